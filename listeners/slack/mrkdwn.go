package slack

import (
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/switchboard-gw/switchboard/mdbounds"
)

// The model writes CommonMark with GitHub's extensions; Slack shows its own
// "mrkdwn", which has no headings, tables or nested lists and marks bold
// with one asterisk. toMrkdwn walks goldmark's syntax tree and writes the
// nearest mrkdwn for each node, so that what is code stays code and what
// is text is escaped the one way Slack requires (& < >): the only "<…>"
// in the result are the links it writes itself, so a model cannot forge a
// mention (<!channel>, <@U…>) or a link whose text hides its target.

// mdParser parses the model's Markdown; only its parser is used.
var mdParser = goldmark.New(goldmark.WithExtensions(extension.GFM))

// mdMaxChunk is the largest chunk parsed (mdbounds): one that could not be
// cut smaller is shown as escaped text past this.
const mdMaxChunk = 64 << 10

// toMrkdwn converts Markdown to Slack mrkdwn (see the comment at the top of
// this file). The result has no trailing whitespace on any line and no blank
// lines at either end.
func toMrkdwn(markdown string) string { return mdConvert(markdown, false) }

// toPlainText converts Markdown to the text of a message's "text" field,
// the fallback Slack shows in notifications and reads to screen readers:
// no emphasis marks or code fences, links as "label (url)", but escaped
// for Slack like mrkdwn.
func toPlainText(markdown string) string { return mdConvert(markdown, true) }

func mdConvert(src string, plain bool) string {
	parse := func(chunk string) string {
		b := []byte(chunk)
		doc := mdParser.Parser().Parse(text.NewReader(b))
		c := mdConverter{src: b, plain: plain}
		return c.blocks(doc, "\n\n", 0)
	}
	return mdbounds.Convert(src, mdMaxChunk, parse, mrkdwnEscape, mdTrimLines)
}

// mdTrimLines removes trailing whitespace from every line and blank lines
// from both ends.
func mdTrimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRightFunc(l, unicode.IsSpace)
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}

// mrkdwnEscape escapes the three characters Slack reads as markup.
func mrkdwnEscape(s string) string {
	if !strings.ContainsAny(s, "&<>") {
		return s
	}
	return mrkdwnEscaper.Replace(s)
}

var mrkdwnEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// mrkdwnUnescape undoes mrkdwnEscape, to measure text as it is shown.
func mrkdwnUnescape(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	return mrkdwnUnescaper.Replace(s)
}

var mrkdwnUnescaper = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">")

// inline modes: what markup the inline renderer may write.
type mdInlineMode int

const (
	mdNormal  mdInlineMode = iota
	mdHeading              // no emphasis marks: the heading is bold already
	mdLabel                // plain text on one line: a link's label, an image's alt text
	mdCell                 // plain text on one line, links as "label (url)": a table cell
)

type mdConverter struct {
	src   []byte
	plain bool // write plain text (toPlainText)
}

// blocks renders the children of parent, separated by sep. level is the
// list nesting level, which chooses the bullet.
func (c *mdConverter) blocks(parent ast.Node, sep string, level int) string {
	var parts []string
	for n := parent.FirstChild(); n != nil; n = n.NextSibling() {
		if s := c.block(n, level); strings.TrimSpace(s) != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, sep)
}

func (c *mdConverter) block(node ast.Node, level int) string {
	switch n := node.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return strings.TrimSpace(c.inlines(n, mdNormal))
	case *ast.Heading:
		t := mdbounds.OneLine(c.inlines(n, mdHeading))
		if t == "" || c.plain {
			return t
		}
		return "*" + t + "*"
	case *ast.ThematicBreak:
		return "───"
	case *ast.CodeBlock, *ast.FencedCodeBlock:
		var b strings.Builder
		lines := n.Lines()
		for i := range lines.Len() {
			seg := lines.At(i)
			b.Write(seg.Value(c.src))
		}
		return c.code(strings.TrimRight(b.String(), "\n"))
	case *ast.Blockquote:
		inner := c.blocks(n, "\n\n", level)
		lines := strings.Split(inner, "\n")
		for i, l := range lines {
			if l == "" {
				lines[i] = ">"
			} else {
				lines[i] = "> " + l
			}
		}
		return strings.Join(lines, "\n")
	case *ast.List:
		return c.list(n, level)
	case *ast.HTMLBlock:
		var b strings.Builder
		lines := n.Lines()
		for i := range lines.Len() {
			seg := lines.At(i)
			b.Write(seg.Value(c.src))
		}
		if n.HasClosure() {
			b.Write(n.ClosureLine.Value(c.src))
		}
		return mrkdwnEscape(strings.TrimRight(b.String(), "\n"))
	case *east.Table:
		return c.table(n)
	default:
		return c.blocks(n, "\n\n", level)
	}
}

