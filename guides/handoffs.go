package guides

import (
	"fmt"
	"maps"
	"slices"

	"gopkg.in/yaml.v3"
)

// Handoffs (front matter "handoffs: [billing, support]") name the guides
// a guide may pass a conversation to: its model is given a handoff tool
// that names one of them (sessions/handoff.go). A guide may not name
// itself; that every name is a guide is checked once the whole folder is
// read (linkHandoffs), at start-up and at each reload.

func (p parser) handoffs(n *yaml.Node, g *Guide) error {
	list, err := p.list(n, "handoffs")
	if err != nil {
		return err
	}
	if err := p.unique(n, "handoffs"); err != nil {
		return err
	}
	for _, item := range n.Content {
		if !validName.MatchString(item.Value) {
			return p.errorf(item, "handoffs: %q is not a guide's name (letters, digits, '-' and '_')", item.Value)
		}
		g.handoffLines = append(g.handoffLines, item.Line+p.offset)
	}
	g.Handoffs = list
	return nil
}

// notSelf runs once the guide's name is known: handing a conversation to
// oneself would change nothing but count against the turn's handoffs.
func (p parser) notSelf(n *yaml.Node, g *Guide) error {
	if n == nil {
		return nil
	}
	for _, item := range n.Content {
		if item.Value == g.Name {
			return p.errorf(item, "handoffs: %q is this guide itself: list the guides it may pass conversations to", g.Name)
		}
	}
	return nil
}

// linkHandoffs checks, once a folder is scanned, that every guide a
// parsed guide hands off to is one the catalog will offer: parsed here,
// or, for a reload, a broken file whose last good version runs on
// (runsOn; nil at start-up). A guide that names another that is not is
// itself refused, as a broken file is (its error names the file and the
// line, and found gets nil for it) — and so, in turn, are the guides
// that hand off to it.
func linkHandoffs(found map[string]*Guide, runsOn func(name string) bool) []error {
	var problems []error
	for changed := true; changed; {
		changed = false
		for _, name := range slices.Sorted(maps.Keys(found)) {
			g := found[name]
			if g == nil {
				continue
			}
			for i, to := range g.Handoffs {
				if found[to] != nil || runsOn != nil && runsOn(to) {
					continue
				}
				have := []string{}
				for _, n := range slices.Sorted(maps.Keys(found)) {
					if found[n] != nil && n != name {
						have = append(have, n)
					}
				}
				what := "no guide %q is in the folder%s"
				if _, ok := found[to]; ok {
					what = "the guide %q cannot be read (its own error says why)%s"
				}
				problems = append(problems, fmt.Errorf("%s:%d: handoffs: "+what, g.File, g.handoffLines[i], to, unknownHint(to, have)))
				found[name] = nil
				changed = true
				break
			}
		}
	}
	return problems
}

// runsOn reports, for a reload that found found, whether a guide not
// parsed from it still runs in its last good version: its file is
// broken, or it is def (the default guide is kept when its file goes).
func (s *snapshot) runsOn(def string, found map[string]*Guide) func(string) bool {
	return func(name string) bool {
		_, had := s.guides[name]
		_, listed := found[name]
		return had && (listed || name == def)
	}
}
