package openai_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

func newEmbedder(t *testing.T, s *openaitest.Server, model string, dims int) *openai.Embedder {
	t.Helper()
	e, err := openai.NewEmbedder(providers.Config{Name: "main", Kind: "openai", BaseURL: s.BaseURL(), APIKey: apiKey, Model: model}, dims)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func norm(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// The real SDK against the fake: one vector per text in order, nothing
// sent for an empty or blank text (OpenAI refuses those), the model and
// the dimensions on the wire, and Space telling the two apart.
func TestEmbed(t *testing.T) {
	s := openaitest.New()
	defer s.Close()
	e := newEmbedder(t, s, "text-embedding-3-small", 0)
	if got := e.Space(); got != "openai:text-embedding-3-small" {
		t.Errorf("Space = %q", got)
	}
	texts := []string{"the cat sat", "", "a dog ran", " \n", "the cat sat"}
	vecs, err := e.Embed(context.Background(), providers.EmbedDocument, texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(vecs), len(texts))
	}
	for i, v := range vecs {
		want := 1536
		if strings.TrimSpace(texts[i]) == "" {
			want = 0
		}
		if len(v) != want {
			t.Errorf("text %d (%q): %d numbers, want %d", i, texts[i], len(v), want)
		}
	}
	if vecs[0][0] != vecs[4][0] || vecs[0][0] == vecs[2][0] && vecs[0][1] == vecs[2][1] {
		t.Errorf("vectors out of order")
	}
	reqs := s.EmbeddingRequests()
	if len(reqs) != 1 || len(reqs[0].Input) != 3 || reqs[0].Model != "text-embedding-3-small" || reqs[0].Dimensions != 0 {
		t.Fatalf("requests: %+v", reqs)
	}

	short := newEmbedder(t, s, "text-embedding-3-small", 256)
	if got := short.Space(); got != "openai:text-embedding-3-small/256" {
		t.Errorf("Space = %q", got)
	}
	vecs, err = short.Embed(context.Background(), providers.EmbedQuery, []string{"the cat sat"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs[0]) != 256 || math.Abs(norm(vecs[0])-1) > 1e-4 {
		t.Errorf("%d numbers, norm %v", len(vecs[0]), norm(vecs[0]))
	}
	if got := s.EmbeddingRequests(); got[len(got)-1].Dimensions != 256 {
		t.Errorf("dimensions not sent: %+v", got[len(got)-1])
	}

	none, err := e.Embed(context.Background(), providers.EmbedDocument, []string{"", "  "})
	if err != nil || len(none) != 2 || len(none[0]) != 0 {
		t.Errorf("blank texts: %v, %v", none, err)
	}
	if got := len(s.EmbeddingRequests()); got != 2 {
		t.Errorf("blank texts were sent: %d requests", got)
	}
}

// OpenAI's bounds are kept on our side: at most 2048 inputs and 300,000
// tokens a request, an input cut to 8192 tokens; the fake refuses any
// request over them (counting a token a byte, as no tokenizer exceeds).
func TestEmbedKeepsToOpenAIsLimits(t *testing.T) {
	s := openaitest.New()
	defer s.Close()
	e := newEmbedder(t, s, "text-embedding-3-small", 32)
	many := make([]string, 5000)
	for i := range many {
		many[i] = "message"
	}
	vecs, err := e.Embed(context.Background(), providers.EmbedDocument, many)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 5000 || len(vecs[4999]) != 32 {
		t.Fatalf("%d vectors", len(vecs))
	}
	var sizes []int
	for _, r := range s.EmbeddingRequests() {
		sizes = append(sizes, len(r.Input))
	}
	if len(sizes) != 3 || sizes[0] != 2048 || sizes[2] != 5000-2*2048 {
		t.Errorf("requests of %v inputs", sizes)
	}

	long := make([]string, 50)
	for i := range long {
		long[i] = strings.Repeat("ü long message ", 2000) // 32 KB: cut
	}
	if _, err := e.Embed(context.Background(), providers.EmbedDocument, long); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.EmbeddingRequests()[3:] {
		total := 0
		for _, in := range r.Input {
			total += len(in)
			if len(in) > openaitest.MaxEmbeddingTokens || !strings.HasPrefix(strings.Repeat("ü long message ", 2000), in) {
				t.Fatalf("an input of %d bytes, or not the text's start", len(in))
			}
		}
		if total > openaitest.MaxEmbeddingsRequest {
			t.Errorf("a request of %d bytes", total)
		}
	}
}

// A refusal is a *providers.Error with the status, classified as users'
// errors are: an unknown model, dimensions the model does not take, a
// provider down; a vector's numbers are checked.
func TestEmbedErrors(t *testing.T) {
	s := openaitest.New()
	defer s.Close()
	ctx := context.Background()
	check := func(e *openai.Embedder, status int, kind providers.Kind, said string) {
		t.Helper()
		_, err := e.Embed(ctx, providers.EmbedDocument, []string{"hello"})
		var pe *providers.Error
		if !errors.As(err, &pe) || pe.Status != status || providers.Classify(err) != kind || !strings.Contains(err.Error(), said) {
			t.Errorf("err = %v (%T), want status %d, kind %s, saying %q", err, err, status, kind, said)
		}
		if strings.Contains(err.Error(), apiKey) {
			t.Errorf("the key is in the error: %v", err)
		}
	}
	check(newEmbedder(t, s, "text-embedding-9", 0), http.StatusNotFound, providers.KindRefused, "does not exist")
	check(newEmbedder(t, s, "text-embedding-ada-002", 256), http.StatusBadRequest, providers.KindRefused, "does not support specifying dimensions")
	s.SetEmbeddingsDown(http.StatusServiceUnavailable)
	check(newEmbedder(t, s, "text-embedding-3-small", 0), http.StatusServiceUnavailable, providers.KindUnavailable, "503")
	s.SetEmbeddingsDown(http.StatusTooManyRequests)
	check(newEmbedder(t, s, "text-embedding-3-small", 0), http.StatusTooManyRequests, providers.KindRateLimited, "429")
	s.SetEmbeddingsDown(0)

	s.SetEmbedding(func(string, int) []float32 {
		v := make([]float32, 1536)
		v[0] = float32(math.Inf(1))
		return v
	})
	_, err := newEmbedder(t, s, "text-embedding-3-small", 0).Embed(ctx, providers.EmbedDocument, []string{"hello"})
	if !errors.Is(err, providers.ErrBrokenStream) {
		t.Errorf("a vector that is not numbers: %v", err)
	}

	if _, err := openai.NewEmbedder(providers.Config{BaseURL: s.BaseURL()}, 0); err == nil {
		t.Error("an embedder without a model")
	}
	dead := newEmbedder(t, s, "text-embedding-3-small", 0)
	s.Close()
	_, err = dead.Embed(ctx, providers.EmbedDocument, []string{"hello"})
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Status != 0 || providers.Classify(err) != providers.KindUnavailable {
		t.Errorf("unreachable: %v", err)
	}
}
