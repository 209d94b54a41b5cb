package sessions_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

func TestRateLimitThenSuccess(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(openaitest.Reply{Status: 429, RetryAfter: "1"}, openaitest.Reply{Text: []string{"made it"}})
	c := h.newSession(alice)
	c.say("hi")
	if got := c.reply().Content; got != "made it" {
		t.Fatalf("reply = %q", got)
	}
	if n := len(h.llm.Requests()); n != 2 {
		t.Fatalf("requests = %d, want 2", n)
	}
}

func TestServerErrorsUntilRetriesRunOutThenNextTurnWorks(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(openaitest.Reply{Status: 500}, openaitest.Reply{Status: 500}, openaitest.Reply{Status: 500})
	c := h.newSession(alice)
	c.say("hi")
	e := c.errorEvent()
	if e.Code != switchboard.ErrCodeProvider || !strings.Contains(e.Message, "try again") {
		t.Fatalf("error = %+v", e)
	}
	c.idle()
	if n := len(h.llm.Requests()); n != 3 { // MaxRetries 2
		t.Fatalf("requests = %d, want 3", n)
	}
	h.llm.Push(openaitest.Reply{Text: []string{"back"}})
	c.say("again")
	if got := c.reply().Content; got != "back" {
		t.Fatalf("next turn = %q", got)
	}
	req := lastRequest(t, h.llm)
	var users []string
	for _, m := range req.Messages {
		if m.Role == "user" {
			users = append(users, openaitest.Text(m.Content))
		}
	}
	if strings.Join(users, "|") != "hi|again" {
		t.Fatalf("context after the failure = %v", users)
	}
}

func TestBadRequestIsNotRetried(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(openaitest.Reply{Status: 400})
	c := h.newSession(alice)
	c.say("hi")
	if e := c.errorEvent(); !strings.Contains(e.Message, "rejected") {
		t.Fatalf("error = %+v", e)
	}
	if n := len(h.llm.Requests()); n != 1 {
		t.Fatalf("a 400 was retried: %d requests", n)
	}
}

func TestStreamCutMidwayStoresNoHalfMessage(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(openaitest.Reply{Text: []string{"I was say", "ing"}, Cut: true})
	c := h.newSession(alice)
	c.say("hi")
	c.until(switchboard.EventDelta, nil)
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeProvider {
		t.Fatalf("error = %+v", e)
	}
	c.idle()
	if w := c.window(); len(w) != 1 || w[0].Role != switchboard.RoleUser {
		t.Fatalf("history after a broken stream = %+v", w)
	}
}

func TestHangingProviderTimesOut(t *testing.T) {
	h := newHarness(t, func(c *sessions.Config) {
		p := *c.Providers["main"]
		p.Policy.IdleTimeout = 100 * time.Millisecond
		p.Policy.MaxRetries = 0
		c.Providers["main"] = &p
	})
	h.llm.Push(openaitest.Reply{Hang: true})
	c := h.newSession(alice)
	c.say("hi")
	if e := c.errorEvent(); !strings.Contains(e.Message, "did not respond in time") {
		t.Fatalf("error = %+v", e)
	}
	c.idle()
	c.say("still there?")
	c.reply()
}

func TestStopCancelsAStreamingTurn(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	defer close(gate)
	h.llm.Push(openaitest.Reply{Text: []string{"long ", "answer"}, Gate: gate})
	c := h.newSession(alice)
	ctx := context.Background()
	if _, err := h.m.Submit(ctx, c.id, switchboard.Input{Kind: switchboard.InputText, Text: "talk", Author: alice}); err != nil {
		t.Fatal(err)
	}
	c.until(switchboard.EventDelta, nil) // the stream is open and waiting
	c.send(switchboard.Input{Kind: switchboard.InputCancel})
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeCancelled {
		t.Fatalf("error = %+v", e)
	}
	c.idle()
	if w := c.window(); len(w) != 1 {
		t.Fatalf("a stopped stream left %+v", w)
	}
	c.say("next")
	c.reply()
}

func TestConversationIsRememberedAcrossRestart(t *testing.T) {
	h := newHarness(t)
	c := h.attach(sessions.AttachOptions{Key: "stdin", Author: alice})
	h.llm.Push(openaitest.Reply{Text: []string{"Nice to meet you, Ann."}})
	c.say("my name is Ann")
	c.idle()
	h.restart()
	c2 := h.attach(sessions.AttachOptions{Key: "stdin", Author: alice, AfterSeq: -1})
	if c2.id != c.id {
		t.Fatalf("stdin key opened %s after restart, want %s", c2.id, c.id)
	}
	if c2.sub.Ready.LastSeq == 0 {
		t.Fatal("seq did not survive the restart")
	}
	c2.say("what is my name?")
	ev := c2.until(switchboard.EventMessage, nil)
	if first := c2.got[0].Seq; first != c2.sub.Ready.LastSeq+1 {
		t.Fatalf("first event after restart has seq %d, want %d", first, c2.sub.Ready.LastSeq+1)
	}
	_ = ev
	c2.idle()
	req := lastRequest(t, h.llm)
	var texts []string
	for _, m := range req.Messages[1:] {
		texts = append(texts, openaitest.Text(m.Content))
	}
	if strings.Join(texts, "|") != "my name is Ann|Nice to meet you, Ann.|what is my name?" {
		t.Fatalf("context after restart = %q", texts)
	}
}

func TestSlowSubscriberIsDroppedAndCatchesUpWithoutGaps(t *testing.T) {
	h := newHarness(t, func(c *sessions.Config) { c.SubscriberBuffer = 1 })
	chunks := make([]string, 200)
	for i := range chunks {
		chunks[i] = "x"
	}
	h.llm.Push(openaitest.Reply{Text: chunks})
	fast := h.newSession(alice)
	slow := h.attach(sessions.AttachOptions{SessionID: fast.id, Author: bob})
	fast.say("stream a lot") // returns when the turn is over: slow read nothing meanwhile
	fast.idle()
	slow.idle()
	all := append(slow.got, nil...)
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("slow subscriber event %d has seq %d: gap or duplicate", i, ev.Seq)
		}
	}
	// Of what fast got, the history (not the notice that bob came in).
	history := slices.DeleteFunc(slices.Clone(fast.got), func(ev switchboard.Event) bool { return ev.Seq == 0 })
	if len(all) != len(history) {
		t.Fatalf("slow got %d events, fast %d", len(all), len(history))
	}
}

func TestViewerMayNotWrite(t *testing.T) {
	h := newHarness(t)
	owner := h.newSession(alice)
	_, err := h.m.Attach(context.Background(), sessions.AttachOptions{SessionID: owner.id, Author: bob, Role: "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.m.Submit(context.Background(), owner.id, switchboard.Input{Kind: switchboard.InputText, Text: "hi", Author: bob})
	if err == nil || !strings.Contains(err.Error(), "may not write") {
		t.Fatalf("viewer submit err = %v", err)
	}
}
