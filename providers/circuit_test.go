package providers_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// clock is a settable time for the breaker's cool-down.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// changes records what a circuit reports, as the gateway's gauge would.
type changes struct {
	mu  sync.Mutex
	got []string
}

func (c *changes) record(provider string, open bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	state := "closed"
	if open {
		state = "open"
	}
	c.got = append(c.got, provider+"="+state)
}

func (c *changes) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.got, " ")
}

// breakerSetup is a main provider that fails with 500 until told
// otherwise, with a breaker on a test clock, and a healthy backup.
type breakerSetup struct {
	main, backup *openaitest.Server
	r            *providers.Resilient
	clock        *clock
	changes      *changes
	mu           sync.Mutex
	healthy      bool
}

const (
	breakerFailures = 3
	breakerCooldown = 30 * time.Second
)

func newBreakerSetup(t *testing.T, withFallback bool) *breakerSetup {
	t.Helper()
	s := &breakerSetup{main: openaitest.New(), backup: openaitest.New(), clock: &clock{now: time.Unix(1_700_000_000, 0)}, changes: &changes{}}
	t.Cleanup(s.main.Close)
	t.Cleanup(s.backup.Close)
	s.main.Respond(func(openaitest.Request) openaitest.Reply {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.healthy {
			return openaitest.Reply{Text: []string{"from main"}}
		}
		return openaitest.Reply{Status: 500}
	})
	s.backup.Respond(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Text: []string{"from backup"}} })
	var slept []time.Duration
	s.r = resilient(t, s.main, "main", &slept)
	s.r.Policy.BreakerFailures = breakerFailures
	s.r.Policy.BreakerCooldown = breakerCooldown
	s.r.Now = s.clock.Now
	s.r.Circuit = providers.NewCircuit("main", s.changes.record)
	if withFallback {
		s.r.Fallback = resilient(t, s.backup, "backup", &slept)
	}
	return s
}

func (s *breakerSetup) heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.healthy = true
}

// turn runs one call the way sessions do: on a copy of the Resilient.
func (s *breakerSetup) turn(t *testing.T) (string, error) {
	t.Helper()
	cp := *s.r
	return collect(t, &cp)
}

func TestBreakerOpensAfterFailedTurnsAndSkipsTheMain(t *testing.T) {
	s := newBreakerSetup(t, true)
	if got := s.changes.String(); got != "main=closed" {
		t.Fatalf("a new circuit reports %q, want main=closed", got)
	}
	for i := range breakerFailures {
		got, err := s.turn(t)
		if err != nil || got != "from backup" {
			t.Fatalf("turn %d: %q, %v", i+1, got, err)
		}
	}
	tried := len(s.main.Requests())
	if tried != breakerFailures*3 { // MaxRetries 2: three attempts a turn
		t.Fatalf("main saw %d requests in %d failed turns, want %d", tried, breakerFailures, breakerFailures*3)
	}
	if !s.r.Circuit.Open() || s.changes.String() != "main=closed main=open" {
		t.Fatalf("after %d failed turns: open %v, changes %q", breakerFailures, s.r.Circuit.Open(), s.changes)
	}

	for i := range 5 {
		got, err := s.turn(t)
		if err != nil || got != "from backup" {
			t.Fatalf("open turn %d: %q, %v", i+1, got, err)
		}
	}
	if n := len(s.main.Requests()); n != tried {
		t.Fatalf("main saw %d more requests while its circuit was open", n-tried)
	}
	s.clock.Advance(breakerCooldown - time.Second)
	if _, err := s.turn(t); err != nil || len(s.main.Requests()) != tried {
		t.Fatalf("before the cool-down ended: %v, main requests %d (want %d)", err, len(s.main.Requests()), tried)
	}
}

func TestBreakerProbesAfterCooldownAndClosesOnSuccess(t *testing.T) {
	s := newBreakerSetup(t, true)
	for range breakerFailures {
		if _, err := s.turn(t); err != nil {
			t.Fatal(err)
		}
	}
	tried := len(s.main.Requests())

	// Cool-down over, main still failing: one probe, one request (no
	// retries), the backup answers, and the circuit opens again.
	s.clock.Advance(breakerCooldown)
	if got, err := s.turn(t); err != nil || got != "from backup" {
		t.Fatalf("failed probe turn: %q, %v", got, err)
	}
	if n := len(s.main.Requests()) - tried; n != 1 {
		t.Fatalf("the probe made %d requests to main, want 1", n)
	}
	tried++
	if !s.r.Circuit.Open() {
		t.Fatal("a failed probe closed the circuit")
	}
	if _, err := s.turn(t); err != nil || len(s.main.Requests()) != tried {
		t.Fatalf("right after a failed probe main was called again (%d requests, want %d), %v", len(s.main.Requests()), tried, err)
	}

	// Next cool-down, main healthy: the probe answers and closes it.
	s.heal()
	s.clock.Advance(breakerCooldown)
	if got, err := s.turn(t); err != nil || got != "from main" {
		t.Fatalf("successful probe turn: %q, %v", got, err)
	}
	if s.r.Circuit.Open() || s.changes.String() != "main=closed main=open main=closed" {
		t.Fatalf("after a successful probe: open %v, changes %q", s.r.Circuit.Open(), s.changes)
	}
	if got, err := s.turn(t); err != nil || got != "from main" {
		t.Fatalf("turn after closing: %q, %v", got, err)
	}
}

func TestBreakerWithoutFallbackFailsFastAsUnavailable(t *testing.T) {
	s := newBreakerSetup(t, false)
	for range breakerFailures {
		if _, err := s.turn(t); err == nil {
			t.Fatal("a failing main succeeded")
		}
	}
	tried := len(s.main.Requests())
	_, err := s.turn(t)
	if !errors.Is(err, providers.ErrCircuitOpen) {
		t.Fatalf("err = %v, want ErrCircuitOpen", err)
	}
	if n := len(s.main.Requests()); n != tried {
		t.Fatalf("main saw %d requests while open", n-tried)
	}
	kind, msg := providers.Describe(err)
	if kind != providers.KindUnavailable || !refRE.MatchString(msg) || strings.Contains(msg, "circuit") {
		t.Fatalf("kind %s, message %q", kind, msg)
	}
}

func TestBreakerCountsOnlyConsecutiveRetryableFailures(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	var slept []time.Duration
	r := resilient(t, llm, "main", &slept)
	r.Policy.BreakerFailures = breakerFailures
	r.Circuit = providers.NewCircuit("main", nil)

	// Refusals say the provider is up: however many, the circuit stays
	// closed and every turn reaches the server.
	llm.Respond(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Status: 401} })
	for range breakerFailures + 2 {
		if _, err := collect(t, r); err == nil {
			t.Fatal("401 succeeded")
		}
	}
	if r.Circuit.Open() || len(llm.Requests()) != breakerFailures+2 {
		t.Fatalf("after refusals: open %v, requests %d", r.Circuit.Open(), len(llm.Requests()))
	}

	// Failures broken up by a success never add up to the threshold.
	fail := func() {
		llm.Respond(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Status: 503} })
		for range breakerFailures - 1 {
			if _, err := collect(t, r); err == nil {
				t.Fatal("503 succeeded")
			}
		}
	}
	fail()
	llm.Respond(nil)
	llm.Push(openaitest.Reply{Text: []string{"ok"}})
	if got, err := collect(t, r); err != nil || got != "ok" {
		t.Fatalf("%q, %v", got, err)
	}
	fail()
	if r.Circuit.Open() {
		t.Fatal("the circuit opened on failures that were not consecutive")
	}
}
