package sessions_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// askForTime scripts a model that calls current_time (an "ask" tool in the
// test guide) and then answers with the tool's result.
func askForTime(h *harness) {
	first := openaitest.Reply{Text: []string{"Checking."}, ToolCalls: []openaitest.ToolCall{{ID: "t1", Name: "current_time", Args: `{"timezone":"UTC"}`}}}
	if h.model != nil {
		h.model.Push(first)
		h.model.Respond(func(r providers.Request) openaitest.Reply {
			return openaitest.Reply{Text: []string{"Result: " + r.Messages[len(r.Messages)-1].Content}}
		})
		return
	}
	h.llm.Push(first)
	h.llm.Respond(func(r openaitest.Request) openaitest.Reply {
		last := r.Messages[len(r.Messages)-1]
		return openaitest.Reply{Text: []string{"Result: " + openaitest.Text(last.Content)}}
	})
}

func (c *client) confirmation() *switchboard.ConfirmationRequestData {
	c.t.Helper()
	return c.until(switchboard.EventConfirmationRequest, nil).(*switchboard.ConfirmationRequestData)
}

func TestApprovalByOwnerRunsTheTool(t *testing.T) {
	h := newHarness(t)
	askForTime(h)
	c := h.newSession(alice)
	c.say("what time is it?")
	req := c.confirmation()
	if req.ToolName != "current_time" || string(req.Args) != `{"timezone":"UTC"}` || req.ExpiresAt.IsZero() {
		t.Fatalf("confirmation request = %+v", req)
	}
	c.until(switchboard.EventState, func(p any) bool {
		return p.(*switchboard.StateData).State == switchboard.StateAwaitingConfirmation
	})
	c.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	res := c.until(switchboard.EventConfirmationResolved, nil).(*switchboard.ConfirmationResolvedData)
	if !res.Approved || res.By != "Alice" {
		t.Fatalf("resolved = %+v", res)
	}
	tr := c.until(switchboard.EventToolResponse, nil).(*switchboard.ToolResponseData)
	if tr.IsError || !strings.Contains(tr.ContentPreview, "UTC") {
		t.Fatalf("tool response = %+v", tr)
	}
	if got := c.reply().Content; !strings.HasPrefix(got, "Result: ") || !strings.Contains(got, "UTC") {
		t.Fatalf("the result did not flow back into the answer: %q", got)
	}
	c.idle()
}

func TestDenialGoesBackToTheModel(t *testing.T) {
	h := newHarness(t)
	askForTime(h)
	c := h.newSession(alice)
	c.say("what time is it?")
	req := c.confirmation()
	c.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: false})
	if got := c.reply().Content; !strings.Contains(got, "denied") {
		t.Fatalf("the model was not told of the denial: %q", got)
	}
}

func TestOnlyApproversMayAnswerAndOnlyOnce(t *testing.T) {
	h := newHarness(t)
	askForTime(h)
	owner := h.newSession(alice)
	guest := h.attach(sessions.AttachOptions{SessionID: owner.id, Author: bob})
	if guest.sub.Ready.Role != string(collaboration.Member) {
		t.Fatalf("a joining user's role = %q, want member", guest.sub.Ready.Role)
	}
	owner.say("what time is it?")
	req := owner.confirmation()

	guest.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	if e := guest.errorEvent(); e.Code != switchboard.ErrCodeForbidden || !strings.Contains(e.Message, "Bob") {
		t.Fatalf("non-approver got %+v", e)
	}
	owner.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	owner.reply()
	owner.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: false})
	if e := owner.errorEvent(); e.Code != switchboard.ErrCodeAlreadyResolved {
		t.Fatalf("second answer got %+v", e)
	}
	// Bob saw the same stream, in the same order; what he got wrong was
	// told to him alone.
	guest.until(switchboard.EventMessage, func(p any) bool { return p.(*switchboard.MessageData).Role == switchboard.RoleAssistant })
	g, o := numbered(guest.got), numbered(owner.got)
	for i := range min(len(g), len(o)) {
		if g[i].Seq != o[i].Seq || g[i].Type != o[i].Type {
			t.Fatalf("event %d differs: %+v vs %+v", i, g[i], o[i])
		}
	}
	for _, ev := range owner.got {
		if ev.Type == switchboard.EventError && strings.Contains(string(ev.Data), "Bob") {
			t.Fatalf("Alice was shown Bob's refusal: %s", ev.Data)
		}
	}
}

// numbered drops the notices (seq 0), which are per listener.
func numbered(evs []switchboard.Event) []switchboard.Event {
	var out []switchboard.Event
	for _, ev := range evs {
		if ev.Seq > 0 {
			out = append(out, ev)
		}
	}
	return out
}

