package stdin

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ANSI styles. Italics have an "off" of their own; 22 ends both bold and
// dim, so what is still on is set again after it.
const (
	ansiBold      = "\x1b[1m"
	ansiDim       = "\x1b[2m"
	ansiItalic    = "\x1b[3m"
	ansiBoldOff   = "\x1b[22m"
	ansiItalicOff = "\x1b[23m"
)

// maxMarkdown is the largest text whose Markdown is interpreted; a longer
// one is shown as it is.
const maxMarkdown = 64 << 10

// markdown renders the Markdown the model writes for a terminal: with
// styled, **bold** and _italics_ become ANSI bold and italics; without,
// the markers are removed. `code` loses its backticks, a link shows its
// address after its text, and a heading's #s go (styled: it is bold).
// Fenced code blocks are shown as they are, without the fences. Lists,
// quotes and tables read well as they are written. base is the style the
// text is shown in (dim for the recap), set again after a style ends.
func markdown(src string, styled bool, base string) string {
	if len(src) > maxMarkdown {
		return src
	}
	r := mdRenderer{styled: styled, base: base}
	var out []string
	fence := ""
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		indented := len(line)-len(trimmed) >= 4
		switch {
		case fence != "":
			if !indented && isFence(trimmed) && strings.HasPrefix(trimmed, fence) && strings.TrimRight(trimmed, fence[:1]+" ") == "" {
				fence = ""
				continue
			}
			out = append(out, line)
		case !indented && isFence(trimmed):
			fence = trimmed[:fenceLen(trimmed)]
		case !indented && isHeading(trimmed):
			text := strings.TrimSpace(strings.TrimLeft(trimmed, "#"))
			if t := strings.TrimRight(text, "#"); t == "" || strings.HasSuffix(t, " ") {
				text = strings.TrimSpace(t) // a closing sequence of #s
			}
			out = append(out, r.bold(text))
		default:
			out = append(out, r.inline(line, nil))
		}
	}
	return strings.Join(out, "\n")
}

// isFence: ``` or ~~~ (three or more) opens or closes a code block.
func isFence(s string) bool { return fenceLen(s) >= 3 }

func fenceLen(s string) int {
	if s == "" || s[0] != '`' && s[0] != '~' {
		return 0
	}
	n := 0
	for n < len(s) && s[n] == s[0] {
		n++
	}
	if s[0] == '`' && strings.Contains(s[n:], "`") {
		return 0 // an inline code span, not a fence
	}
	return n
}

// isHeading: 1 to 6 #s and a space (or nothing).
func isHeading(s string) bool {
	n := 0
	for n < len(s) && s[n] == '#' {
		n++
	}
	return n >= 1 && n <= 6 && (n == len(s) || s[n] == ' ' || s[n] == '\t')
}

type mdRenderer struct {
	styled bool
	base   string
}

func (r mdRenderer) bold(text string) string {
	if !r.styled {
		return r.inline(text, nil)
	}
	return ansiBold + r.inline(text, []string{ansiBold}) + ansiBoldOff + r.base
}

// piece is a part of a line: literal text, or a run of * or _ that may
// open or close emphasis.
type piece struct {
	text string
	run  *delimRun
}

type delimRun struct {
	ch                byte
	n, orig           int // delimiters left unmatched, and at first
	canOpen, canClose bool
	opens             []string // styles it opens, outermost first
	closes            []string // styles it closes, innermost first
}

// inline renders emphasis, code spans and links in one line, with the
// rules of CommonMark for which * and _ open and close (so snake_case and
// 2 * 3 * 4 stay as they are). open are the styles already open around it.
func (r mdRenderer) inline(s string, open []string) string {
	pieces := r.split(s)
	matchEmphasis(pieces)
	var b strings.Builder
	stack := append([]string(nil), open...)
	for _, p := range pieces {
		if p.run == nil {
			b.WriteString(p.text)
			continue
		}
		for _, style := range p.run.closes {
			stack = stack[:len(stack)-1]
			if !r.styled {
				continue
			}
			if style == ansiItalic {
				b.WriteString(ansiItalicOff)
				continue
			}
			// 22 ends bold and dim alike: set again what is still on.
			b.WriteString(ansiBoldOff + r.base)
			if slices.Contains(stack, ansiBold) {
				b.WriteString(ansiBold)
			}
		}
		b.WriteString(strings.Repeat(string(p.run.ch), p.run.n))
		for _, style := range p.run.opens {
			stack = append(stack, style)
			if r.styled {
				b.WriteString(style)
			}
		}
	}
	return b.String()
}

