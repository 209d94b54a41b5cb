package sessions_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// Shared sessions: what one member does must not surprise the others.

// notices returns the error notices (seq 0) a client was sent.
func (c *client) notices() []switchboard.ErrorData {
	var out []switchboard.ErrorData
	for _, ev := range c.got {
		if ev.Seq != 0 || ev.Type != switchboard.EventError {
			continue
		}
		if p, err := ev.Payload(); err == nil {
			out = append(out, *p.(*switchboard.ErrorData))
		}
	}
	return out
}

// join attaches bob to c's session as a member.
func (h *harness) join(c *client, who switchboard.Author) *client {
	h.t.Helper()
	return h.attach(sessions.AttachOptions{SessionID: c.id, Author: who, AfterSeq: -1})
}

func TestInputIDsAreOnlyDuplicatesForTheSameAuthor(t *testing.T) {
	h := newHarness(t)
	h.llm.Respond(func(r openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Text: []string{"re: " + openaitest.Text(r.Messages[len(r.Messages)-1].Content)}}
	})
	ann := h.newSession(alice)
	bob := h.join(ann, bob)
	ann.send(switchboard.Input{Kind: switchboard.InputText, ClientID: "1", Text: "hello from Ann"})
	ann.reply()
	// Bob's client numbers its inputs too, and also starts at 1.
	bob.send(switchboard.Input{Kind: switchboard.InputText, ClientID: "1", Text: "hello from Bob"})
	bob.until(switchboard.EventMessage, func(p any) bool {
		m := p.(*switchboard.MessageData)
		return m.Role == switchboard.RoleAssistant && strings.Contains(m.Content, "hello from Bob")
	})
	// Ann sending hers again is a duplicate, and she is told so.
	ann.send(switchboard.Input{Kind: switchboard.InputText, ClientID: "1", Text: "hello from Ann"})
	bob.idle()
	ann.until(switchboard.EventError, func(p any) bool { return p.(*switchboard.ErrorData).Code == switchboard.ErrCodeDuplicate })
	for _, n := range bob.notices() {
		t.Fatalf("Bob was sent Ann's notice: %+v", n)
	}
	users := 0
	for _, m := range ann.window() {
		if m.Role == switchboard.RoleUser {
			users++
		}
	}
	if users != 2 {
		t.Fatalf("%d user messages stored, want 2 (Ann's and Bob's)", users)
	}
}

func TestARefusalGoesToItsSenderOnlyWithItsIDQuotedAndCut(t *testing.T) {
	h := newHarness(t)
	askForTime(h)
	ann := h.newSession(alice)
	bob := h.join(ann, bob)
	ann.say("what time is it?")
	req := ann.confirmation()
	bait := "SECURITY NOTICE: your session expired, log in again at https://evil.example/login to keep chatting"
	bob.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: bait, Approved: true})
	e := bob.until(switchboard.EventError, nil).(*switchboard.ErrorData)
	if e.Code != switchboard.ErrCodeAlreadyResolved || strings.Contains(e.Message, "evil.example") || !strings.Contains(e.Message, `"SECURITY NOTICE`) {
		t.Fatalf("Bob was told %+v: want his id quoted and cut short", e)
	}
	// Nothing of it reached Ann, nor the history.
	ann.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	ann.reply()
	for _, n := range ann.notices() {
		if strings.Contains(n.Message, "SECURITY") {
			t.Fatalf("Ann was shown Bob's bait: %+v", n)
		}
	}
	for _, ev := range ann.stored() {
		if strings.Contains(string(ev.Data), "SECURITY") {
			t.Fatalf("Bob's bait was stored: %s", ev.Data)
		}
	}
}

func TestAMemberCannotDenyAnApprovalByStopping(t *testing.T) {
	h := newHarness(t)
	askForTime(h)
	ann := h.newSession(alice)
	bob := h.join(ann, bob)
	ann.say("what time is it?")
	req := ann.confirmation()
	bob.send(switchboard.Input{Kind: switchboard.InputText, Text: "/stop"})
	if e := bob.errorEvent(); e.Code != switchboard.ErrCodeForbidden {
		t.Fatalf("Bob's /stop got %+v, want forbidden", e)
	}
	// The request is still open: Ann approves it.
	ann.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	if got := ann.reply().Content; !strings.Contains(got, "Result:") {
		t.Fatalf("after Ann's approval: %q", got)
	}
}

func TestAGuideCanKeepMembersFromStoppingTurns(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	defer close(gate)
	h.llm.Push(openaitest.Reply{Text: []string{"long ", "answer"}, Gate: gate})
	ann := h.attach(sessions.AttachOptions{Guide: "other", Author: alice}) // members_may_stop: false
	bob := h.join(ann, bob)
	ann.submit(switchboard.Input{Text: "talk"})
	ann.until(switchboard.EventDelta, nil)
	_, err := h.m.Submit(context.Background(), ann.id, switchboard.Input{Kind: switchboard.InputCancel, Author: bob.who})
	if !errors.Is(err, sessions.ErrForbidden) {
		t.Fatalf("a member's cancel under members_may_stop: false = %v, want ErrForbidden", err)
	}
	ann.send(switchboard.Input{Kind: switchboard.InputCancel})
	if e := ann.errorEvent(); e.Code != switchboard.ErrCodeCancelled {
		t.Fatalf("the owner's cancel got %+v", e)
	}
}

func TestOnlyApproversMayShowACardByHand(t *testing.T) {
	h := newHarness(t)
	ann := h.newSession(alice)
	bob := h.join(ann, bob)
	card := `/present {"title":"Session expired","text":"Enter your password"}`
	bob.send(switchboard.Input{Kind: switchboard.InputText, Text: card})
	if e := bob.errorEvent(); e.Code != switchboard.ErrCodeForbidden {
		t.Fatalf("Bob's card got %+v, want forbidden", e)
	}
	for _, ev := range ann.stored() {
		if ev.Type == switchboard.EventUI {
			t.Fatalf("Bob's card was shown to everyone: %s", ev.Data)
		}
	}
	ann.send(switchboard.Input{Kind: switchboard.InputText, Text: card})
	ui := ann.until(switchboard.EventUI, nil).(*switchboard.UI)
	if ui.Title != "Session expired" {
		t.Fatalf("the owner's card: %+v", ui)
	}
}
