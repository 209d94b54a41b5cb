package discord

import (
	"bytes"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
	"golang.org/x/text/width"

	"github.com/switchboard-gw/switchboard/mdbounds"
)

// The model writes CommonMark with GitHub's extensions; Discord renders a
// Markdown dialect of its own that already has most of it: bold, italics,
// strikethrough, inline code, code fences with a language, masked links
// [text](url), headings # to ###, block quotes, lists and subtext (-# ).
// So toDiscord does not re-render the text: it keeps the model's source
// exactly and edits only the parts Discord would show wrong, found by
// walking goldmark's syntax tree:
//
//   - GFM tables: a ``` block with aligned columns (Discord has no tables);
//   - images: a masked link to the image (alt text alone inside a link);
//   - raw HTML, inline or as a block: its text, with Discord's markup
//     characters backslash-escaped, so "<b>" reads as written;
//   - horizontal rules: "───";
//   - headings #### and deeper: a bold line; setext headings (Title\n===):
//     # and ##; ATX headings lose their closing #s;
//   - code blocks Discord would not recognise (indented, ~~~, ```` fences,
//     unclosed, a ``` in the code, an info string that is not a language):
//     a ``` block;
//   - __bold__ and ~single~ strikethrough: ** and ~~ (Discord reads __ as
//     underline and needs two tildes);
//   - reference links, links with a title or <destination>: [text](url);
//     links to anything but http(s): their text; reference definitions go;
//   - task list boxes: ☐ and ☑; HTML entities: the character; a hard
//     break: a plain line break; <a@b.co>: the address;
//   - a run of blank lines between blocks: one (Discord shows them all);
//     a block quote's blank ">" line: "> " (Discord quotes only "> ").
//
// "@everyone" and "@here" outside code get a zero-width space after the @,
// so that text the model writes cannot ping a server. The listener should
// still send every message with AllowedMentions set to none (an empty
// Parse list: noMentions, mentionsNone): that also silences <@id> and
// <@&id>, which toDiscord keeps because Discord shows them as names.

// mdSpansKey keys the inline spans recorded while parsing (mdSpan).
var mdSpansKey = parser.NewContextKey()

// mdSpan is where an inline node's parse began and ended in the source:
// for a link or an image, begin is its closing "]" and end is after its
// destination. goldmark records where nodes start but not where they end.
type mdSpan struct{ begin, end int }

// mdSpanRecorder wraps one of goldmark's inline parsers and records the
// span of every node it returns in the parse context.
type mdSpanRecorder struct{ parser.InlineParser }

func (r mdSpanRecorder) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	_, before := block.Position()
	n := r.InlineParser.Parse(parent, block, pc)
	if n != nil {
		if spans, ok := pc.Get(mdSpansKey).(map[ast.Node]mdSpan); ok {
			_, after := block.Position()
			spans[n] = mdSpan{before.Start, after.Start}
		}
	}
	return n
}

func (r mdSpanRecorder) CloseBlock(parent ast.Node, block text.Reader, pc parser.Context) {
	if cb, ok := r.InlineParser.(parser.CloseBlocker); ok {
		cb.CloseBlock(parent, block, pc)
	}
}

// mdDiscordParser is goldmark's default parser with GFM, its inline
// parsers wrapped in mdSpanRecorder. Only its parser is used.
var mdDiscordParser = func() parser.Parser {
	var inlines []util.PrioritizedValue
	for _, v := range parser.DefaultInlineParsers() {
		inlines = append(inlines, util.Prioritized(mdSpanRecorder{v.Value.(parser.InlineParser)}, v.Priority))
	}
	p := parser.NewParser(
		parser.WithBlockParsers(parser.DefaultBlockParsers()...),
		parser.WithInlineParsers(inlines...),
		parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
	)
	return goldmark.New(goldmark.WithParser(p), goldmark.WithExtensions(extension.GFM)).Parser()
}()

// mdMaxChunk is the largest chunk parsed (mdbounds): one that could not be
// cut smaller is passed through as it is (mentions escaped) past this.
const mdMaxChunk = 64 << 10

// toDiscord converts the model's Markdown to Discord's (see the comment at
// the top of this file). The result has no blank lines at its start and
// no whitespace at its end.
func toDiscord(markdown string) string {
	return mdbounds.Convert(markdown, mdMaxChunk, mdConvertChunk, escapeMassMentions, trimBlankLines)
}