// code renders a code block's text, not yet escaped. A ``` inside it
// would end Slack's block, so codeSafe breaks it up.
func (c *mdConverter) code(body string) string {
	body = mrkdwnEscape(body)
	if c.plain {
		return body
	}
	return "```\n" + codeSafe(body) + "\n```"
}

// mdBullets are the list markers by nesting level.
var mdBullets = [...]string{"•", "◦", "▪"}

// list renders each item as its marker and its content; the lines after
// the first, nested lists included, are indented by four spaces, so a list
// nested twice is indented by eight.
func (c *mdConverter) list(l *ast.List, level int) string {
	sep := "\n"
	if !l.IsTight {
		sep = "\n\n"
	}
	var items []string
	num := l.Start
	for it := l.FirstChild(); it != nil; it = it.NextSibling() {
		marker := mdBullets[level%len(mdBullets)]
		if l.IsOrdered() {
			marker = strconv.Itoa(num) + "."
			num++
		}
		lines := strings.Split(c.blocks(it, sep, level+1), "\n")
		var b strings.Builder
		b.WriteString(marker)
		if lines[0] != "" {
			b.WriteString(" " + lines[0])
		}
		for _, line := range lines[1:] {
			b.WriteString("\n")
			if line != "" {
				b.WriteString("    " + line)
			}
		}
		items = append(items, b.String())
	}
	return strings.Join(items, sep)
}

// table renders a GFM table as a code block with aligned columns: Slack
// has no tables, and a monospace font is the only way to line them up.
func (c *mdConverter) table(t *east.Table) string {
	var rows [][]string
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
			cells = append(cells, mrkdwnUnescape(mdbounds.OneLine(c.inlines(cell, mdCell))))
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		return ""
	}
	return c.code(strings.TrimRight(mdbounds.Table(rows, t.Alignments, utf8.RuneCountInString), "\n"))
}

// inlines renders the inline children of parent, escaped.
func (c *mdConverter) inlines(parent ast.Node, mode mdInlineMode) string {
	var b strings.Builder
	for n := parent.FirstChild(); n != nil; n = n.NextSibling() {
		c.inline(&b, n, mode)
	}
	return b.String()
}

// label renders the children of n as plain text on one line.
func (c *mdConverter) label(n ast.Node) string {
	return mdbounds.OneLine(c.inlines(n, mdLabel))
}

