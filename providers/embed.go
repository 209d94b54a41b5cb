package providers

import (
	"context"
	"fmt"
	"unicode/utf8"
)

// Embedder turns texts into vectors whose closeness (cosine similarity)
// says how close their meanings are: what semantic recall searches with
// (package semantic). The OpenAI adapter (also for Ollama and other
// OpenAI-compatible servers) and the Gemini adapter have one; Anthropic
// has no embeddings API.
//
// Embed returns one vector per text, in order. The adapter keeps to its
// vendor's documented limits on its own side: the texts are split into as
// many requests as the vendor's bounds on inputs per request (and tokens
// per request) need, made one after another; a text longer than the model
// takes is cut to its start (CutUTF8); an empty or blank text gets
// an empty vector without being sent, as vendors refuse those. A failed
// request fails the call: nothing is returned for the texts before it.
// Errors are *Error for answers from the provider, as Stream's are, so
// Classify and RetryAfter tell the caller what to do; adapters do not
// retry.
type Embedder interface {
	Embed(ctx context.Context, use EmbedUse, texts []string) ([][]float32, error)
	// Space names the vectors Embed makes ("openai:text-embedding-3-small",
	// "gemini:gemini-embedding-001/768"): it changes with the vendor, the
	// model and the dimensions asked for, and vectors of two spaces are
	// never compared.
	Space() string
}

// EmbedUse says what a text is embedded for. Some models (Gemini's) embed
// a question and the passages that answer it differently, which finds
// more; others ignore it.
type EmbedUse int

const (
	// EmbedDocument is a stored message, to be found.
	EmbedDocument EmbedUse = iota
	// EmbedQuery is a search's question.
	EmbedQuery
)

// CutUTF8 is the start of s, at most n bytes, cut on a character
// boundary: what an adapter sends of a text longer than its model takes.
// Every token of the vendors' tokenizers stands for at least one byte, so
// n bytes are never more than n tokens, whatever the language.
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// EmbedBatches splits texts (already cut to what one input may be, empty
// ones left out by the caller) into consecutive runs of at most maxInputs
// texts and maxBytes bytes together, each run one request: it returns each
// run's end index. A single text longer than maxBytes is a run of its own.
func EmbedBatches(texts []string, maxInputs, maxBytes int) []int {
	var ends []int
	n, size := 0, 0
	for i, t := range texts {
		if n > 0 && (n == maxInputs || size+len(t) > maxBytes) {
			ends = append(ends, i)
			n, size = 0, 0
		}
		n++
		size += len(t)
	}
	if n > 0 {
		ends = append(ends, len(texts))
	}
	return ends
}

// CheckEmbedder checks what every adapter's NewEmbedder needs of its
// configuration, and returns the name its errors go by (cfg.Name, else
// vendor).
func CheckEmbedder(cfg Config, dimensions int, vendor string) (name string, err error) {
	name = cfg.Name
	if name == "" {
		name = vendor
	}
	switch {
	case cfg.Model == "":
		return name, fmt.Errorf("%s: no embedding model configured", name)
	case dimensions < 0:
		return name, fmt.Errorf("%s: dimensions %d: want 0 (the model's own) or more", name, dimensions)
	}
	return name, nil
}
