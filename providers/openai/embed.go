package openai

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/switchboard-gw/switchboard/providers"
)

// OpenAI's documented bounds on POST /embeddings: "The input must not
// exceed the max input tokens for the model (8192 tokens for all embedding
// models), cannot be an empty string, and any array must be 2048
// dimensions or less. ... all embedding models enforce a maximum of
// 300,000 tokens summed across all inputs in a single request." A token
// is at least a byte, so bytes bound tokens (providers.CutUTF8).
const (
	maxEmbedInputs       = 2048
	maxEmbedInputBytes   = 8192
	maxEmbedRequestBytes = 300_000
)

// Embedder makes vectors with POST {base_url}/embeddings through the
// official SDK: OpenAI's embedding models, and those of any server that
// speaks the same wire (Ollama's /v1, vLLM, LM Studio).
type Embedder struct {
	name  string
	space string
	model string
	dims  int
	svc   sdk.EmbeddingService
}

var _ providers.Embedder = (*Embedder)(nil)

// NewEmbedder builds an embedder for cfg.Model (required) at cfg's
// endpoint, built as New builds the chat service (no environment, no SDK
// retries). dimensions > 0 asks the model for vectors that long
// (text-embedding-3 and later shorten theirs; older models and many
// compatible servers refuse the parameter), 0 takes the model's own.
func NewEmbedder(cfg providers.Config, dimensions int) (*Embedder, error) {
	name, err := providers.CheckEmbedder(cfg, dimensions, "openai")
	if err != nil {
		return nil, err
	}
	opts, _, err := clientOptions(name, cfg)
	if err != nil {
		return nil, err
	}
	space := cmp.Or(cfg.Kind, "openai") + ":" + cfg.Model
	if dimensions > 0 {
		space += "/" + strconv.Itoa(dimensions)
	}
	return &Embedder{name: name, space: space, model: cfg.Model, dims: dimensions, svc: sdk.NewEmbeddingService(opts...)}, nil
}

// Space implements providers.Embedder.
func (e *Embedder) Space() string { return e.space }

// Embed implements providers.Embedder. OpenAI's models embed questions and
// passages alike, so use is not sent.
func (e *Embedder) Embed(ctx context.Context, _ providers.EmbedUse, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var (
		at   []int // where each sent text goes in out
		send []string
	)
	for i, t := range texts {
		if strings.TrimSpace(t) == "" { // refused, even as a space
			out[i] = []float32{}
			continue
		}
		at = append(at, i)
		send = append(send, providers.CutUTF8(t, maxEmbedInputBytes))
	}
	start := 0
	for _, end := range providers.EmbedBatches(send, maxEmbedInputs, maxEmbedRequestBytes) {
		vecs, err := e.request(ctx, send[start:end])
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

// request embeds one request's texts.
func (e *Embedder) request(ctx context.Context, texts []string) ([][]float32, error) {
	params := sdk.EmbeddingNewParams{
		Model: e.model,
		Input: sdk.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
	}
	if e.dims > 0 {
		params.Dimensions = param.NewOpt(int64(e.dims))
	}
	var raw *http.Response
	res, err := e.svc.New(ctx, params, option.WithResponseInto(&raw))
	if err != nil {
		return nil, callError(ctx, e.name, "embeddings", answered(raw), err)
	}
	vecs, err := vectors(res, len(texts))
	if err != nil {
		return nil, &providers.Error{Provider: e.name, Err: fmt.Errorf("%w: embeddings: %w", providers.ErrBrokenStream, err)}
	}
	return vecs, nil
}

// vectors are a response's embeddings in input order (each names its
// input by index), every input answered once, each a vector of finite
// numbers.
func vectors(res *sdk.CreateEmbeddingResponse, n int) ([][]float32, error) {
	if len(res.Data) != n {
		return nil, fmt.Errorf("%d embeddings for %d inputs", len(res.Data), n)
	}
	out := make([][]float32, n)
	for _, d := range res.Data {
		i := d.Index
		switch {
		case i < 0 || i >= int64(n):
			return nil, fmt.Errorf("an embedding for input %d of %d", i, n)
		case out[i] != nil:
			return nil, fmt.Errorf("two embeddings for input %d", i)
		case len(d.Embedding) == 0:
			return nil, fmt.Errorf("an empty embedding for input %d", i)
		}
		v := make([]float32, len(d.Embedding))
		for j, x := range d.Embedding {
			f := float32(x)
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, errors.New("an embedding holds a number that is not finite")
			}
			v[j] = f
		}
		out[i] = v
	}
	return out, nil
}
