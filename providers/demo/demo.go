// Package demo is the offline demo model: what the gateway answers with
// when no provider credentials are configured. It is deterministic, streams
// word by word, calls a tool when the text plainly asks for one (the time
// in a city, arithmetic, a card of options), tells people what the tool
// found in their words rather than the model's, and says what it is, so
// nobody mistakes it for a real model: every reply carries the model name
// Model, which listeners show beside it, and the first reply of a
// conversation says so in its text too.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"
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

// label starts the first reply of a conversation, for channels that do
// not show a reply's model (the terminal).
const label = "I am the offline demo model. "

// answer decides the reply: after tool results, say what they mean;
// otherwise call a tool if the last user message plainly asks for one,
// or say what the demo can do.
func (p *Provider) answer(req providers.Request) (string, *switchboard.ToolCall) {
	if len(req.Messages) == 0 {
		return "Hello! I am the offline demo model.", nil
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == switchboard.RoleTool {
		return phraseResults(req.Messages), nil
	}
	first := !slices.ContainsFunc(req.Messages, func(m switchboard.Message) bool {
		return m.Role == switchboard.RoleAssistant
	})
	text, call := p.reply(req, strings.TrimSpace(last.Content))
	if first && !strings.Contains(text, "offline demo model") {
		text = label + text
	}
	return text, call
}

// reply answers a user's message.
func (p *Provider) reply(req providers.Request, text string) (string, *switchboard.ToolCall) {
	var tools []string
	if req.Tools != nil { // nil: the last call of a turn, which may not use tools
		for _, t := range req.Tools {
			tools = append(tools, t.Name)
		}
	}
	has := func(name string) bool { return slices.Contains(tools, name) }

	// A click on a card comes back as `Clicked "label" on "title"`: the
	// label is what the person asked for.
	picked, isClick := clicked(text)
	if isClick {
		text = picked
	}
	if fields, ok := submitted(text); ok {
		return "Thanks, I got " + fields + ".", nil
	}
	w, expr := words(text), expressionIn(text)
	switch {
	case has("current_time") && asksTime(w):
		zone, _ := zoneIn(text)
		args := map[string]any{}
		if zone != "" {
			args["timezone"] = zone
		}
		return "Let me check the clock.", call("current_time", args)
	case has("calculator") && expr != "":
		return "Let me work that out.", call("calculator", map[string]any{"expression": expr})
	case has("present") && asksForm(w):
		return "Here is a form; what you send comes back to me.", call("present", formCard)
	case has("present") && asksOptions(w):
		return "Here are a few things I can do without an API key.", call("present", optionsCard)
	case isClick:
		return fmt.Sprintf("You picked %s.", picked), nil
	case greets(w):
		return p.withHint("Hello! I am the offline demo model. " + capabilities(tools)), nil
	}
	if c := capabilities(tools); c != "" {
		return p.withHint(fmt.Sprintf("I am the offline demo model, so I can't answer %q. %s", text, c)), nil
	}
	return p.withHint(fmt.Sprintf("I am the offline demo model, so I can only echo: %q.", text)), nil
}

func (p *Provider) withHint(reply string) string {
	if p.Hint == "" {
		return reply
	}
	return reply + " " + p.Hint
}

// optionsCard is what "show me some options" shows: buttons whose labels
// are requests the demo answers, so a click leads somewhere.
var optionsCard = map[string]any{
	"title": "Try the demo",
	"text":  "Each of these works with the offline demo model, without an API key.",
	"buttons": []map[string]string{
		{"label": "Time in Tokyo", "style": "primary"},
		{"label": "Time in New York"},
		{"label": "What is 2^10?"},
	},
}

// formCard is what "show me a form" shows: every kind of field, so a
// channel's form (a modal in Slack and Discord, field by field in the
// terminal) can be tried without an API key.
var formCard = map[string]any{
	"title": "Book a call",
	"text":  "A demo form: the offline demo model reads back what you send.",
	"form": map[string]any{
		"submit_label": "Book",
		"inputs": []map[string]any{
			{"name": "name", "label": "Your name", "required": true},
			{"name": "email", "label": "E-mail", "type": "email", "required": true},
			{"name": "seats", "label": "Seats", "type": "number", "placeholder": "5"},
			{"name": "notes", "label": "Anything else?", "type": "textarea"},
		},
	},
}

// capabilities says what to try, for the tools the guide has.
func capabilities(tools []string) string {
	var can []string
	if slices.Contains(tools, "current_time") {
		can = append(can, `tell the time in a city ("what time is it in Tokyo?")`)
	}
	if slices.Contains(tools, "calculator") {
		can = append(can, `work out arithmetic ("what is 2*(3+4)?")`)
	}
	if slices.Contains(tools, "present") {
		can = append(can, `show a card of options ("show me some options")`, `show a form ("show me a form")`)
	}
	switch len(can) {
	case 0:
		return ""
	case 1:
		return "I can " + can[0] + "; /help lists the commands."
	}
	return "I can " + strings.Join(can[:len(can)-1], ", ") + " and " + can[len(can)-1] + "; /help lists the commands."
}

// clicked unwraps what a click or choice on a card sends as the user's
// message (tools.DescribeAction): `Clicked "Yes" on "Title"` and `Chose
// "Berlin" in "Title"` give the label. A form's submission stays as is.
func clicked(text string) (string, bool) {
	for _, prefix := range []string{"Clicked ", "Chose "} {
		rest, ok := strings.CutPrefix(text, prefix)
		if !ok || !strings.HasPrefix(rest, `"`) {
			continue
		}
		var label string
		if err := json.NewDecoder(strings.NewReader(rest)).Decode(&label); err == nil {
			return label, true
		}
	}
	return "", false
}

// submitted reads a form's submission (tools.DescribeAction):
// `Submitted "Title": {"email":"ann@example.com","name":"Ann"}` gives
// `email "ann@example.com" and name "Ann"`, by name as the gateway sorts
// them; empty fields are left out.
func submitted(text string) (string, bool) {
	if !strings.HasPrefix(text, "Submitted ") {
		return "", false
	}
	i := strings.Index(text, ": {")
	if i < 0 {
		return "", false
	}
	var values map[string]string
	if err := json.Unmarshal([]byte(text[i+2:]), &values); err != nil {
		return "", false
	}
	keys := slices.Sorted(maps.Keys(values))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if values[k] != "" {
			parts = append(parts, fmt.Sprintf("%s %q", k, values[k]))
		}
	}
	switch len(parts) {
	case 0:
		return "the form, empty", true
	case 1:
		return parts[0], true
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1], true
}

