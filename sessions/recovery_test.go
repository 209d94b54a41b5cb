package sessions_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// These tests cut turns short the way a process cannot survive — a
// shutdown that does not wait, a full disk — and check what the store and
// the listeners have afterwards. The gateway binary is killed for real in
// cmd/gateway's crash test.

// submit hands an input to the session without waiting for its turn.
func (c *client) submit(in switchboard.Input) *sessions.Receipt {
	c.t.Helper()
	if in.Author == (switchboard.Author{}) {
		in.Author = c.who
	}
	if in.Kind == "" {
		in.Kind = switchboard.InputText
	}
	r, err := c.h.m.Submit(context.Background(), c.id, in)
	if err != nil {
		c.t.Fatalf("submit %+v: %v", in, err)
	}
	return r
}

// stored returns every stored event of the session.
func (c *client) stored() []switchboard.Event {
	c.t.Helper()
	if err := c.h.db.Flush(context.Background()); err != nil {
		c.t.Fatal(err)
	}
	evs, err := c.h.db.EventsAfter(context.Background(), c.id, 0, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	return evs
}

// checkHistory asserts the invariants a client relies on: stored seqs
// run 1..N without a gap, and every numbered event any of the clients was
// shown is stored under the same number with the same content.
func checkHistory(t *testing.T, stored []switchboard.Event, shown ...[]switchboard.Event) {
	t.Helper()
	for i, ev := range stored {
		if ev.Seq != int64(i+1) {
			t.Fatalf("stored event %d has seq %d: a gap or a repeat", i, ev.Seq)
		}
	}
	for _, evs := range shown {
		for _, ev := range evs {
			if ev.Seq == 0 {
				continue // a notice, outside the history
			}
			if ev.Seq > int64(len(stored)) {
				t.Fatalf("a client was shown seq %d (%s), which is not stored (last stored: %d)", ev.Seq, ev.Type, len(stored))
			}
			st := stored[ev.Seq-1]
			if st.Type != ev.Type || string(st.Data) != string(ev.Data) {
				t.Fatalf("seq %d was shown as %s %s but stored as %s %s: renumbered", ev.Seq, ev.Type, ev.Data, st.Type, st.Data)
			}
		}
	}
}

// messagesOf lists the role:content of the stored context messages.
func messagesOf(ws []switchboard.Message) string {
	var out []string
	for _, m := range ws {
		out = append(out, string(m.Role)+":"+m.Content)
	}
	return strings.Join(out, " | ")
}

func hasError(evs []switchboard.Event, code string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type != switchboard.EventError {
			continue
		}
		p, err := ev.Payload()
		if err == nil && p.(*switchboard.ErrorData).Code == code {
			n++
		}
	}
	return n
}

// midStream opens a session and sends text (client id c1); the model's
// first reply streams its first chunk of first and then waits on the
// returned gate; later replies follow. It returns once the first delta
// was shown.
func (h *harness) midStream(text string, first []string, then ...openaitest.Reply) (*client, chan struct{}) {
	h.t.Helper()
	gate := make(chan struct{})
	h.llm.Push(append([]openaitest.Reply{{Text: first, Gate: gate}}, then...)...)
	c := h.newSession(alice)
	c.submit(switchboard.Input{ClientID: "c1", Text: text})
	c.until(switchboard.EventDelta, nil)
	return c, gate
}

