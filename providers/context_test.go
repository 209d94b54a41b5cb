package providers_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

func TestContextWindow(t *testing.T) {
	for model, want := range map[string]int{
		"gpt-4o-mini": 128_000, "gpt-4.1-nano": 1_047_576, "gpt-4": 8_192, "GPT-4-Turbo": 128_000,
		"claude-sonnet-4-5": 200_000, "models/gemini-2.5-pro": 1_048_576, "gemini-1.5-pro-002": 2_097_152,
		"o3-mini": 200_000, "llama3.1:8b": 0, "": 0,
	} {
		if got := providers.ContextWindow(model); got != want {
			t.Errorf("ContextWindow(%q) = %d, want %d", model, got, want)
		}
	}
}

// The estimate grows with every part of a request: text, authors, tool
// calls and their arguments, tool specs, the system prompt.
func TestEstimateTokens(t *testing.T) {
	base := providers.Request{Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hello"}}}
	n := providers.EstimateTokens(base)
	for name, more := range map[string]providers.Request{
		"longer text": {Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: strings.Repeat("hello ", 100)}}},
		"system":      {System: "You are kind.", Messages: base.Messages},
		"tool call": {Messages: append(base.Messages, switchboard.Message{Role: switchboard.RoleAssistant,
			ToolCalls: []switchboard.ToolCall{{ID: "c1", Name: "calculator", Args: json.RawMessage(`{"expression":"2+2"}`)}}})},
		"tools": {Messages: base.Messages, Tools: []providers.ToolSpec{{Name: "calculator", Description: "adds", Parameters: json.RawMessage(`{"type":"object"}`)}}},
	} {
		if got := providers.EstimateTokens(more); got <= n {
			t.Errorf("%s: %d tokens, not more than the bare request's %d", name, got, n)
		}
	}
	// About four bytes a token.
	big := providers.Request{Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: strings.Repeat("x", 40_000)}}}
	if got := providers.EstimateTokens(big); got < 9_000 || got > 11_000 {
		t.Errorf("40,000 bytes: %d tokens, want about 10,000", got)
	}
}

func TestContextTooLongWords(t *testing.T) {
	for _, tc := range []struct {
		status int
		msg    string
		want   bool
	}{
		{400, "prompt is too long: 208370 tokens > 200000 maximum", true},
		{400, "This model's maximum context length is 4096 tokens.", true},
		{413, "request_too_large", true},
		{400, "Invalid value for 'temperature'.", false},
		{500, "maximum context length", false},
	} {
		if got := providers.ContextTooLong(tc.status, tc.msg); got != tc.want {
			t.Errorf("ContextTooLong(%d, %q) = %v, want %v", tc.status, tc.msg, got, tc.want)
		}
	}
}
