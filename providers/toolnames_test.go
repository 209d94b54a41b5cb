package providers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// A tool named "server.tool" (an MCP server's) reaches OpenAI under a name
// its function-name rule accepts, in the tool list and in the history
// alike, and the model's call comes back under the gateway's name.
func TestDottedToolNamesCrossTheWire(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	long := "docs." + strings.Repeat("x", 80)
	llm.Push(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c2", Name: "github__create_issue", Args: `{}`}}})
	var slept []time.Duration
	p := resilient(t, llm, "main", &slept)
	req := providers.Request{
		Tools: []providers.ToolSpec{
			{Name: "calculator", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "github.create_issue", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: long, Parameters: json.RawMessage(`{"type":"object"}`)},
		},
		Messages: []switchboard.Message{
			{Role: switchboard.RoleUser, Content: "file it"},
			{Role: switchboard.RoleAssistant, ToolCalls: []switchboard.ToolCall{{ID: "c1", Name: "github.create_issue", Args: json.RawMessage(`{}`)}}},
			{Role: switchboard.RoleTool, ToolCallID: "c1", ToolName: "github.create_issue", Content: "#12"},
		},
	}
	var calls []string
	for ev, err := range p.Stream(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == providers.EventToolCall {
			calls = append(calls, ev.ToolCall.Name)
		}
	}
	if len(calls) != 1 || calls[0] != "github.create_issue" {
		t.Errorf("the model's call came back as %v; want github.create_issue", calls)
	}
	sent := llm.Requests()[0]
	var names []string
	for _, tl := range sent.Tools {
		names = append(names, tl.Function.Name)
	}
	if names[0] != "calculator" || names[1] != "github__create_issue" || len(names[2]) > 64 || !strings.HasPrefix(names[2], "docs__xxx") {
		t.Errorf("tool names sent: %v", names)
	}
	if got := sent.Messages[1].ToolCalls[0].Function.Name; got != "github__create_issue" {
		t.Errorf("the history's call was sent as %q", got)
	}
	// The caller's request is left as it was.
	if req.Tools[1].Name != "github.create_issue" || req.Messages[1].ToolCalls[0].Name != "github.create_issue" {
		t.Error("the caller's request was changed")
	}
}
