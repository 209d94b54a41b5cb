package sessions

// Routing (issue 30, docs/routing.md): a conversation opened without a
// guide (a Slack or Discord place, a web page that names none) gets its
// guide from its first message, by the routing rules of the config and,
// when none matches, the router model. The first message is known only
// when the session takes it up, so the choice is made there, on the
// session's goroutine, before the budgets and guardrails of the chosen
// guide apply to it. A session unloaded before its first message, or
// resumed after a restart, keeps the guide it has: routing is for the
// conversation's start. /guide still switches afterwards.

import (
	"context"
	"strings"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/routing"
)

// Router chooses a new conversation's guide (routing.Table). Route may
// wait for a model, within its own timeout; it always decides.
type Router interface {
	Route(ctx context.Context, c routing.Conversation) routing.Decision
}

// routes holds the Router in force (nil: none).
type routes struct{ r Router }

// SetRouter puts a Router in force for conversations that start from now
// on (a config reload swaps it); nil turns routing off.
func (m *Manager) SetRouter(r Router) { m.routes.Store(&routes{r}) }

func (m *Manager) router() Router {
	if rs := m.routes.Load(); rs != nil {
		return rs.r
	}
	return m.cfg.Router
}

// routeFirstTurn chooses the guide of a conversation opened without one,
// at its first message; it does nothing after that.
func (s *session) routeFirstTurn(ctx context.Context, in switchboard.Input, text string) {
	if !s.routeFirst.CompareAndSwap(true, false) {
		return
	}
	r := s.m.router()
	if r == nil {
		return
	}
	d := r.Route(ctx, routing.Conversation{
		Channel: in.Author.Channel, Places: placesOf(in), Person: in.Author.Key(), Text: text,
	})
	if d.Fallback != "" {
		s.log.Warn("the router's pick was not taken: the conversation gets the default guide (see routing.router_timeout, and the router guide's provider)",
			"why", d.Fallback, "guide", d.Guide)
	}
	if d.Guide == "" || d.Guide == s.guide.Name {
		return
	}
	g, ok := s.m.cfg.Guides.Get(d.Guide)
	if !ok {
		s.log.Error("routing chose a guide there is none of: the conversation keeps its guide (check routing: in the config)",
			"guide", d.Guide, "by", d.By, "rule", d.Rule)
		return
	}
	if err := s.m.cfg.Store.SetSessionGuide(ctx, s.id, g.Name); err != nil {
		s.log.Error("the routed guide was not stored: the conversation keeps its guide", "guide", g.Name, "err", err)
		return
	}
	s.useGuide(ctx, g)
	s.rec.Guide = g.Name
	s.log.Info("conversation routed", "guide", g.Name, "by", d.By, "rule", d.Rule)
}

// placesOf are the ids the input's place is known by, widest first: the
// ones the channel gave (Input.Where), then its address's parts ("slack:
// T1:C1:17000.1" is T1, C1 and 17000.1).
func placesOf(in switchboard.Input) []string {
	out := append([]string(nil), in.Where...)
	if _, addr, ok := strings.Cut(in.Place, ":"); ok {
		out = append(out, strings.Split(addr, ":")...)
	}
	return out
}

// ProviderFor is the provider a guide's model calls go to now (a reload
// may have swapped it), with its fallback when it names one; nil when
// there is none of its name. The gateway's router asks its guide's
// model through it.
func (m *Manager) ProviderFor(g guides.Guide) providers.Provider {
	ps := m.providers()
	p := ps.of(&g)
	if p == nil {
		return nil
	}
	if fb, ok := ps.byName[g.Fallback]; ok && g.Fallback != ps.nameFor(&g) {
		withFallback := *p
		withFallback.Fallback = fb
		return &withFallback
	}
	return p
}
