package mdbounds

import (
	"strings"
	"testing"
)

// Long text is cut at blank lines outside code blocks, into pieces that
// put it back together whole.
func TestChunks(t *testing.T) {
	para := strings.Repeat("word ", 1000) + "\n"
	code := "```\n" + strings.Repeat("x = 1\n\n", 4000) + "```\n"
	src := para + "\n" + para + "\n" + code + "\n" + para + "\n" + para
	chunks := Chunks(src)
	if len(chunks) < 2 {
		t.Fatalf("%d chunks for %d bytes", len(chunks), len(src))
	}
	for _, c := range chunks {
		if strings.Count(c, "```")%2 != 0 {
			t.Fatalf("a chunk cuts the code block: %.60q…", c)
		}
	}
	if got := strings.Join(chunks, ""); strings.ReplaceAll(got, "\n", "") != strings.ReplaceAll(src, "\n", "") {
		t.Fatal("the chunks lose text")
	}
	if c := Chunks("short"); len(c) != 1 || c[0] != "short" {
		t.Fatalf("short text: %q", c)
	}
}

// What makes goldmark slow is refused; the same inside a code block is not.
func TestParseable(t *testing.T) {
	for name, tc := range map[string]struct {
		src  string
		want bool
	}{
		"plain":                 {"Hello **world**, [a](https://example.com).", true},
		"too long":              {strings.Repeat("a", 101), false},
		"nested too deep":       {strings.Repeat("> ", MaxDepth+1) + "x", false},
		"nested just enough":    {strings.Repeat("> ", MaxDepth) + "x", true},
		"too many links":        {strings.Repeat("[a](", MaxLinks+1), false},
		"too many delimiters":   {strings.Repeat("*", MaxDelims+1), false},
		"delimiters in a fence": {"```\n" + strings.Repeat("*", 90) + "\n```", true},
	} {
		max := 100
		if name == "too many links" || name == "too many delimiters" {
			max = 1 << 20
		}
		if got := Parseable(tc.src, max); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestUnescape(t *testing.T) {
	if got := Unescape([]byte(`\*a\* &amp; &#65;`)); got != "*a* & A" {
		t.Fatalf("%q", got)
	}
}
