package websocket

import (
	"strings"
	"testing"
)

// Inputs that make the Markdown parser quadratic, or its output explode,
// are shown as escaped plain text instead, with output bounded by their
// size.
func TestPathologicalMarkdownIsBounded(t *testing.T) {
	m := newMarkdown(imagePolicy{})
	for _, c := range []struct{ name, src string }{
		{"unclosed links, 64 KiB", strings.Repeat("[a](", 16200)},
		{"unclosed links, under the size cap", strings.Repeat("[a](", 8000)},
		{"nested quotes, 64 KiB", strings.Repeat(">", 65536)},
		{"nested quotes, under the size cap", strings.Repeat(">", 30000)},
		{"spaced nested quotes", strings.Repeat("> ", 15000)},
		{"deep nesting on many lines", strings.Repeat(strings.Repeat("> ", 40)+"x\n", 300)},
		{"nested lists", strings.Repeat("- ", 40) + "x <b>"},
		{"huge", strings.Repeat("word <b> ", 100000)},
		{"emphasis delimiters", strings.Repeat("*a_", 10000)},
		{"brackets", strings.Repeat("[", 16000) + strings.Repeat("]", 16000)},
	} {
		out := m.render(c.src)
		// Escaped text is at most 5 bytes per input byte (&#34;), plus the
		// <pre> around it.
		if len(out) > 5*len(c.src)+64 || len(out) > maxMarkdownOutput && len(out) > 5*len(c.src) {
			t.Errorf("%s: %d bytes in, %d bytes of HTML out", c.name, len(c.src), len(out))
		}
		if !strings.HasPrefix(out, "<pre>") || strings.Contains(out, "<blockquote") || strings.Contains(out, "<a ") || strings.Contains(out, "<b>") {
			t.Errorf("%s: want escaped plain text in <pre>, got %.120q", c.name, out)
		}
	}
	// Underscores and stars in a code block are not delimiters.
	code := "```go\n" + strings.Repeat("var snake_case_name = *p\n", 1000) + "```\n"
	if out := m.render(code); !strings.HasPrefix(out, "<pre><code") {
		t.Errorf("a long code block was not rendered as one: %.80q", out)
	}
	// Ordinary Markdown, quotes and lists included, still renders.
	out := m.render("> quoted **bold**\n\n- a\n  - b\n    - c\n\n[link](https://example.com/x)")
	for _, want := range []string{"<blockquote>", "<strong>bold</strong>", "<li>c</li>", `<a href="https://example.com/x"`} {
		if !strings.Contains(out, want) {
			t.Errorf("ordinary Markdown lost %s: %s", want, out)
		}
	}
}

// An image loads without a click, so it may come only from the gateway's
// own origin, data: or a configured host; any other is a link.
func TestExternalImagesBecomeLinks(t *testing.T) {
	m := newMarkdown(newImagePolicy("https://chat.example.com", []string{"images.example.com", "*.cdn.example", "127.0.0.1:8443"}))
	for _, c := range []struct {
		src    string
		inline bool
	}{
		{"![p](https://attacker.example/log?secret=s3cret)", false},
		{"![p](http://127.0.0.1:9999/x.png)", false},
		{"![p](//attacker.example/x.png)", false},
		{"![p](/local.png)", false},
		{"![p](https://images.example.com.attacker.example/x.png)", false},
		{"![p](https://user@images.example.com/x.png)", false},
		{"![p][r]\n\n[r]: https://attacker.example/ref.png", false},
		{"![p](https://chat.example.com/logo.png)", true},
		{"![p](https://images.example.com/a.png)", true},
		{"![p](https://a.b.cdn.example/a.png)", true},
		{"![p](https://127.0.0.1:8443/a.png)", true},
		{"![p](data:image/png;base64,iVBORw0KGgo=)", true},
	} {
		out := m.render(c.src)
		hasImg := strings.Contains(out, "<img")
		if hasImg != c.inline {
			t.Errorf("%s: %s, want inline=%v", c.src, out, c.inline)
		}
		if !c.inline && !strings.Contains(out, "<a href=") && !strings.Contains(c.src, "/local.png") {
			t.Errorf("%s: %s, want a link to the image", c.src, out)
		}
	}
}
