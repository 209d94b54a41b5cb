package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/telemetry"
	"github.com/switchboard-gw/switchboard/telemetry/otlptest"
)

// The gateway traces a turn when OTEL_EXPORTER_OTLP_ENDPOINT is set, and
// writes the trace log telemetry.trace_log.path names; both are complete
// once it has stopped (the spans and lines of the last turn are flushed
// on the way out).
func TestTheGatewayTracesATurnAndWritesTheTraceLog(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	llm.Push(openaitest.Reply{Text: []string{"Let me look."}, ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "current_time", Args: `{"timezone":"UTC"}`}}})
	llm.Push(openaitest.Reply{Text: []string{"It is noon."}})
	recv := otlptest.Start(t)
	g := newGateway(t, openAIProvider(llm), "telemetry:\n  service_name: gw-under-test\n  trace_log: { path: data/trace.jsonl }\n")

	out, logs, err := g.runArgs([]string{"--session", "terminal"}, "what time is it?\ny\n", "OTEL_EXPORTER_OTLP_ENDPOINT="+recv.Endpoint)
	if err != nil || !strings.Contains(out, "It is noon.") {
		t.Fatalf("gateway: %v\nstdout:\n%s\nstderr:\n%s", err, out, logs)
	}
	if !strings.Contains(logs, "telemetry: exporting traces") || !strings.Contains(logs, recv.Endpoint) {
		t.Errorf("the start-up log does not say where traces go:\n%s", logs)
	}
	spans := recv.Spans()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
		if s.Resource["service.name"] != "gw-under-test" {
			t.Errorf("span %q: service.name %v", s.Name, s.Resource["service.name"])
		}
	}
	slices.Sort(names)
	want := []string{"approval current_time", "chat gpt-test", "chat gpt-test", "execute_tool current_time", "invoke_agent assistant", "invoke_agent assistant"}
	if !slices.Equal(names, want) {
		t.Fatalf("spans = %v, want %v", names, want)
	}

	f, err := os.Open(filepath.Join(g.dir, "data", "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var types []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l telemetry.Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		types = append(types, l.Type)
	}
	if got := strings.Join(types, " "); got != "turn_start model_request model_response approval_requested turn_end approval_decided turn_start tool_call tool_result model_request model_response turn_end" {
		t.Fatalf("trace log = %s", got)
	}
}
