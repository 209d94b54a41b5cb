// Package anthropic adapts Anthropic's Messages API to providers.Provider
// through the official github.com/anthropics/anthropic-sdk-go SDK and its
// streaming endpoint, POST /v1/messages with "stream": true.
package anthropic

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

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// DefaultMaxTokens is sent when the request sets no limit: the Messages API
// requires max_tokens on every call.
const DefaultMaxTokens = 4096

// Provider streams responses from one Anthropic configuration.
type Provider struct {
	name   string
	model  string
	client sdk.Client
}

var _ providers.Provider = (*Provider)(nil)

// New builds the adapter. cfg.BaseURL is the host root (the SDK adds
// /v1/messages).
//
// The SDK's own retries are off, since the providers.Resilient wrapper
// retries once for every vendor. Its environment defaults (ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL, profile files) are off too: the gateway's configuration
// alone says which key and endpoint are used.
func New(cfg providers.Config) (*Provider, error) {
	name := cmp.Or(cfg.Name, "anthropic")
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithMaxRetries(0),
	}
	if cfg.BaseURL != "" {
		if _, err := url.Parse(cfg.BaseURL); err != nil {
			return nil, fmt.Errorf("%s: base URL: %w", name, err)
		}
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Provider{name: name, model: cfg.Model, client: sdk.NewClient(opts...)}, nil
}

// Stream implements providers.Provider.
func (p *Provider) Stream(ctx context.Context, req providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		params, err := p.params(req)
		if err != nil {
			yield(providers.Event{}, fmt.Errorf("%s: %w", p.name, err))
			return
		}
		var status int // of the response, once it came
		seen := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			res, err := next(r)
			if res != nil {
				status = res.StatusCode
			}
			return res, err
		})
		stream := p.client.Messages.NewStreaming(ctx, params, seen)
		answered := func() bool { return status >= 200 && status <= 299 }
		defer stream.Close()

		st := newTurn()
		for stream.Next() {
			more, err := st.consume(stream.Current(), yield)
			if err != nil {
				yield(providers.Event{}, p.streamError(ctx, answered(), err))
				return
			}
			if !more {
				return
			}
			if st.stopped {
				break // message_stop: the body has nothing more to say
			}
		}
		if err := stream.Err(); err != nil {
			yield(providers.Event{}, p.streamError(ctx, answered(), err))
			return
		}
		if !st.stopped {
			yield(providers.Event{}, p.streamError(ctx, answered(), errors.New("stream ended before message_stop")))
			return
		}
		if !yield(providers.Event{Kind: providers.EventUsage, Usage: st.usage()}, nil) {
			return
		}
		yield(providers.Event{Kind: providers.EventDone, StopReason: st.stopReason, Model: cmp.Or(st.model, string(params.Model))}, nil)
	}
}

// params builds the Messages request. Errors here are the request's own
// fault and would fail again, so they are not *providers.Error.
func (p *Provider) params(req providers.Request) (sdk.MessageNewParams, error) {
	model := cmp.Or(req.Model, p.model)
	if model == "" {
		return sdk.MessageNewParams{}, errors.New("no model configured")
	}
	msgs, system, err := history(req.Messages, req.Images)
	if err != nil {
		return sdk.MessageNewParams{}, err
	}
	if req.System != "" {
		system = append([]sdk.TextBlockParam{{Text: req.System}}, system...)
	}
	params := sdk.MessageNewParams{
		Model:     sdk.Model(model),
		MaxTokens: DefaultMaxTokens,
		Messages:  msgs,
		System:    system,
	}
	if req.MaxTokens > 0 {
		params.MaxTokens = int64(req.MaxTokens)
	}
	if req.Temperature != nil {
		params.Temperature = param.NewOpt(*req.Temperature)
	}
	for _, t := range req.Tools {
		tool, err := toolParam(t)
		if err != nil {
			return sdk.MessageNewParams{}, err
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: tool})
	}
	return params, nil
}

// toolParam declares a tool with its JSON Schema sent exactly as given;
// input_schema is required, so a tool without parameters takes an empty
// object.
func toolParam(t providers.ToolSpec) (*sdk.ToolParam, error) {
	schema := t.Parameters
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	var probe map[string]any
	if err := json.Unmarshal(schema, &probe); err != nil {
		return nil, fmt.Errorf("tool %s: parameters are not a JSON object: %w", t.Name, err)
	}
	tool := &sdk.ToolParam{
		Name:        t.Name,
		InputSchema: param.Override[sdk.ToolInputSchemaParam](schema),
	}
	if t.Description != "" {
		tool.Description = param.NewOpt(t.Description)
	}
	return tool, nil
}

// history translates the conversation into Messages turns. Every message
// keeps all of its content: an assistant message becomes one turn with its
// text and one tool_use block per call, and the tool results that answer it
// become one user turn with one tool_result block each. Consecutive messages
// of the same role share one turn, as the API wants roles to alternate.
// System messages inside the conversation join the system prompt. The
// pictures a user message's files have in images go before its text, as
// Anthropic advises.
func history(msgs []switchboard.Message, images map[string]providers.Image) ([]sdk.MessageParam, []sdk.TextBlockParam, error) {
	var (
		turns  []sdk.MessageParam
		system []sdk.TextBlockParam
	)
	add := func(role sdk.MessageParamRole, blocks ...sdk.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return // the API rejects a turn without content
		}
		if n := len(turns); n > 0 && turns[n-1].Role == role {
			turns[n-1].Content = append(turns[n-1].Content, blocks...)
			return
		}
		turns = append(turns, sdk.MessageParam{Role: role, Content: blocks})
	}
	for i, m := range msgs {
		switch m.Role {
		case switchboard.RoleSystem:
			if m.Content != "" {
				system = append(system, sdk.TextBlockParam{Text: m.Content})
			}
		case switchboard.RoleUser:
			text := m.Content
			if m.Author != "" {
				text = "[" + m.Author + "]: " + text
			}
			var blocks []sdk.ContentBlockParamUnion
			for _, f := range m.Files {
				if img, ok := images[f.Path]; ok {
					blocks = append(blocks, sdk.NewImageBlockBase64(img.Type, base64.StdEncoding.EncodeToString(img.Data)))
				}
			}
			if text != "" { // the API rejects empty text blocks
				blocks = append(blocks, sdk.NewTextBlock(text))
			}
			add(sdk.MessageParamRoleUser, blocks...)
		case switchboard.RoleAssistant:
			blocks := make([]sdk.ContentBlockParamUnion, 0, 1+len(m.ToolCalls))
			if m.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			for _, call := range m.ToolCalls {
				input := call.Args
				if len(input) == 0 {
					input = json.RawMessage(`{}`)
				}
				if !json.Valid(input) {
					return nil, nil, fmt.Errorf("message %d: tool call %s: arguments are not valid JSON", i, call.ID)
				}
				blocks = append(blocks, sdk.NewToolUseBlock(call.ID, input, call.Name))
			}
			add(sdk.MessageParamRoleAssistant, blocks...)
		case switchboard.RoleTool:
			result := sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID, IsError: param.NewOpt(m.IsError)}
			if m.Content != "" { // an empty text block would be rejected; no content is fine
				result.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Content}}}
			}
			add(sdk.MessageParamRoleUser, sdk.ContentBlockParamUnion{OfToolResult: &result})
		default:
			return nil, nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return turns, system, nil
}
