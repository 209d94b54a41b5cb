package openai

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// decodeRequest never panics, refuses with a *requestError only, and
// what it accepts is answerable: a model, a non-empty last user message.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"support","messages":[{"role":"user","content":"Hi"}]}`,
		`{"model":"support","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`,
		`{"model":"support","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c"}]},{"role":"user","content":"Hi"}]}`,
		`{"model":"support","messages":[{"role":"tool","content":"1"}]}`,
		`{"model":"support","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`,
		`{"model":"s","tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],"tool_choice":"auto","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{\"q\":1}"}},{"id":"c2","type":"function","function":{"name":"lookup","arguments":"x"}}]},{"role":"tool","tool_call_id":"c2","content":"2"},{"role":"tool","tool_call_id":"c1","content":"1"}]}`,
		`{"model":"s","messages":[{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f"}}]},{"role":"user","content":"Hi"}]}`,
		`{"model":"s","tools":[{"type":"custom"}],"messages":[{"role":"user","content":"Hi"}]}`,
		`{"model":"","messages":[]}`, `{"model":1}`, `[]`, `{`, `{} {}`, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeRequest(body)
		if refused(t, err) {
			return
		}
		if r.Model == "" || (strings.TrimSpace(r.Text) == "") == (len(r.Results) == 0) {
			t.Fatalf("accepted %q: model %q, text %q, %d results: want a model and either a text or results", body, r.Model, r.Text, len(r.Results))
		}
		if len(r.Results) > 0 {
			// The results answer the calls of the history's last message,
			// each once.
			calls := map[string]bool{}
			for _, c := range r.History[len(r.History)-1].ToolCalls {
				calls[c.ID] = true
			}
			for _, res := range r.Results {
				if !calls[res.CallID] {
					t.Fatalf("accepted %q: result %q answers no open call", body, res.CallID)
				}
				delete(calls, res.CallID)
			}
			if len(calls) > 0 {
				t.Fatalf("accepted %q: calls %v unanswered", body, calls)
			}
		}
		for _, m := range r.History {
			for _, c := range m.ToolCalls {
				if !json.Valid(c.Args) {
					t.Fatalf("accepted %q: arguments %q are not JSON", body, c.Args)
				}
			}
		}
		if r.IncludeUsage && !r.Stream {
			t.Fatalf("accepted %q: usage chunk without a stream", body)
		}
	})
}

// refused reports whether a decoder refused its body, failing unless it
// did with a *requestError that has a message.
func refused(t *testing.T, err error) bool {
	t.Helper()
	if err == nil {
		return false
	}
	var re *requestError
	if !errors.As(err, &re) || re.msg == "" {
		t.Fatalf("error %v (%T): want a *requestError with a message", err, err)
	}
	return true
}
