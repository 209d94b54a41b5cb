package websocket_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/websocket"
)

func TestConnectionsPerAddressAreBounded(t *testing.T) {
	g := newGatewayWith(t, websocket.Config{MaxConnsPerIP: 2}, nil)
	first := g.dial(nil)
	g.dial(nil)
	if _, err := g.tryDial(nil); err == nil || !strings.Contains(err.Error(), "HTTP 429") {
		t.Fatalf("a third connection from one address: %v, want HTTP 429", err)
	}
	if n := g.metric(`switchboard_limit_refusals_total{limit="conns_per_ip"}`); n != 1 {
		t.Fatalf("refusals counted: %v, want 1", n)
	}
	// One closing makes room for another.
	first.ws.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("a closed connection never made room for another")
		}
		c, err := g.tryDial(nil)
		if err == nil {
			c.ws.Close()
			break
		}
		if !strings.Contains(err.Error(), "HTTP 429") {
			t.Fatal(err)
		}
	}
}

func TestNewSessionsPerAddressAreBounded(t *testing.T) {
	g := newGatewayWith(t, websocket.Config{NewSessionsPerIP: 2}, nil)
	_, ready := g.hello(map[string]any{})
	g.hello(map[string]any{})
	c := g.dial(nil)
	c.send(map[string]any{"type": "hello"})
	ev := c.next()
	if ev.Type != switchboard.EventError || !strings.Contains(string(ev.Data), "too many new conversations") {
		t.Fatalf("a third new session from one address: %s %s", ev.Type, ev.Data)
	}
	if n := g.metric(`switchboard_limit_refusals_total{limit="new_sessions_per_ip"}`); n != 1 {
		t.Fatalf("refusals counted: %v, want 1", n)
	}
	// Attaching to an existing session is not a new one.
	again, r := g.hello(map[string]any{"session": ready.Session})
	if r.Session != ready.Session {
		t.Fatalf("attached to %s, want %s", r.Session, ready.Session)
	}
	again.ws.Close()
}

func TestAnInputThatCannotBeStoredIsRefusedClearly(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	c, _ := g.hello(map[string]any{"user": map[string]any{"id": "ada"}})
	if err := g.db.LimitSize(t.Context(), 1); err != nil { // the disk is full
		t.Fatal(err)
	}
	c.send(map[string]any{"type": "input", "id": "1", "text": strings.Repeat("y", 32<<10)})
	for {
		ev := c.next()
		if ev.Type != switchboard.EventError {
			continue
		}
		// The session's own storage notice may come first.
		e := data[switchboard.ErrorData](t, ev)
		if e.Code != switchboard.ErrCodeStorage {
			t.Fatalf("refused input: %+v, want storage_unavailable", e)
		}
		if strings.Contains(e.Message, "send it again") {
			return
		}
	}
}
