package gemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/gemini"
)

// embedModels are the models the fake embeds with, and their vectors'
// length.
var embedModels = map[string]int{"gemini-embedding-001": 3072}

// embedFake extends the fake with what the SDK's Models.EmbedContent
// calls: POST /v1beta/models/{model}:batchEmbedContents, a request per
// text ({"model": "models/…", "content": {"parts": [{"text": …}]},
// "taskType": …, "outputDimensionality": …}), answered with
// {"embeddings": [{"values": […]}]} in order. It refuses what Gemini
// refuses, with its error bodies: over 100 requests a batch, a text over
// the model's 2,048 tokens (a token a byte, as no tokenizer exceeds), an
// empty text, a model it does not know (404 NOT_FOUND).
func embedFake(t *testing.T) *fakeGemini {
	var f *fakeGemini
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) {
		seen := f.requests()
		body := seen[len(seen)-1].Body
		model, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v1beta/models/"), ":batchEmbedContents")
		if !ok || r.Method != http.MethodPost {
			apiError(w, http.StatusNotFound, `{"error":{"code":404,"message":"not found","status":"NOT_FOUND"}}`)
			return
		}
		dims, known := embedModels[model]
		if !known {
			apiError(w, http.StatusNotFound, fmt.Sprintf(`{"error":{"code":404,"message":"models/%s is not found for API version v1beta, or is not supported for embedContent. Call ListModels to see the list of available models and their supported methods.","status":"NOT_FOUND"}}`, model))
			return
		}
		reqs, _ := body["requests"].([]any)
		if len(reqs) > 100 {
			apiError(w, http.StatusBadRequest, `{"error":{"code":400,"message":"* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch\n","status":"INVALID_ARGUMENT"}}`)
			return
		}
		var out []map[string]any
		for i, raw := range reqs {
			req := raw.(map[string]any)
			content, _ := req["content"].(map[string]any)
			parts, _ := content["parts"].([]any)
			text := ""
			if len(parts) == 1 {
				text, _ = parts[0].(map[string]any)["text"].(string)
			}
			switch {
			case req["model"] != "models/"+model:
				apiError(w, http.StatusBadRequest, fmt.Sprintf(`{"error":{"code":400,"message":"* BatchEmbedContentsRequest.model: requests[%d] is for model %v, not models/%s\n","status":"INVALID_ARGUMENT"}}`, i, req["model"], model))
				return
			case strings.TrimSpace(text) == "":
				apiError(w, http.StatusBadRequest, `{"error":{"code":400,"message":"* BatchEmbedContentsRequest.requests[0].content.parts: contents.parts must not be empty.\n","status":"INVALID_ARGUMENT"}}`)
				return
			case len(text) > 2048:
				apiError(w, http.StatusBadRequest, `{"error":{"code":400,"message":"The input token count exceeds the maximum number of tokens allowed (2048).","status":"INVALID_ARGUMENT"}}`)
				return
			}
			n := dims
			if d, ok := req["outputDimensionality"].(float64); ok {
				n = int(d)
			}
			v := make([]float32, n)
			h := fnv.New64a()
			fmt.Fprint(h, req["taskType"], text)
			x := h.Sum64()
			for j := range v {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				v[j] = float32(int64(x%2001)-1000) / 1000
			}
			out = append(out, map[string]any{"values": v})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"embeddings": out})
	})
	return f
}

