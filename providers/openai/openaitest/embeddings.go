package openaitest

// POST /v1/embeddings, refused as OpenAI refuses it: an empty (or blank)
// input, more than 2048 inputs, an input over the model's 8192 tokens or
// a request over 300,000 tokens (the fake counts a token for every byte,
// the most any tokenizer makes), a model it does not know (404,
// model_not_found) and dimensions the model does not take. The statuses
// and the error bodies' shape are OpenAI's; the wording of the last three
// is close to it.

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strings"
	"unicode"
)

// EmbeddingModel is a model the fake embeds with.
type EmbeddingModel struct {
	Dims int // the length of its vectors
	// Shortens: it takes "dimensions" (text-embedding-3 and later), and
	// cuts its vectors to that length, as Matryoshka models do.
	Shortens bool
}

// EmbeddingModels are OpenAI's embedding models, which the fake knows
// from the start.
func EmbeddingModels() map[string]EmbeddingModel {
	return map[string]EmbeddingModel{
		"text-embedding-3-small": {Dims: 1536, Shortens: true},
		"text-embedding-3-large": {Dims: 3072, Shortens: true},
		"text-embedding-ada-002": {Dims: 1536},
	}
}

// EmbeddingRequest is an embeddings request the fake answered or refused.
type EmbeddingRequest struct {
	Model      string
	Input      []string
	Dimensions int // 0 when not sent
}

// The bounds OpenAI documents for POST /embeddings.
const (
	MaxEmbeddingInputs   = 2048
	MaxEmbeddingTokens   = 8192
	MaxEmbeddingsRequest = 300_000
)

// embeddings is the fake's embeddings state, under Server.mu.
type embeddings struct {
	models   map[string]EmbeddingModel
	embed    func(text string, dims int) []float32
	down     int // SetEmbeddingsDown's status
	requests []EmbeddingRequest
}

// SetEmbedding sets how a text becomes a vector of dims numbers (the
// model's own length; the fake cuts it to the dimensions asked for and
// scales it back to unit length). By default it is BagOfWords. A test
// makes a paraphrase land near the sentence it paraphrases with it.
func (s *Server) SetEmbedding(f func(text string, dims int) []float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emb.embed = f
}

// AddEmbeddingModel makes a model known to the embeddings endpoint.
func (s *Server) AddEmbeddingModel(name string, m EmbeddingModel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embModels()[name] = m
}

// SetEmbeddingsDown answers every embeddings request with status (and
// an OpenAI error body) until it is set to 0 again: a provider that is
// down (503), rate-limited (429) or refuses the key (401).
func (s *Server) SetEmbeddingsDown(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emb.down = status
}

// EmbeddingRequests are the embeddings requests received so far.
func (s *Server) EmbeddingRequests() []EmbeddingRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EmbeddingRequest(nil), s.emb.requests...)
}

// embModels is the known models, made on first use (under s.mu).
func (s *Server) embModels() map[string]EmbeddingModel {
	if s.emb.models == nil {
		s.emb.models = EmbeddingModels()
	}
	return s.emb.models
}

// BagOfWords is the fake's default embedding: each word (lower case,
// letters and digits) stands for a fixed random direction, picked by its
// hash, and a text is the sum of its words' scaled to unit length. Texts
// sharing words are near; texts sharing none are about orthogonal, as
// unrelated texts are for a real model; and every place carries meaning,
// so a vector's start is a shorter one of its own (as Matryoshka models'
// are, which is what "dimensions" shortens).
func BagOfWords(text string, dims int) []float32 {
	v := make([]float32, dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }) {
		h := fnv.New64a()
		h.Write([]byte(w))
		x := h.Sum64()
		for i := range v {
			// splitmix64: a fixed pseudo-random sign for each place.
			x += 0x9e3779b97f4a7c15
			z := x
			z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
			z = (z ^ z>>27) * 0x94d049bb133111eb
			if (z^z>>31)&1 == 1 {
				v[i]++
			} else {
				v[i]--
			}
		}
	}
	return unit(v)
}

func unit(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return v
	}
	n := float32(math.Sqrt(sum))
	for i := range v {
		v[i] /= n
	}
	return v
}

// embeddingError writes an OpenAI error body.
func embeddingError(w http.ResponseWriter, status int, message, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	c := any(nil)
	if code != "" {
		c = code
	}
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": c}})
	w.Write(b)
}

const invalidInput = "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."

func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		Dimensions     *int            `json:"dimensions"`
		EncodingFormat string          `json:"encoding_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		embeddingError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", "")
		return
	}
	var inputs []string
	var one string
	if json.Unmarshal(body.Input, &one) == nil {
		inputs = []string{one}
	} else if json.Unmarshal(body.Input, &inputs) != nil {
		embeddingError(w, http.StatusBadRequest, invalidInput, "")
		return
	}
	s.mu.Lock()
	req := EmbeddingRequest{Model: body.Model, Input: inputs}
	if body.Dimensions != nil {
		req.Dimensions = *body.Dimensions
	}
	s.emb.requests = append(s.emb.requests, req)
	model, known := s.embModels()[body.Model]
	down, embed := s.emb.down, s.emb.embed
	s.mu.Unlock()
	if embed == nil {
		embed = BagOfWords
	}

	total := 0
	for _, in := range inputs {
		total += len(in)
	}
	switch {
	case down != 0:
		embeddingError(w, down, fmt.Sprintf("scripted failure %d", down), "")
		return
	case !known:
		embeddingError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", body.Model), "model_not_found")
		return
	case len(inputs) == 0 || len(inputs) > MaxEmbeddingInputs:
		embeddingError(w, http.StatusBadRequest, invalidInput, "")
		return
	case body.EncodingFormat != "" && body.EncodingFormat != "float":
		embeddingError(w, http.StatusBadRequest, "The fake answers encoding_format float only.", "")
		return
	}
	for _, in := range inputs {
		switch {
		case strings.TrimSpace(in) == "":
			embeddingError(w, http.StatusBadRequest, invalidInput, "")
			return
		case len(in) > MaxEmbeddingTokens:
			embeddingError(w, http.StatusBadRequest, fmt.Sprintf("This model's maximum context length is %d tokens, however you requested %d tokens (%d in your prompt; 0 for the completion). Please reduce your prompt; or completion length.",
				MaxEmbeddingTokens, len(in), len(in)), "")
			return
		}
	}
	if total > MaxEmbeddingsRequest {
		embeddingError(w, http.StatusBadRequest, fmt.Sprintf("Requested %d tokens, max %d tokens per request", total, MaxEmbeddingsRequest), "max_tokens_per_request")
		return
	}
	dims := model.Dims
	if body.Dimensions != nil {
		switch d := *body.Dimensions; {
		case !model.Shortens:
			embeddingError(w, http.StatusBadRequest, "This model does not support specifying dimensions.", "")
			return
		case d < 1 || d > model.Dims:
			embeddingError(w, http.StatusBadRequest, fmt.Sprintf("Invalid value for 'dimensions' = %d. Must be between 1 and %d.", d, model.Dims), "")
			return
		default:
			dims = d
		}
	}

	data := make([]map[string]any, len(inputs))
	for i, in := range inputs {
		v := embed(in, model.Dims)
		if len(v) != model.Dims {
			panic(fmt.Sprintf("openaitest: the embedding function made %d numbers for a model of %d", len(v), model.Dims))
		}
		v = unit(append([]float32(nil), v[:dims]...))
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": v}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"object": "list", "data": data, "model": body.Model,
		"usage": map[string]any{"prompt_tokens": total, "total_tokens": total},
	})
}
