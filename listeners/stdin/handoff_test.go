package stdin

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// A handoff is one dim line of the terminal; the model's reason cannot
// bring control characters to it.
func TestViewHandoff(t *testing.T) {
	v, out := newTestView(true, true)
	v.start(switchboard.ReadyData{LastSeq: 0}, true)
	v.render(event(t, 7, switchboard.EventHandoff, switchboard.HandoffData{From: "support", To: "billing", Reason: "an invoice\x1b[2J question"}))
	got := ansiNames.Replace(strings.ReplaceAll(out.String(), "\x1b[0m", "[0]"))
	if want := "[d]· Passed to billing: an invoice[2J question[0]\n"; got != want {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
}
