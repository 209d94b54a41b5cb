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
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	var parts []string
	for _, chunk := range mdbounds.Chunks(src) {
		var out string
		if mdbounds.Parseable(chunk, mdMaxChunk) {
			b := []byte(chunk)
			doc := mdParser.Parser().Parse(text.NewReader(b))
			c := mdConverter{src: b, plain: plain}
			out = c.blocks(doc, "\n\n", 0)
		} else {
			out = mrkdwnEscape(chunk)
		}
		if out = mdTrimLines(out); out != "" {
			parts = append(parts, out)
		}
	}
	return strings.Join(parts, "\n\n")
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
		t := mdOneLine(c.inlines(n, mdHeading))
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
	cols := 0
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
			cells = append(cells, mrkdwnUnescape(mdOneLine(c.inlines(cell, mdCell))))
		}
		cols = max(cols, len(cells))
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		return ""
	}
	width := make([]int, cols)
	for i := range width {
		width[i] = 1
	}
	for _, r := range rows {
		for i, cell := range r {
			width[i] = max(width[i], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	line := func(cells []string, pad func(i int, s string) string, sep string) {
		var parts []string
		for i := range cols {
			s := ""
			if i < len(cells) {
				s = cells[i]
			}
			parts = append(parts, pad(i, s))
		}
		b.WriteString(strings.TrimRightFunc(strings.Join(parts, sep), unicode.IsSpace))
		b.WriteString("\n")
	}
	align := func(i int, s string) string {
		gap := width[i] - utf8.RuneCountInString(s)
		a := east.AlignNone
		if i < len(t.Alignments) {
			a = t.Alignments[i]
		}
		switch a {
		case east.AlignRight:
			return strings.Repeat(" ", gap) + s
		case east.AlignCenter:
			return strings.Repeat(" ", gap/2) + s + strings.Repeat(" ", gap-gap/2)
		default:
			return s + strings.Repeat(" ", gap)
		}
	}
	for i, r := range rows {
		line(r, align, " | ")
		if i == 0 {
			line(nil, func(i int, _ string) string { return strings.Repeat("-", width[i]) }, "-+-")
		}
	}
	return c.code(strings.TrimRight(b.String(), "\n"))
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
	return mdOneLine(c.inlines(n, mdLabel))
}

// mdOneLine joins the lines of s with spaces and trims it.
func mdOneLine(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(s, "\n", " "))
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
		if n.IsChecked {
			b.WriteString("☑ ")
		} else {
			b.WriteString("☐ ")
		}
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
// without the extra fences.
func splitMrkdwn(s string, limit int) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	limit = max(limit, 1)
	if utf8.RuneCountInString(s) <= limit {
		return []string{s}
	}
	sp := newMdSplitter([]rune(s), limit >= 16)
	var out []string
	for start := 0; start < len(sp.rs); {
		prefix := sp.open[start]
		room := limit
		if prefix {
			room -= len(mdFenceOpen)
		}
		if len(sp.rs)-start <= room {
			if strings.TrimSpace(string(sp.rs[start:])) != "" {
				out = append(out, sp.piece(start, len(sp.rs), prefix, ""))
			}
			break
		}
		end, next := sp.cut(start, room, room/2)
		if strings.TrimSpace(string(sp.rs[start:end])) != "" {
			out = append(out, sp.piece(start, end, prefix, ""))
		}
		start = next
	}
	return out
}

// truncateMrkdwn shortens mrkdwn to at most limit characters, ending in
// "…", cutting where splitMrkdwn would, but late rather than early.
func truncateMrkdwn(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	if limit < 2 {
		return "…"
	}
	sp := newMdSplitter([]rune(s), limit >= 16)
	room := limit - 1
	end, _ := sp.cut(0, room, room*3/4)
	return sp.piece(0, end, false, "…")
}

const (
	mdFenceOpen  = "```\n"
	mdFenceClose = "\n```"
)

type mdSplitter struct {
	rs []rune
	// open[i] is whether a code block is open before rs[i].
	open []bool
	// atomic[i] is whether a cut before rs[i] would break a link, an
	// entity or a fence.
	atomic []bool
}

func newMdSplitter(rs []rune, fences bool) *mdSplitter {
	sp := &mdSplitter{rs: rs, open: make([]bool, len(rs)+1), atomic: make([]bool, len(rs)+1)}
	open := false
	for i := 0; i < len(rs); {
		sp.open[i] = open
		switch {
		case rs[i] == '<':
			j := i + 1
			for j < len(rs) && rs[j] != '>' && rs[j] != '\n' && rs[j] != '<' {
				j++
			}
			if j < len(rs) && rs[j] == '>' {
				for k := i + 1; k <= j; k++ {
					sp.atomic[k] = true
					sp.open[k] = open
				}
				i = j + 1
				continue
			}
		case rs[i] == '&':
			j := i + 1
			for j < len(rs) && j-i <= 10 && (rs[j] == '#' || rs[j] < utf8.RuneSelf && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j]))) {
				j++
			}
			if j < len(rs) && j > i+1 && rs[j] == ';' {
				for k := i + 1; k <= j; k++ {
					sp.atomic[k] = true
					sp.open[k] = open
				}
				i = j + 1
				continue
			}
		case rs[i] == '`' && i+2 < len(rs) && rs[i+1] == '`' && rs[i+2] == '`':
			sp.atomic[i+1], sp.atomic[i+2] = true, true
			sp.open[i+1], sp.open[i+2] = open, open
			if fences {
				open = !open
			}
			i += 3
			continue
		}
		i++
	}
	sp.open[len(rs)] = open
	return sp
}

