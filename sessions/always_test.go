package sessions_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// callTime scripts one model turn that calls current_time n times, then
// answers.
func callTime(h *harness, n int) {
	var calls []openaitest.ToolCall
	for i := range n {
		calls = append(calls, openaitest.ToolCall{ID: "t" + string(rune('a'+i)), Name: "current_time", Args: `{"timezone":"UTC"}`})
	}
	h.llm.Push(openaitest.Reply{ToolCalls: calls}, openaitest.Reply{Text: []string{"Done."}})
}

func (c *client) system() string {
	c.t.Helper()
	return c.until(switchboard.EventMessage, func(p any) bool {
		return p.(*switchboard.MessageData).Role == switchboard.RoleSystem
	}).(*switchboard.MessageData).Content
}

func (c *client) resolved() *switchboard.ConfirmationResolvedData {
	c.t.Helper()
	return c.until(switchboard.EventConfirmationResolved, nil).(*switchboard.ConfirmationResolvedData)
}

// "Always allow" answers every open request for the tool, stops asking
// for it for the rest of the session, across a restart, until /revoke.
func TestAlwaysAllowAsksNoMoreUntilRevoked(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)

	callTime(h, 2)
	c.say("time twice")
	first := c.confirmation()
	c.confirmation()
	c.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: first.ConfirmationID, Approved: true, Scope: switchboard.ScopeSession})
	for range 2 {
		if r := c.resolved(); !r.Approved || r.Scope != switchboard.ScopeSession || r.By != "Alice" {
			t.Fatalf("resolved = %+v, want approved for the session by Alice", r)
		}
	}
	c.reply()
	c.idle()

	// The next call runs without a request, also after a restart.
	h.restart()
	c = h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: -1})
	callTime(h, 1)
	c.say("and now?")
	c.until(switchboard.EventToolResponse, nil)
	c.reply()
	c.idle()
	if slices.Contains(c.types(), string(switchboard.EventConfirmationRequest)) {
		t.Fatalf("asked again for a tool allowed for the session: %v", c.types())
	}
	c.say("/tools")
	if got := c.system(); !strings.Contains(got, "current_time") || !strings.Contains(got, "allowed for this session") {
		t.Fatalf("/tools does not show the allowance:\n%s", got)
	}

	// A member may not revoke; the owner may, and then it asks again.
	member := h.attach(sessions.AttachOptions{SessionID: c.id, Author: bob, AfterSeq: -1})
	member.say("/revoke current_time")
	if e := member.errorEvent(); e.Code != switchboard.ErrCodeForbidden {
		t.Fatalf("a member's /revoke: %+v", e)
	}
	c.say("/revoke current_time")
	if got := c.system(); !strings.Contains(got, "revoked") {
		t.Fatalf("/revoke said %q", got)
	}
	callTime(h, 1)
	c.say("once more")
	req := c.confirmation()
	c.say("/deny " + req.ConfirmationID)
	if r := c.resolved(); r.Approved || r.Scope != "" {
		t.Fatalf("after /revoke, /deny resolved %+v", r)
	}
	c.reply()
}

// A member may not allow a tool for the session, and a denial cannot be
// for the session.
func TestAlwaysAllowNeedsAnApprover(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)
	member := h.attach(sessions.AttachOptions{SessionID: c.id, Author: bob, AfterSeq: -1})
	callTime(h, 1)
	c.say("time")
	req := c.confirmation()
	member.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true, Scope: switchboard.ScopeSession})
	if e := member.errorEvent(); e.Code != switchboard.ErrCodeForbidden {
		t.Fatalf("a member's always-allow: %+v", e)
	}
	c.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: false, Scope: switchboard.ScopeSession})
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeBadInput {
		t.Fatalf("a denial for the session: %+v", e)
	}
	c.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true, Scope: "forever"})
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeBadInput || !strings.Contains(e.Message, "forever") {
		t.Fatalf("an unknown scope: %+v", e)
	}
	// Still open: the typed command answers it.
	c.say("/approve")
	if r := c.resolved(); !r.Approved || r.Scope != "" {
		t.Fatalf("/approve resolved %+v", r)
	}
	c.reply()
}