// asksTime: the text asks for the time, the time zone or the date.
func asksTime(w []string) bool {
	return asksDate(w) || slices.ContainsFunc(w, func(x string) bool {
		return x == "time" || x == "clock" || x == "timezone"
	})
}

// asksDate: the text asks for the date or the day.
func asksDate(w []string) bool {
	for i, x := range w {
		switch x {
		case "date", "today", "weekday":
			return true
		case "day":
			if i > 0 && (w[i-1] == "what" || w[i-1] == "which") {
				return true
			}
		}
	}
	return false
}

// asksForm: the text asks to be shown a form.
func asksForm(w []string) bool {
	return slices.ContainsFunc(w, func(x string) bool { return x == "form" || x == "forms" })
}

// asksOptions: the text asks to be shown choices.
func asksOptions(w []string) bool {
	return slices.ContainsFunc(w, func(x string) bool {
		switch x {
		case "option", "options", "choice", "choices", "card", "menu", "button", "buttons":
			return true
		}
		return false
	})
}

// greets: the text says hello or asks what the demo can do.
func greets(w []string) bool {
	if len(w) == 0 {
		return false
	}
	switch w[0] {
	case "hi", "hello", "hey", "hallo", "howdy", "help":
		return true
	}
	return slices.Contains(w, "help") || strings.Contains(strings.Join(w, " "), "what can you do")
}

func call(name string, args map[string]any) *switchboard.ToolCall {
	raw, _ := json.Marshal(args) // plain maps of strings never fail to encode
	return &switchboard.ToolCall{Name: name, Args: raw}
}
