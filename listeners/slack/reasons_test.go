package slack

import (
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// The line posted when an approval's card is gone: what was decided
// (places.DecisionAt, tested there by reason) in this platform's markup,
// its time in each reader's own time zone.
func TestResolvedLine(t *testing.T) {
	if got, want := resolvedLine(switchboard.ConfirmationResolvedData{By: "expired", Reason: switchboard.ReasonExpired}, time.Time{}), "The tool call was expired."; got != want {
		t.Errorf("resolvedLine = %q, want %q", got, want)
	}
	at := time.Date(2025, 1, 2, 14, 5, 0, 0, time.UTC)
	res := switchboard.ConfirmationResolvedData{Approved: true, By: "Carol", Channel: "slack"}
	if got, want := resolvedLine(res, at), "Approved by Carol · Slack · <!date^1735826700^{date_short_pretty} {time}|2025-01-02 14:05 UTC>."; got != want {
		t.Errorf("resolvedLine = %q, want %q", got, want)
	}
}
