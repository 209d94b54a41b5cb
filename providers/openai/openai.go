// Package openai adapts OpenAI's Chat Completions API to providers.Provider
// through the official github.com/openai/openai-go SDK and its streaming
// endpoint, POST {base_url}/chat/completions with "stream": true.
//
// The same wire is spoken by many other servers (Ollama's /v1, vLLM, LM
// Studio), so nothing here assumes OpenAI itself: the API key may be empty
// and a stream without a usage chunk is fine.
package openai

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// DefaultOllamaBaseURL is where a local Ollama serves its OpenAI-compatible
// API.
const DefaultOllamaBaseURL = "http://127.0.0.1:11434/v1"

// openAIHost is the API whose newer models refuse max_tokens.
const openAIHost = "api.openai.com"

// Provider streams chat completions from one configured endpoint.
type Provider struct {
	name  string
	model string
	// legacyMaxTokens sends max_tokens instead of max_completion_tokens:
	// OpenAI's reasoning models reject the former, while compatible servers
	// have long known only it.
	legacyMaxTokens bool
	chat            sdk.ChatCompletionService
}

var _ providers.Provider = (*Provider)(nil)

// New builds the adapter. cfg.BaseURL ends in /v1 as the SDK takes it
// (https://api.openai.com/v1 when empty).
//
// Only the chat completions service is built, not sdk.NewClient: the client
// reads OPENAI_API_KEY and OPENAI_BASE_URL from the environment, which would
// send an OpenAI key to whatever server base_url names (a local Ollama, say)
// and let the environment override the gateway's own configuration. SDK
// retries are off, since the providers wrapper retries once for every vendor.
func New(cfg providers.Config) (*Provider, error) {
	name := cmp.Or(cfg.Name, "openai")
	opts, remote, err := clientOptions(name, cfg)
	if err != nil {
		return nil, err
	}
	return &Provider{
		name:            name,
		model:           cfg.Model,
		legacyMaxTokens: remote,
		chat:            sdk.NewChatCompletionService(opts...),
	}, nil
}

// clientOptions are a service's options for cfg. compatible reports a
// base URL that is not OpenAI's own: an OpenAI-compatible server.
func clientOptions(name string, cfg providers.Config) (opts []option.RequestOption, compatible bool, err error) {
	opts = []option.RequestOption{
		option.WithEnvironmentProduction(),
		option.WithMaxRetries(0),
	}
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, false, fmt.Errorf("%s: base URL %q: not an absolute URL", name, cfg.BaseURL)
		}
		compatible = u.Hostname() != openAIHost
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" { // none is sent otherwise, which local servers accept
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return opts, compatible, nil
}

// NewOllama is New with Ollama's local endpoint as the default base URL.
func NewOllama(cfg providers.Config) (*Provider, error) {
	cfg.BaseURL = cmp.Or(cfg.BaseURL, DefaultOllamaBaseURL)
	cfg.Name = cmp.Or(cfg.Name, "ollama")
	return New(cfg)
}

// Stream implements providers.Provider.
func (p *Provider) Stream(ctx context.Context, req providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		params, err := p.params(req)
		if err != nil {
			yield(providers.Event{}, fmt.Errorf("%s: %w", p.name, err))
			return
		}
		var term terminator
		var raw *http.Response
		sdkStream := p.chat.NewStreaming(ctx, params, option.WithMiddleware(term.watch), option.WithResponseInto(&raw))
		// The SDK's stream is only used for its error: the same response
		// is read as a stream of the lean chunk type (see chunk).
		stream := ssestream.NewStream[chunk](ssestream.NewDecoder(raw), sdkStream.Err())
		defer stream.Close()

		t := newTurn()
		for stream.Next() {
			more, err := t.consume(stream.Current(), yield)
			if err != nil {
				yield(providers.Event{}, p.streamError(ctx, answered(raw), err))
				return
			}
			if !more {
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(providers.Event{}, p.streamError(ctx, answered(raw), err))
			return
		}
		if !term.seen() {
			yield(providers.Event{}, p.streamError(ctx, answered(raw), errors.New("stream ended before data: [DONE]")))
			return
		}
		// [DONE] closes the response even when no finish_reason came.
		more, err := t.flush(yield)
		if err != nil {
			yield(providers.Event{}, p.streamError(ctx, answered(raw), err))
			return
		}
		if !more {
			return
		}
		if u, ok := t.usage(); ok {
			if !yield(providers.Event{Kind: providers.EventUsage, Usage: u}, nil) {
				return
			}
		}
		yield(providers.Event{Kind: providers.EventDone, StopReason: t.finish, Model: cmp.Or(t.model, params.Model)}, nil)
	}
}

// answered reports a 2xx response: a failure after it is a broken stream.
func answered(res *http.Response) bool {
	return res != nil && res.StatusCode >= 200 && res.StatusCode <= 299
}

