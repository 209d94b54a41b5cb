package stdin

import (
	"strings"
	"testing"
)

// Styled output spelled with readable markers: [b] bold, [/b] its end,
// [i] italics, [/i] its end, [d] dim.
var ansiNames = strings.NewReplacer(ansiBold, "[b]", ansiBoldOff, "[/b]", ansiItalic, "[i]", ansiItalicOff, "[/i]", ansiDim, "[d]")

func TestMarkdownPlainAndStyled(t *testing.T) {
	for _, tc := range []struct {
		name, in, plain, styled string
	}{
		{"bold", "a **bold** word", "a bold word", "a [b]bold[/b] word"},
		{"bold underscores", "a __bold__ word", "a bold word", "a [b]bold[/b] word"},
		{"italics", "an _italic_ and *another*", "an italic and another", "an [i]italic[/i] and [i]another[/i]"},
		{"bold and italics", "***both***", "both", "[i][b]both[/b][/i]"},
		{"italics inside bold", "**bold _and_ more**", "bold and more", "[b]bold [i]and[/i] more[/b]"},
		{"bold inside italics", "_a **b** c_", "a b c", "[i]a [b]b[/b] c[/i]"},
		{"code", "run `go test ./...` now", "run go test ./... now", "run go test ./... now"},
		{"code keeps markers", "`**not bold**` and `a_b_c`", "**not bold** and a_b_c", "**not bold** and a_b_c"},
		{"double backticks", "``a ` b``", "a ` b", "a ` b"},
		{"link", "see [the docs](https://example.com/docs \"Docs\")", "see the docs (https://example.com/docs)", "see the docs (https://example.com/docs)"},
		{"link with bold text", "[**Go**](https://go.dev)", "Go (https://go.dev)", "[b]Go[/b] (https://go.dev)"},
		{"link with parentheses", "[Go](https://en.wikipedia.org/wiki/Go_(programming_language))", "Go (https://en.wikipedia.org/wiki/Go_(programming_language))", "Go (https://en.wikipedia.org/wiki/Go_(programming_language))"},
		{"link in angle brackets", "[a](<https://a.example/x>) and [b](https://b.example 'B')", "a (https://a.example/x) and b (https://b.example)", "a (https://a.example/x) and b (https://b.example)"},
		{"brackets that are no link", "[a] b (c) [d]", "[a] b (c) [d]", "[a] b (c) [d]"},
		{"bare link", "[https://go.dev](https://go.dev)", "https://go.dev", "https://go.dev"},
		{"autolink", "<https://go.dev>", "https://go.dev", "https://go.dev"},
		{"image", "![a cat](https://x.example/cat.png)", "a cat (https://x.example/cat.png)", "a cat (https://x.example/cat.png)"},
		{"escapes", `not \*emphasis\* here`, "not *emphasis* here", "not *emphasis* here"},
		{"snake_case stays", "call my_tool_name or __init__ now", "call my_tool_name or init now", "call my_tool_name or [b]init[/b] now"},
		{"arithmetic stays", "2 * 3 * 4 = 24 and 2*(3+4)", "2 * 3 * 4 = 24 and 2*(3+4)", "2 * 3 * 4 = 24 and 2*(3+4)"},
		{"unclosed stays", "**half open and [no link", "**half open and [no link", "**half open and [no link"},
		{"heading", "## Next steps ##\ntext", "Next steps\ntext", "[b]Next steps[/b]\ntext"},
		{"not a heading", "#hashtag and C#", "#hashtag and C#", "#hashtag and C#"},
		{"list", "- **one**\n- two", "- one\n- two", "- [b]one[/b]\n- two"},
		{"fenced code", "before\n```go\nx := **y**\n```\nafter", "before\nx := **y**\nafter", "before\nx := **y**\nafter"},
		{"unicode", "**grüße** and _日本_", "grüße and 日本", "[b]grüße[/b] and [i]日本[/i]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := markdown(tc.in, false, ""); got != tc.plain {
				t.Errorf("plain:\n got %q\nwant %q", got, tc.plain)
			}
			if got := ansiNames.Replace(markdown(tc.in, true, "")); got != tc.styled {
				t.Errorf("styled:\n got %q\nwant %q", got, tc.styled)
			}
		})
	}
}

// In the dimmed recap, the end of a bold (which also ends dim) sets dim
// again.
func TestMarkdownRestoresTheBaseStyle(t *testing.T) {
	got := ansiNames.Replace(markdown("a **b** c", true, ansiDim))
	if want := "a [b]b[/b][d] c"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Long or hostile input costs linear time and comes back unchanged where
// nothing matches.
func TestMarkdownPathologicalInput(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("a*b_", 20000),
		strings.Repeat("[x](", 10000),
		strings.Repeat("<a ", 20000),
		strings.Repeat("[a] ", 16000),
		"`" + strings.Repeat("``", 20000),
		strings.Repeat("*", 30000),
		strings.Repeat("`", 30000),
	} {
		_ = markdown(in, true, "")
	}
	big := strings.Repeat("**x** ", maxMarkdown)
	if markdown(big, false, "") != big {
		t.Fatal("a text over maxMarkdown was changed")
	}
}
