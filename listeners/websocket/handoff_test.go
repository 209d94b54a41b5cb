package websocket_test

import (
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// A handoff reaches a /ws client as a stored "handoff" event: from, to
// and reason, the envelope's agent the guide passed to, and the events
// after it are that guide's; a client that comes back is replayed it.
func TestHandoffEventOnTheWire(t *testing.T) {
	g := newGatewayWith(t, websocket.Config{}, sessionstest.WithHandoffGuides(t))
	g.llm.Push(sessionstest.Handoff("billing", "an invoice question"), openaitest.Reply{Text: []string{"Billing here."}})
	c, ready := g.hello(map[string]any{})
	if ready.Guide != "assistant" {
		t.Fatalf("the session starts with %q, want assistant", ready.Guide)
	}
	c.send(map[string]any{"type": "input", "id": "m1", "text": "was my invoice paid?"})
	evs := c.untilIdle()
	var handoff *wireEvent
	for i, ev := range evs {
		if ev.Type == switchboard.EventHandoff {
			handoff = &evs[i]
		}
		if handoff != nil && ev.Type == switchboard.EventMessage && ev.Agent != "billing" {
			t.Errorf("a message after the handoff is %q's, want billing's", ev.Agent)
		}
	}
	if handoff == nil {
		t.Fatalf("no handoff event among %d", len(evs))
	}
	want := switchboard.HandoffData{From: "assistant", To: "billing", Reason: "an invoice question"}
	if got := data[switchboard.HandoffData](t, *handoff); got != want || handoff.Seq == 0 || handoff.Agent != "billing" {
		t.Fatalf("handoff event %+v with %+v, want %+v, stored, billing's", handoff.Event, got, want)
	}

	// Replayed to a client that comes back.
	c2, ready2 := g.hello(map[string]any{"session": ready.Session, "resume_after": handoff.Seq - 1})
	if ready2.Guide != "billing" {
		t.Errorf("back in the session, its guide is %q, want billing", ready2.Guide)
	}
	if ev := c2.next(); ev.Type != switchboard.EventHandoff || ev.Seq != handoff.Seq {
		t.Fatalf("replayed first %s #%d, want the handoff #%d", ev.Type, ev.Seq, handoff.Seq)
	}
}
