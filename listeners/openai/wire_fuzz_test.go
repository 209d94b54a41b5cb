package openai

import (
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
		`{"model":"","messages":[]}`, `{"model":1}`, `[]`, `{`, `{} {}`, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeRequest(body)
		if refused(t, err) {
			return
		}
		if r.Model == "" || strings.TrimSpace(r.Text) == "" {
			t.Fatalf("accepted %q: model %q, text %q", body, r.Model, r.Text)
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
