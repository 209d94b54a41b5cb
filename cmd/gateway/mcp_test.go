package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// serveTestMCP is an issue tracker's MCP server on stdio: create_issue
// files one (and says which token it was given), close_all fails as a
// tool error.
func serveTestMCP() {
	s := sdk.NewServer(&sdk.Implementation{Name: "tracker", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "create_issue", Description: "Files an issue",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Title string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			text := fmt.Sprintf("filed #7 %q with token %s; gateway key %q", in.Title, os.Getenv("TRACKER_TOKEN"), os.Getenv("TEST_OPENAI_KEY"))
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "close_all", Description: "Closes every issue", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "refused: closing everything needs an admin"}}}, nil
		})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "test MCP server:", err)
	}
}

// An MCP server configured in tools.mcp, its tools named in a guide as
// "tracker.*": the gateway starts it, the model is offered its tools
// (as tracker__create_issue), a call asks for approval under the
// server's policy, runs with the env the config gives the server and
// nothing else of the gateway's, and a tool error reaches the model as
// one.
func TestMCPServerThroughTheGateway(t *testing.T) {
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "m1", Name: "tracker__create_issue", Args: `{"title":"login broken"}`}}},
		openaitest.Reply{Text: []string{"Filed."}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "m2", Name: "tracker__close_all", Args: `{}`}}},
		openaitest.Reply{Text: []string{"I could not close them."}},
	)
	dir := t.TempDir()
	guides := filepath.Join(dir, "guides")
	if err := os.MkdirAll(guides, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(guides, "triage.md"), []byte("---\nname: triage\n"+
		"tools: [calculator, tracker.*]\napproval: { default: auto, ask: [tracker.create_issue] }\n---\nYou triage issues.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := &gateway{t: t, dir: dir, config: filepath.Join(dir, "config.yaml")}
	if err := os.WriteFile(g.config, []byte(fmt.Sprintf(`http:
  addr: 127.0.0.1:0
metrics:
  addr: ""
storage:
  dsn: %s
providers:
%s
guides:
  dir: %s
  default: triage
tools:
  mcp:
    - name: tracker
      command: [%q]
      env: { GATEWAY_TEST_MCP_SERVER: "1", TRACKER_TOKEN: "${TEST_TRACKER_TOKEN}" }
`, filepath.Join(dir, "data", "switchboard.db"), openAIProvider(llm), guides, os.Args[0])), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := g.serve([]string{"TEST_OPENAI_KEY=sk-secret", "TEST_TRACKER_TOKEN=trk-123"})
	c := dialPeer(t, srv.addr, map[string]any{"type": "hello", "user": map[string]string{"id": "ann", "name": "Ann"}})
	saw := func(what string, pred func(wsFrame) bool) wsFrame {
		t.Helper()
		f, err := c.until(30*time.Second, pred)
		if err != nil {
			t.Fatalf("never saw %s: %v\n%s\n%s", what, err, c.history(), srv.logs)
		}
		return f
	}
	c.send(map[string]any{"type": "input", "id": "1", "text": "file the login bug"})
	req := saw("the approval request", func(f wsFrame) bool { return f.Type == "confirmation_request" })
	var cr switchboard.ConfirmationRequestData
	_ = json.Unmarshal(req.Data, &cr)
	if cr.ToolName != "tracker.create_issue" {
		t.Errorf("asked to approve %q; want tracker.create_issue", cr.ToolName)
	}
	c.send(map[string]any{"type": "confirm", "confirmation_id": cr.ConfirmationID, "approved": true})
	res := saw("the result", func(f wsFrame) bool { return f.Type == "tool_response" })
	var tr switchboard.ToolResponseData
	_ = json.Unmarshal(res.Data, &tr)
	if tr.IsError || !strings.Contains(tr.ContentPreview, `filed #7 "login broken" with token trk-123`) || strings.Contains(tr.ContentPreview, "sk-secret") {
		t.Errorf("the server's answer: %+v (the token from the config's env; none of the gateway's keys)", tr)
	}
	saw("the answer", func(f wsFrame) bool { return f.Type == "message" && strings.Contains(string(f.Data), "Filed.") })
	offered := llm.Requests()[0].Tools
	var names []string
	for _, tl := range offered {
		names = append(names, tl.Function.Name)
	}
	if strings.Join(names, ",") != "calculator,tracker__close_all,tracker__create_issue" {
		t.Errorf("tools offered: %v", names)
	}

	c.send(map[string]any{"type": "input", "id": "2", "text": "close them all"})
	res = saw("the error result", func(f wsFrame) bool {
		return f.Type == "tool_response" && strings.Contains(string(f.Data), "close_all")
	})
	_ = json.Unmarshal(res.Data, &tr)
	if !tr.IsError || !strings.Contains(tr.ContentPreview, "needs an admin") {
		t.Errorf("a tool error: %+v", tr)
	}
	saw("the last answer", func(f wsFrame) bool {
		return f.Type == "message" && strings.Contains(string(f.Data), "could not close")
	})
	srv.stop()
}
