package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
)

func TestLiveSessionsAreBounded(t *testing.T) {
	h := newHarness(t, func(c *sessions.Config) { c.MaxLive = 2 })
	h.newSession(alice)
	h.newSession(bob)
	_, err := h.m.Attach(context.Background(), sessions.AttachOptions{Author: switchboard.Author{Channel: "web", ID: "carol"}})
	if !errors.Is(err, sessions.ErrFull) {
		t.Fatalf("a third session with max_live 2: %v, want ErrFull", err)
	}
}

func TestAnAuthorCannotOpenSessionsWithoutEnd(t *testing.T) {
	h := newHarness(t, func(c *sessions.Config) { c.NewPerMinute = 2 })
	h.newSession(alice)
	h.newSession(alice)
	_, err := h.m.Attach(context.Background(), sessions.AttachOptions{Author: alice})
	if !errors.Is(err, sessions.ErrTooFast) {
		t.Fatalf("Alice's third new session in a minute: %v, want ErrTooFast", err)
	}
	h.newSession(bob) // others are not held back
}

func TestRetentionDeletesIdleSessions(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)
	c.say("hello")
	c.idle()
	// Restart with a retention that everything stored has outlived.
	h.shutdown()
	h.cfg.Retention = time.Nanosecond
	forgotten := make(chan []string, 1)
	h.cfg.Forget = func(ids []string) { forgotten <- ids }
	h.start()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := h.db.Session(context.Background(), c.id)
		if errors.Is(err, switchboard.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle session is still stored (%v)", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := h.m.Attach(context.Background(), sessions.AttachOptions{SessionID: c.id, Author: alice})
	if !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("attaching to a deleted session: %v, want not found", err)
	}
	// What lives outside the database (a sandbox's files) is let go too.
	select {
	case ids := <-forgotten:
		if !slices.Contains(ids, c.id) {
			t.Fatalf("Forget was told %v, not %s", ids, c.id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Forget was not told of the deleted session")
	}
}

func TestASessionLeavesMemorySoonAfterItsLastListener(t *testing.T) {
	h := newHarness(t, func(c *sessions.Config) { c.IdleTimeout = 50 * time.Millisecond })
	c := h.newSession(alice)
	c.say("hello")
	c.idle()
	if n := h.m.Live(); n != 1 {
		t.Fatalf("%d sessions loaded while attached, want 1", n)
	}
	c.sub.Close()
	h.waitUnloaded(t)
	// Stored, it loads again on use.
	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: 0})
	c2.say("again")
	c2.idle()
}

func TestAnIdleSessionHasNoGoroutine(t *testing.T) {
	h := newHarness(t)
	var clients []*client
	for range 20 {
		c := h.newSession(switchboard.Author{Channel: "web", ID: newName()})
		c.say("hello")
		c.idle()
		clients = append(clients, c)
	}
	for deadline := time.Now().Add(10 * time.Second); h.m.Working() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 20 idle sessions still hold a goroutine", h.m.Working())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := h.m.Live(); n != 20 {
		t.Fatalf("%d sessions loaded, want the 20 attached ones", n)
	}
	// Work wakes a session up again.
	clients[7].say("again")
	clients[7].idle()
}

var nameSeq atomic.Int64

func newName() string { return fmt.Sprintf("user%d", nameSeq.Add(1)) }