// piece is rs[start:end] with the fences it needs and tail before the
// closing one.
func (sp *mdSplitter) piece(start, end int, reopen bool, tail string) string {
	var b strings.Builder
	if reopen {
		b.WriteString(mdFenceOpen)
	}
	b.WriteString(string(sp.rs[start:end]))
	b.WriteString(tail)
	if end < len(sp.rs) && sp.open[end] {
		b.WriteString(mdFenceClose)
	}
	return b.String()
}

func mdIsHSpace(r rune) bool { return r == ' ' || r == '\t' }

func mdIsSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// cut chooses where the piece starting at start ends: end is where its
// text ends (whitespace dropped; end == start for a piece that is only
// dropped whitespace) and next where the following piece starts. The piece's text and the closing fence it may need fit in room.
// A cut at a break or a space is taken only if it leaves at least minLen
// characters, unless there is no other; a cut anywhere else only if no
// break or space will do.
func (sp *mdSplitter) cut(start, room, minLen int) (end, next int) {
	rs := sp.rs
	hi := min(start+room, len(rs)-1)
	// fits reports whether rs[start:e] and its closing fence fit; unless
	// relaxed, a piece may not end with the fence that opens a code block.
	fits := func(e, minLen int, relaxed bool) bool {
		if e-start < max(minLen, 1) {
			return false
		}
		n := e - start
		if sp.open[e] {
			n += len(mdFenceClose)
			if !relaxed && e-start >= 3 && string(rs[e-3:e]) == "```" {
				return false
			}
		}
		return n <= room
	}
	trimBack := func(p int) int {
		for p > start && mdIsSpace(rs[p-1]) {
			p--
		}
		return p
	}
	// skipBlank skips the whitespace cut at p: the spaces there, then
	// whole blank lines, but not the indentation of the next line.
	skipBlank := func(p int) int {
		for p < len(rs) && mdIsHSpace(rs[p]) {
			p++
		}
		for p < len(rs) && (rs[p] == '\n' || rs[p] == '\r') {
			p++
			j := p
			for j < len(rs) && mdIsHSpace(rs[j]) {
				j++
			}
			if j == len(rs) {
				return j
			}
			if rs[j] == '\n' || rs[j] == '\r' {
				p = j
			}
		}
		return p
	}
	paragraph := func(p int) bool { return rs[p] == '\n' && p+1 < len(rs) && rs[p+1] == '\n' }
	line := func(p int) bool { return rs[p] == '\n' }
	space := func(p int) bool { return mdIsHSpace(rs[p]) }
	classes := []func(int) bool{paragraph, line, space}
	// try looks for a break, then a space; early, a space inside code is
	// passed over for a line break, however short the piece.
	try := func(minLen int, early bool) (int, int, bool) {
		for _, class := range classes {
			for p := hi; p > start; p-- {
				if !class(p) || sp.atomic[p] || early && sp.open[p] && mdIsHSpace(rs[p]) {
					continue
				}
				if e := trimBack(p); fits(e, minLen, false) {
					return e, sp.after(e, skipBlank(p)), true
				}
			}
		}
		return 0, 0, false
	}
	if e, n, ok := try(minLen, true); ok {
		return e, n
	}
	if e, n, ok := try(1, false); ok {
		return e, n
	}
	// No break or space: cut between two characters, outside a link, an
	// entity or a fence, and not before a combining mark; then let the
	// piece end by opening a code block; then cut anywhere at all.
	for _, relaxed := range []bool{false, true} {
		for p := hi; p > start; p-- {
			if sp.atomic[p] || unicode.Is(unicode.Mn, rs[p]) {
				continue
			}
			if e := trimBack(p); fits(e, 1, relaxed) {
				return e, sp.after(e, skipBlank(p))
			}
		}
	}
	// Whitespace that leaves no room (deep indentation before a fence) is
	// dropped: an empty piece, which splitMrkdwn leaves out.
	if mdIsSpace(rs[start]) {
		p := start
		for p < len(rs) && mdIsSpace(rs[p]) {
			p++
		}
		return start, p
	}
	for p := hi; p > start; p-- {
		if e := trimBack(p); fits(e, 1, true) {
			return e, sp.after(e, p)
		}
	}
	return start + 1, start + 1
}

// after adjusts where the next piece starts: when the piece ends inside a
// code block and the next text is the fence that closes it, the fence the
// piece gets closes it instead.
func (sp *mdSplitter) after(end, next int) int {
	rs := sp.rs
	if !sp.open[end] || next+3 > len(rs) || string(rs[next:next+3]) != "```" || !sp.open[next] {
		return next
	}
	next += 3
	for next < len(rs) && mdIsHSpace(rs[next]) {
		next++
	}
	for next < len(rs) && (rs[next] == '\n' || rs[next] == '\r') {
		next++
	}
	return next
}
