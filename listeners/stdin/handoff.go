package stdin

import (
	"strings"
	"unicode"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

// handoffLine is the conversation passing to another guide, as the
// terminal shows it, dimmed like the gateway's other notes: "· Passed to
// billing: …". The model's reason is shown without control characters,
// so it cannot move the cursor or restyle the screen.
func (v *view) handoffLine(d switchboard.HandoffData) string {
	noControl := func(s string) string {
		return strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return -1
			}
			return r
		}, s)
	}
	return v.dim(v.fit("· "+places.Handoff(d, noControl))) + "\n"
}
