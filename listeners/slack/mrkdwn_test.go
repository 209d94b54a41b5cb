package slack

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestToMrkdwn(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// Emphasis.
		{"bold", "**bold** and __bold__", "*bold* and *bold*"},
		{"em", "*em* and _em_", "_em_ and _em_"},
		{"strike", "~~gone~~ and ~gone~", "~gone~ and ~gone~"},
		{"bold em", "***both***", "_*both*_"},
		{"nested", "**bold _em_ bold**", "*bold _em_ bold*"},
		{"marks per line", "**one\ntwo**", "*one*\n*two*"},
		{"escaped marks", `2 \* 3 \_ 4`, "2 * 3 _ 4"},

		// Code.
		{"code span", "`a < b && c`", "`a &lt; b &amp;&amp; c`"},
		{"code span newline", "`a\nb`", "`a b`"},
		{"fenced", "```go\nfunc f() { return a<b }\n```", "```\nfunc f() { return a&lt;b }\n```"},
		{"fenced tilde", "~~~\nx\n\n\ny\n~~~", "```\nx\n\n\ny\n```"},
		{"indented", "text\n\n    x := 1\n    y := 2", "text\n\n```\nx := 1\ny := 2\n```"},
		{"fence in code", "~~~\n```\n~~~", "```\n`\u200b`\u200b`\n```"},
		{"code trailing space", "```\na   \nb\n```", "```\na\nb\n```"},

		// Links.
		{"link", "[text](https://example.com)", "<https://example.com|text>"},
		{"link query", "[q](https://e.com/?a=1&b=2)", "<https://e.com/?a=1&amp;b=2|q>"},
		{"link same as url", "[https://x.com](https://x.com)", "<https://x.com>"},
		{"link with title", `[t](https://e.com "title")`, "<https://e.com|t>"},
		{"link pipe", "[x](https://e.com/a|b)", "<https://e.com/a%7Cb|x>"},
		{"link space", "[x](<https://e.com/a b>)", "<https://e.com/a%20b|x>"},
		{"link label escaped", "[a > b & c](https://e.com)", "<https://e.com|a &gt; b &amp; c>"},
		{"link label flat", "[**bold** `code` link](https://e.com)", "<https://e.com|bold code link>"},
		{"mailto", "[mail me](mailto:a@b.co)", "<mailto:a@b.co|mail me>"},
		{"javascript", "[click](javascript:alert(1))", "click"},
		{"relative", "[docs](/docs/x)", "docs"},
		{"ftp", "[f](ftp://e.com/x)", "f"},
		{"autolink", "<https://x.com/a>", "<https://x.com/a>"},
		{"autolink email", "<a@b.co>", "<mailto:a@b.co|a@b.co>"},
		{"linkify", "see https://x.com/a.", "see <https://x.com/a>."},
		{"linkify www", "www.go.dev", "<http://www.go.dev|www.go.dev>"},
		{"linkify email", "write a@b.co", "write <mailto:a@b.co|a@b.co>"},
		{"image", "![alt text](https://i.com/a.png)", "<https://i.com/a.png|alt text>"},
		{"image no alt", "![](https://i.com/a.png)", "<https://i.com/a.png>"},
		{"image data", "![x](data:image/png;base64,AAAA)", "x"},
		{"image in link", "[![logo](https://i.com/l.png)](https://e.com)", "<https://e.com|logo>"},

		// Blocks.
		{"heading", "# Title *with* `code`\ntext", "*Title with `code`*\n\ntext"},
		{"heading 2", "## Sub\n\n### Subsub", "*Sub*\n\n*Subsub*"},
		{"setext heading", "Title\n=====", "*Title*"},
		{"paragraphs", "one\ntwo\n\n\n\nthree", "one\ntwo\n\nthree"},
		{"hard breaks", "a  \nb\\\nc", "a\nb\nc"},
		{"thematic break", "a\n\n---\n\nb\n\n***", "a\n\n───\n\nb\n\n───"},
		{"bullets", "- one\n- two\n* three", "• one\n• two\n\n• three"},
		{"nested", "- a\n  - b\n    - c\n      - d\n- e", "• a\n    ◦ b\n        ▪ c\n            • d\n• e"},
		{"ordered", "1. a\n2. b\n3. c", "1. a\n2. b\n3. c"},
		{"ordered start", "3) x\n4) y", "3. x\n4. y"},
		{"ordered nested bullets", "1. a\n   - x\n   - y\n2. b", "1. a\n    ◦ x\n    ◦ y\n2. b"},
		{"loose list", "- a\n\n- b\n\n  more", "• a\n\n• b\n\n    more"},
		{"list with code", "- run:\n\n  ```\n  make\n  ```", "• run:\n\n    ```\n    make\n    ```"},
		{"empty item", "-\n- b", "•\n• b"},
		{"task list", "- [x] done\n- [ ] todo", "• ☑ done\n• ☐ todo"},
		{"quote", "> one\n> two\n>\n> three", "> one\n> two\n>\n> three"},
		{"quote list", "> - a\n> - b", "> • a\n> • b"},
		{"quote heading", "> # H\n> text", "> *H*\n>\n> text"},
		{"table", "| Name | Qty |\n|:-----|----:|\n| apple | 3 |\n| kiwi | 12 |",
			"```\nName  | Qty\n------+----\napple |   3\nkiwi  |  12\n```"},
		{"table center", "| a | b |\n|:-:|---|\n| wide cell | x |",
			"```\n    a     | b\n----------+--\nwide cell | x\n```"},
		{"table inline", "| x | y |\n|---|---|\n| **b** `c` | [l](https://e.com) |\n| 1 < 2 | |",
			"```\nx     | y\n------+------------------\nb c   | l (https://e.com)\n1 &lt; 2 |\n```"},

		// Escaping and raw HTML.
		{"escape", "a & b < c > d", "a &amp; b &lt; c &gt; d"},
		{"no mention", "<!channel> <@U123> <#C1|x>", "&lt;!channel&gt; &lt;@U123&gt; &lt;#C1|x&gt;"},
		{"entities", "&copy; &amp; &#60; &lt;", "© &amp; &lt; &lt;"},
		{"inline html", "a <b>bold</b> c", "a &lt;b&gt;bold&lt;/b&gt; c"},
		{"html block", "<div>\n*x*\n</div>", "&lt;div&gt;\n*x*\n&lt;/div&gt;"},
		{"html comment", "<!-- secret -->", "&lt;!-- secret --&gt;"},

		// Edges.
		{"empty", "", ""},
		{"spaces", "  \n\t\n", ""},
		{"crlf", "a\r\nb\r\n\r\nc", "a\nb\n\nc"},
		{"intraword", "snake_case_name", "snake_case_name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := toMrkdwn(tt.in); got != tt.want {
				t.Errorf("toMrkdwn(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestToPlainText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"marks", "# Hi\n\n**b** _e_ ~~s~~ `c`", "Hi\n\nb e s c"},
		{"link", "[docs](https://e.com/d) and https://x.com", "docs (https://e.com/d) and https://x.com"},
		{"www", "www.go.dev", "www.go.dev"},
		{"email", "<a@b.co>", "a@b.co"},
		{"code block", "```\na < b\n```", "a &lt; b"},
		{"list", "- a\n- b", "• a\n• b"},
		{"escape", "<@U1> & co", "&lt;@U1&gt; &amp; co"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := toPlainText(tt.in); got != tt.want {
				t.Errorf("toPlainText(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

// mdSample exercises every construct toMrkdwn handles.
const mdSample = "# Report for *Q3*   \n\n" +
	"Some **bold**, _em_, ~~old~~ and `code <x>` & more.  \nNext line.\n\n" +
	"- item one with [a link](https://example.com/a?b=1&c=2)\n  - nested   \n    1. deep\n- [x] done\n\n" +
	"> quoted\n>\n> again   \n\n" +
	"```python\ndef f(x):   \n    return x < 2\n```\n\n" +
	"| col | other |\n|-----|:-----:|\n| 1 | two |\n\n" +
	"<span>raw</span> <https://auto.example> ![pic](https://i.example/p.png)\n\n---\n\nend"

func TestToMrkdwnDeterministicNoTrailingWhitespace(t *testing.T) {
	first := toMrkdwn(mdSample)
	for range 5 {
		if got := toMrkdwn(mdSample); got != first {
			t.Fatalf("output changed between runs:\n%q\n%q", first, got)
		}
	}
	for _, out := range []string{first, toPlainText(mdSample)} {
		for i, line := range strings.Split(out, "\n") {
			if strings.TrimRight(line, " \t") != line {
				t.Errorf("line %d has trailing whitespace: %q", i+1, line)
			}
		}
		if strings.HasPrefix(out, "\n") || strings.HasSuffix(out, "\n") {
			t.Errorf("output starts or ends with a blank line: %q", out)
		}
	}
	checkMrkdwnEscaped(t, first)
}

// checkMrkdwnEscaped checks that every < in mrkdwn opens a link we wrote, and
// every & an entity.
func checkMrkdwnEscaped(t *testing.T, s string) {
	t.Helper()
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				t.Errorf("unclosed < at %d: %q", i, s[i:])
				return
			}
			link := s[i+1 : i+end]
			if !strings.HasPrefix(link, "http://") && !strings.HasPrefix(link, "https://") && !strings.HasPrefix(link, "mailto:") {
				t.Errorf("< that is not a link at %d: %q", i, s[i:i+end+1])
			}
			i += end
		case '>':
			// A quote marker starts a line (after a list's indentation
			// and bullet); any other > is escaped.
			prefix := s[strings.LastIndexByte(s[:i], '\n')+1 : i]
			if strings.Trim(prefix, " •◦▪>0123456789.") != "" {
				t.Errorf("bare > at %d: %q", i, s[max(0, i-10):min(len(s), i+10)])
			}
		case '&':
			rest := s[i:]
			if !strings.HasPrefix(rest, "&amp;") && !strings.HasPrefix(rest, "&lt;") && !strings.HasPrefix(rest, "&gt;") {
				t.Errorf("bare & at %d: %q", i, rest[:min(len(rest), 10)])
			}
		}
	}
}

func TestToMrkdwnLargeInput(t *testing.T) {
	// 10,000 words with some Markdown in every paragraph.
	var b strings.Builder
	for i := range 10000 {
		switch {
		case i%100 == 99:
			b.WriteString("end.\n\n")
		case i%10 == 0:
			fmt.Fprintf(&b, "**w%d** ", i)
		default:
			fmt.Fprintf(&b, "w%d ", i)
		}
	}
	src := b.String()
	start := time.Now()
	out := toMrkdwn(src)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("10,000 words took %v", d)
	}
	for _, w := range []string{"*w0*", "w1", "*w5000*", "w9998", "end."} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	if strings.Count(out, "\n\n") < 99 {
		t.Errorf("paragraphs lost: %d breaks", strings.Count(out, "\n\n"))
	}

	// Inputs goldmark is slow on are shown as escaped text, quickly.
	for name, src := range map[string]string{
		"links":  strings.Repeat("[a](", 20000),
		"delims": strings.Repeat("*a _b [c ", 5000),
		"quotes": strings.Repeat("> ", 100) + "deep <x>",
	} {
		start := time.Now()
		out := toMrkdwn(src)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
		if strings.Contains(out, "<x>") || out == "" {
			t.Errorf("%s: not shown as escaped text: %.80q", name, out)
		}
	}
}

func TestSplitMrkdwn(t *testing.T) {
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
		{"indentation kept", "• a\n    ◦ b\n    ◦ c", 12, []string{"• a\n    ◦ b", "    ◦ c"}},
		{"hard", "abcdefghijklmnopqrstuvwxyz", 10, []string{"abcdefghij", "klmnopqrst", "uvwxyz"}},
		{"link kept whole", "aa bb <https://e.com|x y> cc", 20, []string{"aa bb", "<https://e.com|x y>", "cc"}},
		{"link too long", "<https://example.com/x|a long label here> ok", 30,
			[]string{"<https://example.com/x|a long", "label here> ok"}},
		{"entity kept whole", "abc &amp;&amp;&amp; def", 8, []string{"abc", "&amp;", "&amp;", "&amp;", "def"}},
		{"code reopened", "intro\n```\nline one\nline two\nline three\n```\nafter", 24,
			[]string{"intro\n```\nline one\n```", "```\nline two\n```", "```\nline three\n```\nafter"}},
		{"closing fence reused", "```\nline one\nline two\n```\nafter the code", 20,
			[]string{"```\nline one\n```", "```\nline two\n```", "after the code"}},
		{"no empty code block", "text here\n```\ncode\n```", 16, []string{"text here", "```\ncode\n```"}},
		{"tiny limit", "abc", 1, []string{"a", "b", "c"}},
		{"combining mark", "e\u0301e\u0301e\u0301", 5, []string{"e\u0301e\u0301", "e\u0301"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := splitMrkdwn(tt.in, tt.limit)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("splitMrkdwn(%q, %d)\n got %q\nwant %q", tt.in, tt.limit, got, tt.want)
			}
			checkPieces(t, tt.in, got, tt.limit)
		})
	}
}