func TestInterruptedTurnIsRunAgainAfterARestart(t *testing.T) {
	h := newHarness(t)
	// The gate is never opened: the first answer is cut half way.
	c, _ := h.midStream("question", []string{"Half an ", "answer"}, openaitest.Reply{Text: []string{"The whole answer."}})

	h.restart() // the turn is cut, as by a crash: nothing ends it

	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: 0})
	if got := c2.reply().Content; got != "The whole answer." {
		t.Fatalf("answer after restart = %q", got)
	}
	c2.idle()
	stored := c.stored()
	checkHistory(t, stored, c.got, c2.got)
	if n := hasError(stored, switchboard.ErrCodeInterrupted); n != 1 {
		t.Fatalf("%d interrupted markers stored, want 1", n)
	}
	if n := hasError(stored, switchboard.ErrCodeCancelled); n != 0 {
		t.Fatal("the cut turn was stored as stopped")
	}
	// The marker comes after what was shown of the cut answer and before
	// the new one.
	var order []string
	for _, ev := range stored {
		switch ev.Type {
		case switchboard.EventDelta, switchboard.EventMessage, switchboard.EventError:
			order = append(order, string(ev.Type))
		}
	}
	if got := strings.Join(order, ","); got != "message,delta,error,delta,message" {
		t.Fatalf("stored events = %s, want the user's message, the cut delta, the marker, the new reply", got)
	}
	if got := messagesOf(c2.window()); got != "user:question | assistant:The whole answer." {
		t.Fatalf("context = %s", got)
	}
	// Sent again by a client that did not see it stored: answered once.
	r := c2.submit(switchboard.Input{ClientID: "c1", Text: "question"})
	if _, err := r.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := messagesOf(c2.window()); got != "user:question | assistant:The whole answer." {
		t.Fatalf("context after a repeat = %s", got)
	}
	if unfinished, err := h.db.Unfinished(context.Background()); err != nil || len(unfinished) != 0 {
		t.Fatalf("unfinished after the answer: %v, %v", unfinished, err)
	}
}

func TestAcceptedInputsAreAnsweredAfterARestart(t *testing.T) {
	h := newHarness(t)
	c, _ := h.midStream("one", []string{"cut"},
		openaitest.Reply{Text: []string{"answer one"}}, openaitest.Reply{Text: []string{"answer two"}})
	// Queued behind the running turn: accepted, so stored.
	c.submit(switchboard.Input{ClientID: "c2", Text: "two"})

	h.restart()

	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: 0})
	c2.until(switchboard.EventMessage, func(p any) bool { return p.(*switchboard.MessageData).Content == "answer two" })
	c2.idle()
	checkHistory(t, c.stored(), c.got, c2.got)
	if got := messagesOf(c2.window()); got != "user:one | assistant:answer one | user:two | assistant:answer two" {
		t.Fatalf("context = %s", got)
	}
}

