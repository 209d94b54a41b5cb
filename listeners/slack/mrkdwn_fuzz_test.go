package slack

import (
	"testing"
	"unicode/utf8"
)

// FuzzSplitMrkdwn: whatever text and limit, no piece is over the limit or
// empty, no text is lost, and code fences are balanced (checkPieces).
func FuzzSplitMrkdwn(f *testing.F) {
	for _, s := range []string{"", "word", "a\n\nb", "```\nx := 1\n```", "<https://e.com|x y> &amp; &lt;", "👍🏽 e\u0301 ü"} {
		f.Add(s, 10)
	}
	f.Add("<```>\n```\naaaa bbbb cccc dddd eeee ffff", 20) // a fence is never taken for a link's text
	f.Fuzz(func(t *testing.T, in string, limit int) {
		if !utf8.ValidString(in) {
			return
		}
		limit = 1 + (limit%300+300)%300
		checkPieces(t, in, splitMrkdwn(in, limit), limit)
	})
}

// FuzzToMrkdwn: any Markdown a model writes converts without a panic into
// valid UTF-8 that splits into pieces Slack takes.
func FuzzToMrkdwn(f *testing.F) {
	for _, s := range []string{"# Title\n\n**bold** _it_", "| a | b |\n|---|---|\n| 1 | 2 |", "> quote\n- list\n  - nested", "```\ncode\n```", "<!channel> & <b>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		if !utf8.ValidString(md) || len(md) > 16<<10 {
			return
		}
		out := toMrkdwn(md)
		if !utf8.ValidString(out) {
			t.Fatalf("toMrkdwn(%q) is not UTF-8: %q", md, out)
		}
		checkPieces(t, out, splitMrkdwn(out, 3000), 3000)
	})
}
