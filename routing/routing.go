// Package routing chooses the guide of a new conversation: rules by
// channel, place, person or the first message's words, first match wins;
// then, optionally, a small model that picks among guides by their
// descriptions; then the default (docs/routing.md).
//
// A Table is built once from config (and again on a reload) and is safe
// for concurrent use. The model call is the only part that waits: it is
// bounded by the router's timeout, and whatever goes wrong there (a
// timeout, an error, an answer that names no candidate) falls back to the
// default, and says why in the Decision.
package routing

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Conversation is what a new conversation's guide is chosen by.
type Conversation struct {
	// Channel is the chat app: "slack", "discord", "web", "stdin", "openai".
	Channel string
	// Places are the ids the place is known by, from the widest to the
	// narrowest: a Slack workspace, channel and thread; a Discord
	// server, channel and thread.
	Places []string
	// Person is the author's key ("slack:U123").
	Person string
	// Text is the conversation's first message.
	Text string
}

// RuleSpec is a rule as config writes it. Every condition set must hold;
// a rule with none matches everything (and leaves the rules after it
// unreachable).
type RuleSpec struct {
	Guide   string
	Channel string
	// Place matches when it is one of the conversation's Places.
	Place string
	// Person is an author's key ("slack:U123").
	Person string
	// Keywords match when one of them is a word of the first message
	// (case-insensitive).
	Keywords []string
	// Match is a regular expression the first message must match.
	Match string
}

// Rule is a compiled rule.
type Rule struct {
	RuleSpec
	match    *regexp.Regexp
	keywords *regexp.Regexp
}

// Chooser asks a model to pick: it sends the prompt and returns the
// model's answer. The gateway implements it with the router guide's
// provider.
type Chooser interface {
	Choose(ctx context.Context, system, prompt string) (string, error)
}

// Candidate is a guide the router may pick.
type Candidate struct {
	Name, Description string
}

// Router asks a model when no rule matched.
type Router struct {
	Chooser    Chooser
	Candidates []Candidate
	// Timeout bounds the model's answer (3 s when 0).
	Timeout time.Duration
}

// Table is the routing rules, the router and the default.
type Table struct {
	rules  []Rule
	router *Router
	def    string
}

// New compiles the rules. def is the guide when nothing else decides.
func New(specs []RuleSpec, router *Router, def string) (*Table, error) {
	t := &Table{router: router, def: def}
	for i, s := range specs {
		r := Rule{RuleSpec: s}
		if s.Guide == "" {
			return nil, fmt.Errorf("routing.rules[%d].guide: must name the guide the rule chooses", i)
		}
		if s.Match != "" {
			re, err := regexp.Compile(s.Match)
			if err != nil {
				return nil, fmt.Errorf("routing.rules[%d].match: %w", i, err)
			}
			r.match = re
		}
		if len(s.Keywords) > 0 {
			words := make([]string, len(s.Keywords))
			for j, k := range s.Keywords {
				if strings.TrimSpace(k) == "" {
					return nil, fmt.Errorf("routing.rules[%d].keywords[%d]: must not be empty", i, j)
				}
				words[j] = regexp.QuoteMeta(strings.TrimSpace(k))
			}
			r.keywords = regexp.MustCompile(`(?i)\b(?:` + strings.Join(words, "|") + `)\b`)
		}
		t.rules = append(t.rules, r)
	}
	if router != nil && router.Timeout <= 0 {
		router.Timeout = 3 * time.Second
	}
	return t, nil
}

// By says what chose a guide.
type By string

const (
	ByRule    By = "rule"
	ByRouter  By = "router"
	ByDefault By = "default"
)

// Decision is a conversation's guide and what chose it.
type Decision struct {
	Guide string
	By    By
	// Rule is the rule's index, when By is ByRule.
	Rule int
	// Fallback says why the router's choice was not taken, when it was
	// asked and By is ByDefault.
	Fallback string
}

// Route chooses a new conversation's guide.
func (t *Table) Route(ctx context.Context, c Conversation) Decision {
	for i, r := range t.rules {
		if r.matches(c) {
			return Decision{Guide: r.Guide, By: ByRule, Rule: i}
		}
	}
	if t.router == nil || len(t.router.Candidates) == 0 {
		return Decision{Guide: t.def, By: ByDefault}
	}
	g, err := t.router.pick(ctx, c.Text)
	if err != nil {
		return Decision{Guide: t.def, By: ByDefault, Fallback: err.Error()}
	}
	return Decision{Guide: g, By: ByRouter}
}

