package discord

import (
	"testing"
	"unicode/utf8"
)

// FuzzSplitDiscord: whatever text and limit, no piece is over the limit or
// empty, no text is lost, and code fences are balanced (checkPieces).
func FuzzSplitDiscord(f *testing.F) {
	for _, s := range []string{"", "word", "a\n\nb", "```go\nx := 1\n```", "[x y](https://e.com) <@123> `c d`", "👍🏽 e\u0301 ü"} {
		f.Add(s, 10)
	}
	f.Add("<```>\n```\naaaa bbbb cccc dddd eeee ffff", 20)       // a fence is never taken for a tag's text
	f.Add("[a```](https://e.com)\n```\naaaa bbbb cccc dddd", 20) // nor for a masked link's
	f.Add("`a```b` c\n```\naaaa bbbb cccc dddd", 20)             // nor for a code span's
	f.Fuzz(func(t *testing.T, in string, limit int) {
		if !utf8.ValidString(in) {
			return
		}
		limit = 1 + (limit%300+300)%300
		checkPieces(t, in, splitDiscord(in, limit), limit)
	})
}

// FuzzToDiscord: any Markdown a model writes converts without a panic into
// valid UTF-8 that splits into pieces Discord takes.
func FuzzToDiscord(f *testing.F) {
	for _, s := range []string{"# Title\n\n**bold** _it_", "| a | b |\n|---|---|\n| 1 | 2 |", "> quote\n- list\n  - nested", "```\ncode\n```", "<script>x</script> @everyone"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		if !utf8.ValidString(md) || len(md) > 16<<10 {
			return
		}
		out := toDiscord(md)
		if !utf8.ValidString(out) {
			t.Fatalf("toDiscord(%q) is not UTF-8: %q", md, out)
		}
		checkPieces(t, out, splitDiscord(out, contentLimit), contentLimit)
	})
}
