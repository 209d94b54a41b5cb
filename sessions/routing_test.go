package sessions_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/routing"
	"github.com/switchboard-gw/switchboard/sessions"
)

// withRouting routes new conversations by rules, then router, then the
// harness's default guide (tester).
func withRouting(t *testing.T, rules []routing.RuleSpec, router *routing.Router) option {
	return func(cfg *sessions.Config) {
		table, err := routing.New(rules, router, cfg.DefaultGuide)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Router = table
	}
}

// routed is the guide a session's first answer came from, checked three
// ways: the reply's event, the model's system prompt and the stored
// session.
func routed(t *testing.T, h *harness, c *client, prompt string) string {
	t.Helper()
	r := c.until(switchboard.EventMessage, func(p any) bool { return p.(*switchboard.MessageData).Role == switchboard.RoleAssistant })
	var agent string
	for _, ev := range c.got {
		if ev.Type == switchboard.EventMessage {
			agent = ev.Agent
		}
	}
	if r.(*switchboard.MessageData).Author != agent {
		t.Errorf("the answer is by %q, its event's agent %q", r.(*switchboard.MessageData).Author, agent)
	}
	reqs := h.model.Requests()
	if len(reqs) == 0 || !strings.Contains(reqs[len(reqs)-1].System, prompt) {
		t.Errorf("the model's system prompt is not %q's: %+v", agent, reqs)
	}
	rec, err := h.db.Session(context.Background(), c.id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Guide != agent {
		t.Errorf("stored guide %q, answered by %q", rec.Guide, agent)
	}
	return agent
}

var slackCarol = switchboard.Author{Channel: "slack", ID: "U3", Name: "Carol"}

func TestRoutingBySlackChannel(t *testing.T) {
	h := newBubbleHarness(t, withRouting(t, []routing.RuleSpec{
		{Guide: "other", Channel: "slack", Place: "C_FINANCE"},
	}, nil))
	// A thread in the finance channel, opened as the Slack listener does:
	// by the place's key, naming no guide.
	c := h.attach(sessions.AttachOptions{Key: "slack:T1:C_FINANCE:1700000000.000100", Author: slackCarol, AfterSeq: -1})
	c.send(switchboard.Input{Kind: switchboard.InputText, Text: "hello", Place: "slack:T1:C_FINANCE:1700000000.000100"})
	if g := routed(t, h, c, "You are the other assistant."); g != "other" {
		t.Fatalf("a thread of the finance channel went to %q", g)
	}

	// Another channel: the default.
	d := h.attach(sessions.AttachOptions{Key: "slack:T1:C_RANDOM:1700000000.000200", Author: slackCarol, AfterSeq: -1})
	d.send(switchboard.Input{Kind: switchboard.InputText, Text: "hello", Place: "slack:T1:C_RANDOM:1700000000.000200"})
	if g := routed(t, h, d, "You are the test assistant."); g != "tester" {
		t.Fatalf("a thread of another channel went to %q", g)
	}
}

func TestRoutingByTheFirstMessageOnly(t *testing.T) {
	h := newBubbleHarness(t, withRouting(t, []routing.RuleSpec{
		{Guide: "other", Match: `(?i)\b(invoice|refund)s?\b`},
	}, nil))
	c := h.newSession(alice)
	c.say("Where is my invoice?")
	if g := routed(t, h, c, "You are the other assistant."); g != "other" {
		t.Fatalf("routed to %q", g)
	}

	// The rules choose once: a later message does not route again, and a
	// guide the channel asked for is kept.
	d := h.newSession(alice)
	d.say("hello")
	if g := routed(t, h, d, "You are the test assistant."); g != "tester" {
		t.Fatalf("routed to %q", g)
	}
	d.say("and my refund?")
	d.reply()
	if reqs := h.model.Requests(); !strings.Contains(reqs[len(reqs)-1].System, "You are the test assistant.") {
		t.Fatal("a second message routed the conversation again")
	}
	e := h.attach(sessions.AttachOptions{Author: alice, Guide: "compacting"})
	e.say("my invoice")
	if g := routed(t, h, e, "You remember everything."); g != "compacting" {
		t.Fatalf("a conversation opened with a guide was routed to %q", g)
	}
}

// slowChooser answers only when asked to stop: the router's timeout must
// end the wait.
type slowChooser struct{ asked chan string }

func (c slowChooser) Choose(ctx context.Context, system, prompt string) (string, error) {
	c.asked <- prompt
	<-ctx.Done()
	return "", ctx.Err()
}

type quickChooser string

func (c quickChooser) Choose(ctx context.Context, system, prompt string) (string, error) {
	return string(c), nil
}

func TestRouterTimeoutFallsBackToTheDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := slowChooser{asked: make(chan string, 1)}
		h := newBubbleHarness(t, withRouting(t, nil, &routing.Router{
			Chooser: slow, Timeout: 3 * time.Second,
			Candidates: []routing.Candidate{{Name: "other", Description: "Another persona"}, {Name: "tester", Description: "Tests"}},
		}))
		c := h.newSession(alice)
		start := time.Now()
		c.say("which of you?")
		if got := <-slow.asked; got != "which of you?" {
			t.Fatalf("the router was asked %q", got)
		}
		if g := routed(t, h, c, "You are the test assistant."); g != "tester" {
			t.Fatalf("after the router's timeout, routed to %q, want the default", g)
		}
		if waited := time.Since(start); waited != 3*time.Second {
			t.Fatalf("the first answer waited %s for the router, want its timeout (3s)", waited)
		}
	})
}

func TestRouterPicksAmongCandidates(t *testing.T) {
	h := newBubbleHarness(t, withRouting(t, nil, &routing.Router{
		Chooser: quickChooser("Other."), Candidates: []routing.Candidate{{Name: "other", Description: "Another persona"}},
	}))
	c := h.newSession(alice)
	c.say("something for the other one")
	if g := routed(t, h, c, "You are the other assistant."); g != "other" {
		t.Fatalf("routed to %q, want the router's pick", g)
	}
}