// checkPieces checks the properties splitMrkdwn promises.
func checkPieces(t *testing.T, in string, pieces []string, limit int) {
	t.Helper()
	for i, p := range pieces {
		if n := utf8.RuneCountInString(p); n > limit {
			t.Errorf("piece %d has %d characters, limit %d: %q", i, n, limit, p)
		}
		if strings.TrimSpace(p) == "" {
			t.Errorf("piece %d is empty: %q", i, p)
		}
		if limit >= 16 && strings.Count(in, "```")%2 == 0 && strings.Count(p, "```")%2 != 0 {
			t.Errorf("piece %d leaves a code block open: %q", i, p)
		}
	}
	// Nothing is lost: the same text, but for whitespace and fences.
	norm := func(s string) string {
		s = strings.ReplaceAll(s, "```", "")
		return strings.Join(strings.Fields(s), "")
	}
	// Joined, or each piece on its own: a fence may be cut where the limit
	// leaves no room for it, and two pieces may join into a "```" the
	// text did not have ("``" and "`").
	var each strings.Builder
	for _, p := range pieces {
		each.WriteString(norm(p))
	}
	if got, want := norm(strings.Join(pieces, "")), norm(in); got != want && each.String() != want {
		t.Errorf("content changed:\n got %q\nwant %q", got, want)
	}
}

