package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
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

// A session idle for longer than the retention is deleted when the
// gateway starts, with what lives outside the database. The month passes
// on synctest's clock.
func TestRetentionDeletesIdleSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t)
		c := h.newSession(alice)
		c.say("hello")
		c.idle()
		// Restart with a retention that everything stored has outlived.
		h.shutdown()
		h.cfg.Retention = 30 * 24 * time.Hour
		time.Sleep(h.cfg.Retention + time.Second)
		forgotten := make(chan []string, 1)
		h.cfg.Forget = func(ids []string) { forgotten <- ids }
		h.start()
		synctest.Wait() // the sweep at start is done
		if _, err := h.db.Session(context.Background(), c.id); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("the idle session is still stored (%v)", err)
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
		default:
			t.Fatal("Forget was not told of the deleted session")
		}
	})
}

// A session with a listener stays loaded however long it idles; once the
// last listener has left, it leaves memory IdleTimeout later, not a moment
// before; stored, it loads again on use. The clock is synctest's.
func TestASessionLeavesMemorySoonAfterItsLastListener(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, func(c *sessions.Config) { c.IdleTimeout = 10 * time.Minute })
		c := h.newSession(alice)
		c.say("hello")
		c.idle()
		time.Sleep(2 * h.cfg.IdleTimeout)
		synctest.Wait()
		if n := h.m.Live(); n != 1 {
			t.Fatalf("%d sessions loaded after idling attached for %s, want 1", n, 2*h.cfg.IdleTimeout)
		}
		c.sub.Close()
		h.idleOut(t) // counted from the leaving, not from the last work
		// Stored, it loads again on use.
		c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: 0})
		c2.say("again")
		c2.idle()
	})
}

// Once their work is done, idle sessions hold no goroutine, attached or
// not; work wakes one up again. In a bubble, synctest.Wait is exactly
// "every goroutine has parked or waits".
func TestAnIdleSessionHasNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t)
		var clients []*client
		for range 20 {
			c := h.newSession(switchboard.Author{Channel: "web", ID: newName()})
			c.say("hello")
			c.idle()
			clients = append(clients, c)
		}
		synctest.Wait()
		if n := h.m.Working(); n != 0 {
			t.Fatalf("%d of 20 idle sessions still hold a goroutine", n)
		}
		if n := h.m.Live(); n != 20 {
			t.Fatalf("%d sessions loaded, want the 20 attached ones", n)
		}
		// Work wakes a session up again.
		clients[7].say("again")
		clients[7].idle()
	})
}

var nameSeq atomic.Int64

func newName() string { return fmt.Sprintf("user%d", nameSeq.Add(1)) }