// trimBlankLines removes trailing whitespace and the blank lines at the
// start of s; the indentation of its first line stays.
func trimBlankLines(s string) string {
	s = strings.TrimRightFunc(s, unicode.IsSpace)
	for {
		line, rest, ok := strings.Cut(s, "\n")
		if !ok || strings.TrimSpace(line) != "" {
			return s
		}
		s = rest
	}
}

func mdConvertChunk(chunk string) string {
	src := []byte(chunk)
	spans := map[ast.Node]mdSpan{}
	pc := parser.NewContext()
	pc.Set(mdSpansKey, spans)
	doc := mdDiscordParser.Parse(text.NewReader(src), parser.WithContext(pc))
	c := &mdConv{src: src, spans: spans}
	return c.splice(0, len(src), c.block(doc))
}

// mdEdit replaces src[start:end] with text; start == end inserts.
type mdEdit struct {
	start, end int
	text       string
}

type mdConv struct {
	src   []byte
	spans map[ast.Node]mdSpan
}

// splice is src[start:end] with the edits inside it applied. Edits do not
// overlap (the walk makes them so); one that would is dropped, as is a
// repeated one.
func (c *mdConv) splice(start, end int, edits []mdEdit) string {
	edits = slices.Clone(edits)
	slices.SortStableFunc(edits, func(a, b mdEdit) int { return a.start - b.start })
	var b strings.Builder
	at := start
	for i, e := range edits {
		if e.start < at || e.start < start || e.end > end || e.end < e.start || i > 0 && e == edits[i-1] {
			continue
		}
		b.Write(c.src[at:e.start])
		b.WriteString(e.text)
		at = e.end
	}
	b.Write(c.src[at:end])
	return b.String()
}

// lineStart is the offset of the start of the line holding pos.
func (c *mdConv) lineStart(pos int) int {
	return bytes.LastIndexByte(c.src[:pos], '\n') + 1
}

// lineEnd is the offset of the newline ending the line holding pos, or
// the end of the source.
func (c *mdConv) lineEnd(pos int) int {
	if i := bytes.IndexByte(c.src[pos:], '\n'); i >= 0 {
		return pos + i
	}
	return len(c.src)
}