// params builds the request. Errors here are the request's own fault and
// would fail again, so they are not *providers.Error.
func (p *Provider) params(req providers.Request) (sdk.ChatCompletionNewParams, error) {
	model := cmp.Or(req.Model, p.model)
	if model == "" {
		return sdk.ChatCompletionNewParams{}, errors.New("no model configured")
	}
	msgs, err := history(req.System, req.Messages, req.Images)
	if err != nil {
		return sdk.ChatCompletionNewParams{}, err
	}
	params := sdk.ChatCompletionNewParams{
		Model:    model,
		Messages: msgs,
		// Without it the stream carries no token counts at all.
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	if req.Temperature != nil {
		params.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.MaxTokens > 0 {
		if p.legacyMaxTokens {
			params.MaxTokens = param.NewOpt(int64(req.MaxTokens))
		} else {
			params.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
		}
	}
	for _, spec := range req.Tools {
		fn, err := function(spec)
		if err != nil {
			return sdk.ChatCompletionNewParams{}, err
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	return params, nil
}

// function declares a tool. The schema's top-level members are kept as raw
// JSON, so everything below them reaches the wire byte for byte (numbers
// are not rounded through float64).
func function(spec providers.ToolSpec) (shared.FunctionDefinitionParam, error) {
	fn := shared.FunctionDefinitionParam{Name: spec.Name}
	if spec.Description != "" {
		fn.Description = param.NewOpt(spec.Description)
	}
	if len(spec.Parameters) == 0 {
		return fn, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(spec.Parameters, &members); err != nil {
		return fn, fmt.Errorf("tool %s: parameters are not a JSON object: %w", spec.Name, err)
	}
	fn.Parameters = make(shared.FunctionParameters, len(members))
	for k, v := range members {
		fn.Parameters[k] = v
	}
	return fn, nil
}

// errorPrefix marks a failed tool's result: the chat wire has no error
// flag on tool messages, so the model is told in words.
const errorPrefix = "Error: "

// history translates the conversation: the system prompt first, then every
// message in order. An assistant message keeps its text and all its tool
// calls; each tool result becomes a role "tool" message that names its call.
// A user message whose files have pictures in images is its text, then
// each picture as a data URL.
//
// Messages of text and tool calls are encoded here (wireMessage) and given
// to the SDK as raw JSON (param.Override): its reflective encoder took
// about 1.8 µs a message, and a guide with a 20-message memory sends 20 of
// them every model call. A user message with pictures is the SDK's type.
func history(system string, msgs []switchboard.Message, images map[string]providers.Image) ([]sdk.ChatCompletionMessageParamUnion, error) {
	out := make([]sdk.ChatCompletionMessageParamUnion, 0, len(msgs)+1)
	if system != "" {
		out = append(out, sdk.SystemMessage(system))
	}
	for i, m := range msgs {
		w := wireMessage{Role: string(m.Role)}
		switch m.Role {
		case switchboard.RoleSystem:
			w.Content = &m.Content
		case switchboard.RoleUser:
			text := m.Content
			if m.Author != "" { // several people may share a session
				text = "[" + m.Author + "]: " + text
			}
			var parts []sdk.ChatCompletionContentPartUnionParam
			for _, f := range m.Files {
				if img, ok := images[f.Path]; ok {
					parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{
						URL: "data:" + img.Type + ";base64," + base64.StdEncoding.EncodeToString(img.Data),
					}))
				}
			}
			if len(parts) > 0 {
				out = append(out, sdk.UserMessage(append([]sdk.ChatCompletionContentPartUnionParam{sdk.TextContentPart(text)}, parts...)))
				continue
			}
			w.Content = &text
		case switchboard.RoleAssistant:
			if m.Content != "" || len(m.ToolCalls) == 0 {
				w.Content = &m.Content
			}
			for _, call := range m.ToolCalls {
				args := string(call.Args)
				if args == "" {
					args = "{}"
				}
				if !json.Valid([]byte(args)) {
					return nil, fmt.Errorf("message %d: tool call %s: arguments are not valid JSON", i, call.ID)
				}
				w.ToolCalls = append(w.ToolCalls, wireToolCall{ID: call.ID, Type: "function", Function: wireFunction{Name: call.Name, Arguments: args}})
			}
		case switchboard.RoleTool:
			content := m.Content
			if m.IsError {
				content = errorPrefix + content
			}
			w.Content, w.ToolCallID = &content, m.ToolCallID
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		raw, err := json.Marshal(w)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		out = append(out, param.Override[sdk.ChatCompletionMessageParamUnion](json.RawMessage(raw)))
	}
	return out, nil
}

// wireMessage is a message of the Chat Completions API without pictures:
// the fields ChatCompletion{System,User,Assistant,Tool}MessageParam send
// for text and tool calls (TestToolResultsRoundTrip pins them).
type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}