func TestSplitMrkdwnProperties(t *testing.T) {
	var b strings.Builder
	for i := range 40 {
		b.WriteString(mdSample)
		fmt.Fprintf(&b, "\n\nparagraph %d with a [link number %d](https://example.com/%d) in it, ", i, i, i)
		b.WriteString(strings.Repeat("word ", i*7))
		b.WriteString("\n\n```\n" + strings.Repeat("code line & <tag>\n", i) + "```\n\n")
	}
	md := toMrkdwn(b.String())
	for _, limit := range []int{16, 50, 100, 333, 1000, 3000} {
		pieces := splitMrkdwn(md, limit)
		if len(pieces) < 2 {
			t.Fatalf("limit %d: %d pieces of %d characters", limit, len(pieces), utf8.RuneCountInString(md))
		}
		checkPieces(t, md, pieces, limit)
		for _, p := range pieces {
			// No link or entity is cut where the limit leaves room.
			if limit >= 100 {
				checkEscapedPiece(t, p)
			}
		}
	}
}

// checkEscapedPiece checks that a piece has only whole links and entities.
func checkEscapedPiece(t *testing.T, p string) {
	t.Helper()
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '<':
			end := strings.IndexByte(p[i:], '>')
			if end < 0 || strings.Contains(p[i:i+end], "\n") {
				t.Errorf("piece cuts a link at %d: %q", i, p[i:min(len(p), i+40)])
				return
			}
			i += end
		case '&':
			if rest := p[i:]; !strings.HasPrefix(rest, "&amp;") && !strings.HasPrefix(rest, "&lt;") && !strings.HasPrefix(rest, "&gt;") {
				t.Errorf("piece cuts an entity at %d: %q", i, rest[:min(len(rest), 10)])
			}
		}
	}
}