// contPrefix is what starts the lines after the first of a block that
// starts at pos: the containers' markers before pos with list markers
// blanked and tabs expanded, so "> - " gives "> " and two spaces.
func (c *mdConv) contPrefix(pos int) string {
	p := c.src[c.lineStart(pos):pos]
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch ch := p[i]; {
		case ch == '-' || ch == '*' || ch == '+':
			b.WriteByte(' ')
		case ch >= '0' && ch <= '9':
			j := i
			for j < len(p) && p[j] >= '0' && p[j] <= '9' {
				j++
			}
			if j < len(p) && (p[j] == '.' || p[j] == ')') {
				b.WriteString(strings.Repeat(" ", j-i+1))
				i = j
			} else {
				b.WriteByte(ch)
			}
		case ch == '\t':
			b.WriteString(strings.Repeat(" ", 4-b.Len()%4))
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}

// mdPrefixLines puts prefix before every line of s but the first; a blank
// line gets the prefix without trailing spaces.
func mdPrefixLines(s, prefix string) string {
	if prefix == "" || !strings.Contains(s, "\n") {
		return s
	}
	lines := strings.Split(s, "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] == "" {
			lines[i] = strings.TrimRight(prefix, " ")
		} else {
			lines[i] = prefix + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

func (c *mdConv) blocks(parent ast.Node) []mdEdit {
	var edits []mdEdit
	for n := parent.FirstChild(); n != nil; n = n.NextSibling() {
		edits = append(edits, c.block(n)...)
	}
	return edits
}

func (c *mdConv) block(node ast.Node) []mdEdit {
	switch n := node.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return c.inlines(n, false)
	case *ast.Heading:
		return c.heading(n)
	case *ast.ThematicBreak:
		if n.Pos() < 0 {
			return nil
		}
		return []mdEdit{{n.Pos(), c.lineEnd(n.Pos()), "───"}}
	case *ast.CodeBlock:
		return c.indentedCode(n)
	case *ast.FencedCodeBlock:
		return c.fencedCode(n)
	case *ast.HTMLBlock:
		return c.htmlBlock(n)
	case *east.Table:
		return c.table(n)
	case *ast.LinkReferenceDefinition:
		return c.definition(n)
	case *ast.Document:
		return append(c.blocks(n), c.gaps(n)...)
	case *ast.Blockquote:
		return append(c.blocks(n), c.quoteBlankLines(n)...)
	default: // lists, list items
		return c.blocks(n)
	}
}

// gaps keeps one blank line between the document's blocks: Discord shows
// every blank line, Markdown reads a run of them as one break.
func (c *mdConv) gaps(doc ast.Node) []mdEdit {
	var edits []mdEdit
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		if n.PreviousSibling() == nil || n.Pos() < 0 {
			continue
		}
		// Walk back over the blank lines before n's first line.
		ls := c.lineStart(n.Pos())
		from, blanks := ls, 0
		for from > 0 {
			prev := c.lineStart(from - 1)
			if strings.TrimSpace(string(c.src[prev:from-1])) != "" {
				break
			}
			from, blanks = prev, blanks+1
		}
		if blanks > 1 {
			edits = append(edits, mdEdit{from, ls, "\n"})
		}
	}
	return edits
}

// quoteBlankLines ends the blank lines of a block quote, ">", with a
// space: Discord quotes only a line that starts "> ".
func (c *mdConv) quoteBlankLines(q *ast.Blockquote) []mdEdit {
	last := q.LastChild()
	if last == nil || last.Pos() < 0 || q.Pos() < 0 {
		return nil
	}
	var edits []mdEdit
	for at, stop := c.lineStart(q.Pos()), c.lineStart(last.Pos()); at < stop; {
		e := c.lineEnd(at)
		if l := string(c.src[at:e]); strings.HasSuffix(l, ">") && strings.Trim(l, " >") == "" {
			edits = append(edits, mdEdit{e, e, " "})
		}
		at = e + 1
	}
	return edits
}

// heading keeps # to ### as they are (closing #s dropped), makes deeper
// ones a bold line and setext headings ATX ones, on one line.
func (c *mdConv) heading(h *ast.Heading) []mdEdit {
	pos, lines := h.Pos(), h.Lines()
	if pos < 0 {
		return c.inlines(h, false)
	}
	end := c.lineEnd(pos)
	start := pos
	if ls := c.lineStart(pos); strings.TrimSpace(string(c.src[ls:pos])) == "" {
		start = ls // Discord wants the # first on the line
	}
	content := ""
	if lines.Len() > 0 {
		first, last := lines.At(0), lines.At(lines.Len()-1)
		content = c.splice(first.Start, last.Stop, c.inlines(h, false))
		if first.Start == pos { // setext: the underline is the next line
			if e := c.lineEnd(last.Start); e < len(c.src) {
				end = c.lineEnd(e + 1)
			}
			ls := strings.Split(content, "\n")
			for i := range ls {
				ls[i] = strings.TrimSpace(strings.TrimLeft(ls[i], " \t>"))
			}
			content = strings.Join(ls, " ")
		}
		content = strings.TrimSpace(content)
	}
	var out string
	switch {
	case content == "":
	case h.Level <= 3:
		out = strings.Repeat("#", h.Level) + " " + content
	case strings.Contains(content, "**"):
		out = content
	default:
		out = "**" + content + "**"
	}
	return []mdEdit{{start, end, out}}
}

// mdCodeBlock writes a ``` block of body, its lines after the first
// prefixed; a ``` in the body is broken up so it cannot close the block.
func mdCodeBlock(lang, body, prefix string) string {
	body = strings.TrimRight(body, "\n")
	if strings.TrimSpace(body) == "" {
		return ""
	}
	return mdPrefixLines("```"+lang+"\n"+codeSafe(body)+"\n```", prefix)
}

// codeSafe keeps text inside a ``` block from closing it: a zero-width
// space goes between the backticks.
func codeSafe(s string) string {
	return strings.ReplaceAll(s, "```", "`\u200b`\u200b`")
}

// linesValue is the text of a block's lines, indentation padding included.
func (c *mdConv) linesValue(lines *text.Segments) string {
	var b strings.Builder
	for i := range lines.Len() {
		seg := lines.At(i)
		b.Write(seg.Value(c.src))
	}
	return b.String()
}

func (c *mdConv) indentedCode(n *ast.CodeBlock) []mdEdit {
	lines := n.Lines()
	if lines.Len() == 0 {
		return nil
	}
	first, last := lines.At(0), lines.At(lines.Len()-1)
	// Start where the indentation starts: the container prefix, less the
	// four columns that make the block.
	ls := c.lineStart(first.Start)
	start := first.Start
	for k := 0; k < 4 && start > ls && (c.src[start-1] == ' ' || c.src[start-1] == '\t'); k++ {
		start--
		if c.src[start] == '\t' {
			break
		}
	}
	end := last.Stop
	if end > 0 && c.src[end-1] == '\n' {
		end--
	}
	return []mdEdit{{start, max(end, start), mdCodeBlock("", c.linesValue(lines), c.contPrefix(start))}}
}

// mdLangRe is what Discord takes as a code block's language.
var mdLangRe = regexp.MustCompile(`^[A-Za-z0-9_+\-.#]+$`)

func (c *mdConv) fencedCode(n *ast.FencedCodeBlock) []mdEdit {
	pos := n.Pos()
	if pos < 0 || pos >= len(c.src) {
		return nil
	}
	fence := c.src[pos]
	flen := 0
	for pos+flen < len(c.src) && c.src[pos+flen] == fence {
		flen++
	}
	info := ""
	if n.Info != nil {
		info = strings.TrimSpace(string(n.Info.Segment.Value(c.src)))
	}
	lang := string(n.Language(c.src))
	if !mdLangRe.MatchString(lang) {
		lang = ""
	}
	lines := n.Lines()
	body := c.linesValue(lines)

	// The block ends with its closing fence, if it has one, on the line
	// after its last.
	after := c.lineEnd(pos)
	if lines.Len() > 0 {
		after = c.lineEnd(lines.At(lines.Len() - 1).Start)
	}
	end, closed := after, false
	if after < len(c.src) {
		next := c.lineEnd(after + 1)
		t := strings.TrimLeft(string(c.src[after+1:next]), " \t>")
		k := 0
		for k < len(t) && t[k] == fence {
			k++
		}
		if k >= flen && strings.TrimSpace(t[k:]) == "" {
			end, closed = next, true
		}
	}
	if !closed {
		end = after
		if lines.Len() > 0 {
			end = lines.At(lines.Len() - 1).Stop
		}
		for end > pos && c.src[end-1] == '\n' {
			end--
		}
	}
	keep := fence == '`' && flen == 3 && closed && info == lang &&
		strings.TrimSpace(body) != "" && !strings.Contains(body, "```")
	if keep {
		return nil
	}
	return []mdEdit{{pos, end, mdCodeBlock(lang, body, c.contPrefix(pos))}}
}

// htmlBlock shows an HTML block as the text it is.
func (c *mdConv) htmlBlock(n *ast.HTMLBlock) []mdEdit {
	var edits []mdEdit
	add := func(seg text.Segment) {
		s, e := seg.Start, seg.Stop
		for e > s && c.src[e-1] == '\n' {
			e--
		}
		if e > s {
			edits = append(edits, mdEdit{s, e, mdEscape(string(c.src[s:e]))})
		}
	}
	lines := n.Lines()
	for i := range lines.Len() {
		add(lines.At(i))
	}
	if n.HasClosure() {
		add(n.ClosureLine)
	}
	return edits
}

// definition removes a link reference definition (its links are written
// out inline) and, at the top level, the blank lines after it.
func (c *mdConv) definition(n *ast.LinkReferenceDefinition) []mdEdit {
	lines := n.Lines()
	pos := n.Pos()
	if lines.Len() == 0 || pos < 0 {
		return nil
	}
	end := c.lineEnd(lines.At(lines.Len() - 1).Start)
	if c.lineStart(pos) == pos {
		for end < len(c.src) {
			next := c.lineEnd(end + 1)
			if strings.TrimSpace(string(c.src[end+1:next])) != "" {
				end++ // keep the next line's start; drop this newline
				break
			}
			end = next
		}
	}
	return []mdEdit{{pos, min(end, len(c.src)), ""}}
}

// table renders a GFM table as a code block with aligned columns: a
// monospace font is the only way to line one up in Discord.
func (c *mdConv) table(t *east.Table) []mdEdit {
	head := t.FirstChild()
	if head == nil || head.Pos() < 0 {
		return nil
	}
	var rows [][]string
	lastRow := -1
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
			cells = append(cells, mdbounds.OneLine(c.plain(cell, true)))
		}
		rows = append(rows, cells)
		if row != head && row.Pos() >= 0 {
			lastRow = row.Pos()
		}
	}
	start := head.Pos()
	var end int
	if lastRow >= 0 {
		end = c.lineEnd(lastRow)
	} else { // the delimiter row is the last
		end = c.lineEnd(start)
		if end < len(c.src) {
			end = c.lineEnd(end + 1)
		}
	}
	return []mdEdit{{start, end, mdCodeBlock("", mdbounds.Table(rows, t.Alignments, mdWidth), c.contPrefix(start))}}
}