// A request nobody answers expires ApprovalTimeout after it was asked, not
// a moment before: it then counts as a denial by "expired", the model is
// told nobody answered in time, and a late answer is refused. The clock is
// synctest's, so the timeout can be a real one.
func TestExpiredApprovalCountsAsDeny(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 5 * time.Minute
		h := newBubbleHarness(t, func(c *sessions.Config) { c.ApprovalTimeout = timeout })
		askForTime(h)
		c := h.newSession(alice)
		c.say("what time is it?")
		req := c.confirmation()
		asked := time.Now()
		if got := req.ExpiresAt.Sub(asked); got != timeout {
			t.Fatalf("the request expires %s after it was asked, want %s", got, timeout)
		}
		time.Sleep(timeout - time.Nanosecond)
		evs, _ := c.pending()
		for _, ev := range evs {
			if ev.Type == switchboard.EventConfirmationResolved {
				t.Fatalf("the request was resolved a moment before it expired: %s", ev.Data)
			}
		}
		if n := len(h.model.Requests()); n != 1 {
			t.Fatalf("the model was called %d times before the request expired, want once", n)
		}
		time.Sleep(time.Nanosecond)
		res := c.already(switchboard.EventConfirmationResolved).(*switchboard.ConfirmationResolvedData)
		if res.Approved || res.By != "expired" {
			t.Fatalf("resolved = %+v", res)
		}
		if got := c.reply().Content; !strings.Contains(got, "in time") {
			t.Fatalf("the model was not told it expired: %q", got)
		}
		if told := lastMessage(t, h.model); told.Role != switchboard.RoleTool || !told.IsError || !strings.Contains(told.Content, "in time") {
			t.Fatalf("the model was given %+v, want the call's error result: not answered in time", told)
		}
		c.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
		if e := c.errorEvent(); e.Code != switchboard.ErrCodeAlreadyResolved {
			t.Fatalf("late answer got %+v", e)
		}
	})
}

func TestApprovalSurvivesARestart(t *testing.T) {
	h := newHarness(t)
	askForTime(h)
	c := h.newSession(alice)
	c.say("what time is it?")
	req := c.confirmation()
	c.idleOrAwaiting()

	h.restart()

	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: 0})
	// The replay shows the open request again.
	again := c2.confirmation()
	if again.ConfirmationID != req.ConfirmationID {
		t.Fatalf("replayed request %s, want %s", again.ConfirmationID, req.ConfirmationID)
	}
	c2.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	if got := c2.reply(); !strings.Contains(got.Content, "UTC") {
		// The first "Checking." reply is replayed first; skip to the answer.
		if got = c2.reply(); !strings.Contains(got.Content, "UTC") {
			t.Fatalf("answer after restart = %q", got.Content)
		}
	}
	c2.idle()
	w := c2.window()
	var roles []string
	for _, m := range w {
		roles = append(roles, string(m.Role))
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant" {
		t.Fatalf("stored history after restart = %v", roles)
	}
}

func TestStopWhileAwaitingApprovalClosesTheTurn(t *testing.T) {
	h := newHarness(t)
	askForTime(h)
	c := h.newSession(alice)
	c.say("what time is it?")
	c.confirmation()
	c.say("/stop")
	res := c.until(switchboard.EventConfirmationResolved, nil).(*switchboard.ConfirmationResolvedData)
	if res.Approved {
		t.Fatalf("stop approved the call: %+v", res)
	}
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeCancelled {
		t.Fatalf("stop reported %+v", e)
	}
	c.idle()
	if n := len(h.llm.Requests()); n != 1 {
		t.Fatalf("the model was called %d times; a stopped turn must not call it again", n)
	}
	w := c.window()
	if len(w) != 3 || w[2].Role != switchboard.RoleTool || !w[2].IsError {
		t.Fatalf("history after stop = %+v", w)
	}
	// The session is usable again.
	c.say("hello again")
	c.reply()
}

func TestMessageWhileAwaitingApprovalIsRefusedClearly(t *testing.T) {
	h := newHarness(t)
	askForTime(h)
	c := h.newSession(alice)
	c.say("what time is it?")
	c.confirmation()
	c.say("are you there?")
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeBusy || !strings.Contains(e.Message, "current_time") {
		t.Fatalf("got %+v", e)
	}
}

func TestRefusedMessageCanBeSentAgainWithItsID(t *testing.T) {
	h := newHarness(t)
	askForTime(h)
	c := h.newSession(alice)
	c.say("what time is it?")
	req := c.confirmation()
	again := switchboard.Input{Kind: switchboard.InputText, Text: "are you there?", ClientID: "m2"}
	c.send(again)
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeBusy {
		t.Fatalf("got %+v", e)
	}
	c.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	c.reply()
	c.idle()

	// The refused message was not stored, so its id is free: the client's
	// retry is answered, and a second retry is not.
	c.send(again)
	user := c.until(switchboard.EventMessage, nil).(*switchboard.MessageData)
	if user.Role != switchboard.RoleUser || user.Content != "are you there?" {
		t.Fatalf("retry gave %+v", user)
	}
	c.reply()
	c.idle()
	calls := len(h.llm.Requests())
	c.send(again)
	stored := 0
	for _, m := range c.window() {
		if m.Role == switchboard.RoleUser && m.Content == "are you there?" {
			stored++
		}
	}
	if stored != 1 || len(h.llm.Requests()) != calls {
		t.Fatalf("the retried message is stored %d times and the repeat called the model %d times; want 1 and 0",
			stored, len(h.llm.Requests())-calls)
	}
}

// idleOrAwaiting waits for the turn to settle into waiting for approval.
func (c *client) idleOrAwaiting() {
	c.t.Helper()
	c.until(switchboard.EventState, func(p any) bool {
		s := p.(*switchboard.StateData).State
		return s == switchboard.StateIdle || s == switchboard.StateAwaitingConfirmation
	})
}
