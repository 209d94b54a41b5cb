package places

import (
	"time"

	"github.com/switchboard-gw/switchboard"
)

// Decision is how a closed approval request reads in a place, without the
// time and the platform's markup: "Approved by Carol · Slack", "Denied by
// …", "Always allowed by …", "The tool call was expired", "The tool call
// was cancelled by Ann · Web". esc escapes a name for the platform. It
// decides by the request's reason, never by its By: a person may be called
// "Expired".
func Decision(d switchboard.ConfirmationResolvedData, esc func(string) string) string {
	by := esc(d.By)
	if d.Channel != "" {
		by += " · " + esc(switchboard.ChannelName(d.Channel))
	}
	switch why := d.Why(); {
	case why == switchboard.ReasonCancelled && d.Reason != "" && d.By != "": // By is who stopped the turn
		return "The tool call was cancelled by " + by
	case why != "":
		return "The tool call was " + why
	case d.Approved && d.Scope == switchboard.ScopeSession:
		return "Always allowed by " + by
	case d.Approved:
		return "Approved by " + by
	}
	return "Denied by " + by
}

// DecisionAt is Decision with when it was made, as a line where there is
// no card to edit: "Approved by Carol · Slack · <date>." date writes the
// time in the platform's markup (each reader's time zone where it can); a
// zero at is left out.
func DecisionAt(d switchboard.ConfirmationResolvedData, at time.Time, esc func(string) string, date func(time.Time) string) string {
	line := Decision(d, esc)
	if !at.IsZero() {
		line += " · " + date(at)
	}
	return line + "."
}
