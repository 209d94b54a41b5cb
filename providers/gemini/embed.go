package gemini

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/genai"

	"github.com/switchboard-gw/switchboard/providers"
)

// The Gemini API's bounds on models/{model}:batchEmbedContents, which the
// SDK's Models.EmbedContent calls with one request per text: at most 100
// requests a batch ("BatchEmbedContentsRequest.requests: at most 100
// requests can be in one batch", 400), and 2,048 tokens a text for
// gemini-embedding-001. A token is at least a byte, so bytes bound tokens
// (providers.CutUTF8).
const (
	maxEmbedInputs     = 100
	maxEmbedInputBytes = 2048
)

// Task types: Gemini embeds a stored passage and the question that looks
// for it each in its own way, which finds more than embedding both alike.
const (
	taskDocument = "RETRIEVAL_DOCUMENT"
	taskQuery    = "RETRIEVAL_QUERY"
)

// Embedder makes vectors with the Gemini Developer API's
// batchEmbedContents through the official SDK.
type Embedder struct {
	name   string
	space  string
	model  string
	dims   int
	client *genai.Client
}

var _ providers.Embedder = (*Embedder)(nil)

// NewEmbedder builds an embedder for cfg.Model (required; e.g.
// gemini-embedding-001), with a client built as New builds one.
// dimensions > 0 asks for vectors that long (outputDimensionality:
// gemini-embedding-001 makes 3,072 and Google recommends 768 or 1,536 when
// shorter), 0 takes the model's own.
func NewEmbedder(cfg providers.Config, dimensions int) (*Embedder, error) {
	name, err := providers.CheckEmbedder(cfg, dimensions, "gemini")
	if err != nil {
		return nil, err
	}
	client, err := newClient(name, cfg)
	if err != nil {
		return nil, err
	}
	space := cmp.Or(cfg.Kind, "gemini") + ":" + strings.TrimPrefix(cfg.Model, "models/")
	if dimensions > 0 {
		space += "/" + strconv.Itoa(dimensions)
	}
	return &Embedder{name: name, space: space, model: cfg.Model, dims: dimensions, client: client}, nil
}

// Space implements providers.Embedder.
func (e *Embedder) Space() string { return e.space }

// Embed implements providers.Embedder.
func (e *Embedder) Embed(ctx context.Context, use providers.EmbedUse, texts []string) ([][]float32, error) {
	config := &genai.EmbedContentConfig{TaskType: taskDocument}
	if use == providers.EmbedQuery {
		config.TaskType = taskQuery
	}
	if e.dims > 0 {
		config.OutputDimensionality = genai.Ptr(int32(e.dims))
	}
	out := make([][]float32, len(texts))
	var (
		at   []int // where each sent text goes in out
		send []string
	)
	for i, t := range texts {
		if strings.TrimSpace(t) == "" { // nothing to embed; Gemini refuses an empty part
			out[i] = []float32{}
			continue
		}
		at = append(at, i)
		send = append(send, providers.CutUTF8(t, maxEmbedInputBytes))
	}
	start := 0
	for _, end := range providers.EmbedBatches(send, maxEmbedInputs, math.MaxInt) {
		vecs, err := e.request(ctx, send[start:end], config)
		if err != nil {
			return nil, err
		}
		for j, v := range vecs {
			out[at[start+j]] = v
		}
		start = end
	}
	return out, nil
}

// request embeds one batch.
func (e *Embedder) request(ctx context.Context, texts []string, config *genai.EmbedContentConfig) ([][]float32, error) {
	contents := make([]*genai.Content, len(texts))
	for i, t := range texts {
		contents[i] = genai.NewContentFromText(t, genai.RoleUser)
	}
	ex := &exchange{}
	ctx = context.WithValue(ctx, exchangeKey{}, ex)
	res, err := e.client.Models.EmbedContent(ctx, e.model, contents, config)
	if err != nil {
		return nil, callError(ctx, e.name, "embeddings", ex, err)
	}
	if len(res.Embeddings) != len(texts) {
		return nil, e.unreadable(fmt.Errorf("%d embeddings for %d texts", len(res.Embeddings), len(texts)))
	}
	out := make([][]float32, len(texts))
	for i, emb := range res.Embeddings {
		if emb == nil || len(emb.Values) == 0 {
			return nil, e.unreadable(fmt.Errorf("no embedding for text %d", i))
		}
		for _, x := range emb.Values {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, e.unreadable(fmt.Errorf("the embedding of text %d holds a number that is not finite", i))
			}
		}
		out[i] = emb.Values
	}
	return out, nil
}

// unreadable is an answer that came whole but cannot be used.
func (e *Embedder) unreadable(err error) error {
	return &providers.Error{Provider: e.name, Err: fmt.Errorf("%w: embeddings: %w", providers.ErrBrokenStream, err)}
}
