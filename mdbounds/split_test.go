package mdbounds

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// scanTest is a platform's Scanner in small: a <…> on one line and
// without backticks is kept whole, as is a ``` fence with the language after it; every ``` opens or
// closes a code block, which the next piece reopens with its opening
// fence; no cut goes before a combining mark.
func scanTest(rs []rune, limit int) *Marks {
	m := NewMarks(len(rs))
	cur := ""
	span := func(from, to int) { // no cut before rs[from+1 … to-1]
		for k := from + 1; k < to; k++ {
			m.Atomic[k] = true
			m.Reopen[k] = cur
		}
	}
	for i := 0; i < len(rs); {
		m.Reopen[i] = cur
		switch {
		case rs[i] == '<':
			j := i + 1
			for j < len(rs) && rs[j] != '>' && rs[j] != '\n' && rs[j] != '`' {
				j++
			}
			if j < len(rs) && rs[j] == '>' {
				span(i, j+1)
				i = j + 1
				continue
			}
		case strings.HasPrefix(string(rs[i:min(i+3, len(rs))]), "```"):
			j := i + 3
			if cur != "" {
				span(i, j)
				cur = ""
				i = j
				continue
			}
			k := j
			for k < len(rs) && unicode.IsLetter(rs[k]) {
				k++
			}
			lang := ""
			if k < len(rs) && rs[k] == '\n' {
				lang, j = string(rs[j:k]), k
			}
			span(i, j)
			if limit >= MinFenced {
				cur = "```" + lang + "\n"
				body := j
				if body < len(rs) && rs[body] == '\n' {
					body++
				}
				for e := j; e <= body; e++ {
					m.Opener[e] = i
				}
			}
			i = j
			continue
		}
		i++
	}
	m.Reopen[len(rs)] = cur
	for i, r := range rs {
		if unicode.Is(unicode.Mn, r) {
			m.Atomic[i] = true
		}
	}
	return m
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		want  []string
	}{
		{"fits", "short", 10, []string{"short"}},
		{"empty", "", 10, nil},
		{"only whitespace", "  \n\n ", 2, nil},
		{"paragraph", "aaaa bbbb\n\ncccc dddd", 12, []string{"aaaa bbbb", "cccc dddd"}},
		{"paragraph over line", "aaaa\nbbb\n\ncccc dddd eeee", 12, []string{"aaaa\nbbb", "cccc dddd", "eeee"}},
		{"line", "aaaa bbbb\ncccc dddd", 12, []string{"aaaa bbbb", "cccc dddd"}},
		{"space", "aaaa bbbb cccc dddd", 12, []string{"aaaa bbbb", "cccc dddd"}},
		{"late break over early", "ab\n\ncdefgh ijk lmn", 12, []string{"ab\n\ncdefgh", "ijk lmn"}},
		{"blank lines dropped", "aaaa bbbb\n\n\n  \n\ncccc", 10, []string{"aaaa bbbb", "cccc"}},
		{"indentation kept", "- a\n  - b\n  - c", 9, []string{"- a\n  - b", "  - c"}},
		{"hard", "abcdefghijklmnopqrstuvwxyz", 10, []string{"abcdefghij", "klmnopqrst", "uvwxyz"}},
		{"zero limit", "ab", 0, []string{"a", "b"}},
		{"atomic kept whole", "aa bb <https://e.com x y> cc", 20, []string{"aa bb", "<https://e.com x y>", "cc"}},
		{"atomic too long", "<https://example.com/x a long label here> ok", 30,
			[]string{"<https://example.com/x a long", "label here> ok"}},
		{"code reopened", "intro\n```\nline one\nline two\nline three\n```\nafter", 24,
			[]string{"intro\n```\nline one\n```", "```\nline two\n```", "```\nline three\n```\nafter"}},
		{"language reopened", "```go\nline one\nline two\nline three\n```", 26,
			[]string{"```go\nline one\n```", "```go\nline two\n```", "```go\nline three\n```"}},
		{"closing fence reused", "```\nline one\nline two\n```\nafter the code", 20,
			[]string{"```\nline one\n```", "```\nline two\n```", "after the code"}},
		{"no empty code block", "text here\n```go\ncode\n```", 18, []string{"text here", "```go\ncode\n```"}},
		{"code cut at a line", "intro text\n```\nab cd ef gh ij\nkl\n```", 24, []string{"intro text", "```\nab cd ef gh ij\n```", "```\nkl\n```"}},
		{"code cut at a space", "intro text\n```\nab cd ef gh ij\nkl\n```", 16, []string{"intro text", "```\nab cd ef\n```", "```\ngh ij\nkl\n```"}},
		{"no fences below MinFenced", "```\nab cd\n```", 8, []string{"```\nab", "cd\n```"}},
		{"tiny limit", "abc", 1, []string{"a", "b", "c"}},
		{"combining mark", "e\u0301e\u0301e\u0301", 5, []string{"e\u0301e\u0301", "e\u0301"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.in, tt.limit, scanTest)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("Split(%q, %d)\n got %q\nwant %q", tt.in, tt.limit, got, tt.want)
			}
			checkPieces(t, tt.in, got, tt.limit)
		})
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"one two three four five six", 15, "one two three…"},
		{"one two three four five six", 12, "one two…"},
		{"```go\nline one\nline two\nline three\n```", 24, "```go\nline one…\n```"},
		{"a <https://e.com x> b", 12, "a…"},
		{"abcdef", 4, "abc…"},
		{"abcdef", 1, "…"},
	}
	for _, tt := range tests {
		got := Truncate(tt.in, tt.limit, scanTest)
		if got != tt.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
		}
		if n := utf8.RuneCountInString(got); n > tt.limit && tt.limit > 0 {
			t.Errorf("Truncate(%q, %d) has %d characters", tt.in, tt.limit, n)
		}
	}
}

