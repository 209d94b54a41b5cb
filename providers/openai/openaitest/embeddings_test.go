package openaitest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// The fake refuses what OpenAI refuses, with OpenAI's statuses and error
// bodies, and answers the rest with unit vectors of the length asked for.
func TestEmbeddingsEndpoint(t *testing.T) {
	s := openaitest.New()
	defer s.Close()
	post := func(body string) (int, map[string]any) {
		t.Helper()
		res, err := http.Post(s.BaseURL()+"/embeddings", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatalf("%s: body is not JSON: %v", body, err)
		}
		return res.StatusCode, out
	}
	errorOf := func(out map[string]any) (message string, code any) {
		e, _ := out["error"].(map[string]any)
		message, _ = e["message"].(string)
		return message, e["code"]
	}
	many, _ := json.Marshal(make([]string, openaitest.MaxEmbeddingInputs+1))
	for _, c := range []struct {
		name, body string
		status     int
		message    string
		code       any
	}{
		{"empty", `{"model":"text-embedding-3-small","input":""}`, 400, "'$.input' is invalid", nil},
		{"an empty one of several", `{"model":"text-embedding-3-small","input":["a",""]}`, 400, "'$.input' is invalid", nil},
		{"blank", `{"model":"text-embedding-3-small","input":["  \n"]}`, 400, "'$.input' is invalid", nil},
		{"no inputs", `{"model":"text-embedding-3-small","input":[]}`, 400, "'$.input' is invalid", nil},
		{"too many", `{"model":"text-embedding-3-small","input":` + strings.ReplaceAll(string(many), `""`, `"x"`) + `}`, 400, "'$.input' is invalid", nil},
		{"too long", `{"model":"text-embedding-3-small","input":["` + strings.Repeat("a", openaitest.MaxEmbeddingTokens+1) + `"]}`, 400, "maximum context length is 8192 tokens", nil},
		{"unknown model", `{"model":"text-embedding-9","input":["hi"]}`, 404, "The model `text-embedding-9` does not exist", "model_not_found"},
		{"dimensions of a model that has its own", `{"model":"text-embedding-ada-002","input":["hi"],"dimensions":256}`, 400, "does not support specifying dimensions", nil},
		{"too many dimensions", `{"model":"text-embedding-3-small","input":["hi"],"dimensions":4096}`, 400, "'dimensions'", nil},
	} {
		status, out := post(c.body)
		msg, code := errorOf(out)
		if status != c.status || !strings.Contains(msg, c.message) || code != c.code {
			t.Errorf("%s: %d %q code %v, want %d %q code %v", c.name, status, msg, code, c.status, c.message, c.code)
		}
	}

	status, out := post(`{"model":"text-embedding-3-small","input":["the cat sat","the cat sat","a dog ran"],"dimensions":64}`)
	if status != 200 {
		t.Fatalf("%d %v", status, out)
	}
	data := out["data"].([]any)
	vec := func(i int) []float64 {
		var v []float64
		for _, x := range data[i].(map[string]any)["embedding"].([]any) {
			v = append(v, x.(float64))
		}
		return v
	}
	dot := func(a, b []float64) float64 {
		s := 0.0
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	if len(data) != 3 || len(vec(0)) != 64 {
		t.Fatalf("%d vectors of %d", len(data), len(vec(0)))
	}
	if d := dot(vec(0), vec(0)); d < 0.999 || d > 1.001 {
		t.Errorf("not unit length: %v", d)
	}
	if d := dot(vec(0), vec(1)); d < 0.999 {
		t.Errorf("the same text made two vectors: %v", d)
	}
	if d := dot(vec(0), vec(2)); d > 0.5 {
		t.Errorf("texts sharing no word are near: %v", d)
	}
	if reqs := s.EmbeddingRequests(); len(reqs) == 0 || reqs[len(reqs)-1].Dimensions != 64 {
		t.Errorf("requests: %+v", reqs)
	}
}
