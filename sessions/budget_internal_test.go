package sessions

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// Old bulky tool results are one line in a request, the latest keep and
// the short ones whole; the messages given are not changed.
func TestStubResults(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	msgs := []switchboard.Message{
		{Role: switchboard.RoleUser, Content: "run it"},
		{Role: switchboard.RoleTool, ToolName: "python", Content: big},     // old, bulky: a stub
		{Role: switchboard.RoleTool, ToolName: "calculator", Content: "4"}, // old, short: whole
		{Role: switchboard.RoleTool, ToolName: "python", Content: big},     // among the latest 2: whole
		{Role: switchboard.RoleAssistant, Content: "done"},
		{Role: switchboard.RoleTool, ToolName: "mcp.fetch", Content: big}, // the latest: whole
	}
	out := stubResults(msgs, 2)
	if got := out[1].Content; !strings.HasPrefix(got, "[The result of python, 65536 bytes, is left out here") {
		t.Errorf("old bulky result: %.80q", got)
	}
	for _, i := range []int{2, 3, 5} {
		if out[i].Content != msgs[i].Content {
			t.Errorf("message %d was changed", i)
		}
	}
	if msgs[1].Content != big {
		t.Error("the window itself was changed")
	}
	if got := stubResults(msgs, 10); &got[0] != &msgs[0] {
		t.Error("nothing to stub, yet the messages were copied")
	}
	if got := stubResults(msgs, 0)[5].Content; !strings.HasPrefix(got, "[The result of mcp.fetch") {
		t.Errorf("keep 0: the latest result is whole: %.40q", got)
	}
}