// mdWidth is how many columns s takes in a monospace font: East
// Asian wide characters take two, combining marks none.
func mdWidth(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Mn, r) || r == '\u200b' || r == '\u200d':
		case r >= 0x1F300 && r <= 0x1FAFF: // emoji
			n += 2
		default:
			switch width.LookupRune(r).Kind() {
			case width.EastAsianWide, width.EastAsianFullwidth:
				n += 2
			default:
				n++
			}
		}
	}
	return n
}

func (c *mdConv) inlines(parent ast.Node, inLink bool) []mdEdit {
	var edits []mdEdit
	for n := parent.FirstChild(); n != nil; n = n.NextSibling() {
		edits = append(edits, c.inline(n, inLink)...)
	}
	return edits
}

func (c *mdConv) inline(node ast.Node, inLink bool) []mdEdit {
	switch n := node.(type) {
	case *ast.Text:
		return c.text(n)
	case *ast.CodeSpan:
		return nil // Discord's as well; mentions do not work in code
	case *ast.Emphasis:
		return c.delimited(n, n.Level, '_', inLink)
	case *east.Strikethrough:
		return c.delimited(n, 1, '~', inLink)
	case *ast.Link:
		return c.link(n)
	case *ast.Image:
		return c.image(n, inLink)
	case *ast.AutoLink:
		sp, ok := c.spans[n]
		if ok && n.AutoLinkType == ast.AutoLinkEmail && n.Pos() >= 0 && c.src[n.Pos()] == '<' {
			return []mdEdit{{n.Pos(), sp.end, mdEscape(string(n.Label(c.src)))}}
		}
		return nil
	case *ast.RawHTML:
		var edits []mdEdit
		for i := range n.Segments.Len() {
			seg := n.Segments.At(i)
			edits = append(edits, mdEdit{seg.Start, seg.Stop, mdEscape(string(seg.Value(c.src)))})
		}
		return edits
	case *east.TaskCheckBox:
		pos := n.Pos()
		if pos < 0 || pos+3 > len(c.src) || c.src[pos] != '[' || c.src[pos+2] != ']' {
			return nil
		}
		box := "☐"
		if n.IsChecked {
			box = "☑"
		}
		return []mdEdit{{pos, pos + 3, box}}
	default:
		return c.inlines(n, inLink)
	}
}

