package providers

import (
	"testing"
	"time"
)

// While half-open, one call probes and the others keep skipping the
// provider; a probe that says nothing (cancelled) lets the next call probe.
func TestCircuitLetsOneProbeThrough(t *testing.T) {
	p := Policy{BreakerFailures: 2, BreakerCooldown: time.Minute}
	now := time.Unix(0, 0)
	c := NewCircuit("main", nil)
	for range 2 {
		if ok, _ := c.allow(p, now); !ok {
			t.Fatal("a closed circuit refused a call")
		}
		c.record(p, now, outcomeFailure, false)
	}
	if ok, _ := c.allow(p, now); ok {
		t.Fatal("an open circuit let a call through")
	}
	now = now.Add(time.Minute)
	ok, probe := c.allow(p, now)
	if !ok || !probe {
		t.Fatalf("after the cool-down: allow %v probe %v, want a probe", ok, probe)
	}
	if ok, _ := c.allow(p, now); ok {
		t.Fatal("a second call went through while the probe was under way")
	}
	c.record(p, now, outcomeNeutral, true)
	if ok, probe := c.allow(p, now); !ok || !probe {
		t.Fatal("a cancelled probe did not let the next call probe")
	}
	c.record(p, now, outcomeSuccess, true)
	if c.Open() {
		t.Fatal("a successful probe left the circuit open")
	}
}

func TestNegativeBreakerFailuresNeverOpens(t *testing.T) {
	p := Policy{BreakerFailures: -1}.withDefaults()
	c := NewCircuit("main", nil)
	for range 100 {
		c.record(p, time.Time{}, outcomeFailure, false)
	}
	if ok, _ := c.allow(p, time.Time{}); !ok || c.Open() {
		t.Fatal("a disabled breaker opened")
	}
}
