package slack

// Tool calls in a thread. A call is shown as one short line, "used
// current_time · 0.2 s" (or "current_time failed · 0.2 s"), in a context
// block at the end of the reply that follows it, never as a message of
// its own; a notice that follows instead carries it the same way, and a
// turn that ends with neither shows its lines in one small message. What
// a tool returned is never shown: a result is written for the model, not
// for people (present's "do not assume their choice", a denial's
// wording). Neither is present's call: its card is its output
// (tools.ShownAsCard). A call that needed approval and did not get it is
// told by its card alone.
//
// The calls waiting for a reply (places.ToolNotes) are kept in memory: a
// place is not recorded as rendered past a tool call whose line is not
// shown yet (follow.render), so a restart replays the call and shows its
// line once.

import (
	"fmt"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard/places"
)

// toolLine is a call as one line of mrkdwn: "used current_time · 0.2 s".
func toolLine(name string, failed bool, took time.Duration) string {
	name = mrkdwnEscape(places.Clip(places.ToolName(name), 64))
	if failed {
		return name + " failed · " + mrkdwnEscape(places.Duration(took))
	}
	return "used " + name + " · " + mrkdwnEscape(places.Duration(took))
}

// toolsText is lines as one mrkdwn text, the lines past
// places.LinesShown counted.
func toolsText(lines []string) string {
	return strings.Join(places.Counted(lines, func(n int) string { return fmt.Sprintf("and %d more tool calls", n) }), "\n")
}

// toolsContext is the context block that shows lines.
func toolsContext(lines []string) slackapi.Block {
	return contextLine(toolsText(lines))
}

// replyBlocks is a piece of a reply (mrkdwn) in sections, ending in the
// context block of its tool lines.
func replyBlocks(text string, lines []string) []slackapi.Block {
	return append(textSections(text, maxBlocks-1), toolsContext(lines))
}