// delimited rewrites the marks around emphasis or strikethrough where
// Discord reads them otherwise: __bold__ is underline to Discord, so it
// becomes **bold**, and bold inside bold loses its marks; ~one~ tilde is
// not strikethrough to Discord, so it becomes ~~two~~. level is the marks'
// length; mark the character that needs rewriting.
func (c *mdConv) delimited(n ast.Node, level int, mark byte, inLink bool) []mdEdit {
	edits := c.inlines(n, inLink)
	open, ok1 := c.start(n)
	end, ok2 := c.end(n)
	if !ok1 || !ok2 || open < 0 || end > len(c.src) || end-level < open+level {
		return edits
	}
	opener, closer := string(c.src[open:open+level]), string(c.src[end-level:end])
	var with string
	switch {
	case mark == '~':
		// A single tilde: no tilde after the opener or before the closer.
		if opener != "~" || closer != "~" || c.src[open+1] == '~' || c.src[end-2] == '~' {
			return edits
		}
		with = "~~"
	case level == 2 && c.inStrong(n):
		with = ""
	case opener == "__" && closer == "__":
		with = "**"
	default:
		return edits
	}
	return append(append([]mdEdit{{open, open + level, with}}, edits...), mdEdit{end - level, end, with})
}

// inStrong reports whether n is inside bold.
func (c *mdConv) inStrong(n ast.Node) bool {
	for p := n.Parent(); p != nil; p = p.Parent() {
		if e, ok := p.(*ast.Emphasis); ok && e.Level == 2 {
			return true
		}
	}
	return false
}

// start is where an inline node starts in the source, its marks included.
// goldmark's position for emphasis is that of the whole run of marks
// ("***" for both of ***x***), so it is found from the content's.
func (c *mdConv) start(n ast.Node) (int, bool) {
	switch n := n.(type) {
	case *ast.Text:
		return n.Segment.Start, true
	case *ast.Emphasis:
		if first := n.FirstChild(); first != nil {
			s, ok := c.start(first)
			return s - n.Level, ok && s-n.Level >= 0
		}
	case *east.Strikethrough:
		if first := n.FirstChild(); first != nil {
			s, ok := c.start(first)
			k := 1
			if s >= 2 && c.src[s-2] == '~' {
				k = 2
			}
			return s - k, ok && s-k >= 0
		}
	default:
		if p := n.Pos(); p >= 0 {
			return p, true
		}
	}
	return 0, false
}

