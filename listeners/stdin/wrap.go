package stdin

import (
	"regexp"
	"strings"

	xterm "golang.org/x/term"
	"golang.org/x/text/width"
)

// defaultWidth is the width assumed where the terminal's cannot be read.
const defaultWidth = 80

// minText is the fewest columns a listing's text column is given; a
// narrower terminal wraps it under the start of the line instead.
const minText = 20

// width is how the view learns the terminal's width: Width, else Out's
// size if it is a terminal (asked each time: a window may be resized),
// else defaultWidth.
func (l *Listener) width() func() int {
	if l.Width != nil {
		return func() int {
			if w := l.Width(); w > 0 {
				return w
			}
			return defaultWidth
		}
	}
	f, ok := l.Out.(interface{ Fd() uintptr })
	return func() int {
		if ok {
			if w, _, err := xterm.GetSize(int(f.Fd())); err == nil && w > 0 {
				return w
			}
		}
		return defaultWidth
	}
}

// The columns of the gateway's listings: /tools' "  name  [policy] text",
// whose text goes on under the policy, and /help's "  /tools    text",
// whose text goes on under itself (after a gap of two spaces or more).
// The first group is what continued lines are indented by.
var columns = []*regexp.Regexp{
	regexp.MustCompile(`^(\s+[^\s/]\S*\s+)\[[^\]]*\] `), // a tool's name, not a /command [arg]
	regexp.MustCompile(`^(\s*\S.*?\s{2,})`),
}

// wrap breaks the lines of text longer than cols at spaces (a word longer
// than a line is cut). A line that goes on is indented under its text
// column, when it has one that leaves room, else as the line itself.
func wrap(text string, cols int) string {
	if cols < 20 {
		cols = 20 // narrower, nothing fits anyway: keep the words whole
	}
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		lines[i] = wrapLine(line, cols)
	}
	return strings.Join(lines, "\n")
}

func wrapLine(line string, cols int) string {
	if textWidth(line) <= cols {
		return line
	}
	lead := line[:len(line)-len(strings.TrimLeft(line, " "))]
	head, pad := lead, lead
	for _, re := range columns {
		// A column that leaves the text too little room is not kept.
		if m := re.FindStringSubmatch(line); m != nil && textWidth(m[0]) <= cols-minText {
			head, pad = m[0], strings.Repeat(" ", textWidth(m[1]))
			break
		}
	}
	if textWidth(pad) > cols-minText {
		pad = strings.Repeat(" ", max(cols-minText, 0))
	}
	var out []string
	cur, n, empty, onPad := head, textWidth(head), true, head == pad
	next := func() {
		out = append(out, strings.TrimRight(cur, " "))
		cur, n, empty, onPad = pad, textWidth(pad), true, true
	}
	for _, word := range strings.Fields(line[len(head):]) {
		for word != "" {
			w, sep := textWidth(word), 1
			if empty {
				sep = 0
			}
			switch {
			case n+sep+w <= cols:
				if !empty {
					cur += " "
				}
				cur, n, empty, word = cur+word, n+sep+w, false, ""
			case !empty || !onPad && textWidth(pad)+w <= cols:
				next() // on the next line
			default: // alone it does not fit: cut it
				part, rest := cutWidth(word, cols-n)
				cur += part
				word = rest
				next()
			}
		}
	}
	if !empty || len(out) == 0 {
		out = append(out, cur)
	}
	return strings.Join(out, "\n")
}

// textWidth is how many columns s takes: East Asian wide characters two.
func textWidth(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

func runeWidth(r rune) int {
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// cutWidth splits s after at most max columns, one character at least.
func cutWidth(s string, max int) (part, rest string) {
	n := 0
	for i, r := range s {
		w := runeWidth(r)
		if n+w > max && i > 0 {
			return s[:i], s[i:]
		}
		n += w
	}
	return s, ""
}
