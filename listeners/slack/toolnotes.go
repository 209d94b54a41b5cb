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
// The lines waiting for a reply are kept in memory: a place is not
// recorded as rendered past a tool call whose line is not shown yet
// (follow.render), so a restart replays the call and shows its line once.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/tools"
)

// toolNote is a tool call to show as a line.
type toolNote struct {
	ID    string
	Name  string
	Since time.Time // when it was called, or approved
	// Confirm is its approval's confirmation id while that is open.
	Confirm string
	// Line is what is shown once the tool answered.
	Line string
	// Reply is the id of the reply that shows it.
	Reply string
}

// toolLinesShown is how many tool lines a message shows; more are
// counted.
const toolLinesShown = 8

// noteTool keeps track of the tool calls to show, from each event as it is
// shown or replayed.
func (f *follow) noteTool(p any, at time.Time) {
	find := func(ok func(n *toolNote) bool) *toolNote {
		for i := range f.tools {
			if ok(&f.tools[i]) {
				return &f.tools[i]
			}
		}
		return nil
	}
	switch d := p.(type) {
	case *switchboard.ToolCallData:
		if tools.ShownAsCard(d.Name) || find(func(n *toolNote) bool { return n.ID == d.ID }) != nil {
			return
		}
		f.tools = append(f.tools, toolNote{ID: d.ID, Name: d.Name, Since: at})
	case *switchboard.ConfirmationRequestData:
		if n := find(func(n *toolNote) bool { return n.ID == d.ToolCallID && n.Line == "" }); n != nil {
			n.Confirm = d.ConfirmationID
		}
	case *switchboard.ConfirmationResolvedData:
		n := find(func(n *toolNote) bool { return n.Confirm != "" && n.Confirm == d.ConfirmationID })
		switch {
		case n == nil:
		case d.Approved:
			n.Confirm, n.Since = "", at // it runs from now
		default: // denied, expired, cancelled: its card says so
			f.tools = slices.DeleteFunc(f.tools, func(m toolNote) bool { return m.ID == n.ID })
		}
	case *switchboard.ToolResponseData:
		if n := find(func(n *toolNote) bool { return n.ID == d.ToolCallID && n.Line == "" }); n != nil {
			n.Line = toolLine(n.Name, d.IsError, at.Sub(n.Since))
		}
	}
}

// toolsFor gives a reply the lines of the calls that answered and are
// not shown yet, and returns every line it shows.
func (f *follow) toolsFor(reply string) []string {
	var lines []string
	for i := range f.tools {
		n := &f.tools[i]
		if n.Line != "" && n.Reply == "" {
			n.Reply = reply
		}
		if n.Reply == reply {
			lines = append(lines, n.Line)
		}
	}
	return lines
}

// takeTools returns the lines of the calls that answered and are not
// shown yet, and forgets them: the message about to be posted shows them.
func (f *follow) takeTools() []string {
	var lines []string
	f.tools = slices.DeleteFunc(f.tools, func(n toolNote) bool {
		if n.Line != "" && n.Reply == "" {
			lines = append(lines, n.Line)
			return true
		}
		return false
	})
	return lines
}

// forgetTools forgets the calls no reply shows: at a turn's end, those
// that never answered.
func (f *follow) forgetTools() {
	f.tools = slices.DeleteFunc(f.tools, func(n toolNote) bool { return n.Reply == "" })
}

// shownTools forgets the calls a reply showed.
func (f *follow) shownTools(reply string) {
	f.tools = slices.DeleteFunc(f.tools, func(n toolNote) bool { return n.Reply == reply })
}

// toolLine is a call as one line of mrkdwn: "used current_time · 0.2 s".
func toolLine(name string, failed bool, took time.Duration) string {
	name = mrkdwnEscape(truncateText(toolName(name), 64))
	if failed {
		return name + " failed · " + mrkdwnEscape(duration(took))
	}
	return "used " + name + " · " + mrkdwnEscape(duration(took))
}

// duration is how long a tool took, as people read it.
func duration(d time.Duration) string {
	switch {
	case d < 100*time.Millisecond:
		return "<0.1 s"
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Round(time.Second).Seconds()))
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%d min %d s", int(d/time.Minute), int(d%time.Minute/time.Second))
}

// toolsText is lines as one mrkdwn text, the lines past toolLinesShown
// counted.
func toolsText(lines []string) string {
	if len(lines) > toolLinesShown {
		more := len(lines) - toolLinesShown + 1
		lines = append(lines[:toolLinesShown-1:toolLinesShown-1], fmt.Sprintf("and %d more tool calls", more))
	}
	return strings.Join(lines, "\n")
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
