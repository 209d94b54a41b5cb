// Package gemini adapts Google's Gemini Developer API (not Vertex AI) to
// providers.Provider through the official google.golang.org/genai SDK and its
// streaming endpoint, models/{model}:streamGenerateContent?alt=sse.
package gemini

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"

	"google.golang.org/genai"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// ErrPromptBlocked is the cause of a call Gemini refused to answer because of
// the prompt itself (promptFeedback.blockReason). It is deliberately not a
// *providers.Error: the same prompt would be blocked again, so nothing may
// retry it.
var ErrPromptBlocked = errors.New("prompt blocked")

// skipThoughtSignature is Google's documented stand-in for the thought
// signature Gemini 3 requires on the first functionCall part of every replayed
// model turn. The real signature cannot survive the trip through
// switchboard.ToolCall, and without any signature Gemini 3 answers 400.
const skipThoughtSignature = "skip_thought_signature_validator"

// Provider streams responses from one Gemini configuration.
type Provider struct {
	name   string
	model  string
	client *genai.Client
}

var _ providers.Provider = (*Provider)(nil)

// New builds the adapter. cfg.BaseURL is the host root (the SDK adds
// /v1beta/...). The SDK's own retries are off: the providers.Resilient
// wrapper retries, once, for every vendor.
func New(cfg providers.Config) (*Provider, error) {
	name := cmp.Or(cfg.Name, "gemini")
	client, err := newClient(name, cfg)
	if err != nil {
		return nil, err
	}
	return &Provider{name: name, model: cfg.Model, client: client}, nil
}

