// Package health keeps what each part of the gateway says of itself — a
// listener, a provider, an MCP server — so that one that is down is seen:
// on /readyz, by `gateway status`, and as a metric (issue: nothing fails
// silently). A part reports through its Reporter as its state changes;
// readers take a Snapshot. The package imports nothing of the project and
// no metrics library: a Registry calls its watch function on every change
// (cmd/gateway sets a gauge from it).
package health

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// State is how a part is doing.
type State string

const (
	// Starting: the part has not said yet (a listener connecting).
	Starting State = "starting"
	// Up: it works.
	Up State = "up"
	// Degraded: it works in part, or is recovering (a provider's breaker
	// letting one call through).
	Degraded State = "degraded"
	// Down: it does not work; Reason says why and Fix what would mend it.
	Down State = "down"
	// Removed is told to a Registry's watch alone, when a part is taken
	// out (Remove); a Snapshot never shows it.
	Removed State = "removed"
)

// Status is one part's last report.
type Status struct {
	Name string `json:"name"` // "slack", "provider main", "mcp docs"
	Kind string `json:"kind"` // listener | provider | mcp
	// Required parts make the gateway not ready while they are down or
	// starting (a configured listener); the others only degrade it.
	Required bool      `json:"required"`
	State    State     `json:"state"`
	Reason   string    `json:"reason,omitempty"`
	Fix      string    `json:"fix,omitempty"`
	Since    time.Time `json:"since"` // when State last changed
}

// Registry holds the parts' statuses. Its zero value is not usable: New.
type Registry struct {
	mu    sync.Mutex
	parts map[string]*Status
	watch func(Status)
	now   func() time.Time
}

// New returns a registry that calls watch (if not nil) with every status
// as it is reported, in order: it runs under the registry's lock, so it
// must return soon and not call the registry.
func New(watch func(Status)) *Registry {
	return &Registry{parts: map[string]*Status{}, watch: watch, now: time.Now}
}

// Add registers a part, Starting, and returns its reporter. Adding a name
// again returns a reporter for the same part.
func (r *Registry) Add(name, kind string, required bool) *Reporter {
	r.mu.Lock()
	s, ok := r.parts[name]
	if !ok {
		s = &Status{Name: name, Kind: kind, Required: required, State: Starting, Since: r.now().UTC()}
		r.parts[name] = s
	}
	if !ok && r.watch != nil {
		r.watch(*s)
	}
	r.mu.Unlock()
	return &Reporter{r: r, name: name}
}

// Remove forgets a part that is no longer there (a provider or an MCP
// server a configuration reload took out); its reporters report nothing
// from then on. watch is told its last status with State Removed, so a
// gauge made from it can be deleted.
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.parts[name]
	if !ok {
		return
	}
	delete(r.parts, name)
	if r.watch != nil {
		gone := *s
		gone.State = Removed
		r.watch(gone)
	}
}

// Snapshot is every part's status, listeners first, then by name.
func (r *Registry) Snapshot() []Status {
	r.mu.Lock()
	out := make([]Status, 0, len(r.parts))
	for _, s := range r.parts {
		out = append(out, *s)
	}
	r.mu.Unlock()
	order := map[string]int{"listener": 0, "provider": 1, "mcp": 2}
	slices.SortFunc(out, func(a, b Status) int {
		return cmp.Or(cmp.Compare(order[a.Kind], order[b.Kind]), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Ready reports whether no required part is down or still starting.
func Ready(parts []Status) bool {
	for _, s := range parts {
		if s.Required && (s.State == Down || s.State == Starting) {
			return false
		}
	}
	return true
}

// Reporter is how one part tells its state. A nil Reporter reports
// nothing, so a part may be built without a registry (in tests).
type Reporter struct {
	r    *Registry
	name string
}

// Up says the part works.
func (p *Reporter) Up() { p.set(Up, "", "") }

// Standby says the part works, with another process doing part of its
// work now (a replica whose Discord listener stands by while another holds
// the bot's Gateway connection): it is up, and reason says what it leaves
// to the other.
func (p *Reporter) Standby(reason string) { p.set(Up, reason, "") }

// Degraded says the part works in part: why, and what would mend it.
func (p *Reporter) Degraded(reason, fix string) { p.set(Degraded, reason, fix) }

// Down says the part does not work: why, and what would mend it.
func (p *Reporter) Down(reason, fix string) { p.set(Down, reason, fix) }

// State is the part's state now.
func (p *Reporter) State() State {
	if p == nil {
		return Starting
	}
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if s, ok := p.r.parts[p.name]; ok {
		return s.State
	}
	return Removed
}

func (p *Reporter) set(state State, reason, fix string) {
	if p == nil {
		return
	}
	r := p.r
	r.mu.Lock()
	s, ok := r.parts[p.name]
	if !ok { // removed
		r.mu.Unlock()
		return
	}
	if s.State == state && s.Reason == reason && s.Fix == fix {
		r.mu.Unlock()
		return
	}
	if s.State != state {
		s.Since = r.now().UTC()
	}
	s.State, s.Reason, s.Fix = state, reason, fix
	if r.watch != nil {
		r.watch(*s)
	}
	r.mu.Unlock()
}