// TestSplitMrkdwnRandom splits random mixes of words, breaks, fences,
// links and entities at random limits.
func TestSplitMrkdwnRandom(t *testing.T) {
	atoms := []string{"a", "bb", "word", " ", "\t", "    ", "\n", "\n\n", "```", "<https://e.com|x y>", "&amp;", "e\u0301", "ü"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		in, limit := b.String(), 1+r.IntN(60)
		checkPieces(t, in, splitMrkdwn(in, limit), limit)
		if got := truncateMrkdwn(in, limit); utf8.RuneCountInString(got) > limit {
			t.Errorf("truncateMrkdwn(%q, %d) = %q: too long", in, limit, got)
		}
		if t.Failed() {
			t.Fatalf("input %q, limit %d: %q", in, limit, splitMrkdwn(in, limit))
		}
	}
}

func TestTruncateMrkdwn(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"one two three four five six", 15, "one two three…"},
		{"```\nline one\nline two\nline three\n```", 22, "```\nline one…\n```"},
		{"a <https://e.com|link> b", 12, "a…"},
		{"abcdef", 1, "…"},
	}
	for _, tt := range tests {
		got := truncateMrkdwn(tt.in, tt.limit)
		if got != tt.want {
			t.Errorf("truncateMrkdwn(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
		}
		if n := utf8.RuneCountInString(got); n > tt.limit {
			t.Errorf("truncateMrkdwn(%q, %d) has %d characters", tt.in, tt.limit, n)
		}
	}
}
