package discord

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

func TestToDiscord(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// What Discord shows itself is kept as it is.
		{"emphasis", "**bold**, *em*, _em_, ***both***, ~~gone~~", "**bold**, *em*, _em_, ***both***, ~~gone~~"},
		{"code span", "`a < b && c` and ``x ` y``", "`a < b && c` and ``x ` y``"},
		{"fenced", "```go\nfunc f() { return a<b }\n```", "```go\nfunc f() { return a<b }\n```"},
		{"fenced plain", "```\nx  \n\n\ny\n```", "```\nx  \n\n\ny\n```"},
		{"fenced lang", "```c++\nint x;\n```", "```c++\nint x;\n```"},
		{"link", "[text](https://example.com/a?b=1&c=2)", "[text](https://example.com/a?b=1&c=2)"},
		{"link unicode", "[ü](https://example.com/ü)", "[ü](https://example.com/ü)"},
		{"autolink", "<https://x.com/a> and https://y.com", "<https://x.com/a> and https://y.com"},
		{"headings", "# One\n## Two\n### Three", "# One\n## Two\n### Three"},
		{"heading inline", "## A *b* `c` [d](https://e.com)", "## A *b* `c` [d](https://e.com)"},
		{"quote", "> one\n> two", "> one\n> two"},
		{"lists", "- a\n- b\n  - c\n1. x\n2. y", "- a\n- b\n  - c\n1. x\n2. y"},
		{"subtext", "-# small print", "-# small print"},
		{"spoiler", "||secret||", "||secret||"},
		{"discord tags", "<@123> <#456> <t:1700000000:R> <:party:789>", "<@123> <#456> <t:1700000000:R> <:party:789>"},
		{"escapes", `2 \* 3 \_ 4`, `2 \* 3 \_ 4`},
		{"soft breaks", "one\ntwo", "one\ntwo"},
		{"intraword", "snake_case_name", "snake_case_name"},
		{"code in list", "1. x\n\n   ```sh\n   make\n   ```", "1. x\n\n   ```sh\n   make\n   ```"},
		{"code in quote", "> ```go\n> x\n> ```", "> ```go\n> x\n> ```"},

		// Emphasis Discord reads otherwise.
		{"underscore bold", "__bold__ and __a *b* `c`__", "**bold** and **a *b* `c`**"},
		{"underscore bold link", "__[l](https://x.com)__", "**[l](https://x.com)**"},
		{"triple underscore", "___x___", "_**x**_"},
		{"bold in bold", "**__x__** and __**y**__", "**x** and **y**"},
		{"not emphasis", "__a__b", "__a__b"},
		{"single tilde", "~gone~ and ~~gone~~", "~~gone~~ and ~~gone~~"},
		{"single tilde code", "~a `c`~", "~~a `c`~~"},

		// Headings.
		{"closing hashes", "## Title ##", "## Title"},
		{"deep headings", "#### Four\n##### Five *x*\n###### **Six**", "**Four**\n**Five *x***\n**Six**"},
		{"setext", "Title\n=====\n\nSub *x*\n---", "# Title\n\n## Sub *x*"},
		{"setext two lines", "one\ntwo\n===", "# one two"},
		{"indented heading", "   # Title", "# Title"},
		{"empty heading", "#\n\ntext", "text"},

		// Code Discord would not recognise.
		{"tilde fence", "~~~py\nprint(1)\n~~~", "```py\nprint(1)\n```"},
		{"long fence", "````md\n```go\nx\n```\n````", "```md\n`\u200b`\u200b`go\nx\n`\u200b`\u200b`\n```"},
		{"info string", "```python {linenos}\nprint(1)\n```", "```python\nprint(1)\n```"},
		{"not a language", "```my lang!\nx\n```", "```my\nx\n```"},
		{"bad language", "```a/b\nx\n```", "```\nx\n```"},
		{"unclosed", "```go\nfunc f()\n", "```go\nfunc f()\n```"},
		{"indented", "text\n\n    x := 1\n      y := 2", "text\n\n```\nx := 1\n  y := 2\n```"},
		{"indented in list", "- a\n\n      code", "- a\n\n  ```\n  code\n  ```"},
		{"indented with tabs", "- \tx\n\n\t\tcode", "- \tx\n\n\t```\n    code\n    ```"},
		{"fence in list", "- a\n  ~~~\n  code\n  ~~~\n- b", "- a\n  ```\n  code\n  ```\n- b"},
		{"fence in quote", "> ~~~\n> code\n> ~~~", "> ```\n> code\n> ```"},
		{"empty code", "```\n```\n\ntext", "text"},

		// Tables.
		{"table", "| Name | Qty |\n|:-----|----:|\n| apple | 3 |\n| kiwi | 12 |",
			"```\nName  | Qty\n------+----\napple |   3\nkiwi  |  12\n```"},
		{"table center", "| a | b |\n|:-:|---|\n| wide cell | x |",
			"```\n    a     | b\n----------+--\nwide cell | x\n```"},
		{"table inline", "| x | y |\n|---|---|\n| **b** `c` | [l](https://e.com) |\n| 1 < 2 | a \\| b |\n| ![i](https://i.com/i.png) | &amp; |",
			"```\nx     | y\n------+------------------\nb c   | l (https://e.com)\n1 < 2 | a | b\ni     | &\n```"},
		{"table wide characters", "| 名前 | n |\n|---|---|\n| 日本 | 1 |\n| ab | 2 |",
			"```\n名前 | n\n-----+--\n日本 | 1\nab   | 2\n```"},
		{"table header only", "| a | b |\n|---|---|", "```\na | b\n--+--\n```"},
		{"table after text", "Totals:\n| a | b |\n|---|---|\n| 1 | 2 |", "Totals:\n```\na | b\n--+--\n1 | 2\n```"},
		{"table in quoted list", "> - | a | b |\n>   |---|--:|\n>   | 1 | 22 |\n\nafter",
			"> - ```\n>   a |  b\n>   --+---\n>   1 | 22\n>   ```\n\nafter"},
		{"table in ordered list", "1. | a |\n   |---|\n   | b |", "1. ```\n   a\n   -\n   b\n   ```"},
		{"table in ordered list )", "10) | a |\n    |---|", "10) ```\n    a\n    -\n    ```"},
		{"table cells plain", "| <https://x.com> | <b>h</b> | `c` | [x](https://x.com) | [https://y.com](https://y.com) | [](https://z.com) | - [ ] |\n|---|---|---|---|---|---|---|",
			"```\nhttps://x.com | <b>h</b> | c | x (https://x.com) | https://y.com | https://z.com | - [ ]\n" +
				"--------------+----------+---+-------------------+---------------+---------------+------\n```"},
		{"table fence in cell", "| `` ``` `` |\n|---|", "```\n`\u200b`\u200b`\n---\n```"},

		// Images.
		{"image", "![alt *text*](https://i.com/a.png)", "[alt text](https://i.com/a.png)"},
		{"image no alt", "![](https://i.com/a.png)", "https://i.com/a.png"},
		{"image title", `![a](https://i.com/a.png "title")`, "[a](https://i.com/a.png)"},
		{"image brackets", "![a [b] c](https://i.com/a.png)", `[a \[b\] c](https://i.com/a.png)`},
		{"image data", "![chart](data:image/png;base64,AAAA)", "chart"},
		{"image relative", "![](/a.png)", "image"},
		{"image alt flattened", "![a `b` [c](https://d.com) <i>](https://i.com/x.png)", `[a b c \<i\>](https://i.com/x.png)`},
		{"image in link", "[![logo](https://i.com/l.png)](https://e.com)", "[logo](https://e.com)"},
		{"image no alt in link", "[![](https://i.com/l.png)](https://e.com)", "[image](https://e.com)"},

		// Links Discord cannot show as written.
		{"link title", `[t](https://e.com "title")`, "[t](https://e.com)"},
		{"link angle", "[x](<https://e.com/a b>)", "[x](https://e.com/a%20b)"},
		{"link parens", "[Go](https://en.wikipedia.org/wiki/Go_(language))", "[Go](https://en.wikipedia.org/wiki/Go_%28language%29)"},
		{"link entity", "[a &amp; b](https://e.com/?a=1&amp;b=2)", "[a & b](https://e.com/?a=1&b=2)"},
		{"reference link", "See [docs][d] and [d].\n\n[d]: https://e.com/docs\n\nMore.", "See [docs](https://e.com/docs) and [d](https://e.com/docs).\n\nMore."},
		{"definitions only", "[a]: https://a.com\n[b]: https://b.com \"B\"", ""},
		{"relative link", "[docs](/docs/x)", "docs"},
		{"javascript link", "[click](javascript:alert(1))", "click"},
		{"mailto link", "[mail me](mailto:a@b.co)", "mail me (a@b.co)"},
		{"mailto same", "[a@b.co](mailto:a@b.co)", "a@b.co"},
		{"email autolink", "<a@b.co>", "a@b.co"},

		// Raw HTML.
		{"inline html", "a <b>bold</b> c", `a \<b\>bold\</b\> c`},
		{"html attributes", `<span class="a_b">x</span>`, `\<span class="a\_b"\>x\</span\>`},
		{"html block", "<div>\n# x *y*\n</div>", "\\<div\\>\n\\# x \\*y\\*\n\\</div\\>"},
		{"html comment", "<!-- secret -->", `\<!-- secret --\>`},
		{"html details", "<details>\n<summary>S</summary>\n\nbody **b**\n\n</details>",
			"\\<details\\>\n\\<summary\\>S\\</summary\\>\n\nbody **b**\n\n\\</details\\>"},

		// Rules, boxes, entities, breaks.
		{"rules", "a\n\n---\n\n***\n- - -\n___", "a\n\n───\n\n───\n───\n───"},
		{"task list", "- [x] done\n- [ ] todo\n- [X] also", "- ☑ done\n- ☐ todo\n- ☑ also"},
		{"entities", "&copy; &#42; &amp; &lt;b&gt; &bogus;", `© \* & \<b\> &bogus;`},
		{"escaped entity", `\&amp;`, `\&amp;`},
		{"hard breaks", "a  \nb\\\nc", "a\nb\nc"},
		{"trailing backslash", "end\\", "end\\"},
		{"blank lines", "a\n\n\n\nb", "a\n\nb"},
		{"blank lines in code", "```\nx\n\n\n\ny\n```", "```\nx\n\n\n\ny\n```"},
		{"quote blank line", "> a\n>\n> b", "> a\n> \n> b"},
		{"nested quote blank lines", "> > a\n> >\n> > b\n>\n> c", "> > a\n> > \n> > b\n> \n> c"},

		// Mass mentions.
		{"mentions", "hi @everyone and @here!", "hi @\u200beveryone and @\u200bhere!"},
		{"mentions case", "@Everyone @HERE", "@\u200bEveryone @\u200bHERE"},
		{"mention escaped", `\@everyone`, "\\@\u200beveryone"},
		{"mention in heading", "# Hey @everyone", "# Hey @\u200beveryone"},
		{"mention in link", "[@here](https://e.com)", "[@\u200bhere](https://e.com)"},
		{"mention in html", "<b>@everyone</b>", "\\<b\\>@\u200beveryone\\</b\\>"},
		{"mention in code", "`@everyone`\n\n```\n@here\n```", "`@everyone`\n\n```\n@here\n```"},
		{"user mention kept", "<@123>", "<@123>"},

		// Edges.
		{"empty", "", ""},
		{"spaces", "  \n\t\n", ""},
		{"crlf", "a\r\nb\r\n\r\nc", "a\nb\n\nc"},
		{"leading blank lines", "\n\n  \nx", "x"},
		{"trailing whitespace", "x  \n\n", "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := toDiscord(tt.in); got != tt.want {
				t.Errorf("toDiscord(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

// mdSample exercises every construct toDiscord handles.
const mdSample = "# Report for *Q3*   \n\n" +
	"Some **bold**, __strong__, _em_, ~~old~~, ~new~ and `code <x>` & more @here.  \nNext line.\n\n" +
	"- item one with [a link](https://example.com/a?b=1&c=2)\n  - nested   \n    1. deep\n- [x] done\n\n" +
	"> quoted\n>\n> again   \n\n" +
	"```python\ndef f(x):   \n    return x < 2\n```\n\n" +
	"~~~\nplain\n~~~\n\n" +
	"| col | other |\n|-----|:-----:|\n| 1 | two |\n\n" +
	"#### Deep heading\n\n" +
	"<span>raw</span> <https://auto.example> ![pic](https://i.example/p.png)\n\n---\n\nend"

func TestToDiscordSample(t *testing.T) {
	want := "# Report for *Q3*\n\n" +
		"Some **bold**, **strong**, _em_, ~~old~~, ~~new~~ and `code <x>` & more @\u200bhere.\nNext line.\n\n" +
		"- item one with [a link](https://example.com/a?b=1&c=2)\n  - nested   \n    1. deep\n- ☑ done\n\n" +
		"> quoted\n> \n> again   \n\n" +
		"```python\ndef f(x):   \n    return x < 2\n```\n\n" +
		"```\nplain\n```\n\n" +
		"```\ncol | other\n----+------\n1   |  two\n```\n\n" +
		"**Deep heading**\n\n" +
		"\\<span\\>raw\\</span\\> <https://auto.example> [pic](https://i.example/p.png)\n\n───\n\nend"
	first := toDiscord(mdSample)
	if first != want {
		t.Errorf("toDiscord(mdSample)\n got %q\nwant %q", first, want)
	}
	for range 5 {
		if got := toDiscord(mdSample); got != first {
			t.Fatalf("output changed between runs:\n%q\n%q", first, got)
		}
	}
	// Converting again changes nothing more: what toDiscord writes is
	// what it keeps.
	if again := toDiscord(first); again != first {
		t.Errorf("toDiscord is not idempotent on its output:\n got %q\nwant %q", again, first)
	}
	checkFences(t, first)
}

// checkFences checks that code fences are balanced and every fence is on
// a line of its own or opens with a language.
func checkFences(t *testing.T, s string) {
	t.Helper()
	if n := strings.Count(s, "```"); n%2 != 0 {
		t.Errorf("%d fences, unbalanced: %q", n, s)
	}
}

func TestToDiscordLargeInput(t *testing.T) {
	// 10,000 words with some Markdown in every paragraph.
	var b strings.Builder
	for i := range 10000 {
		switch {
		case i%100 == 99:
			b.WriteString("end.\n\n")
		case i%10 == 0:
			fmt.Fprintf(&b, "__w%d__ ", i)
		default:
			fmt.Fprintf(&b, "w%d ", i)
		}
	}
	src := b.String()
	start := time.Now()
	out := toDiscord(src)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("10,000 words took %v", d)
	}
	for _, w := range []string{"**w0**", "w1", "**w5000**", "w9998", "end."} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	if strings.Count(out, "\n\n") < 99 {
		t.Errorf("paragraphs lost: %d breaks", strings.Count(out, "\n\n"))
	}

	// Inputs goldmark is slow on pass through as they are, quickly, their
	// mass mentions escaped.
	for name, src := range map[string]string{
		"links":  strings.Repeat("[a](", 20000) + " @everyone",
		"delims": strings.Repeat("*a _b [c ", 5000) + " @everyone",
		"quotes": strings.Repeat("> ", 100) + "deep @everyone",
	} {
		start := time.Now()
		out := toDiscord(src)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
		if out != strings.TrimSpace(strings.ReplaceAll(src, "@everyone", "@\u200beveryone")) {
			t.Errorf("%s: not passed through: %.80q", name, out)
		}
	}
}

func TestEscapeMassMentions(t *testing.T) {
	tests := []struct{ in, want string }{
		{"@everyone", "@\u200beveryone"},
		{"@here and @hereafter", "@\u200bhere and @\u200bhereafter"},
		{"a@b.co @someone", "a@b.co @someone"},
		{"@", "@"},
	}
	for _, tt := range tests {
		if got := escapeMassMentions(tt.in); got != tt.want {
			t.Errorf("escapeMassMentions(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Every form toDiscord writes is free of pinging mentions.
	for _, in := range []string{"@everyone", "**@everyone**", "> @here", "# @here", "- @everyone", "| @here |\n|--|", "<i>@here</i>", "![@here](https://i.com/x.png)"} {
		if out := toDiscord(in); massMentionRe.MatchString(out) && !strings.Contains(out, "```") {
			t.Errorf("toDiscord(%q) = %q pings", in, out)
		}
	}
}

var massMentionRe = regexp.MustCompile(`(?i)@(everyone|here)`)

func TestSplitDiscord(t *testing.T) {
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
		{"indentation kept", "- a\n  - b\n  - c", 9, []string{"- a\n  - b", "  - c"}},
		{"hard", "abcdefghijklmnopqrstuvwxyz", 10, []string{"abcdefghij", "klmnopqrst", "uvwxyz"}},
		{"masked link kept whole", "aa bb [x y](https://e.com) cc", 22, []string{"aa bb", "[x y](https://e.com)", "cc"}},
		{"tag kept whole", "abc<t:1700000000:R>def", 17, []string{"abc", "<t:1700000000:R>d", "ef"}},
		{"code span kept whole", "aa bb `x y z` cc dd", 10, []string{"aa bb", "`x y z` cc", "dd"}},
		{"code reopened", "intro\n```\nline one\nline two\nline three\n```\nafter", 24,
			[]string{"intro\n```\nline one\n```", "```\nline two\n```", "```\nline three\n```\nafter"}},
		{"language reopened", "```go\nline one\nline two\nline three\n```", 26,
			[]string{"```go\nline one\n```", "```go\nline two\n```", "```go\nline three\n```"}},
		{"closing fence reused", "```\nline one\nline two\n```\nafter the code", 20,
			[]string{"```\nline one\n```", "```\nline two\n```", "after the code"}},
		{"no empty code block", "text here\n```go\ncode\n```", 18, []string{"text here", "```go\ncode\n```"}},
		{"code cut at a line", "intro text\n```\nab cd ef gh ij\nkl\n```", 24, []string{"intro text", "```\nab cd ef gh ij\n```", "```\nkl\n```"}},
		{"code cut at a space", "intro text\n```\nab cd ef gh ij\nkl\n```", 16, []string{"intro text", "```\nab cd ef\n```", "```\ngh ij\nkl\n```"}},
		{"tiny limit", "abc", 1, []string{"a", "b", "c"}},
		{"combining mark", "e\u0301e\u0301e\u0301", 5, []string{"e\u0301e\u0301", "e\u0301"}},
		{"emoji sequence", "👍🏽👍🏽👍🏽", 5, []string{"👍🏽👍🏽", "👍🏽"}},
		{"escaped mention", "aaaa @\u200beveryone", 6, []string{"aaaa", "@\u200bever", "yone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := splitDiscord(tt.in, tt.limit)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("splitDiscord(%q, %d)\n got %q\nwant %q", tt.in, tt.limit, got, tt.want)
			}
			checkPieces(t, tt.in, got, tt.limit)
			checkNoEmptyBlocks(t, got)
		})
	}
}

// checkNoEmptyBlocks checks that no piece is only fences: a code block
// is not cut where nothing of it would be left in a piece.
func checkNoEmptyBlocks(t *testing.T, pieces []string) {
	t.Helper()
	for i, p := range pieces {
		var text []string
		for _, l := range strings.Split(p, "\n") {
			if !fenceLineRe.MatchString(strings.TrimSpace(l)) {
				text = append(text, l)
			}
		}
		if strings.TrimSpace(strings.Join(text, "\n")) == "" {
			t.Errorf("piece %d is empty but for fences: %q", i, p)
		}
	}
}

// emptyBlockRe is a code block with nothing in it.
var emptyBlockRe = regexp.MustCompile("```[A-Za-z0-9_+\\-.#]*\\s*```")

// fenceLineRe is a line that is only a code fence, with or without a
// language.
var fenceLineRe = regexp.MustCompile("^```[A-Za-z0-9_+\\-.#]*$")

// checkPieces checks the properties splitDiscord promises.
func checkPieces(t *testing.T, in string, pieces []string, limit int) {
	t.Helper()
	for i, p := range pieces {
		if n := utf8.RuneCountInString(p); n > limit {
			t.Errorf("piece %d has %d characters, limit %d: %q", i, n, limit, p)
		}
		onlyFences := func(s string) bool { return strings.TrimSpace(strings.ReplaceAll(s, "```", "")) == "" }
		wellFormed := strings.Count(in, "```")%2 == 0 && !emptyBlockRe.MatchString(in) && !onlyFences(in)
		if strings.TrimSpace(p) == "" || limit >= 16 && wellFormed && onlyFences(p) {
			t.Errorf("piece %d is empty: %q", i, p)
		}
		if limit >= 16 && strings.Count(in, "```")%2 == 0 && strings.Count(p, "```")%2 != 0 {
			t.Errorf("piece %d leaves a code block open: %q", i, p)
		}
	}
	if !reassembles(in, pieces) {
		t.Errorf("pieces %q do not add up to %q", pieces, in)
	}
}

// reassembles reports whether pieces are orig cut up as splitDiscord
// promises: each piece is a stretch of orig, maybe with a fence line added
// before it ("```lang\n", reopening a code block) and a fence added after
// it ("\n```", closing one); between the stretches orig has only
// whitespace, and, after a piece whose closing fence was added, the fence
// that closed the block.
func reassembles(orig string, pieces []string) bool {
	type state struct {
		i, at  int
		closed bool
	}
	failed := map[state]bool{}
	var from func(st state) bool
	from = func(st state) bool {
		if st.i == len(pieces) {
			rest := strings.TrimSpace(orig[st.at:])
			return rest == "" || st.closed && strings.TrimSpace(strings.TrimPrefix(rest, "```")) == ""
		}
		if failed[st] {
			return false
		}
		// Where the next stretch may start: after any of the whitespace
		// here, or after the fence an added one replaced.
		var starts []int
		spaces := func(k int) int { // k and the whitespace after it
			for k < len(orig) { // the whitespace a cut drops (unicode.IsSpace)
				r, n := utf8.DecodeRuneInString(orig[k:])
				if !unicode.IsSpace(r) {
					break
				}
				starts = append(starts, k)
				k += n
			}
			starts = append(starts, k)
			return k
		}
		ws := spaces(st.at)
		if st.closed && strings.HasPrefix(orig[ws:], "```") {
			k := ws + 3
			for k < len(orig) && (orig[k] == ' ' || orig[k] == '\t') {
				k++
			}
			for k < len(orig) && orig[k] == '\n' {
				k++
			}
			spaces(k)
		}
		p := pieces[st.i]
		bodies := []string{p}
		if strings.HasPrefix(p, "```") {
			if _, after, ok := strings.Cut(p, "\n"); ok {
				bodies = append(bodies, after)
			}
		}
		for _, s := range starts {
			for _, body := range bodies {
				if strings.HasPrefix(orig[s:], body) && from(state{st.i + 1, s + len(body), false}) {
					return true
				}
				if cut, ok := strings.CutSuffix(body, "\n```"); ok && strings.HasPrefix(orig[s:], cut) && from(state{st.i + 1, s + len(cut), true}) {
					return true
				}
			}
		}
		failed[st] = true
		return false
	}
	return from(state{})
}

// longReply is about 9,000 characters of a model's reply: prose, a list,
// and a Go code block of about 5,000 characters.
func longReply() string {
	var b strings.Builder
	b.WriteString("# Refactoring plan\n\nHere is the **whole** file, rewritten. ")
	for i := range 16 {
		fmt.Fprintf(&b, "Sentence %d explains a change in some detail, with `code_%d` and a [link](https://example.com/%d). ", i, i, i)
	}
	b.WriteString("\n\n```go\npackage main\n\nimport \"fmt\"\n\n")
	for i := range 80 {
		fmt.Fprintf(&b, "func step%02d(x int) int {\n\treturn x*%d + %d // step %d of the plan\n}\n", i, i, i*7, i)
	}
	b.WriteString("```\n\nAnd the steps:\n\n")
	for i := range 30 {
		fmt.Fprintf(&b, "%d. Step %d: call `step%02d` and check the result against the table; log it.\n", i+1, i, i)
	}
	b.WriteString("\nThat is all.")
	return b.String()
}

func TestSplitDiscordLongReply(t *testing.T) {
	reply := toDiscord(longReply())
	if n := utf8.RuneCountInString(reply); n < 8500 || n > 9500 {
		t.Fatalf("reply has %d characters, want about 9,000", n)
	}
	pieces := splitDiscord(reply, 2000)
	if len(pieces) < 5 {
		t.Fatalf("%d pieces", len(pieces))
	}
	checkPieces(t, reply, pieces, 2000)
	checkNoEmptyBlocks(t, pieces)
	inCode := false
	for i, p := range pieces {
		if strings.Count(p, "```")%2 != 0 {
			t.Errorf("piece %d has unbalanced fences", i)
		}
		// A piece that continues the code block reopens it as Go.
		if inCode && !strings.HasPrefix(p, "```go\n") {
			t.Errorf("piece %d continues the code without reopening it: %.40q", i, p)
		}
		inCode = strings.Contains(p, "func step") && !strings.Contains(p, "\nAnd the steps")
	}
	// Joined, without fence lines and blank lines, the pieces are the
	// reply without them: every cut was at a line break.
	norm := func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if strings.TrimSpace(l) != "" && !fenceLineRe.MatchString(l) {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	if got, want := norm(strings.Join(pieces, "\n")), norm(reply); got != want {
		t.Errorf("pieces do not add up to the reply")
	}
}

// TestSplitDiscordRandom splits random mixes of words, breaks, fences,
// links, tags and code at random limits.
func TestSplitDiscordRandom(t *testing.T) {
	// Fences are on lines of their own, as toDiscord writes them.
	atoms := []string{"a", "bb", "word", " ", "\t", "    ", "\n", "\n\n", "\n```\n", "\n```go\n", "[x y](https://e.com)", "<@123>", " `c d` ", "e\u0301", "ü", "👍🏽", "@\u200beveryone"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		in, limit := b.String(), 1+r.IntN(60)
		checkPieces(t, in, splitDiscord(in, limit), limit)
		if got := truncateDiscord(in, limit); utf8.RuneCountInString(got) > limit {
			t.Errorf("truncateDiscord(%q, %d) = %q: too long", in, limit, got)
		}
		if t.Failed() {
			t.Fatalf("input %q, limit %d: %q", in, limit, splitDiscord(in, limit))
		}
	}
}

func TestTruncateDiscord(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"one two three four five six", 15, "one two three…"},
		{"```go\nline one\nline two\nline three\n```", 24, "```go\nline one…\n```"},
		{"a [link](https://e.com) b", 12, "a…"},
		{"abcdef", 1, "…"},
	}
	for _, tt := range tests {
		got := truncateDiscord(tt.in, tt.limit)
		if got != tt.want {
			t.Errorf("truncateDiscord(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
		}
		if n := utf8.RuneCountInString(got); n > tt.limit {
			t.Errorf("truncateDiscord(%q, %d) has %d characters", tt.in, tt.limit, n)
		}
	}
}
