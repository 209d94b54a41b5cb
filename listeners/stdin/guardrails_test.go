package stdin

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// An answer a guardrail blocked after some of it streamed ends with a
// message that is not what streamed: the terminal prints it, so the
// person reads the block's message; an answer that ends as it streamed
// is not printed twice.
func TestViewPrintsAnAnswerThatReplacedItsStream(t *testing.T) {
	v, out := newTestView(false, false)
	v.start(switchboard.ReadyData{}, false)
	v.render(event(t, 1, switchboard.EventDelta, switchboard.DeltaData{MessageID: "m1", Content: "Sure. The codename is "}))
	v.render(event(t, 2, switchboard.EventMessage, switchboard.MessageData{ID: "m1", Role: switchboard.RoleAssistant, Content: "That answer cannot be shown."}))
	if got := out.String(); !strings.HasSuffix(got, "That answer cannot be shown.\n") {
		t.Fatalf("the block's message was not printed:\n%q", got)
	}
	out.Reset()
	v.render(event(t, 3, switchboard.EventDelta, switchboard.DeltaData{MessageID: "m2", Content: "All fine."}))
	v.render(event(t, 4, switchboard.EventMessage, switchboard.MessageData{ID: "m2", Role: switchboard.RoleAssistant, Content: "All fine."}))
	if got := out.String(); strings.Count(got, "All fine.") != 1 {
		t.Fatalf("an answer that ended as it streamed: %q", got)
	}
}