func newGeminiEmbedder(t *testing.T, url, model string, dims int) *gemini.Embedder {
	t.Helper()
	e, err := gemini.NewEmbedder(providers.Config{Name: "gem", Kind: "gemini", BaseURL: url + "/", APIKey: "k-123", Model: model}, dims)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The real SDK against the fake: the path and body it sends, the task
// type for a stored message and for a question, the dimensions asked for,
// a vector per text in order, nothing sent for a blank text, at most 100
// texts a request and each cut to 2,048 bytes.
func TestEmbed(t *testing.T) {
	f := embedFake(t)
	e := newGeminiEmbedder(t, f.URL, "gemini-embedding-001", 768)
	if got := e.Space(); got != "gemini:gemini-embedding-001/768" {
		t.Errorf("Space = %q", got)
	}
	texts := make([]string, 250)
	for i := range texts {
		texts[i] = fmt.Sprintf("message %d", i)
	}
	texts[7] = " "
	texts[8] = strings.Repeat("ça ", 2000) // 8 KB: cut
	vecs, err := e.Embed(context.Background(), providers.EmbedDocument, texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 250 || len(vecs[0]) != 768 || len(vecs[7]) != 0 || len(vecs[249]) != 768 {
		t.Fatalf("%d vectors (%d, %d, %d numbers)", len(vecs), len(vecs[0]), len(vecs[7]), len(vecs[249]))
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests for 249 texts, want 3", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1beta/models/gemini-embedding-001:batchEmbedContents" || r.Header.Get("x-goog-api-key") != "k-123" {
		t.Errorf("request line: %s %s, key %q", r.Method, r.Path, r.Header.Get("x-goog-api-key"))
	}
	first := r.Body["requests"].([]any)[0]
	jsonEqual(t, "first request", first, `{"model":"models/gemini-embedding-001","content":{"role":"user","parts":[{"text":"message 0"}]},"taskType":"RETRIEVAL_DOCUMENT","outputDimensionality":768}`)
	if got := r.Body["requests"].([]any)[7].(map[string]any)["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string); len(got) > 2048 || !strings.HasPrefix(texts[8], got) {
		t.Errorf("a long text went as %d bytes", len(got))
	}

	q, err := e.Embed(context.Background(), providers.EmbedQuery, []string{"message 0"})
	if err != nil {
		t.Fatal(err)
	}
	last := f.requests()[3].Body["requests"].([]any)[0].(map[string]any)
	if last["taskType"] != "RETRIEVAL_QUERY" {
		t.Errorf("a question went as %v", last["taskType"])
	}
	if q[0][0] == vecs[0][0] && q[0][1] == vecs[0][1] {
		t.Error("the question and the passage were embedded alike")
	}

	native := newGeminiEmbedder(t, f.URL, "gemini-embedding-001", 0)
	if got := native.Space(); got != "gemini:gemini-embedding-001" {
		t.Errorf("Space = %q", got)
	}
	vecs, err = native.Embed(context.Background(), providers.EmbedDocument, []string{"hello"})
	if err != nil || len(vecs[0]) != 3072 {
		t.Fatalf("%v, %v", len(vecs), err)
	}
	if _, ok := f.requests()[4].Body["requests"].([]any)[0].(map[string]any)["outputDimensionality"]; ok {
		t.Error("outputDimensionality sent without dimensions")
	}
}

// A refusal is a *providers.Error with Gemini's status; an answer missing
// vectors is unreadable.
func TestEmbedErrors(t *testing.T) {
	f := embedFake(t)
	_, err := newGeminiEmbedder(t, f.URL, "text-embedding-9", 0).Embed(context.Background(), providers.EmbedDocument, []string{"hello"})
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusNotFound || providers.Classify(err) != providers.KindRefused || !strings.Contains(err.Error(), "not found") {
		t.Errorf("unknown model: %v", err)
	}
	if strings.Contains(fmt.Sprint(err), "k-123") {
		t.Errorf("the key is in the error: %v", err)
	}

	short := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"embeddings":[{"values":[0.1,0.2]}]}`)
	})
	_, err = newGeminiEmbedder(t, short.URL, "gemini-embedding-001", 0).Embed(context.Background(), providers.EmbedDocument, []string{"a", "b"})
	if !errors.Is(err, providers.ErrBrokenStream) {
		t.Errorf("one vector for two texts: %v", err)
	}

	down := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		apiError(w, http.StatusServiceUnavailable, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`)
	})
	_, err = newGeminiEmbedder(t, down.URL, "gemini-embedding-001", 0).Embed(context.Background(), providers.EmbedDocument, []string{"a"})
	if !errors.As(err, &pe) || pe.Status != http.StatusServiceUnavailable || pe.RetryAfter.Seconds() != 7 {
		t.Errorf("overloaded: %v (%+v)", err, pe)
	}
}
