package discord

import (
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// The line posted when an approval's card is gone tells an expiry or a
// cancellation by the event's reason (or, stored before reasons, by by
// alone without a channel), never by a person's name.
func TestResolvedTextByReason(t *testing.T) {
	for _, tt := range []struct {
		res  switchboard.ConfirmationResolvedData
		want string
	}{
		{switchboard.ConfirmationResolvedData{By: "expired", Reason: switchboard.ReasonExpired}, "-# The tool call was expired."},
		{switchboard.ConfirmationResolvedData{By: "Ann", Reason: switchboard.ReasonCancelled}, "-# The tool call was cancelled by Ann."},
		{switchboard.ConfirmationResolvedData{By: "expired"}, "-# The tool call was expired."},
		{switchboard.ConfirmationResolvedData{By: "cancelled"}, "-# The tool call was cancelled."},
		{switchboard.ConfirmationResolvedData{By: "Expired", Channel: "discord"}, "-# Denied by Expired · Discord."},
		{switchboard.ConfirmationResolvedData{By: "cancelled", Channel: "web"}, "-# Denied by cancelled · Web."},
		{switchboard.ConfirmationResolvedData{Approved: true, By: "expired", Channel: "slack"}, "-# Approved by expired · Slack."},
	} {
		if got := resolvedText(tt.res, time.Time{}); got != tt.want {
			t.Errorf("resolvedText(%+v) = %q, want %q", tt.res, got, tt.want)
		}
	}
	// With its time, in each reader's own time zone.
	at := time.Date(2025, 1, 2, 14, 5, 0, 0, time.UTC)
	res := switchboard.ConfirmationResolvedData{Approved: true, By: "Carol", Channel: "slack"}
	if got, want := resolvedText(res, at), "-# Approved by Carol · Slack · <t:1735826700:f>."; got != want {
		t.Errorf("resolvedText = %q, want %q", got, want)
	}
}