// The Scanner is called with the limit, and only for text that does not
// fit.
func TestSplitScansOnlyLongText(t *testing.T) {
	calls := 0
	scan := func(rs []rune, limit int) *Marks {
		calls++
		if limit != 5 || len(rs) != 11 {
			t.Errorf("scan(%q, %d)", string(rs), limit)
		}
		return NewMarks(len(rs))
	}
	Split("short", 5, scan)
	Truncate("short", 5, scan)
	if calls != 0 {
		t.Errorf("text that fits was scanned %d times", calls)
	}
	if got := Split("hello world", 5, scan); fmt.Sprint(got) != "[hello world]" {
		t.Errorf("Split: %q", got)
	}
	if got := Truncate("hello world", 5, scan); got != "hell…" {
		t.Errorf("Truncate: %q", got)
	}
}

func TestNewMarks(t *testing.T) {
	m := NewMarks(3)
	if len(m.Atomic) != 4 || len(m.Reopen) != 4 || len(m.Opener) != 4 {
		t.Fatalf("lengths %d %d %d, want 4", len(m.Atomic), len(m.Reopen), len(m.Opener))
	}
	for i := range 4 {
		if m.Atomic[i] || m.Reopen[i] != "" || m.Opener[i] != -1 {
			t.Errorf("mark %d is not empty: %v %q %d", i, m.Atomic[i], m.Reopen[i], m.Opener[i])
		}
	}
}

// checkPieces checks what Split promises: no piece is over the limit or
// empty, no text is lost (nor any added but the fences that close and
// reopen code blocks), and where the limit leaves room for fences, each
// piece of text whose fences are balanced has its fences balanced.
func checkPieces(t *testing.T, in string, pieces []string, limit int) {
	t.Helper()
	for i, p := range pieces {
		if n := utf8.RuneCountInString(p); n > max(limit, 1) {
			t.Errorf("piece %d has %d characters, limit %d: %q", i, n, limit, p)
		}
		if strings.TrimSpace(p) == "" {
			t.Errorf("piece %d is empty: %q", i, p)
		}
		if limit >= MinFenced && strings.Count(in, "```")%2 == 0 && strings.Count(p, "```")%2 != 0 {
			t.Errorf("piece %d leaves a code block open: %q", i, p)
		}
	}
	// The text, but for whitespace and backticks, is the input's in order
	// and whole; what is more is only the languages of reopened blocks.
	text := func(s string) []rune {
		var out []rune
		for _, r := range s {
			if !unicode.IsSpace(r) && r != '`' {
				out = append(out, r)
			}
		}
		return out
	}
	want := text(in)
	var got []rune
	extra := 0
	for _, p := range pieces {
		got = append(got, text(p)...)
		if first, _, ok := strings.Cut(p, "\n"); ok && strings.HasPrefix(first, "```") {
			extra += len(text(first))
		}
	}
	k := 0
	for _, r := range got {
		if k < len(want) && r == want[k] {
			k++
		}
	}
	if k < len(want) || len(got) > len(want)+extra {
		t.Errorf("text changed:\n got %q\nwant %q", string(got), string(want))
	}
}

// TestSplitRandom splits random mixes of words, breaks, fences, atomic
// spans and combining marks at random limits.
func TestSplitRandom(t *testing.T) {
	atoms := []string{"a", "bb", "word", " ", "\t", "    ", "\n", "\n\n", "\r", "```", "\n```\n", "\n```go\n", "`", "<e x>", "<", ">", "e\u0301", "ü", "👍"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		in, limit := b.String(), 1+r.IntN(60)
		checkPieces(t, in, Split(in, limit, scanTest), limit)
		if got := Truncate(in, limit, scanTest); utf8.RuneCountInString(got) > limit {
			t.Errorf("Truncate(%q, %d) = %q: too long", in, limit, got)
		}
		if t.Failed() {
			t.Fatalf("input %q, limit %d: %q", in, limit, Split(in, limit, scanTest))
		}
	}
}

// FuzzSplit: whatever the text and the limit, no piece is over the limit
// or empty, no text is lost, and code fences are balanced in each piece
// (checkPieces); Truncate keeps to the limit.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{
		"", "word", "a\n\nb", "aaaa bbbb cccc dddd",
		"```\nx := 1\n```", "intro\n```go\nline one\nline two\n```\nafter",
		"<https://e.com x y> <a\nb>", "e\u0301e\u0301 👍🏽 ü", "  \n\t\r\n  x",
		"``````\n````\n```", "```go\n\n\n```",
	} {
		f.Add(s, 10)
		f.Add(s, 16)
	}
	f.Fuzz(func(t *testing.T, in string, limit int) {
		if !utf8.ValidString(in) {
			return
		}
		limit = 1 + (limit%300+300)%300
		checkPieces(t, in, Split(in, limit, scanTest), limit)
		if got := Truncate(in, limit, scanTest); utf8.RuneCountInString(got) > limit {
			t.Errorf("Truncate(%q, %d) = %q: too long", in, limit, got)
		}
	})
}