// end is where an inline node ends in the source, its marks included,
// where that is known.
func (c *mdConv) end(n ast.Node) (int, bool) {
	if sp, ok := c.spans[n]; ok {
		return sp.end, true
	}
	switch n := n.(type) {
	case *ast.Text:
		return n.Segment.Stop, true
	case *ast.Emphasis:
		if last := n.LastChild(); last != nil {
			e, ok := c.end(last)
			return e + n.Level, ok && e+n.Level <= len(c.src)
		}
	case *east.Strikethrough:
		if last := n.LastChild(); last != nil {
			e, ok := c.end(last)
			k := 1
			if e+1 < len(c.src) && c.src[e+1] == '~' {
				k = 2
			}
			return e + k, ok && e+k <= len(c.src)
		}
	}
	return 0, false
}

// text escapes mass mentions, resolves HTML entities (Discord shows
// "&amp;" as it is) and drops the backslash of a hard line break.
func (c *mdConv) text(n *ast.Text) []mdEdit {
	var edits []mdEdit
	seg := n.Segment
	v := c.src[seg.Start:seg.Stop]
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '@':
			if mdMassMention(v[i+1:]) {
				edits = append(edits, mdEdit{seg.Start + i + 1, seg.Start + i + 1, "\u200b"})
			}
		case '&':
			if n.IsRaw() {
				continue
			}
			if m := mdEntityRe.Find(v[i:]); m != nil {
				if r := mdbounds.Unescape(m); r != string(m) {
					edits = append(edits, mdEdit{seg.Start + i, seg.Start + i + len(m), mdEscape(r)})
					i += len(m) - 1
				}
			}
		case '\\':
			if i+1 < len(v) && v[i+1] != '@' {
				i++ // an escaped character stays escaped
			}
		}
	}
	if n.HardLineBreak() && seg.Stop < len(c.src) {
		// "\" or spaces before the newline: Discord breaks the line anyway.
		if e := c.lineEnd(seg.Stop); c.src[seg.Stop] == '\\' && e == seg.Stop+1 || strings.TrimSpace(string(c.src[seg.Stop:e])) == "" {
			edits = append(edits, mdEdit{seg.Stop, e, ""})
		}
	}
	return edits
}

var mdEntityRe = regexp.MustCompile(`^&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});`)

// mdMassMention reports whether b starts with "everyone" or "here" (in any
// case): what makes a mass mention after an @.
func mdMassMention(b []byte) bool {
	return len(b) >= 8 && bytes.EqualFold(b[:8], []byte("everyone")) ||
		len(b) >= 4 && bytes.EqualFold(b[:4], []byte("here"))
}

// escapeMassMentions puts a zero-width space after the @ of "@everyone"
// and "@here", so that they do not notify anyone.
func escapeMassMentions(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] == '@' && mdMassMention([]byte(s[i+1:])) {
			b.WriteString("\u200b")
		}
	}
	return b.String()
}

// mdEscape makes s show as the text it is: Discord's markup characters
// are backslash-escaped (a backslash before any punctuation shows it),
// as are #, - and + that start a line, and mass mentions are escaped.
func mdEscape(s string) string {
	var b strings.Builder
	lineStart := true
	for _, r := range s {
		switch {
		case strings.ContainsRune("\\*_~`|<>[]", r):
			b.WriteByte('\\')
		case lineStart && (r == '#' || r == '-' || r == '+'):
			b.WriteByte('\\')
		}
		b.WriteRune(r)
		if r == '\n' {
			lineStart = true
		} else if r != ' ' && r != '\t' {
			lineStart = false
		}
	}
	return escapeMassMentions(b.String())
}

// link writes a link Discord cannot show as it is as an inline masked
// link [text](url): a reference link, one with a title or a <destination>.
// A link to anything but http(s) becomes its text, which Discord could not
// open anyway; a mailto: link, its text and the address.
func (c *mdConv) link(n *ast.Link) []mdEdit {
	children := c.inlines(n, true)
	sp, ok := c.spans[n]
	pos := n.Pos()
	if !ok || pos < 0 || sp.begin <= pos || sp.begin > sp.end {
		return children
	}
	dest := string(n.Destination)
	u, isURL := discordURL(dest)
	if isURL && string(c.src[sp.begin:sp.end]) == "]("+dest+")" && !strings.ContainsAny(dest, "\\&<>() \t") {
		return children
	}
	label := strings.TrimSpace(c.splice(pos+1, sp.begin, children))
	var out string
	switch {
	case isURL && label == "":
		out = u
	case isURL:
		out = "[" + label + "](" + u + ")"
	default:
		out = label
		dest = strings.TrimSpace(dest)
		if addr, ok := strings.CutPrefix(strings.ToLower(dest), "mailto:"); ok && addr != "" && !strings.Contains(label, dest[7:]) {
			out = strings.TrimSpace(label + " (" + mdEscape(dest[7:]) + ")")
		}
	}
	return []mdEdit{{pos, sp.end, out}}
}