func (c *mdConverter) inline(b *strings.Builder, node ast.Node, mode mdInlineMode) {
	markup := mode == mdNormal && !c.plain
	switch n := node.(type) {
	case *ast.Text:
		v := n.Segment.Value(c.src)
		if n.IsRaw() {
			b.WriteString(mrkdwnEscape(string(v)))
		} else {
			b.WriteString(mrkdwnEscape(mdbounds.Unescape(v)))
		}
		if n.HardLineBreak() || n.SoftLineBreak() {
			b.WriteString("\n")
		}
	case *ast.String:
		b.WriteString(mrkdwnEscape(string(n.Value)))
	case *ast.CodeSpan:
		var code strings.Builder
		for t := n.FirstChild(); t != nil; t = t.NextSibling() {
			if t, ok := t.(*ast.Text); ok {
				code.Write(t.Segment.Value(c.src))
			}
		}
		s := mrkdwnEscape(strings.ReplaceAll(code.String(), "\n", " "))
		if c.plain || mode == mdLabel || mode == mdCell {
			b.WriteString(s)
		} else {
			b.WriteString("`" + s + "`")
		}
	case *ast.Emphasis:
		mark := "_"
		if n.Level == 2 {
			mark = "*"
		}
		c.wrap(b, n, mode, mark, markup)
	case *east.Strikethrough:
		c.wrap(b, n, mode, "~", markup)
	case *ast.Link:
		c.link(b, string(n.Destination), c.label(n), mode)
	case *ast.Image:
		if mode == mdLabel {
			b.WriteString(c.label(n))
			return
		}
		c.link(b, string(n.Destination), c.label(n), mode)
	case *ast.AutoLink:
		u := string(n.URL(c.src))
		lower := strings.ToLower(u)
		switch {
		case n.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(lower, "mailto:"):
			u = "mailto:" + u
		case n.AutoLinkType == ast.AutoLinkURL && !strings.Contains(lower, ":"):
			u = "http://" + u // www.example.com, found by GFM's linkify
		}
		c.link(b, u, mrkdwnEscape(string(n.Label(c.src))), mode)
	case *ast.RawHTML:
		for i := range n.Segments.Len() {
			seg := n.Segments.At(i)
			b.WriteString(mrkdwnEscape(string(seg.Value(c.src))))
		}
	case *east.TaskCheckBox:
		b.WriteString(mdbounds.CheckBox(n.IsChecked))
	default:
		b.WriteString(c.inlines(n, mode))
	}
}

// wrap renders n's children between two marks, or without them where
// markup is off or there is nothing to mark. Slack's marks do not reach
// across lines, so text that spans lines is marked line by line.
func (c *mdConverter) wrap(b *strings.Builder, n ast.Node, mode mdInlineMode, mark string, markup bool) {
	inner := c.inlines(n, mode)
	if !markup {
		b.WriteString(inner)
		return
	}
	lines := strings.Split(inner, "\n")
	for i, l := range lines {
		if i > 0 {
			b.WriteString("\n")
		}
		if t := strings.TrimSpace(l); t != "" {
			l = strings.TrimRightFunc(l, unicode.IsSpace)
			b.WriteString(mark + l + mark)
		}
	}
}

// link writes a link to dest labelled label (escaped already): <url|label>
// for http(s) and mailto, the label alone for anything else (a relative
// link, javascript:), which Slack could not open anyway.
func (c *mdConverter) link(b *strings.Builder, dest, label string, mode mdInlineMode) {
	u, ok := mdLinkURL(dest)
	if !ok {
		if label == "" {
			label = mrkdwnEscape(mdbounds.Unescape([]byte(dest)))
		}
		b.WriteString(label)
		return
	}
	shown := mrkdwnEscape(mdDisplayURL(u))
	switch {
	case mode == mdLabel:
		b.WriteString(label)
	case c.plain || mode == mdCell:
		switch {
		case label == "" || label == shown || label == mrkdwnEscape(u):
			b.WriteString(shown)
		case "http://"+label == shown || "https://"+label == shown:
			b.WriteString(label)
		default:
			b.WriteString(label + " (" + shown + ")")
		}
	case label == "" && shown != mrkdwnEscape(u): // mailto:
		b.WriteString("<" + mrkdwnEscape(u) + "|" + shown + ">")
	case label == "" || label == mrkdwnEscape(u):
		b.WriteString("<" + mrkdwnEscape(u) + ">")
	default:
		b.WriteString("<" + mrkdwnEscape(u) + "|" + label + ">")
	}
}

// mdDisplayURL is how a URL reads in text: a mailto: link as the address.
func mdDisplayURL(u string) string {
	if len(u) > 7 && strings.EqualFold(u[:7], "mailto:") {
		return u[7:]
	}
	return u
}

