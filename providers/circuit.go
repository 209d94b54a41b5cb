package providers

import (
	"sync"
	"time"
)

// Circuit is a provider's circuit breaker, kept by Resilient. It counts the
// turns that failed in a row with a retryable error (rate limits, 5xx,
// network faults, timeouts; not refusals); at Policy.BreakerFailures it
// opens, and while it is open calls skip the provider: they go to the
// fallback, or fail at once as unavailable. Once Policy.BreakerCooldown has
// passed, one call is let through as a probe (half-open): if it succeeds
// the circuit closes, if it fails it opens for another cool-down.
//
// A Circuit is shared: every copy of a Resilient that holds the same
// *Circuit shares its state. Its zero value is a closed circuit.
type Circuit struct {
	provider string
	onChange func(provider string, open bool)

	mu       sync.Mutex
	failures int       // turns failed in a row while closed
	open     bool      // open or half-open
	openedAt time.Time // when it last opened
	probing  bool      // a half-open probe is under way
}

// NewCircuit is a closed circuit for the named provider. onChange, if not
// nil, is told the state now (closed) and at every change, e.g. to set a
// gauge; it is called with the circuit's lock held, so it must not block or
// call back into the circuit.
func NewCircuit(provider string, onChange func(provider string, open bool)) *Circuit {
	c := &Circuit{provider: provider, onChange: onChange}
	if onChange != nil {
		onChange(provider, false)
	}
	return c
}

// Open reports whether the circuit is open or half-open.
func (c *Circuit) Open() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

// outcome is what a call tells the breaker.
type outcome int

const (
	// outcomeNeutral: says nothing about the provider (cancelled, or never
	// sent).
	outcomeNeutral outcome = iota
	// outcomeSuccess: the provider answered, even if with a refusal.
	outcomeSuccess
	// outcomeFailure: a retryable failure (429, 5xx, network, timeout).
	outcomeFailure
)

// allow says whether a call may go to the provider now, and whether it is
// the half-open probe. A nil Circuit always allows.
func (c *Circuit) allow(p Policy, now time.Time) (ok, probe bool) {
	if c == nil || p.BreakerFailures < 0 {
		return true, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.open:
		return true, false
	case c.probing || now.Sub(c.openedAt) < p.BreakerCooldown:
		return false, false
	}
	c.probing = true
	return true, true
}

// record tells the circuit how a call it allowed went. It reports the
// change it made, if any: opened or closed.
func (c *Circuit) record(p Policy, now time.Time, o outcome, probe bool) (opened, closed bool) {
	if c == nil || p.BreakerFailures < 0 {
		return false, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if probe {
		c.probing = false
	}
	switch {
	case o == outcomeNeutral:
		return false, false
	case o == outcomeSuccess:
		c.failures = 0
		if c.open && probe {
			c.open = false
			c.notify()
			return false, true
		}
		return false, false
	case c.open:
		// A probe failed (or a call let through before the circuit
		// opened ended late): another cool-down.
		if probe {
			c.openedAt = now
		}
		return false, false
	}
	c.failures++
	if c.failures < p.BreakerFailures {
		return false, false
	}
	c.open, c.openedAt, c.failures = true, now, 0
	c.notify()
	return true, false
}

func (c *Circuit) notify() {
	if c.onChange != nil {
		c.onChange(c.provider, c.open)
	}
}
