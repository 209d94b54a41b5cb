package places

import "github.com/switchboard-gw/switchboard"

// MaxHandoffReason is how much of a handoff's reason a place shows.
const MaxHandoffReason = 300 // characters

// Handoff is how a conversation passing to another guide reads in a
// place, without the platform's markup: "Passed to billing: an invoice
// question", or "Passed to billing." without a reason. esc escapes the
// guide's name and the model's reason for the platform.
func Handoff(d switchboard.HandoffData, esc func(string) string) string {
	reason := OneLine(d.Reason)
	if reason == "" {
		return "Passed to " + esc(d.To) + "."
	}
	return "Passed to " + esc(d.To) + ": " + esc(Clip(reason, MaxHandoffReason))
}
