package discord

import (
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// The line posted when an approval's card is gone: what was decided
// (places.DecisionAt, tested there by reason) in this platform's markup,
// its time in each reader's own time zone.
func TestResolvedText(t *testing.T) {
	if got, want := resolvedText(switchboard.ConfirmationResolvedData{By: "expired", Reason: switchboard.ReasonExpired}, time.Time{}), "-# The tool call was expired."; got != want {
		t.Errorf("resolvedText = %q, want %q", got, want)
	}
	at := time.Date(2025, 1, 2, 14, 5, 0, 0, time.UTC)
	res := switchboard.ConfirmationResolvedData{Approved: true, By: "Carol", Channel: "slack"}
	if got, want := resolvedText(res, at), "-# Approved by Carol · Slack · <t:1735826700:f>."; got != want {
		t.Errorf("resolvedText = %q, want %q", got, want)
	}
}
