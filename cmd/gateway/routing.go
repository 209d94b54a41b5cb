package main

// Routing (docs/routing.md): the config's routing rules and router,
// checked against the guides at start-up and by gateway doctor, put in
// force in the sessions (sessions.Manager.SetRouter) and swapped on
// SIGHUP.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/routing"
	"github.com/switchboard-gw/switchboard/sessions"
)

// routingTable is the config's routing over the catalog's guides, nil
// when the config routes nothing. A rule, the router or a candidate that
// names no guide is an error naming the key. The router asks its guide's
// model through models (nil: the doctor, which never asks).
func routingTable(cfg config.Config, catalog *guides.Catalog, models providerFor) (*routing.Table, error) {
	rc := cfg.Routing
	if len(rc.Rules) == 0 && rc.Router == "" {
		return nil, nil
	}
	have := catalog.Names()
	var errs []error
	known := func(key, name string) {
		if _, ok := catalog.Get(name); !ok {
			errs = append(errs, fmt.Errorf("%s: no guide %q in %s (have: %s)", key, name, cfg.Guides.Dir, strings.Join(have, ", ")))
		}
	}
	specs := make([]routing.RuleSpec, len(rc.Rules))
	for i, r := range rc.Rules {
		known(fmt.Sprintf("routing.rules[%d].guide", i), r.Guide)
		specs[i] = routing.RuleSpec{Guide: r.Guide, Channel: r.Channel, Place: r.Place, Person: r.Person, Keywords: r.Keywords, Match: r.Match}
	}
	var router *routing.Router
	if rc.Router != "" {
		known("routing.router", rc.Router)
		names := rc.Candidates
		if len(names) == 0 { // every guide but the router's own
			names = slices.DeleteFunc(slices.Clone(have), func(n string) bool { return n == rc.Router })
		}
		router = &routing.Router{Chooser: guideChooser{guide: rc.Router, catalog: catalog, models: models}, Timeout: time.Duration(rc.RouterTimeout)}
		for i, n := range names {
			known(fmt.Sprintf("routing.candidates[%d]", i), n)
			g, _ := catalog.Get(n)
			router.Candidates = append(router.Candidates, routing.Candidate{Name: n, Description: g.Description})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return routing.New(specs, router, cfg.Guides.Default)
}

// providerFor finds the provider a guide's model calls go to
// (sessions.Manager).
type providerFor interface {
	ProviderFor(g guides.Guide) providers.Provider
}

// guideChooser asks the router guide's model, once, without tools: its
// prompt is the router's question (routing.Router), not the guide's.
type guideChooser struct {
	guide   string
	catalog *guides.Catalog
	models  providerFor
}

func (c guideChooser) Choose(ctx context.Context, system, prompt string) (string, error) {
	g, ok := c.catalog.Get(c.guide)
	if !ok {
		return "", fmt.Errorf("no guide %q", c.guide)
	}
	if c.models == nil {
		return "", errors.New("no models to ask")
	}
	p := c.models.ProviderFor(g)
	if p == nil {
		return "", fmt.Errorf("the guide %q names no configured provider", c.guide)
	}
	zero := 0.0
	req := providers.Request{
		Model: g.Model, System: system, Temperature: &zero, MaxTokens: 32,
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: prompt}},
	}
	var answer strings.Builder
	for ev, err := range p.Stream(ctx, req) {
		if err != nil {
			return "", err
		}
		if ev.Kind == providers.EventTextDelta {
			answer.WriteString(ev.Text)
		}
	}
	return answer.String(), nil
}

// startRouting puts the config's routing in force (none: nothing to
// do). Its guides were checked at start-up (routingTable).
func startRouting(cfg config.Config, catalog *guides.Catalog, m *sessions.Manager) error {
	t, err := routingTable(cfg, catalog, m)
	if t != nil {
		m.SetRouter(t)
	}
	return err
}

// routingReload swaps the routing on a reload: from the next new
// conversation on, the new rules and router decide. Rules naming no guide
// refuse the whole configuration, as at start-up.
func routingReload(catalog *guides.Catalog, m *sessions.Manager) ([]string, reloadHook) {
	return []string{"routing"}, func(old, next config.Config) (func(), error) {
		t, err := routingTable(next, catalog, m)
		if err != nil {
			return nil, err
		}
		return func() {
			if t == nil {
				m.SetRouter(nil)
				return
			}
			m.SetRouter(t)
		}, nil
	}
}

// checkRouting is the doctor's row for routing: the rules in order, the
// router, and what no conversation can reach.
func (d *doctor) checkRouting(catalog *guides.Catalog) checkResult {
	res := checkResult{Name: "routing"}
	if catalog == nil {
		res.Sev, res.Detail = sevInfo, "not checked: the guides did not load"
		return res
	}
	t, err := routingTable(d.cfg, catalog, nil)
	switch {
	case err != nil:
		res.Sev, res.Detail = sevProblem, err.Error()
		res.Fix = "name guides of " + d.cfg.Guides.Dir + " (" + strings.Join(catalog.Names(), ", ") + ")"
		return res
	case t == nil:
		res.Sev, res.Detail = sevOK, "no rules: every new conversation gets guides.default ("+d.cfg.Guides.Default+") unless its channel names a guide"
		return res
	}
	var b strings.Builder
	unreachable := t.Unreachable()
	for i, r := range t.Rules() {
		fmt.Fprintf(&b, "rules[%d]: %s", i, routing.Describe(r))
		if why, ok := unreachable[i]; ok {
			fmt.Fprintf(&b, "  (unreachable: %s)", why)
		}
		b.WriteString("\n")
	}
	rc := d.cfg.Routing
	if rc.Router != "" {
		fmt.Fprintf(&b, "then the router %s picks (within %s)", rc.Router, time.Duration(rc.RouterTimeout))
		if t.RouterUnreachable() {
			b.WriteString(" (unreachable: a rule matches every conversation)")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "else %s", d.cfg.Guides.Default)
	res.Sev, res.Detail = sevOK, b.String()
	if len(unreachable) > 0 || t.RouterUnreachable() {
		res.Sev = sevWarn
		res.Fix = "a rule no conversation reaches is shadowed by an earlier one that matches all it would: move it up, or narrow the earlier one"
	}
	return res
}
