package places_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

// A decided approval tells an expiry or a cancellation by the event's
// reason (or, stored before reasons, by By alone without a channel), never
// by a person's name; with its time in the platform's markup.
func TestDecisionByReason(t *testing.T) {
	for _, tt := range []struct {
		res  switchboard.ConfirmationResolvedData
		want string
	}{
		{switchboard.ConfirmationResolvedData{By: "expired", Reason: switchboard.ReasonExpired}, "The tool call was expired."},
		{switchboard.ConfirmationResolvedData{By: "Ann", Reason: switchboard.ReasonCancelled}, "The tool call was cancelled by Ann."},
		{switchboard.ConfirmationResolvedData{By: "expired"}, "The tool call was expired."},
		{switchboard.ConfirmationResolvedData{By: "cancelled"}, "The tool call was cancelled."},
		{switchboard.ConfirmationResolvedData{By: "Expired", Channel: "slack"}, "Denied by Expired · Slack."},
		{switchboard.ConfirmationResolvedData{By: "cancelled", Channel: "web"}, "Denied by cancelled · Web."},
		{switchboard.ConfirmationResolvedData{Approved: true, By: "expired", Channel: "discord"}, "Approved by expired · Discord."},
		{switchboard.ConfirmationResolvedData{Approved: true, Scope: switchboard.ScopeSession, By: "Dan", Channel: "discord"}, "Always allowed by Dan · Discord."},
		{switchboard.ConfirmationResolvedData{By: "*Eve*", Channel: "web"}, `Denied by \*Eve\* · Web.`},
	} {
		if got := places.DecisionAt(tt.res, time.Time{}, escape, nil); got != tt.want {
			t.Errorf("DecisionAt(%+v) = %q, want %q", tt.res, got, tt.want)
		}
	}
	at := time.Date(2025, 1, 2, 14, 5, 0, 0, time.UTC)
	res := switchboard.ConfirmationResolvedData{Approved: true, By: "Carol", Channel: "slack"}
	date := func(at time.Time) string { return at.Format(time.DateOnly) }
	if got, want := places.DecisionAt(res, at, escape, date), "Approved by Carol · Slack · 2025-01-02."; got != want {
		t.Errorf("DecisionAt = %q, want %q", got, want)
	}
}

func escape(s string) string { return strings.ReplaceAll(s, "*", `\*`) }