// An approval request left open by a restart is in the ready of a
// listener that attaches without replay, /pending lists it, and the
// typed command answers it.
func TestOpenRequestSurvivesRestartAndIsAnsweredByCommand(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)
	callTime(h, 1)
	c.say("time")
	req := c.confirmation()

	h.restart()
	c = h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: -1})
	if len(c.sub.Ready.Pending) != 1 || c.sub.Ready.Pending[0].ConfirmationID != req.ConfirmationID ||
		c.sub.Ready.Pending[0].ToolName != "current_time" {
		t.Fatalf("ready.pending after a restart = %+v, want the open request %s", c.sub.Ready.Pending, req.ConfirmationID)
	}
	c.say("/pending")
	if got := c.system(); !strings.Contains(got, req.ConfirmationID) || !strings.Contains(got, "current_time") {
		t.Fatalf("/pending said:\n%s", got)
	}
	c.say("/approve nosuchid")
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeAlreadyResolved {
		t.Fatalf("/approve with a wrong id: %+v", e)
	}
	c.say("/approve " + req.ConfirmationID)
	if r := c.resolved(); !r.Approved || r.ConfirmationID != req.ConfirmationID {
		t.Fatalf("resolved = %+v", r)
	}
	c.reply()
	c.idle()
	again := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: -1})
	if len(again.sub.Ready.Pending) != 0 {
		t.Fatalf("ready.pending once answered = %+v", again.sub.Ready.Pending)
	}
	c.say("/pending")
	if got := c.system(); !strings.Contains(got, "No tool call") {
		t.Fatalf("/pending with nothing open said %q", got)
	}
}

// A recap is the last few messages, with their own seqs, before live
// events; the guide's greeting and suggestions come with ready.
func TestRecapAndGreeting(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)
	if c.sub.Ready.Greeting != "Hello from the tester." || len(c.sub.Ready.Suggestions) != 2 {
		t.Fatalf("ready = %+v, want the guide's greeting and suggestions", c.sub.Ready)
	}
	for _, q := range []string{"one", "two", "three"} {
		h.llm.Push(openaitest.Reply{Text: []string{"answer " + q}})
		c.say(q)
		c.reply()
		c.idle()
	}
	r := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: -1, Recap: 3})
	var got []string
	for range 3 {
		ev := <-r.sub.Events()
		if ev.Type != switchboard.EventMessage || ev.Seq > r.sub.Ready.LastSeq {
			t.Fatalf("recap event %d %s, ready.last_seq %d", ev.Seq, ev.Type, r.sub.Ready.LastSeq)
		}
		p, _ := ev.Payload()
		got = append(got, p.(*switchboard.MessageData).Content)
	}
	if strings.Join(got, "|") != "answer two|three|answer three" {
		t.Fatalf("recap = %q", got)
	}
	// Then live events.
	h.llm.Push(openaitest.Reply{Text: []string{"answer four"}})
	c.say("four")
	if m := r.reply(); m.Content != "answer four" {
		t.Fatalf("after the recap: %q", m.Content)
	}
}

// A session opened without a key is stored with its first input: a page
// view that sends nothing stores nothing. A keyed one is stored at once.
func TestSessionStoredOnFirstInput(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	c := h.newSession(alice)
	if _, err := h.db.Session(ctx, c.id); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("a session nobody wrote to is stored: %v", err)
	}
	h.llm.Push(openaitest.Reply{Text: []string{"hi"}})
	c.say("hello")
	c.reply()
	rec, err := h.db.Session(ctx, c.id)
	if err != nil || rec.Owner != alice.Key() {
		t.Fatalf("after the first input: %+v, %v", rec, err)
	}
	if role, err := h.db.Member(ctx, c.id, alice.Key()); err != nil || role != "owner" {
		t.Fatalf("owner stored as %q, %v", role, err)
	}

	keyed := h.attach(sessions.AttachOptions{Key: "stdin", Author: alice})
	if _, err := h.db.Session(ctx, keyed.id); err != nil {
		t.Fatalf("a keyed session is not stored at once: %v", err)
	}
}
