package sessions

import (
	"cmp"
	"context"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers"
)

// What a configuration reload changes in a running Manager (cmd/gateway's
// reload.go): the guides (their catalog reloads itself; each session takes
// its guide's current version as a turn starts) and the providers
// (swapped whole, taken by the next model call).

// providerSet is the providers the sessions call: a set is never changed,
// SetProviders swaps in another.
type providerSet struct {
	byName map[string]*providers.Resilient
	// def serves the guides that name no provider.
	def string
}

// SetProviders swaps in the providers model calls are made with, by name,
// and the default one. A call under way finishes on the provider it began
// with; the next one, in every session, takes the new set. The caller
// makes sure every guide's provider is in it (guides.Needs).
func (m *Manager) SetProviders(byName map[string]*providers.Resilient, def string) {
	m.provs.Store(&providerSet{byName: byName, def: def})
}

func (m *Manager) providers() *providerSet { return m.provs.Load() }

// nameFor is the name of the provider a guide uses.
func (ps *providerSet) nameFor(g *guides.Guide) string { return cmp.Or(g.Provider, ps.def) }

// of is the provider a guide uses (nil if none has its name).
func (ps *providerSet) of(g *guides.Guide) *providers.Resilient { return ps.byName[ps.nameFor(g)] }

// Limits are the bounds of Config that SetLimits changes while the
// Manager runs; a zero field takes Config's default.
type Limits struct {
	MaxLive, NewPerMinute        int
	ApprovalTimeout, ToolTimeout time.Duration
}

// SetLimits puts l in force: for the next session loaded or created, the
// next approval asked for and the next tool run (a request open keeps its
// expiry, a tool running its timeout). Everyone's allowance of new
// sessions starts afresh at the new rate.
func (m *Manager) SetLimits(l Limits) {
	d := Config{MaxLive: l.MaxLive, NewPerMinute: l.NewPerMinute, ApprovalTimeout: l.ApprovalTimeout, ToolTimeout: l.ToolTimeout}.withDefaults()
	m.lims.Store(&Limits{MaxLive: d.MaxLive, NewPerMinute: d.NewPerMinute, ApprovalTimeout: d.ApprovalTimeout, ToolTimeout: d.ToolTimeout})
	m.loadMu.Lock()
	clear(m.creators)
	m.loadMu.Unlock()
}

func (m *Manager) limits() *Limits { return m.lims.Load() }

// takeUpGuide gives s, as a turn starts, its guide's version now in the
// catalog, if a reload changed it (a turn under way keeps the guide it
// started with). A guide whose file was deleted runs on in its last
// version (guides.Catalog.Latest). A new memory window or policy reloads
// what the model is shown from the store, as /guide does.
func (s *session) takeUpGuide(ctx context.Context) {
	cat := s.m.cfg.Guides
	gen := cat.Generation()
	if gen == s.guideGen {
		return
	}
	g, ok := cat.Latest(s.guide.Name)
	if !ok {
		return
	}
	s.guideGen = gen
	s.useGuide(ctx, g)
}

// useGuide makes g the session's guide from the next model call on: the
// memory the model is shown follows a new window or policy.
func (s *session) useGuide(ctx context.Context, g guides.Guide) {
	if g.Memory.Window != s.guide.Memory.Window || g.Memory.Policy != s.guide.Memory.Policy {
		var err error
		summary, window := "", []switchboard.Message(nil)
		if g.Memory.Policy == guides.Compact {
			summary, window, err = s.m.cfg.Store.Context(ctx, s.id, compactCap(g))
		} else {
			window, err = s.m.cfg.Store.Window(ctx, s.id, g.Memory.Window)
		}
		if err != nil {
			s.log.Error("the conversation's window was not read again for the guide's new memory: the old one is used", "guide", g.Name, "err", err)
		} else {
			s.window, s.summary = window, summary
		}
	}
	s.guide = &g
	s.mu.Lock()
	s.shownGuide, s.membersMayStop = s.guide, g.MembersMayStop
	s.mu.Unlock()
}
