package mdbounds

import (
	"strings"
	"unicode/utf8"
)

// A chat platform takes messages of a bounded length, so a long reply is
// cut into pieces (Split) or shortened (Truncate). Where to cut is the
// same everywhere: at a paragraph break in the second half of the room,
// else at a line break, else at a space outside code, else at the last
// break or space however early, else between any two characters; a piece
// that ends inside a code block is closed with a fence and the next one
// reopens it. What a platform decides is which stretches must not be cut
// (its links, tags, entities, fences) and how a code block is reopened:
// its Scanner writes that down as Marks.

// MinFenced is the smallest limit at which a code block that is cut is
// closed and reopened; below it, the fences would leave no room for text,
// and a Scanner opens no blocks.
const MinFenced = 16

// FenceClose is what closes a piece that ends inside a code block.
const FenceClose = "\n```"

// Marks are what a platform's Scanner finds in text of n characters
// (runes); each slice has n+1 entries, one for each place a cut could be,
// before each character and at the end. NewMarks makes them empty.
type Marks struct {
	// Atomic[i] is whether a cut before character i would break what
	// must stay whole: a link, a tag, an entity, a code span, a fence,
	// or a character made of several code points (a combining mark).
	Atomic []bool
	// Reopen[i] is what reopens the code block open before character i
	// in the piece that starts there ("```\n", "```go\n"), or "" where
	// no code block is open.
	Reopen []string
	// Opener[i], where it is not -1, says that a piece ending before
	// character i would end with the fence (and its line) that opened
	// the code block open there, and where that fence starts. A piece
	// that holds the fence is not ended at i unless nothing else fits:
	// it would show only an empty code block.
	Opener []int
}

// NewMarks makes the Marks of text of n characters: no atomic spans, no
// code blocks.
func NewMarks(n int) *Marks {
	m := &Marks{Atomic: make([]bool, n+1), Reopen: make([]string, n+1), Opener: make([]int, n+1)}
	for i := range m.Opener {
		m.Opener[i] = -1
	}
	return m
}

// A Scanner finds the Marks of a platform's text for a piece limit; when
// limit < MinFenced it opens no code blocks.
type Scanner func(rs []rune, limit int) *Marks

// Split cuts s into pieces of at most limit characters (runes): at a
// paragraph break where one is in the second half of the room, else at a
// line break, else at a space outside code, else at the last break or
// space however early, else between any two characters; never where scan
// marks a cut Atomic if that can be avoided. A piece that ends inside a
// code block is closed with FenceClose and the next one starts with the
// block's Reopen. The whitespace at a cut is dropped; nothing else is,
// and no piece is empty: text that is only whitespace gives none.
func Split(s string, limit int, scan Scanner) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	limit = max(limit, 1)
	if utf8.RuneCountInString(s) <= limit {
		return []string{s}
	}
	sp := newSplitter([]rune(s), limit, scan)
	var out []string
	for start := 0; start < len(sp.rs); {
		prefix := sp.m.Reopen[start]
		room := limit - utf8.RuneCountInString(prefix)
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

// Truncate shortens s to at most limit characters, ending in "…",
// cutting where Split would, but late rather than early; a code block it
// cuts is closed.
func Truncate(s string, limit int, scan Scanner) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	if limit < 2 {
		return "…"
	}
	sp := newSplitter([]rune(s), limit, scan)
	room := limit - 1
	end, _ := sp.cut(0, room, room*3/4)
	return sp.piece(0, end, "", "…")
}

type splitter struct {
	rs []rune
	m  *Marks
}

func newSplitter(rs []rune, limit int, scan Scanner) *splitter {
	return &splitter{rs: rs, m: scan(rs, limit)}
}

// open reports whether a code block is open before rs[i].
func (sp *splitter) open(i int) bool { return sp.m.Reopen[i] != "" }

// piece is rs[start:end] after prefix, with tail and the closing fence it
// needs.
func (sp *splitter) piece(start, end int, prefix, tail string) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteString(string(sp.rs[start:end]))
	b.WriteString(tail)
	if end < len(sp.rs) && sp.open(end) {
		b.WriteString(FenceClose)
	}
	return b.String()
}

func isHSpace(r rune) bool { return r == ' ' || r == '\t' }

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// cut chooses where the piece starting at start ends: end is where its
// text ends (whitespace dropped; end == start for a piece that is only
// dropped whitespace) and next where the following piece starts. The
// piece's text and the closing fence it may need fit in room. A cut at a
// break or a space is taken only if it leaves at least minLen characters,
// unless there is no other; a cut anywhere else only if no break or space
// will do.
func (sp *splitter) cut(start, room, minLen int) (end, next int) {
	rs := sp.rs
	hi := min(start+room, len(rs)-1)
	// fits reports whether rs[start:e] and its closing fence fit; unless
	// relaxed, a piece may not end with the fence that opens a block.
	fits := func(e, minLen int, relaxed bool) bool {
		if e-start < max(minLen, 1) {
			return false
		}
		n := e - start
		if sp.open(e) {
			n += utf8.RuneCountInString(FenceClose)
			if !relaxed && sp.m.Opener[e] >= start {
				return false
			}
		}
		return n <= room
	}
	trimBack := func(p int) int {
		for p > start && isSpace(rs[p-1]) {
			p--
		}
		return p
	}
	// skipBlank skips the whitespace cut at p: the spaces there, then
	// whole blank lines, but not the indentation of the next line.
	skipBlank := func(p int) int {
		for p < len(rs) && isHSpace(rs[p]) {
			p++
		}
		for p < len(rs) && (rs[p] == '\n' || rs[p] == '\r') {
			p++
			j := p
			for j < len(rs) && isHSpace(rs[j]) {
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
	space := func(p int) bool { return isHSpace(rs[p]) }
	classes := []func(int) bool{paragraph, line, space}
	// try looks for a break, then a space; early, a space inside code is
	// passed over for a line break, however short the piece.
	try := func(minLen int, early bool) (int, int, bool) {
		for _, class := range classes {
			for p := hi; p > start; p-- {
				if !class(p) || sp.m.Atomic[p] || early && sp.open(p) && isHSpace(rs[p]) {
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
	// No break or space: cut between two characters, where no cut is
	// atomic; then let the piece end by opening a code block; then cut
	// anywhere at all.
	for _, relaxed := range []bool{false, true} {
		for p := hi; p > start; p-- {
			if sp.m.Atomic[p] {
				continue
			}
			if e := trimBack(p); fits(e, 1, relaxed) {
				return e, sp.after(e, skipBlank(p))
			}
		}
	}
	// Whitespace that leaves no room (deep indentation before a fence) is
	// dropped: an empty piece, which Split leaves out.
	if isSpace(rs[start]) {
		p := start
		for p < len(rs) && isSpace(rs[p]) {
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
func (sp *splitter) after(end, next int) int {
	rs := sp.rs
	if !sp.open(end) || next+3 > len(rs) || string(rs[next:next+3]) != "```" || !sp.open(next) {
		return next
	}
	next += 3
	for next < len(rs) && isHSpace(rs[next]) {
		next++
	}
	for next < len(rs) && (rs[next] == '\n' || rs[next] == '\r') {
		next++
	}
	return next
}
