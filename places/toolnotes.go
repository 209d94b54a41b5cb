package places

import (
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/tools"
)

// ToolNote is a tool call a place shows as one line ("used current_time
// · 0.2 s") at the end of the reply that follows it, never as a message
// of its own. What the tool returned is never shown: a result is written
// for the model, not for people. Neither is a card's call
// (tools.ShownAsCard), nor one whose approval was not given (its card
// says so).
type ToolNote struct {
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

// ToolNotes are a place's tool calls waiting for their line to be shown,
// or shown by a reply not finished yet. A platform keeps them in memory,
// or with the place's state (JSON) so that a restart shows each line once.
type ToolNotes []ToolNote

// LineFunc makes a call's line in the platform's markup.
type LineFunc func(name string, failed bool, took time.Duration) string

// Note takes what an event (its data: *switchboard.ToolCallData, …) says
// of a tool call, at the event's time, and reports whether the notes
// changed. A replayed event changes nothing.
func (t *ToolNotes) Note(p any, at time.Time, line LineFunc) bool {
	find := func(ok func(n *ToolNote) bool) *ToolNote {
		for i := range *t {
			if ok(&(*t)[i]) {
				return &(*t)[i]
			}
		}
		return nil
	}
	switch d := p.(type) {
	case *switchboard.ToolCallData:
		if tools.ShownAsCard(d.Name) || find(func(n *ToolNote) bool { return n.ID == d.ID }) != nil {
			return false // a card, or replayed: noted already
		}
		*t = append(*t, ToolNote{ID: d.ID, Name: d.Name, Since: at})
		return true
	case *switchboard.ConfirmationRequestData:
		if n := find(func(n *ToolNote) bool { return n.ID == d.ToolCallID && n.Line == "" }); n != nil && n.Confirm != d.ConfirmationID {
			n.Confirm = d.ConfirmationID
			return true
		}
	case *switchboard.ConfirmationResolvedData:
		n := find(func(n *ToolNote) bool { return n.Confirm != "" && n.Confirm == d.ConfirmationID })
		switch {
		case n == nil:
			return false
		case d.Approved:
			n.Confirm, n.Since = "", at // it runs from now
		default: // denied, expired, cancelled: its card says so
			id := n.ID
			*t = slices.DeleteFunc(*t, func(m ToolNote) bool { return m.ID == id })
		}
		return true
	case *switchboard.ToolResponseData:
		if n := find(func(n *ToolNote) bool { return n.ID == d.ToolCallID && n.Line == "" }); n != nil {
			n.Line = line(n.Name, d.IsError, at.Sub(n.Since))
			return true
		}
	}
	return false
}

// For gives a reply the lines of the calls that answered and are not
// shown yet, and returns every line it shows; changed says whether the
// notes changed.
func (t *ToolNotes) For(reply string) (lines []string, changed bool) {
	for i := range *t {
		n := &(*t)[i]
		if n.Line != "" && n.Reply == "" {
			n.Reply, changed = reply, true
		}
		if n.Reply == reply {
			lines = append(lines, n.Line)
		}
	}
	return lines, changed
}

// Take returns the lines of the calls that answered and are not shown yet,
// and forgets them: the message about to be sent shows them.
func (t *ToolNotes) Take() []string {
	var lines []string
	*t = slices.DeleteFunc(*t, func(n ToolNote) bool {
		if n.Line != "" && n.Reply == "" {
			lines = append(lines, n.Line)
			return true
		}
		return false
	})
	return lines
}

// Forget forgets the calls no reply shows (at a turn's end, those that
// never answered), reporting whether there were any.
func (t *ToolNotes) Forget() bool {
	n := len(*t)
	*t = slices.DeleteFunc(*t, func(n ToolNote) bool { return n.Reply == "" })
	return len(*t) != n
}

// Shown forgets the calls a reply showed, reporting whether there were
// any.
func (t *ToolNotes) Shown(reply string) bool {
	n := len(*t)
	*t = slices.DeleteFunc(*t, func(n ToolNote) bool { return n.Reply == reply })
	return len(*t) != n
}

// Duration is how long a tool took, as people read it: "<0.1 s", "0.2 s",
// "14 s", "2 min 5 s".
func Duration(d time.Duration) string {
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

// LinesShown is how many tool lines a message shows; more are counted.
const LinesShown = 8

// Counted is lines as a message shows them: past LinesShown, the rest
// are one line that counts them, made by more.
func Counted(lines []string, more func(n int) string) []string {
	if len(lines) <= LinesShown {
		return lines
	}
	return append(lines[:LinesShown-1:LinesShown-1], more(len(lines)-LinesShown+1))
}