func TestInputSentAgainWhileItsTurnRunsIsAnsweredOnce(t *testing.T) {
	h := newHarness(t)
	c, gate := h.midStream("hi", []string{"slow ", "answer"})
	again := c.submit(switchboard.Input{ClientID: "c1", Text: "hi"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := again.Wait(ctx); err != nil {
		t.Fatalf("a repeated input waits for nothing, but: %v", err)
	}
	close(gate)
	c.reply()
	c.idle()
	if got := messagesOf(c.window()); got != "user:hi | assistant:slow answer" {
		t.Fatalf("context = %s", got)
	}
	if n := len(h.llm.Requests()); n != 1 {
		t.Fatalf("the model was called %d times, want 1", n)
	}
}

func TestFullDiskPausesTheTurnAndItGoesOnWhenSpaceReturns(t *testing.T) {
	h := newHarness(t)
	big := strings.Repeat("x", 16<<10) // each delta needs pages the full disk refuses
	c, gate := h.midStream("question", []string{"start ", big, big, big},
		openaitest.Reply{Text: []string{"Answered after the disk was freed."}})
	ctx := context.Background()

	if err := h.db.LimitSize(ctx, 1); err != nil { // the disk is full
		t.Fatal(err)
	}
	close(gate)
	notice := c.until(switchboard.EventError, func(p any) bool {
		return p.(*switchboard.ErrorData).Code == switchboard.ErrCodeStorage
	}).(*switchboard.ErrorData)
	if !strings.Contains(notice.Message, "disk") {
		t.Fatalf("notice = %q: say what is wrong", notice.Message)
	}
	if last := c.got[len(c.got)-1]; last.Seq != 0 {
		t.Fatalf("the storage notice has seq %d; it is not part of the history", last.Seq)
	}

	if err := h.db.LimitSize(ctx, 0); err != nil { // space returns
		t.Fatal(err)
	}
	got := c.reply()
	if got.Content != "Answered after the disk was freed." {
		t.Fatalf("reply after the disk was freed = %q", got.Content)
	}
	c.idle()
	stored := c.stored()
	checkHistory(t, stored, c.got)
	if n := hasError(stored, switchboard.ErrCodeInterrupted); n != 1 {
		t.Fatalf("%d interrupted markers, want 1", n)
	}
	if got := messagesOf(c.window()); got != "user:question | assistant:Answered after the disk was freed." {
		t.Fatalf("context = %s", got)
	}
	// And the session goes on as usual.
	h.llm.Push(openaitest.Reply{Text: []string{"Still here."}})
	c.say("next")
	if got := c.reply().Content; got != "Still here." {
		t.Fatalf("next reply = %q", got)
	}
	checkHistory(t, c.stored(), c.got)
}

func TestFullDiskRefusesNewInputClearly(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)
	ctx := context.Background()
	if err := h.db.LimitSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// An input too big for what is left cannot be accepted: the listener
	// is told, nothing is half stored, and it can be sent again.
	in := switchboard.Input{Kind: switchboard.InputText, ClientID: "c1", Text: strings.Repeat("y", 64<<10), Author: alice}
	if _, err := h.m.Submit(ctx, c.id, in); !errors.Is(err, sessions.ErrNotStored) || !strings.Contains(err.Error(), "full") {
		t.Fatalf("Submit on a full disk = %v, want ErrNotStored saying it is full", err)
	}
	if err := h.db.LimitSize(ctx, 0); err != nil {
		t.Fatal(err)
	}
	h.llm.Push(openaitest.Reply{Text: []string{"got it"}})
	c.send(in)
	if got := c.reply().Content; got != "got it" {
		t.Fatalf("reply = %q", got)
	}
}

func TestDrainLetsTheTurnUnderWayFinish(t *testing.T) {
	h := newHarness(t)
	c, gate := h.midStream("hi", []string{"finished ", "in time"})

	drained := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h.m.Drain(ctx)
		close(drained)
	}()
	// New input is refused while draining, without closing anything.
	// (Probed with an answer to no request, which is harmless before.)
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := h.m.Submit(context.Background(), c.id, switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: "c_none", Author: alice})
		if errors.Is(err, sessions.ErrDraining) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("input still taken 10 s into the drain (%v)", err)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := h.m.Submit(context.Background(), c.id, switchboard.Input{Kind: switchboard.InputText, Text: "late", Author: alice}); !errors.Is(err, sessions.ErrDraining) {
		t.Fatalf("a message while draining: %v, want ErrDraining", err)
	}
	close(gate)
	<-drained
	stored := c.stored()
	if n := hasError(stored, switchboard.ErrCodeCancelled); n != 0 {
		t.Fatal("a drained turn was stored as stopped")
	}
	if got := messagesOf(c.window()); got != "user:hi | assistant:finished in time" {
		t.Fatalf("context = %s", got)
	}
	if unfinished, err := h.db.Unfinished(context.Background()); err != nil || len(unfinished) != 0 {
		t.Fatalf("unfinished after the drain: %v, %v", unfinished, err)
	}
}

