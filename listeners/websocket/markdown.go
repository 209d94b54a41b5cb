package websocket

import (
	"bytes"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"
)

// markdown renders model output to HTML that is safe to insert into a page.
// It is done here, once, in Go, rather than in every browser. Raw HTML in
// the source is shown as the text it is (a model that writes "<div>"
// means the word), and bluemonday's UGC policy then removes anything that
// could still run (event handlers, javascript: URLs) from what goldmark
// produced. The widget inserts nothing else as HTML.
type markdown struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
}

func newMarkdown() *markdown {
	p := bluemonday.UGCPolicy()
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	return &markdown{
		md: goldmark.New(
			goldmark.WithExtensions(extension.GFM),
			goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(rawHTMLAsText{}, 100))),
		),
		policy: p,
	}
}

func (m *markdown) render(src string) string {
	var buf bytes.Buffer
	if err := m.md.Convert([]byte(src), &buf); err != nil {
		// goldmark only fails on writer errors; a bytes.Buffer has none.
		return m.policy.Sanitize(src)
	}
	return string(m.policy.SanitizeBytes(buf.Bytes()))
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
