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
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/tools"
)

// toolNote is a tool call to show as a line.
type toolNote struct {
	ID    string    `json:"id"`
	Name  string    `json:"name"`
	Since time.Time `json:"since"` // when it was called, or approved
	// Confirm is its approval's confirmation id while that is open.
	Confirm string `json:"confirm,omitempty"`
	// Line is what is shown once the tool answered.
	Line string `json:"line,omitempty"`
	// Reply is the id of the reply that shows it.
	Reply string `json:"reply,omitempty"`
}

// toolLinesShown is how many tool lines a message shows; more are
// counted.
const toolLinesShown = 8

// noteTool keeps track of the tool calls to show, from each event. It
// reports whether the place's state changed (to be saved).
func (f *follow) noteTool(p any, at time.Time) bool {
	find := func(ok func(n *toolNote) bool) *toolNote {
		for i := range f.state.Tools {
			if ok(&f.state.Tools[i]) {
				return &f.state.Tools[i]
			}
		}
		return nil
	}
	switch d := p.(type) {
	case *switchboard.ToolCallData:
		if tools.ShownAsCard(d.Name) || find(func(n *toolNote) bool { return n.ID == d.ID }) != nil {
			return false // replayed: noted already
		}
		f.state.Tools = append(f.state.Tools, toolNote{ID: d.ID, Name: d.Name, Since: at})
		return true
	case *switchboard.ConfirmationRequestData:
		if n := find(func(n *toolNote) bool { return n.ID == d.ToolCallID && n.Line == "" }); n != nil && n.Confirm != d.ConfirmationID {
			n.Confirm = d.ConfirmationID
			return true
		}
	case *switchboard.ConfirmationResolvedData:
		n := find(func(n *toolNote) bool { return n.Confirm != "" && n.Confirm == d.ConfirmationID })
		switch {
		case n == nil:
			return false
		case d.Approved:
			n.Confirm, n.Since = "", at // it runs from now
		default: // denied, expired, cancelled: its card says so
			id := n.ID
			f.state.Tools = slices.DeleteFunc(f.state.Tools, func(m toolNote) bool { return m.ID == id })
		}
		return true
	case *switchboard.ToolResponseData:
		if n := find(func(n *toolNote) bool { return n.ID == d.ToolCallID && n.Line == "" }); n != nil {
			n.Line = toolLine(n.Name, d.IsError, at.Sub(n.Since))
			return true
		}
	}
	return false
}

// toolsFor gives a reply the lines of the calls that answered and are
// not shown yet, and returns every line it shows; changed says whether
// the place's state changed.
func (f *follow) toolsFor(reply string) (lines []string, changed bool) {
	for i := range f.state.Tools {
		n := &f.state.Tools[i]
		if n.Line != "" && n.Reply == "" {
			n.Reply, changed = reply, true
		}
		if n.Reply == reply {
			lines = append(lines, n.Line)
		}
	}
	return lines, changed
}

// takeTools returns the lines of the calls that answered and are not
// shown yet, and forgets them: the message about to be sent shows them.
func (f *follow) takeTools() []string {
	var lines []string
	f.state.Tools = slices.DeleteFunc(f.state.Tools, func(n toolNote) bool {
		if n.Line != "" && n.Reply == "" {
			lines = append(lines, n.Line)
			return true
		}
		return false
	})
	return lines
}

// forgetTools forgets the calls no reply shows (at a turn's end, those
// that never answered), reporting whether there were any.
func (f *follow) forgetTools() bool {
	n := len(f.state.Tools)
	f.state.Tools = slices.DeleteFunc(f.state.Tools, func(n toolNote) bool { return n.Reply == "" })
	return len(f.state.Tools) != n
}

// shownTools forgets the calls a reply showed, reporting whether there
// were any.
func (f *follow) shownTools(reply string) bool {
	n := len(f.state.Tools)
	f.state.Tools = slices.DeleteFunc(f.state.Tools, func(n toolNote) bool { return n.Reply == reply })
	return len(f.state.Tools) != n
}

// toolLine is a call as one subtext line: "-# used current_time · 0.2 s".
func toolLine(name string, failed bool, took time.Duration) string {
	name = mdEscape(clipRunes(toolName(name), 64))
	if failed {
		return "-# " + name + " failed · " + mdEscape(duration(took))
	}
	return "-# used " + name + " · " + mdEscape(duration(took))
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

// toolsText is lines as one text, the lines past toolLinesShown counted.
func toolsText(lines []string) string {
	if len(lines) > toolLinesShown {
		more := len(lines) - toolLinesShown + 1
		lines = append(lines[:toolLinesShown-1:toolLinesShown-1], fmt.Sprintf("-# and %d more tool calls", more))
	}
	return strings.Join(lines, "\n")
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
