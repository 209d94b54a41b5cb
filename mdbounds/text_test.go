package mdbounds

import (
	"strings"
	"testing"
	"unicode/utf8"

	east "github.com/yuin/goldmark/extension/ast"
)

func TestOneLine(t *testing.T) {
	if got := OneLine("  a\nb \n c\n"); got != "a b   c" {
		t.Errorf("OneLine: %q", got)
	}
}

func TestCheckBox(t *testing.T) {
	if CheckBox(true) != "☑ " || CheckBox(false) != "☐ " {
		t.Errorf("CheckBox: %q %q", CheckBox(true), CheckBox(false))
	}
}

// Columns are as wide as their widest cell by width, aligned as asked;
// a short row is padded, and no line ends in spaces.
func TestTable(t *testing.T) {
	rows := [][]string{{"name", "n", "mid"}, {"ü", "10"}, {"long name", "2", "x"}}
	aligns := []east.Alignment{east.AlignLeft, east.AlignRight}
	got := Table(rows, append(aligns, east.AlignCenter), utf8.RuneCountInString)
	want := "name      |  n | mid\n" +
		"----------+----+----\n" +
		"ü         | 10 |\n" +
		"long name |  2 |  x\n"
	if got != want {
		t.Errorf("Table:\n%s\nwant\n%s", got, want)
	}
	// Wide characters take two columns where width says so.
	wide := func(s string) int { return utf8.RuneCountInString(s) + strings.Count(s, "中") }
	if got := Table([][]string{{"中", "x"}, {"abc", "y"}}, nil, wide); got != "中  | x\n----+--\nabc | y\n" {
		t.Errorf("Table with wide cells: %q", got)
	}
}

// Convert converts what it can parse and falls back for the rest, one
// chunk at a time, with "\n" line endings, dropping what tidies to
// nothing.
func TestConvert(t *testing.T) {
	upper := func(s string) string { return strings.ToUpper(s) }
	fallback := func(s string) string { return "[" + s[:4] + "]" }
	tidy := strings.TrimSpace
	if got := Convert("a\r\nb\rc", 100, upper, fallback, tidy); got != "A\nB\nC" {
		t.Errorf("line endings: %q", got)
	}
	if got := Convert("  \n", 100, upper, fallback, tidy); got != "" {
		t.Errorf("blank: %q", got)
	}
	if got := Convert(strings.Repeat("*", MaxDelims+1), 1<<20, upper, fallback, tidy); got != "[****]" {
		t.Errorf("unparseable: %q", got)
	}
	para := strings.Repeat("word ", Chunk/5) + "\n"
	src := para + "\n" + para + "\n" + para
	got := Convert(src, 1<<20, upper, fallback, tidy)
	if n := strings.Count(got, "\n\n"); n != 2 {
		t.Errorf("%d chunks joined by blank lines, want 3", n)
	}
	if strings.Join(strings.Fields(got), "") != strings.Join(strings.Fields(strings.ToUpper(src)), "") {
		t.Error("chunks lose text")
	}
}