func (r Rule) matches(c Conversation) bool {
	switch {
	case r.Channel != "" && r.Channel != c.Channel:
		return false
	case r.Place != "" && !slices.Contains(c.Places, r.Place):
		return false
	case r.Person != "" && r.Person != c.Person:
		return false
	case r.keywords != nil && !r.keywords.MatchString(c.Text):
		return false
	case r.match != nil && !r.match.MatchString(c.Text):
		return false
	}
	return true
}

// errNoPick: the model's answer named no candidate.
var errNoPick = errors.New("the router's answer named no guide it may pick")

// pick asks the model, within the timeout.
func (r *Router) pick(ctx context.Context, text string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	var b strings.Builder
	b.WriteString("Choose the assistant best suited to answer the conversation that starts with the message below. The assistants:\n")
	for _, c := range r.Candidates {
		fmt.Fprintf(&b, "- %s: %s\n", c.Name, c.Description)
	}
	b.WriteString("Answer with the assistant's name only.")
	answer, err := r.Chooser.Choose(ctx, b.String(), text)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("the router did not answer within %s", r.Timeout)
		}
		return "", fmt.Errorf("the router failed: %w", err)
	}
	return r.named(answer)
}

// named finds the candidate an answer names: the whole answer, trimmed
// of quotes and punctuation, or the one candidate it mentions.
func (r *Router) named(answer string) (string, error) {
	a := strings.ToLower(strings.Trim(strings.TrimSpace(answer), "\"'`.*"))
	var mentioned []string
	for _, c := range r.Candidates {
		name := strings.ToLower(c.Name)
		if a == name {
			return c.Name, nil
		}
		if regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(a) {
			mentioned = append(mentioned, c.Name)
		}
	}
	if len(mentioned) == 1 {
		return mentioned[0], nil
	}
	return "", errNoPick
}

// Unreachable names the rules no conversation can reach, each with why:
// an earlier rule matches everything it would (every condition of the
// earlier one is one of its own).
func (t *Table) Unreachable() map[int]string {
	out := map[int]string{}
	for j, later := range t.rules {
		for i, earlier := range t.rules[:j] {
			if covers(earlier, later) {
				out[j] = fmt.Sprintf("rule %d (guide %s) matches every conversation it would", i, earlier.Guide)
				break
			}
		}
	}
	return out
}

// RouterUnreachable reports whether a rule matches everything, so the
// router is never asked.
func (t *Table) RouterUnreachable() bool {
	return t.router != nil && slices.ContainsFunc(t.rules, func(r Rule) bool { return covers(r, Rule{}) })
}

// covers reports whether every conversation b matches, a matches too:
// each of a's conditions is one of b's.
func covers(a, b Rule) bool {
	same := func(x, y string) bool { return x == "" || x == y }
	return same(a.Channel, b.Channel) && same(a.Place, b.Place) && same(a.Person, b.Person) &&
		same(a.Match, b.Match) && (len(a.Keywords) == 0 || slices.Equal(a.Keywords, b.Keywords))
}

// Rules are the table's rules, for the doctor.
func (t *Table) Rules() []RuleSpec {
	out := make([]RuleSpec, len(t.rules))
	for i, r := range t.rules {
		out[i] = r.RuleSpec
	}
	return out
}

// Describe says a rule in a line: "slack place C1 → billing".
func Describe(s RuleSpec) string {
	var parts []string
	for _, c := range [][2]string{{"channel", s.Channel}, {"place", s.Place}, {"person", s.Person}, {"match", s.Match}} {
		if c[1] != "" {
			parts = append(parts, c[0]+" "+c[1])
		}
	}
	if len(s.Keywords) > 0 {
		parts = append(parts, "keywords "+strings.Join(s.Keywords, ", "))
	}
	if len(parts) == 0 {
		parts = []string{"every conversation"}
	}
	return strings.Join(parts, ", ") + " → " + s.Guide
}
