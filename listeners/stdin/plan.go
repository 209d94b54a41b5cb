package stdin

import (
	"fmt"
	"strings"

	"github.com/switchboard-gw/switchboard"
)

// planMarks are a plan step's status as the terminal shows it, in a
// checklist's brackets: "1. [x] Find the order".
var planMarks = map[string]string{
	switchboard.PlanPending:    "[ ]",
	switchboard.PlanInProgress: "[>]",
	switchboard.PlanDone:       "[x]",
	switchboard.PlanFailed:     "[!]",
}

// planText is a plan as the terminal prints it each time it changes: a
// heading that counts what is done, then one numbered line a step. The
// terminal scrolls and edits nothing, so each version is printed whole;
// tool runs print their own lines below it as they happen.
func planText(d *switchboard.PlanData) string {
	done := 0
	for _, st := range d.Steps {
		if st.Status == switchboard.PlanDone {
			done++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  Plan (%d/%d done)\n", done, len(d.Steps))
	for i, st := range d.Steps {
		mark, ok := planMarks[st.Status]
		if !ok {
			mark = "[?]"
		}
		fmt.Fprintf(&b, "  %d. %s %s\n", i+1, mark, st.Title)
	}
	return b.String()
}
