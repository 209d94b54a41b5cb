// Package guardrails checks text against a guide's rules: a person's
// message before the model sees it (input), and the model's answer before
// people see it (output). A rule blocks (the text is refused, and a
// sentence said instead) or masks (what it finds is replaced). It finds
// with a pattern (a regular expression) or a built-in detector of personal
// data and secrets (Detectors: e-mail addresses, phone numbers, IBANs,
// card numbers with their Luhn digit, API keys).
//
// A Guard is compiled once, from a guide, and is safe for concurrent use.
// What it decides is reported as Decisions: the rule's name, its action
// and how many times it applied, never the text it matched.
package guardrails

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Action is what a rule does with what it finds.
type Action string

const (
	Block Action = "block"
	Mask  Action = "mask"
)

// RuleSpec is a rule as a guide writes it: a detector's name or a
// pattern, and what to do.
type RuleSpec struct {
	// Name names the rule in events, traces and logs; empty: the
	// detector's name, or "<action> <n>" for a pattern.
	Name string
	// Detector is a built-in detector's name (Detectors); or Pattern, a
	// regular expression (Go's RE2 syntax).
	Detector string
	Pattern  string
	// With replaces what a mask finds; empty: "[<name>]".
	With string
	// Message is what people are told when a block applies; empty: a
	// sentence that names no rule.
	Message string
}

// Rule is a compiled rule.
type Rule struct {
	Name    string
	Action  Action
	With    string
	Message string
	det     detector
}

// MaxPatternMatch is what a pattern rule is taken to match at most, in
// bytes: a stream holds back as much text (Stream), and a longer match
// may be shown in part.
const MaxPatternMatch = 256

// Compile makes a rule from its spec; n numbers it among its side's rules
// of that action (from 1) for a default name.
func Compile(action Action, spec RuleSpec, n int) (Rule, error) {
	r := Rule{Name: spec.Name, Action: action, With: spec.With, Message: spec.Message}
	switch {
	case spec.Detector != "" && spec.Pattern != "":
		return r, fmt.Errorf("a rule has a detector or a pattern, not both")
	case spec.Detector != "":
		d, ok := newDetector(spec.Detector)
		if !ok {
			return r, fmt.Errorf("no detector %q (have: %s)", spec.Detector, strings.Join(Detectors(), ", "))
		}
		r.det = d
		if r.Name == "" {
			r.Name = spec.Detector
		}
	case spec.Pattern != "":
		re, err := regexp.Compile(spec.Pattern)
		if err != nil {
			return r, fmt.Errorf("pattern %q: %w", spec.Pattern, err)
		}
		if re.MatchString("") {
			return r, fmt.Errorf("pattern %q matches empty text: it would apply everywhere", spec.Pattern)
		}
		r.det = detector{pattern: re, maxLen: MaxPatternMatch}
		if r.Name == "" {
			r.Name = fmt.Sprintf("%s %d", action, n)
		}
	default:
		return r, fmt.Errorf("a rule needs a detector (%s) or a pattern", strings.Join(Detectors(), ", "))
	}
	if action == Block && spec.With != "" {
		return r, fmt.Errorf("rule %q blocks: with is for masks (message is what people are told)", r.Name)
	}
	if action == Mask && spec.Message != "" {
		return r, fmt.Errorf("rule %q masks: message is for blocks (with is the replacement)", r.Name)
	}
	if action == Mask && r.With == "" {
		r.With = "[" + r.Name + "]"
	}
	return r, nil
}

// Guard is one side's rules (a guide's input or output), in order.
type Guard struct {
	blocks, masks []Rule
	// hold is the longest match any rule can make.
	hold int
}

// New makes a guard of rules; nil when there are none, which Check and
// Stream take as "let everything through".
func New(rules ...Rule) *Guard {
	if len(rules) == 0 {
		return nil
	}
	g := &Guard{}
	for _, r := range rules {
		if r.Action == Block {
			g.blocks = append(g.blocks, r)
		} else {
			g.masks = append(g.masks, r)
		}
		g.hold = max(g.hold, r.det.maxLen)
	}
	return g
}

// Decision is what a rule did to a text: never the text it matched.
type Decision struct {
	Rule   string
	Action Action
	Count  int
}

// Result is a checked text.
type Result struct {
	// Text is the text with the masks applied; when Blocked, the block's
	// message instead.
	Text string
	// Blocked is the block rule that applied, if any (the first in order).
	Blocked *Rule
	// Decisions are the rules that applied, blocks first.
	Decisions []Decision
}

// DefaultBlockMessage is what people are told when a block without a
// message applies.
const DefaultBlockMessage = "This cannot be shown: it breaks a rule of this assistant."

// Check applies the rules to text: a block that matches anywhere refuses
// it whole; otherwise every mask replaces what it finds.
func (g *Guard) Check(text string) Result {
	if g == nil {
		return Result{Text: text}
	}
	for i := range g.blocks {
		if n := len(g.blocks[i].find(text)); n > 0 {
			b := &g.blocks[i]
			msg := b.Message
			if msg == "" {
				msg = DefaultBlockMessage
			}
			return Result{Text: msg, Blocked: b, Decisions: []Decision{{Rule: b.Name, Action: Block, Count: n}}}
		}
	}
	spans, decisions := g.maskSpans(text)
	return Result{Text: apply(text, spans, 0, len(text)), Decisions: decisions}
}

// span is a masked part of a text: [start, end) replaced by with.
type span struct {
	start, end int
	with       string
}

// maskSpans finds what the masks replace: non-overlapping spans in order,
// an earlier rule's winning where two overlap.
func (g *Guard) maskSpans(text string) ([]span, []Decision) {
	var spans []span
	var decisions []Decision
	for _, r := range g.masks {
		n := 0
		for _, m := range r.find(text) {
			overlaps := slices.ContainsFunc(spans, func(s span) bool { return m[0] < s.end && s.start < m[1] })
			if !overlaps {
				spans = append(spans, span{m[0], m[1], r.With})
				n++
			}
		}
		if n > 0 {
			decisions = append(decisions, Decision{Rule: r.Name, Action: Mask, Count: n})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	return spans, decisions
}

// apply is text[from:to] with its spans replaced. A span that starts
// before from (found only once more text came) has its rest replaced; one
// that ends after to is left to the next range.
func apply(text string, spans []span, from, to int) string {
	var b strings.Builder
	at := from
	for _, s := range spans {
		if s.end <= from {
			continue
		}
		if s.start >= to || s.end > to {
			break
		}
		b.WriteString(text[at:max(s.start, at)])
		b.WriteString(s.with)
		at = s.end
	}
	b.WriteString(text[at:to])
	return b.String()
}

// find is the rule's matches in text that its check accepts.
func (r *Rule) find(text string) [][]int {
	all := r.det.pattern.FindAllStringIndex(text, -1)
	if r.det.valid == nil {
		return all
	}
	return slices.DeleteFunc(all, func(m []int) bool { return !r.det.valid(text[m[0]:m[1]]) })
}