func TestDrainCutsWhatRunsPastTheGraceAndTheNextStartFinishesIt(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(
		openaitest.Reply{Hang: true},
		openaitest.Reply{Text: []string{"finished after the restart"}},
	)
	c := h.newSession(alice)
	c.submit(switchboard.Input{ClientID: "c1", Text: "hi"})
	c.until(switchboard.EventState, func(p any) bool { return p.(*switchboard.StateData).State == switchboard.StateThinking })

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	h.m.Drain(ctx)
	if n := hasError(c.stored(), switchboard.ErrCodeCancelled); n != 0 {
		t.Fatal("a turn cut by the shutdown was stored as stopped")
	}

	h.restart()
	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: 0})
	if got := c2.reply().Content; got != "finished after the restart" {
		t.Fatalf("reply = %q", got)
	}
	stored := c.stored()
	checkHistory(t, stored, c.got, c2.got)
	if n := hasError(stored, switchboard.ErrCodeInterrupted); n != 1 {
		t.Fatalf("%d interrupted markers, want 1", n)
	}
}

func TestWaitingApprovalAndItsAnswersSurviveARestart(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
		openaitest.Reply{Hang: true}, // after the tool: cut by the restart
		openaitest.Reply{Text: []string{"It is now."}},
	)
	c := h.newSession(alice)
	c.submit(switchboard.Input{ClientID: "c1", Text: "what time is it?"})
	req := c.until(switchboard.EventConfirmationRequest, nil).(*switchboard.ConfirmationRequestData)
	// Approved; the gateway goes down before the turn ends, with the tool
	// run or not yet.
	c.submit(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	c.until(switchboard.EventConfirmationResolved, nil)
	h.restart()

	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: 0})
	if got := c2.reply().Content; got != "It is now." {
		t.Fatalf("reply = %q", got)
	}
	c2.idle()
	stored := c.stored()
	checkHistory(t, stored, c.got, c2.got)
	requests := 0
	for _, ev := range stored {
		if ev.Type == switchboard.EventConfirmationRequest {
			requests++
		}
	}
	if requests != 1 {
		t.Fatalf("%d approval requests, want 1: an answered request is not asked again", requests)
	}
	w := c2.window()
	if len(w) != 4 || w[1].ToolCalls[0].ID != "call_1" || w[2].ToolCallID != "call_1" || w[2].IsError {
		t.Fatalf("context = %+v", w)
	}
}

func TestATurnCutEveryTimeItRunsIsGivenUp(t *testing.T) {
	h := newHarness(t)
	h.llm.Respond(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Hang: true} })
	c := h.newSession(alice)
	c.submit(switchboard.Input{ClientID: "c1", Text: "poison"})
	thinking := func(p any) bool { return p.(*switchboard.StateData).State == switchboard.StateThinking }
	c.until(switchboard.EventState, thinking)
	// Cut by a restart every time it runs: 1 + 3 runs, then given up.
	// Each attach replays from what the last one saw: the restart's
	// Recover may run the turn (and say it is thinking) before it.
	for range 3 {
		seen := int64(0)
		for _, ev := range c.got {
			seen = max(seen, ev.Seq)
		}
		h.restart()
		c = h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: seen})
		c.until(switchboard.EventState, thinking)
	}
	h.restart()
	c = h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: 0})
	e := c.until(switchboard.EventError, func(p any) bool {
		return p.(*switchboard.ErrorData).Code == switchboard.ErrCodeInternal
	}).(*switchboard.ErrorData)
	if !strings.Contains(e.Message, "interrupted 4 times") {
		t.Fatalf("error = %q", e.Message)
	}
	c.idle()
	stored := c.stored()
	checkHistory(t, stored)
	if n := hasError(stored, switchboard.ErrCodeInterrupted); n != 3 {
		t.Fatalf("%d interrupted markers, want 3", n)
	}
	if unfinished, err := h.db.Unfinished(context.Background()); err != nil || len(unfinished) != 0 {
		t.Fatalf("the given-up turn is still open: %v, %v", unfinished, err)
	}
	// The session itself still works.
	h.llm.Respond(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Text: []string{"fine"}} })
	c.say("hello")
	if got := c.reply().Content; got != "fine" {
		t.Fatalf("reply = %q", got)
	}
}
