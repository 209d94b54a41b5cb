package stdin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// An expiry or a cancellation is told by the event's reason (or, stored
// before reasons, by by alone without a channel), never by a name: people
// called "Expired" or "cancelled" answer as people.
func TestViewResolvedByReason(t *testing.T) {
	v, out := newTestView(false, false)
	v.start(switchboard.ReadyData{LastSeq: 1}, true)
	for i, d := range []switchboard.ConfirmationResolvedData{
		{ConfirmationID: "c1", By: "Expired", Channel: "slack"},
		{ConfirmationID: "c2", Approved: true, By: "cancelled", Channel: "discord"},
		{ConfirmationID: "c3", By: "expired", Reason: switchboard.ReasonExpired},
		{ConfirmationID: "c4", By: "Carol", Reason: switchboard.ReasonCancelled},
		{ConfirmationID: "c5", By: "expired"},
		{ConfirmationID: "c6", By: "cancelled"},
	} {
		v.render(event(t, int64(2+i), switchboard.EventConfirmationResolved, d))
	}
	want := "  denied by Expired · Slack\n" +
		"  approved by cancelled · Discord\n" +
		"  denied: nobody answered in time\n" +
		"  denied: the turn was stopped by Carol\n" +
		"  denied: nobody answered in time\n" +
		"  denied: the turn was stopped\n"
	if got := out.String(); got != want {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
}

// A terminal user called "expired" does not take a real expiry of the
// question it asks for their own answer: the question is taken back.
func TestViewExpiryIsNotTheAnswerOfSomeoneCalledExpired(t *testing.T) {
	v, out := newTestView(true, true)
	v.self = switchboard.Author{Channel: "stdin", ID: "expired", Name: "expired"}
	v.start(switchboard.ReadyData{Role: "approver", Pending: []switchboard.ConfirmationRequestData{{
		ConfirmationID: "c1", ToolName: "current_time", Args: json.RawMessage(`{}`),
	}}}, false)
	v.prompt()
	v.render(event(t, 1, switchboard.EventConfirmationResolved, switchboard.ConfirmationResolvedData{ConfirmationID: "c1", By: "expired", Reason: switchboard.ReasonExpired}))
	if got := out.String(); !strings.Contains(got, "current_time denied: nobody answered in time; no answer needed here") {
		t.Fatalf("got %q", got)
	}
	if s := v.takeStale(); s == "" {
		t.Fatal("the expired question was not taken back")
	}
}