// newClient is the SDK's client for cfg: the Gemini Developer API at
// cfg.BaseURL, without the SDK's retries, through a recorder transport
// (errors.go).
func newClient(name string, cfg providers.Config) (*genai.Client, error) {
	base := cfg.HTTPClient
	if base == nil {
		base = &http.Client{}
	}
	hc := *base // a copy: the caller's client is not ours to change
	next := base.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = recorder{next: next}
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:     cfg.APIKey,
		Backend:    genai.BackendGeminiAPI,
		HTTPClient: &hc,
		HTTPOptions: genai.HTTPOptions{
			BaseURL:      cfg.BaseURL,
			RetryOptions: &genai.HTTPRetryOptions{Attempts: genai.Ptr[int32](1)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return client, nil
}

// Stream implements providers.Provider.
func (p *Provider) Stream(ctx context.Context, req providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		model := cmp.Or(req.Model, p.model)
		if model == "" {
			yield(providers.Event{}, fmt.Errorf("%s: no model configured", p.name))
			return
		}
		contents, system, err := history(req.Messages, req.Images)
		if err != nil {
			yield(providers.Event{}, fmt.Errorf("%s: %w", p.name, err))
			return
		}
		config := generateConfig(req, system)

		ex := &exchange{}
		ctx = context.WithValue(ctx, exchangeKey{}, ex)
		var st streamState
		for chunk, err := range p.client.Models.GenerateContentStream(ctx, model, contents, config) {
			if err != nil {
				yield(providers.Event{}, p.streamError(ctx, ex, err))
				return
			}
			if !st.consume(chunk, yield) {
				return
			}
		}
		switch {
		case st.finish != "":
		case ctx.Err() != nil:
			yield(providers.Event{}, p.streamError(ctx, ex, ctx.Err()))
			return
		case st.blocked != "":
			yield(providers.Event{}, fmt.Errorf("%s: %w: %s", p.name, ErrPromptBlocked, st.blocked))
			return
		default:
			yield(providers.Event{}, &providers.Error{Provider: p.name, Err: fmt.Errorf("%w: stream ended without a finish reason", providers.ErrBrokenStream)})
			return
		}
		if st.usage != nil && !yield(providers.Event{Kind: providers.EventUsage, Usage: usage(st.usage)}, nil) {
			return
		}
		yield(providers.Event{Kind: providers.EventDone, StopReason: string(st.finish), Model: cmp.Or(st.model, model)}, nil)
	}
}

// generateConfig carries the request's knobs. Automatic continuation stays
// on: it only acts when the server hands out continuation tokens, and it
// resumes a response rather than repeating it.
func generateConfig(req providers.Request, system []*genai.Part) *genai.GenerateContentConfig {
	config := &genai.GenerateContentConfig{}
	if req.System != "" {
		system = append([]*genai.Part{{Text: req.System}}, system...)
	}
	if len(system) > 0 {
		config.SystemInstruction = &genai.Content{Parts: system}
	}
	if req.Temperature != nil {
		config.Temperature = genai.Ptr(float32(*req.Temperature))
	}
	if req.MaxTokens > 0 {
		config.MaxOutputTokens = int32(req.MaxTokens)
	}
	if len(req.Tools) > 0 {
		decls := make([]*genai.FunctionDeclaration, 0, len(req.Tools))
		for _, t := range req.Tools {
			d := &genai.FunctionDeclaration{Name: t.Name, Description: t.Description}
			if len(t.Parameters) > 0 {
				// parametersJsonSchema takes full JSON Schema, where the
				// older `parameters` field only takes an OpenAPI subset.
				d.ParametersJsonSchema = t.Parameters
			}
			decls = append(decls, d)
		}
		config.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}
	return config
}

// history translates the conversation into Gemini contents. System messages
// inside the conversation have no place there and join the system
// instruction; consecutive tool results become one user turn with one
// functionResponse part each, as Gemini expects after parallel calls. A
// user message's pictures (its files' in images) go after its text as
// inline data.
func history(msgs []switchboard.Message, images map[string]providers.Image) (contents []*genai.Content, system []*genai.Part, err error) {
	for i, m := range msgs {
		switch m.Role {
		case switchboard.RoleSystem:
			system = append(system, &genai.Part{Text: m.Content})
		case switchboard.RoleUser:
			text := m.Content
			if m.Author != "" {
				text = "[" + m.Author + "]: " + text
			}
			c := genai.NewContentFromText(text, genai.RoleUser)
			for _, f := range m.Files {
				if img, ok := images[f.Path]; ok {
					c.Parts = append(c.Parts, genai.NewPartFromBytes(img.Data, img.Type))
				}
			}
			contents = append(contents, c)
		case switchboard.RoleAssistant:
			var parts []*genai.Part
			if m.Content != "" {
				parts = append(parts, &genai.Part{Text: m.Content})
			}
			for j, call := range m.ToolCalls {
				args := map[string]any{}
				if len(call.Args) > 0 {
					if err := json.Unmarshal(call.Args, &args); err != nil {
						return nil, nil, fmt.Errorf("message %d: tool call %s: arguments: %w", i, call.ID, err)
					}
				}
				part := &genai.Part{FunctionCall: &genai.FunctionCall{ID: call.ID, Name: call.Name, Args: args}}
				if j == 0 {
					part.ThoughtSignature = []byte(skipThoughtSignature)
				}
				parts = append(parts, part)
			}
			if len(parts) == 0 {
				continue // Gemini rejects a turn without parts
			}
			contents = append(contents, &genai.Content{Role: genai.RoleModel, Parts: parts})
		case switchboard.RoleTool:
			key := "result"
			if m.IsError {
				key = "error"
			}
			part := &genai.Part{FunctionResponse: &genai.FunctionResponse{
				ID: m.ToolCallID, Name: m.ToolName, Response: map[string]any{key: m.Content},
			}}
			if i > 0 && msgs[i-1].Role == switchboard.RoleTool {
				last := contents[len(contents)-1]
				last.Parts = append(last.Parts, part)
				continue
			}
			contents = append(contents, &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{part}})
		default:
			return nil, nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return contents, system, nil
}

// streamState is what one response has said so far.
type streamState struct {
	finish  genai.FinishReason
	blocked genai.BlockedReason
	model   string
	// usage is the server's running total; the last one seen is the answer.
	usage *genai.GenerateContentResponseUsageMetadata
}

// consume yields the events of one chunk. It reports false when the consumer
// stopped ranging.
func (st *streamState) consume(chunk *genai.GenerateContentResponse, yield func(providers.Event, error) bool) bool {
	if chunk == nil {
		return true
	}
	if chunk.ModelVersion != "" {
		st.model = chunk.ModelVersion
	}
	if chunk.UsageMetadata != nil {
		st.usage = chunk.UsageMetadata
	}
	if f := chunk.PromptFeedback; f != nil && f.BlockReason != "" {
		st.blocked = f.BlockReason
	}
	if len(chunk.Candidates) == 0 || chunk.Candidates[0] == nil {
		return true
	}
	cand := chunk.Candidates[0]
	if cand.Content != nil {
		for _, part := range cand.Content.Parts {
			if ev, ok := partEvent(part); ok && !yield(ev, nil) {
				return false
			}
		}
	}
	if cand.FinishReason != "" && cand.FinishReason != genai.FinishReasonUnspecified {
		st.finish = cand.FinishReason
	}
	return true
}

// partEvent turns one response part into an event. Gemini sends function
// calls whole, one part each, so every part is one distinct call.
func partEvent(part *genai.Part) (providers.Event, bool) {
	switch {
	case part == nil, part.Thought:
		return providers.Event{}, false
	case part.FunctionCall != nil:
		fc := part.FunctionCall
		args := json.RawMessage("{}")
		if len(fc.Args) > 0 {
			b, err := json.Marshal(fc.Args)
			if err == nil { // the SDK decoded it from JSON, so it encodes
				args = b
			}
		}
		id := fc.ID
		if id == "" {
			id = newCallID()
		}
		return providers.Event{Kind: providers.EventToolCall, ToolCall: switchboard.ToolCall{ID: id, Name: fc.Name, Args: args}}, true
	case part.Text != "":
		return providers.Event{Kind: providers.EventTextDelta, Text: part.Text}, true
	}
	return providers.Event{}, false
}

// usage counts thinking tokens as completion and tool-use prompt tokens as
// prompt, as they are billed, so that prompt + completion = total; cached
// tokens are the part of the prompt read from the context cache
// (cachedContentTokenCount).
func usage(u *genai.GenerateContentResponseUsageMetadata) switchboard.Usage {
	return switchboard.Usage{
		PromptTokens:     int(u.PromptTokenCount + u.ToolUsePromptTokenCount),
		CompletionTokens: int(u.CandidatesTokenCount + u.ThoughtsTokenCount),
		TotalTokens:      int(u.TotalTokenCount),
		// Already counted in PromptTokenCount: the part of it read from
		// the cached content.
		CachedTokens: int(u.CachedContentTokenCount),
	}
}

func newCallID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b)
}