// split cuts a line into literal text (code spans, links and escapes
// already resolved) and runs of emphasis delimiters.
func (r mdRenderer) split(s string) []piece {
	var pieces []piece
	var lit strings.Builder
	// What was searched for once is not searched again, so a line costs
	// linear time whatever it holds: the next ']' (-1: not looked for yet),
	// and the lengths of backtick runs that do not occur further on.
	nextClose := -1
	noRun := map[int]bool{}
	flush := func() {
		if lit.Len() > 0 {
			pieces = append(pieces, piece{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			lit.WriteByte(s[i+1])
			i += 2
		case c == '`':
			n := runLen(s, i)
			end := -1
			if !noRun[n] {
				end = closingBackticks(s, i+n, n)
				noRun[n] = end < 0
			}
			if end < 0 {
				lit.WriteString(s[i : i+n])
				i += n
				continue
			}
			code := s[i+n : end]
			if len(code) >= 2 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.Trim(code, " ") != "" {
				code = code[1 : len(code)-1]
			}
			lit.WriteString(code)
			i = end + n
		case c == '[' || c == '!' && i+1 < len(s) && s[i+1] == '[':
			start := i
			if c == '!' {
				start++
			}
			if nextClose < start {
				nextClose = len(s) // none
				if j := strings.IndexByte(s[start:], ']'); j >= 0 {
					nextClose = start + j
				}
			}
			text, dest, end, ok := parseLink(s, start, nextClose)
			if !ok {
				lit.WriteString(s[i : start+1])
				i = start + 1
				continue
			}
			shown := r.inline(text, nil)
			lit.WriteString(shown)
			if dest != "" && dest != text {
				lit.WriteString(" (" + dest + ")")
			}
			i = end
		case c == '<':
			if end := strings.IndexAny(s[i+1:], "> \t<"); end >= 0 && s[i+1+end] == '>' && isAutolink(s[i+1:i+1+end]) {
				lit.WriteString(s[i+1 : i+1+end])
				i += end + 2
				continue
			}
			lit.WriteByte(c)
			i++
		case c == '*' || c == '_':
			n := runLen(s, i)
			before, _ := utf8.DecodeLastRuneInString(s[:i])
			after, _ := utf8.DecodeRuneInString(s[i+n:])
			if i == 0 {
				before = ' '
			}
			if i+n == len(s) {
				after = ' '
			}
			left := !unicode.IsSpace(after) && (!isPunct(after) || unicode.IsSpace(before) || isPunct(before))
			right := !unicode.IsSpace(before) && (!isPunct(before) || unicode.IsSpace(after) || isPunct(after))
			d := &delimRun{ch: c, n: n, orig: n, canOpen: left, canClose: right}
			if c == '_' { // never inside a word
				d.canOpen = left && (!right || isPunct(before))
				d.canClose = right && (!left || isPunct(after))
			}
			flush()
			pieces = append(pieces, piece{run: d})
			i += n
		default:
			lit.WriteByte(c)
			i++
		}
	}
	flush()
	return pieces
}

// matchEmphasis pairs openers with closers, as CommonMark's "process
// emphasis": each closer takes the nearest opener of its kind, two
// delimiters (bold) when both have two, else one (italics); delimiters
// between a pair stay literal.
func matchEmphasis(pieces []piece) {
	type key struct {
		ch      byte
		canOpen bool
		mod     int
	}
	var stack []*delimRun // openers not yet used up, nearest last
	bottom := map[key]int{}
	for _, p := range pieces {
		c := p.run
		if c == nil {
			continue
		}
		if c.canClose {
			k := key{c.ch, c.canOpen, c.orig % 3}
			for c.n > 0 {
				found := -1
				for j := len(stack) - 1; j >= bottom[k]; j-- {
					o := stack[j]
					if o.ch != c.ch || o.n == 0 {
						continue
					}
					if (o.canClose || c.canOpen) && (o.orig+c.orig)%3 == 0 && (o.orig%3 != 0 || c.orig%3 != 0) {
						continue
					}
					found = j
					break
				}
				if found < 0 {
					bottom[k] = len(stack)
					break
				}
				o := stack[found]
				use, style := 1, ansiItalic
				if o.n >= 2 && c.n >= 2 {
					use, style = 2, ansiBold
				}
				o.n -= use
				c.n -= use
				o.opens = append([]string{style}, o.opens...)
				c.closes = append(c.closes, style)
				// What is between the pair can no longer match.
				stack = stack[:found+1]
				if o.n == 0 {
					stack = stack[:found]
				}
				for k, b := range bottom {
					bottom[k] = min(b, len(stack))
				}
			}
		}
		if c.canOpen && c.n > 0 {
			stack = append(stack, c)
		}
	}
}

// parseLink reads [text](destination "title") at s[i] == '['; the text
// ends at the first ']', at close. The destination is read up to a space
// (then a title may follow), and never past a bracket, so that scans of
// one line do not overlap.
func parseLink(s string, i, close int) (text, dest string, end int, ok bool) {
	if close+1 >= len(s) || s[close+1] != '(' {
		return "", "", 0, false
	}
	depth := 0
	for j := close + 2; j < len(s); j++ {
		switch c := s[j]; c {
		case '(':
			depth++
		case ')':
			if depth > 0 {
				depth--
				continue
			}
			return s[i+1 : close], unbracket(s[close+2 : j]), j + 1, true
		case ' ', '\t':
			// A title, in quotes or parentheses, then ')'.
			dest = s[close+2 : j]
			rest := strings.TrimLeft(s[j:], " \t")
			k := len(s) - len(rest)
			if rest == "" {
				return "", "", 0, false
			}
			quote := rest[0]
			if quote == '(' {
				quote = ')'
			} else if quote != '"' && quote != '\'' {
				return "", "", 0, false
			}
			q := strings.IndexByte(rest[1:], quote)
			if q < 0 || q > 256 {
				return "", "", 0, false
			}
			after := k + 1 + q + 1
			after += len(s[after:]) - len(strings.TrimLeft(s[after:], " \t"))
			if after >= len(s) || s[after] != ')' {
				return "", "", 0, false
			}
			return s[i+1 : close], unbracket(dest), after + 1, true
		case '[', ']', '<':
			if c == '<' && j == close+2 {
				continue // <destination>
			}
			return "", "", 0, false
		}
	}
	return "", "", 0, false
}

func unbracket(dest string) string {
	return strings.TrimSuffix(strings.TrimPrefix(dest, "<"), ">")
}

func isAutolink(s string) bool {
	if strings.ContainsAny(s, " \t<") {
		return false
	}
	for _, scheme := range []string{"http://", "https://", "mailto:"} {
		if strings.HasPrefix(strings.ToLower(s), scheme) {
			return true
		}
	}
	return false
}

func runLen(s string, i int) int {
	n := 1
	for i+n < len(s) && s[i+n] == s[i] {
		n++
	}
	return n
}

// closingBackticks finds a run of exactly n backticks from i on.
func closingBackticks(s string, i, n int) int {
	for i < len(s) {
		j := strings.IndexByte(s[i:], '`')
		if j < 0 {
			return -1
		}
		j += i
		m := runLen(s, j)
		if m == n {
			return j
		}
		i = j + m
	}
	return -1
}

func isASCIIPunct(c byte) bool {
	return c < utf8.RuneSelf && isPunct(rune(c))
}

func isPunct(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) }
