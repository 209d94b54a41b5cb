// Package demo is the offline demo model: what the gateway answers with
// when no provider credentials are configured. It is deterministic, streams
// word by word, calls a tool when the text plainly asks for one, and always
// says what it is, so nobody mistakes it for a real model.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"regexp"
	"strings"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// Model is the name the demo answers with; listeners show it beside replies.
const Model = "demo (offline)"

// Provider is the demo model. Hint is appended to its plain answers: the
// environment variable or config key that would enable a real model.
type Provider struct {
	Hint string
}

var exprPattern = regexp.MustCompile(`[-+*/^%().\d\s]*\d[-+*/^%().\d\s]*[-+*/^%][-+*/^%().\d\s]*\d[)\s]*`)

// Stream implements providers.Provider.
func (p *Provider) Stream(ctx context.Context, req providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		text, call := p.answer(req)
		words := strings.SplitAfter(text, " ")
		for _, w := range words {
			if w == "" {
				continue
			}
			if err := ctx.Err(); err != nil {
				yield(providers.Event{}, fmt.Errorf("demo: %w", err))
				return
			}
			if !yield(providers.Event{Kind: providers.EventTextDelta, Text: w}, nil) {
				return
			}
		}
		if call != nil {
			call.ID = fmt.Sprintf("demo_%s_%d", call.Name, len(req.Messages))
			if !yield(providers.Event{Kind: providers.EventToolCall, ToolCall: *call}, nil) {
				return
			}
		}
		completion := len(words)
		prompt := 0
		for _, m := range req.Messages {
			prompt += len(strings.Fields(m.Content))
		}
		prompt += len(strings.Fields(req.System))
		if !yield(providers.Event{Kind: providers.EventUsage, Usage: switchboard.Usage{
			PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		}}, nil) {
			return
		}
		stop := "stop"
		if call != nil {
			stop = "tool_calls"
		}
		yield(providers.Event{Kind: providers.EventDone, StopReason: stop, Model: Model}, nil)
	}
}

// answer decides the reply: after tool results, report them; otherwise call
// a tool if the last user message plainly asks for one, or echo.
func (p *Provider) answer(req providers.Request) (string, *switchboard.ToolCall) {
	if len(req.Messages) == 0 {
		return "Hello! I am the offline demo model.", nil
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == switchboard.RoleTool {
		var b strings.Builder
		for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role == switchboard.RoleTool; i-- {
			m := req.Messages[i]
			if m.IsError {
				fmt.Fprintf(&b, "The tool %s failed: %s. ", m.ToolName, m.Content)
			} else {
				fmt.Fprintf(&b, "The tool %s says: %s. ", m.ToolName, m.Content)
			}
		}
		b.WriteString("(Offline demo model.)")
		return b.String(), nil
	}
	text := last.Content
	lower := strings.ToLower(text)
	has := func(name string) bool {
		for _, t := range req.Tools {
			if t.Name == name {
				return true
			}
		}
		return false
	}
	// A click on a card comes back as "Clicked …": answer it, do not take
	// the card's own words ("card") as a request for another one.
	isClick := strings.HasPrefix(text, "Clicked ") || strings.HasPrefix(text, "Chose ") || strings.HasPrefix(text, "Submitted ")
	if req.Tools != nil && !isClick {
		switch {
		case has("current_time") && (strings.Contains(lower, "time") || strings.Contains(lower, "clock")):
			return "Let me check the clock.", call("current_time", map[string]any{})
		case has("calculator") && exprPattern.MatchString(text):
			expr := strings.TrimSpace(exprPattern.FindString(text))
			return "Let me calculate that.", call("calculator", map[string]any{"expression": expr})
		case has("present") && (strings.Contains(lower, "card") || strings.Contains(lower, "menu")):
			return "Here is a card.", call("present", map[string]any{
				"title":   "Demo card",
				"text":    "This card was made by the **offline demo model**.",
				"fields":  []map[string]string{{"label": "Model", "value": Model}},
				"buttons": []map[string]string{{"label": "Yes", "value": "yes", "style": "primary"}, {"label": "No", "value": "no"}},
			})
		}
	}
	reply := fmt.Sprintf("I am the offline demo model, so I can only echo: %q.", strings.TrimSpace(text))
	if p.Hint != "" {
		reply += " " + p.Hint
	}
	return reply, nil
}

func call(name string, args map[string]any) *switchboard.ToolCall {
	raw, _ := json.Marshal(args) // plain maps of strings never fail to encode
	return &switchboard.ToolCall{Name: name, Args: raw}
}
