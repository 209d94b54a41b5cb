package sessions_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
)

// A person whose name is a reason's word ("Expired", "cancelled") answers
// as a person: the event has no reason, the model is told of a denial,
// and /approvals names them.
func TestApproverNamedLikeAReasonIsAPerson(t *testing.T) {
	for _, tc := range []struct {
		name     string
		approved bool
	}{
		{"Expired", false},
		{"expired", false},
		{"cancelled", false},
		{"Expired", true},
		{"cancelled", true},
	} {
		verdict := map[bool]string{false: "denied", true: "approved"}[tc.approved]
		t.Run(tc.name+" "+verdict, func(t *testing.T) {
			h := newHarness(t)
			askForTime(h)
			who := switchboard.Author{Channel: "web", ID: "u-" + tc.name, Name: tc.name}
			c := h.newSession(who)
			c.say("what time is it?")
			req := c.confirmation()
			c.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: tc.approved, Author: who})
			res := c.until(switchboard.EventConfirmationResolved, nil).(*switchboard.ConfirmationResolvedData)
			if res.By != tc.name || res.Channel != "web" || res.Reason != "" || res.Why() != "" || res.Approved != tc.approved {
				t.Fatalf("resolved = %+v, want %s by %s from web, no reason", res, verdict, tc.name)
			}
			got := c.reply().Content
			if !tc.approved && (!strings.Contains(got, "denied") || strings.Contains(got, "in time") || strings.Contains(got, "stopped")) {
				t.Fatalf("the model was not told of a denial: %q", got)
			}
			c.idle()
			c.say("/approvals")
			if got := c.info(); !strings.Contains(got, "current_time "+verdict+" by "+tc.name+" · Web") {
				t.Errorf("/approvals = %q, want %s by %s", got, verdict, tc.name)
			}
		})
	}
}

// A real expiry and a /stop carry their reason; by stays as clients know
// it ("expired"; who stopped the turn).
func TestExpiryAndStopCarryAReason(t *testing.T) {
	t.Run("expiry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { // the request expires on synctest's clock
			h := newBubbleHarness(t, func(c *sessions.Config) { c.ApprovalTimeout = 5 * time.Minute })
			askForTime(h)
			c := h.newSession(alice)
			c.say("what time is it?")
			c.confirmation()
			time.Sleep(h.cfg.ApprovalTimeout)
			res := c.until(switchboard.EventConfirmationResolved, nil).(*switchboard.ConfirmationResolvedData)
			if res.Approved || res.By != "expired" || res.Reason != switchboard.ReasonExpired || res.Channel != "" || res.Why() != switchboard.ReasonExpired {
				t.Fatalf("resolved = %+v", res)
			}
			c.reply()
			c.idle()
			c.say("/approvals")
			if got := c.info(); !strings.Contains(got, "current_time denied (nobody answered in time)") {
				t.Errorf("/approvals = %q", got)
			}
		})
	})
	t.Run("stop", func(t *testing.T) {
		h := newHarness(t)
		askForTime(h)
		c := h.newSession(alice)
		c.say("what time is it?")
		c.confirmation()
		c.say("/stop")
		res := c.until(switchboard.EventConfirmationResolved, nil).(*switchboard.ConfirmationResolvedData)
		if res.Approved || res.By != "Alice" || res.Reason != switchboard.ReasonCancelled || res.Channel != "" || res.Why() != switchboard.ReasonCancelled {
			t.Fatalf("resolved = %+v", res)
		}
		c.idle()
		c.say("/approvals")
		if got := c.info(); !strings.Contains(got, "current_time denied (the turn was stopped by Alice)") {
			t.Errorf("/approvals = %q", got)
		}
	})
}

// Events stored before reasons existed said an expiry or a cancellation
// in by alone, without a channel: /approvals still reads them so.
func TestApprovalsReadsEventsWithoutAReason(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)
	c.say("/help") // stores the session
	c.until(switchboard.EventMessage, nil)
	ctx := context.Background()
	if err := h.db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := h.db.EventsAfter(ctx, c.id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seq := int64(1)
	if len(evs) > 0 {
		seq += evs[len(evs)-1].Seq
	}
	var legacy []switchboard.Event
	for i, data := range []string{
		`{"confirmation_id":"old1","approved":false,"by":"expired"}`,
		`{"confirmation_id":"old2","approved":false,"by":"cancelled"}`,
		`{"confirmation_id":"old3","approved":false,"by":"Alice"}`,
	} {
		legacy = append(legacy, switchboard.Event{Seq: seq + int64(i), Time: time.Now(), Session: c.id, Agent: "tester",
			Type: switchboard.EventConfirmationResolved, Data: json.RawMessage(data)})
	}
	if err := h.db.AppendEvents(ctx, nil, legacy...); err != nil {
		t.Fatal(err)
	}
	if err := h.db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// As after an upgrade: the session is loaded again with those events.
	h.restart()
	c = h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: -1})
	c.say("/approvals")
	got := c.info()
	for _, want := range []string{"a tool denied (nobody answered in time)", "a tool denied (the turn was stopped)\n", "a tool denied by Alice"} {
		if !strings.Contains(got+"\n", want) {
			t.Errorf("/approvals = %q, want %q", got, want)
		}
	}
}
