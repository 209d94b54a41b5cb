package sessions_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// A subscription with nothing to deliver holds no goroutine: fifty
// listeners attached to a quiet session cost none, and each still gets
// the next event, a notice meant for it, and its end when closed.
func TestIdleSubscriptionsHoldNoGoroutine(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)
	settle := func(what string, atMost int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > atMost {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d goroutines, want at most %d", what, runtime.NumGoroutine(), atMost)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	base := runtime.NumGoroutine()

	type listener struct {
		sub   *sessions.Subscription
		got   chan switchboard.Event
		ended chan struct{}
	}
	const n = 50
	ls := make([]*listener, n)
	for i := range ls {
		l := &listener{got: make(chan switchboard.Event, 64), ended: make(chan struct{})}
		sub, err := h.m.Attach(context.Background(), sessions.AttachOptions{
			SessionID: c.id, Author: alice, AfterSeq: -1,
			Deliver: func(ev switchboard.Event) bool { l.got <- ev; return true },
			Ended:   func() { close(l.ended) },
		})
		if err != nil {
			t.Fatal(err)
		}
		sub.Start()
		l.sub, ls[i] = sub, l
	}
	// A few goroutines of the manager's may come and go; fifty would be
	// one per listener.
	settle("fifty quiet listeners", base+5)

	h.llm.Push(openaitest.Reply{Text: []string{"Hello"}})
	c.say("hi")
	for i, l := range ls {
		for {
			select {
			case ev := <-l.got:
				if ev.Type != switchboard.EventMessage {
					continue
				}
				p, err := ev.Payload()
				if err != nil {
					t.Fatal(err)
				}
				if m := p.(*switchboard.MessageData); m.Role != switchboard.RoleAssistant || m.Content != "Hello" {
					continue
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("listener %d did not get the reply", i)
			}
			break
		}
	}
	c.idle()
	settle("after the turn", base+5)

	// A notice for one person wakes their listeners too.
	c.send(switchboard.Input{Kind: switchboard.InputText, Text: "/nosuchcommand", Author: alice})
	for i, l := range ls {
		for {
			select {
			case ev := <-l.got:
				if ev.Seq != 0 || ev.Type != switchboard.EventError {
					continue
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("listener %d was not told", i)
			}
			break
		}
	}

	for _, l := range ls {
		l.sub.Close()
	}
	for i, l := range ls {
		select {
		case <-l.ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("listener %d did not end after Close", i)
		}
	}
}