// image writes an image as a masked link to it, titled with its alt text;
// inside a link, or for anything but an http(s) image, the alt text alone.
func (c *mdConv) image(n *ast.Image, inLink bool) []mdEdit {
	sp, ok := c.spans[n]
	pos := n.Pos()
	if !ok || pos < 0 || sp.end <= pos {
		return nil
	}
	alt := mdbounds.OneLine(c.plain(n, false))
	u, isURL := discordURL(string(n.Destination))
	var out string
	switch {
	case inLink || !isURL:
		out = mdEscape(alt)
		if out == "" {
			out = "image"
		}
	case alt == "":
		out = u
	default:
		out = "[" + mdEscape(alt) + "](" + u + ")"
	}
	return []mdEdit{{pos, sp.end, out}}
}

// discordURL resolves a link destination's escapes and percent-encodes
// what would end a masked link early. It reports false for anything but
// an absolute http(s) URL.
func discordURL(dest string) (string, bool) {
	v := string(util.URLEscape([]byte(strings.TrimSpace(dest)), true))
	v = strings.NewReplacer("(", "%28", ")", "%29", "<", "%3C", ">", "%3E", " ", "%20").Replace(v)
	p, err := url.Parse(v)
	if err != nil || p.Host == "" {
		return "", false
	}
	switch strings.ToLower(p.Scheme) {
	case "http", "https":
		return v, true
	}
	return "", false
}

// plain renders the inline children of parent as plain text: no marks,
// code without backticks, links as their text (or, in a table cell, as
// "text (url)").
func (c *mdConv) plain(parent ast.Node, cell bool) string {
	var b strings.Builder
	for n := parent.FirstChild(); n != nil; n = n.NextSibling() {
		switch n := n.(type) {
		case *ast.Text:
			v := n.Segment.Value(c.src)
			if n.IsRaw() {
				b.Write(v)
			} else {
				b.WriteString(mdbounds.Unescape(v))
			}
			if n.HardLineBreak() || n.SoftLineBreak() {
				b.WriteString(" ")
			}
		case *ast.String:
			b.Write(n.Value)
		case *ast.CodeSpan:
			for t := n.FirstChild(); t != nil; t = t.NextSibling() {
				if t, ok := t.(*ast.Text); ok {
					b.Write(t.Segment.Value(c.src))
				}
			}
		case *ast.Link:
			label := mdbounds.OneLine(c.plain(n, false))
			u, ok := discordURL(string(n.Destination))
			switch {
			case !cell || !ok || label == u:
				b.WriteString(label)
			case label == "":
				b.WriteString(u)
			default:
				b.WriteString(label + " (" + u + ")")
			}
		case *ast.AutoLink:
			b.Write(n.Label(c.src))
		case *ast.RawHTML:
			for i := range n.Segments.Len() {
				seg := n.Segments.At(i)
				b.Write(seg.Value(c.src))
			}
		case *east.TaskCheckBox:
			b.WriteString(mdbounds.CheckBox(n.IsChecked))
		default:
			b.WriteString(c.plain(n, cell))
		}
	}
	return b.String()
}

// ---- Splitting ----

// splitDiscord cuts Discord Markdown into pieces of at most limit
// characters (code points, which is what Discord counts): at a paragraph
// break where one is in the second half of the room, else at a line
// break, else at a space (outside code), else at the last break or space
// however early, else between any two characters; never inside a masked
// link, a <…> tag (mention, timestamp, link), an inline code span or a
// fence's opening "```lang" where that can be avoided. A piece that ends
// inside a code block is closed with "```" and the next piece reopens it
// with the same language. The whitespace at a cut is dropped; nothing
// else is, and no piece is empty: text that is only whitespace gives none.
// Below 16 characters code blocks are cut without the extra fences.
// (mdbounds.Split, with scanDiscord.)
func splitDiscord(s string, limit int) []string { return mdbounds.Split(s, limit, scanDiscord) }

