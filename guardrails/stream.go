package guardrails

import (
	"slices"
	"unicode/utf8"
)

// A Stream checks text that arrives in pieces (a model's streamed answer)
// before any of it is shown: Write takes a piece and returns what may be
// shown now; Close returns the rest, or the block's message.
//
// It holds back as many bytes of what arrived as the longest match its
// rules can make (a detector's bound, MaxPatternMatch for a pattern): a
// match cannot start in
// what was shown and end in what is still to come, so every mask applies
// whole and a blocked phrase is never shown, not even in part. The cost
// is latency: the text people see runs that many bytes behind the model
// (64 tokens for a pattern rule, 86 for e-mail addresses; see
// docs/guardrails.md), and the held-back rest comes at the end.
//
// A block found once text before it was shown cannot unshow it: Blocked
// then reports it, and the caller replaces the message that showed it
// (every channel shows a message's final text in place of its deltas).
type Stream struct {
	g       *Guard
	raw     []byte // all that arrived
	shown   int    // how much of raw was released (masked)
	blocked *Result
}

// NewStream starts checking a text that arrives in pieces; a nil guard
// lets everything through at once.
func (g *Guard) NewStream() *Stream { return &Stream{g: g} }

// Write adds a piece and returns the text that may be shown now (masked),
// possibly empty. After a block, nothing more is shown.
func (s *Stream) Write(piece string) string {
	s.raw = append(s.raw, piece...) // kept for Close, guard or not
	if s.g == nil {
		s.shown = len(s.raw)
		return piece
	}
	if s.blocked != nil {
		return ""
	}
	text := string(s.raw)
	// Only the window can hold a match not found by an earlier Write: a
	// new match ends in the new piece, so it starts at most hold before
	// the text's old end, past what was shown. The window starts a hold
	// before that, and a match found at its very start is left out (its
	// \b or ^ may be the cut's, not the text's). Each Write so scans what
	// is new and a hold, not the whole answer again.
	from := max(0, s.shown-s.g.hold)
	window := text[from:]
	inWindow := func(start int) bool { return from == 0 || start > 0 }
	for i := range s.g.blocks {
		b := &s.g.blocks[i]
		if n := countFunc(b.find(window), func(m []int) bool { return inWindow(m[0]) }); n > 0 {
			msg := b.Message
			if msg == "" {
				msg = DefaultBlockMessage
			}
			s.blocked = &Result{Text: msg, Blocked: b, Decisions: []Decision{{Rule: b.Name, Action: Block, Count: n}}}
			return ""
		}
	}
	spans, _ := s.g.maskSpans(window)
	spans = slices.DeleteFunc(spans, func(sp span) bool { return !inWindow(sp.start) })
	for i := range spans {
		spans[i].start += from
		spans[i].end += from
	}
	safe := len(text) - s.g.hold
	for _, sp := range spans {
		if sp.start < safe && safe < sp.end {
			safe = sp.start // never cut a match
		}
	}
	for safe > s.shown && safe < len(text) && !utf8.RuneStart(text[safe]) {
		safe-- // nor a character
	}
	if safe <= s.shown {
		return ""
	}
	out := apply(text, spans, s.shown, safe)
	s.shown = safe
	return out
}

func countFunc(ms [][]int, keep func([]int) bool) int {
	n := 0
	for _, m := range ms {
		if keep(m) {
			n++
		}
	}
	return n
}

// Close ends the text: it returns what is left to show, and the whole
// text's result (Text is the whole answer as people should see it, the
// block's message when Blocked).
func (s *Stream) Close() (rest string, whole Result) {
	text := string(s.raw)
	if s.g == nil {
		return "", Result{Text: text}
	}
	if s.blocked != nil {
		return "", *s.blocked
	}
	whole = s.g.Check(text)
	if whole.Blocked != nil {
		return "", whole
	}
	spans, _ := s.g.maskSpans(text)
	rest = apply(text, spans, s.shown, len(text))
	s.shown = len(text)
	return rest, whole
}

// Shown reports whether any text was released: a block found after that
// must replace it.
func (s *Stream) Shown() bool { return s.shown > 0 }
