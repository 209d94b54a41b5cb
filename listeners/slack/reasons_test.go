package slack

import (
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// The line posted when an approval's card is gone tells an expiry or a
// cancellation by the event's reason (or, stored before reasons, by by
// alone without a channel), never by a person's name.
func TestResolvedLineByReason(t *testing.T) {
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
	} {
		if got := resolvedLine(tt.res, time.Time{}); got != tt.want {
			t.Errorf("resolvedLine(%+v) = %q, want %q", tt.res, got, tt.want)
		}
	}
	// With its time, in each reader's own time zone.
	at := time.Date(2025, 1, 2, 14, 5, 0, 0, time.UTC)
	res := switchboard.ConfirmationResolvedData{Approved: true, By: "Carol", Channel: "slack"}
	if got, want := resolvedLine(res, at), "Approved by Carol · Slack · <!date^1735826700^{date_short_pretty} {time}|2025-01-02 14:05 UTC>."; got != want {
		t.Errorf("resolvedLine = %q, want %q", got, want)
	}
}