// truncateDiscord shortens Discord Markdown to at most limit characters,
// ending in "…", cutting where splitDiscord would, but late rather than
// early; a code block it cuts is closed.
func truncateDiscord(s string, limit int) string { return mdbounds.Truncate(s, limit, scanDiscord) }

// fenceAt reports whether a ``` starts at rs[i]: a fence, never part of a
// tag, a link or a code span, so what it opens or closes is counted.
func fenceAt(rs []rune, i int) bool {
	return i+2 < len(rs) && rs[i] == '`' && rs[i+1] == '`' && rs[i+2] == '`'
}

// scanDiscord marks where splitDiscord may not cut: inside a masked link,
// a <…> tag, an inline code span or a fence's opening "```lang", or inside
// a character (dNoCutBefore); and the code blocks (from
// mdbounds.MinFenced), each reopened with its opening fence: "```lang\n",
// or "```\n" where the language would take more than a quarter of the
// piece.
func scanDiscord(rs []rune, limit int) *mdbounds.Marks {
	m := mdbounds.NewMarks(len(rs))
	fences := limit >= mdbounds.MinFenced
	cur := "" // the Reopen of the code block open here
	// mark marks a stretch: no cut before rs[from+1 … to-1].
	mark := func(from, to int) {
		for k := from + 1; k < to && k <= len(rs); k++ {
			m.Atomic[k] = true
			m.Reopen[k] = cur
		}
	}
	for i := 0; i < len(rs); {
		m.Reopen[i] = cur
		switch r := rs[i]; {
		case fenceAt(rs, i):
			j := i + 3
			if cur == "" {
				k := j
				for k < len(rs) && k-j < 32 && isLangChar(rs[k]) {
					k++
				}
				lang := ""
				if k > j && k < len(rs) && rs[k] == '\n' {
					lang, j = string(rs[j:k]), k
				}
				mark(i, j)
				if fences {
					cur = "```\n"
					if 4+len(lang) <= limit/4 { // lang is ASCII (isLangChar)
						cur = "```" + lang + "\n"
					}
					// Up to where the block's text starts, after
					// "```lang\n", a piece would end with the fence.
					body := j
					if body < len(rs) && rs[body] == '\n' {
						body++
					}
					for e := j; e <= body; e++ {
						m.Opener[e] = i
					}
				}
			} else {
				mark(i, j)
				cur = ""
			}
			i = j
			continue
		case cur != "":
		case r == '`':
			// An inline code span: the same run of backticks closes it,
			// on the same line.
			k := i
			for k < len(rs) && rs[k] == '`' {
				k++
			}
			run := k - i
			for j := k; j < len(rs) && j-i < 300 && rs[j] != '\n'; j++ {
				if rs[j] != '`' {
					continue
				}
				e := j
				for e < len(rs) && rs[e] == '`' {
					e++
				}
				if e-j >= 3 {
					break // a fence: never inside a code span
				}
				if e-j == run {
					mark(i, e)
					i = e
					goto next
				}
				j = e - 1
			}
			i = k
			continue
		case r == '<':
			for j := i + 1; j < len(rs) && j-i < 300 && rs[j] != '\n' && rs[j] != '<' && !fenceAt(rs, j); j++ {
				if rs[j] == '>' {
					mark(i, j+1)
					i = j + 1
					goto next
				}
			}
		case r == '[':
			// A masked link: [label](url) on one line.
			j := i + 1
			for j < len(rs) && j-i < 300 && rs[j] != '\n' && rs[j] != ']' && rs[j] != '[' && !fenceAt(rs, j) {
				j++
			}
			if j+1 < len(rs) && rs[j] == ']' && rs[j+1] == '(' {
				for k := j + 2; k < len(rs) && k-i < 2500 && rs[k] != '\n' && rs[k] != ' ' && !fenceAt(rs, k); k++ {
					if rs[k] == ')' {
						mark(i, k+1)
						i = k + 1
						goto next
					}
				}
			}
		}
		i++
	next:
	}
	m.Reopen[len(rs)] = cur
	for i, r := range rs {
		if dNoCutBefore(r) {
			m.Atomic[i] = true
		}
	}
	return m
}

// isLangChar reports whether r can be part of a code block's language.
func isLangChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_+-.#", r)
}

// dNoCutBefore reports whether a cut before r would split a character:
// a combining mark, a variation selector, a zero-width joiner or an
// emoji skin tone.
func dNoCutBefore(r rune) bool {
	return unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || r == '\u200d' || r == '\u200b' || (r >= 0x1F3FB && r <= 0x1F3FF)
}
