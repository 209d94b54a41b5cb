package openai

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// decodeResponsesRequest never panics, refuses with a *requestError
// only, and what it accepts is answerable: a model, a non-empty user
// message, a history of known roles, and Earlier naming the first
// conversational item of it.
func FuzzDecodeResponsesRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"support","input":"Hi"}`,
		`{"model":"support","stream":true,"store":true,"instructions":"Be brief.","metadata":{"a":"b"},"input":[{"role":"developer","content":"x"},{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}]}]}`,
		`{"model":"support","previous_response_id":"resp_ab_cd","input":[{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"Yes","annotations":[]}]},{"role":"user","content":"Hi"}]}`,
		`{"model":"support","input":[{"type":"function_call_output","call_id":"c","output":"1"}]}`,
		`{"model":"support","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`,
		`{"model":"support","input":"Hi","tools":[],"tool_choice":"auto","text":{"format":{"type":"text"}}}`,
		`{"model":"support","input":"Hi","tools":[{"type":"function"}]}`,
		`{"model":"s","tools":[{"type":"function","name":"lookup","parameters":{"type":"object"}}],"input":[{"role":"user","content":"Hi"},{"type":"function_call","call_id":"c1","name":"lookup","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"42"}]}`,
		`{"model":"s","previous_response_id":"resp_x","input":[{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"42"}]}]}`,
		`{"model":"","input":[]}`, `{"model":"m","input":5}`, `{"model":1}`, `[]`, `{`, `{} {}`, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeResponsesRequest(body)
		if refused(t, err) {
			return
		}
		if r.Model == "" || (strings.TrimSpace(r.Text) == "") == (len(r.Results) == 0) {
			t.Fatalf("accepted %q: model %q, text %q, %d results: want a model and either a text or results", body, r.Model, r.Text, len(r.Results))
		}
		conversational := false
		for _, m := range r.History {
			switch m.Role {
			case switchboard.RoleSystem:
			case switchboard.RoleUser, switchboard.RoleAssistant, switchboard.RoleTool:
				conversational = true
			default:
				t.Fatalf("accepted %q: a history message of role %q", body, m.Role)
			}
		}
		if conversational != (r.Earlier != "") {
			t.Fatalf("accepted %q: history %v, earlier %q", body, r.History, r.Earlier)
		}
		if r.Store && !r.StoreSent {
			t.Fatalf("accepted %q: store without it sent", body)
		}
	})
}