// mdLinkURL resolves a link destination's escapes and percent-encodes what
// may not appear between Slack's < and >. It reports false for anything
// but an absolute http(s) or mailto URL.
func mdLinkURL(dest string) (string, bool) {
	v := string(util.URLEscape([]byte(strings.TrimSpace(dest)), true))
	v = strings.NewReplacer("|", "%7C", "<", "%3C", ">", "%3E").Replace(v)
	p, err := url.Parse(v)
	if err != nil {
		return "", false
	}
	switch strings.ToLower(p.Scheme) {
	case "http", "https":
		if p.Host == "" {
			return "", false
		}
	case "mailto":
		if p.Opaque == "" {
			return "", false
		}
	default:
		return "", false
	}
	return v, true
}

// splitMrkdwn cuts mrkdwn into pieces of at most limit characters (runes),
// at a paragraph break where one is in the second half of the room, else
// at a line break, else at a space (outside code), else at the last break
// or space however early, else anywhere, but never inside a <url|text>
// link, an &entity; or a ``` fence where that can be avoided.
// A piece that ends inside a code block is closed with a fence and the
// next piece reopens it, so each renders on its own. The whitespace at a
// cut is dropped; nothing else is, and no piece is empty: text that is
// only whitespace gives none. Below 16 characters code blocks are cut
// without the extra fences. (mdbounds.Split, with scanMrkdwn.)
func splitMrkdwn(s string, limit int) []string { return mdbounds.Split(s, limit, scanMrkdwn) }

// truncateMrkdwn shortens mrkdwn to at most limit characters, ending in
// "…", cutting where splitMrkdwn would, but late rather than early.
func truncateMrkdwn(s string, limit int) string { return mdbounds.Truncate(s, limit, scanMrkdwn) }

// isFenceAt reports whether a ``` starts at rs[i]: it is a fence, never
// part of a link (toMrkdwn writes none there), so what it opens or closes
// is counted.
func isFenceAt(rs []rune, i int) bool {
	return i+2 < len(rs) && rs[i] == '`' && rs[i+1] == '`' && rs[i+2] == '`'
}

// mdFenceOpen reopens a code block in the next piece: Slack's code blocks
// have no language.
const mdFenceOpen = "```\n"

// scanMrkdwn marks where splitMrkdwn may not cut: inside a <url|text>
// link, an &entity; or a ``` fence, or before a combining mark; and the
// code blocks, which every ``` opens or closes (from mdbounds.MinFenced).
func scanMrkdwn(rs []rune, limit int) *mdbounds.Marks {
	m := mdbounds.NewMarks(len(rs))
	fences := limit >= mdbounds.MinFenced
	cur := "" // the Reopen of the code block open here
	// span marks a stretch: no cut before rs[from+1 … to].
	span := func(from, to int) {
		for k := from + 1; k <= to; k++ {
			m.Atomic[k] = true
			m.Reopen[k] = cur
		}
	}
	for i := 0; i < len(rs); {
		m.Reopen[i] = cur
		switch {
		case rs[i] == '<':
			j := i + 1
			for j < len(rs) && rs[j] != '>' && rs[j] != '\n' && rs[j] != '<' && !isFenceAt(rs, j) {
				j++
			}
			if j < len(rs) && rs[j] == '>' {
				span(i, j)
				i = j + 1
				continue
			}
		case rs[i] == '&':
			j := i + 1
			for j < len(rs) && j-i <= 10 && (rs[j] == '#' || rs[j] < utf8.RuneSelf && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j]))) {
				j++
			}
			if j < len(rs) && j > i+1 && rs[j] == ';' {
				span(i, j)
				i = j + 1
				continue
			}
		case isFenceAt(rs, i):
			span(i, i+2)
			if fences && cur == "" {
				cur = mdFenceOpen
			} else {
				cur = ""
			}
			i += 3
			continue
		}
		i++
	}
	m.Reopen[len(rs)] = cur
	for i, r := range rs {
		if unicode.Is(unicode.Mn, r) {
			m.Atomic[i] = true
		}
		// A piece that ends with "```" inside a code block ends with the
		// fence that opened it.
		if e := i + 1; e >= 3 && m.Reopen[e] != "" && string(rs[e-3:e]) == "```" {
			m.Opener[e] = e - 3
		}
	}
	return m
}
