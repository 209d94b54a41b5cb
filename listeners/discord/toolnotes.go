package discord

// Tool calls in a thread. A call is shown as one short subtext line,
// "-# used current_time · 0.2 s" (or "-# current_time failed · 0.2 s"),
// at the end of the reply that follows it, never as a message of its own;
// a notice that follows instead carries it the same way, and a turn that
// ends with neither shows its lines in one small message. What a tool
// returned is never shown: a result is written for the model, not for
// people (present's "do not assume their choice", a denial's wording).
// Neither is present's call: its card is its output (tools.ShownAsCard).
// A call that needed approval and did not get it is told by its card
// alone.
//
// The calls waiting for their line to be shown are kept with the place's
// state (placeState.Tools), by call id, so a restart shows each line once
// whether it replays the call or not.

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard/places"
)

// toolLine is a call as one subtext line: "-# used current_time · 0.2 s".
func toolLine(name string, failed bool, took time.Duration) string {
	name = mdEscape(places.Clip(places.ToolName(name), 64))
	if failed {
		return "-# " + name + " failed · " + mdEscape(places.Duration(took))
	}
	return "-# used " + name + " · " + mdEscape(places.Duration(took))
}

// toolsText is lines as one text, the lines past places.LinesShown
// counted.
func toolsText(lines []string) string {
	return strings.Join(places.Counted(lines, func(n int) string { return fmt.Sprintf("-# and %d more tool calls", n) }), "\n")
}

// withTools is a reply's pieces with its tool lines at the end of the
// last, which is split again where the lines would not fit.
func withTools(pieces []string, lines []string) []string {
	if len(lines) == 0 || len(pieces) == 0 {
		return pieces
	}
	foot := toolsText(lines)
	room := contentLimit - utf8.RuneCountInString(foot) - 1
	last := pieces[len(pieces)-1]
	out := pieces[: len(pieces)-1 : len(pieces)-1]
	if utf8.RuneCountInString(last) > room {
		out = append(out, splitDiscord(last, room)...)
	} else {
		out = append(out, last)
	}
	out[len(out)-1] += "\n" + foot
	return out
}
