package main

import (
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/metrics"
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

	lines, err := telemetry.ReadLogFile(filepath.Join(g.dir, "data", "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, l := range lines {
		types = append(types, l.Type)
	}
	if got := strings.Join(types, " "); got != "turn_start model_request model_response approval_requested turn_end approval_decided turn_start tool_call tool_result model_request model_response turn_end" {
		t.Fatalf("trace log = %s", got)
	}
}

func TestDoctorTelemetry(t *testing.T) {
	recv := otlptest.Start(t)
	closed := func() string { // an address nothing listens on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return "http://" + ln.Addr().String()
	}()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, extra string
		env         []string
		status      string
		want        []string
	}{
		{"off", "", nil, "INFO", []string{"off: no OTLP endpoint"}},
		{"from the environment", "telemetry: {endpoint: " + closed + "}\n", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.Endpoint}, "OK",
			[]string{"traces go to " + recv.Endpoint + " (http/protobuf, from OTEL_EXPORTER_OTLP_ENDPOINT), which accepts connections"}},
		{"nothing listens", "telemetry: {endpoint: " + closed + ", protocol: grpc}\n", nil, "WARN",
			[]string{"traces go to " + closed + " (grpc, from telemetry.endpoint), and nothing answers there", "start the collector"}},
		{"http/json", "", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"}, "PROBLEM",
			[]string{`the OTLP protocol "http/json" cannot be used`, "http/protobuf or grpc"}},
		{"trace log", "telemetry: {trace_log: {path: data/trace.jsonl}}\n", nil, "OK", []string{"trace log's folder", "will be made at start"}},
		{"trace log under a file", "telemetry: {trace_log: {path: " + file + "/trace.jsonl}}\n", nil, "PROBLEM",
			[]string{"cannot be written", "telemetry.trace_log.path"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newDoctorSetup(t, "  - name: main\n    kind: demo", c.extra)
			out, _ := s.doctor(t, c.env)
			wantRow(t, out, "telemetry", c.status, c.want...)
		})
	}
}

// With telemetry on, /metrics counts what it could not do; off, the
// counters are not there at all.
func TestTelemetryCountersAreOnMetrics(t *testing.T) {
	scrape := func(cfg config.Config) string {
		mets := metrics.New()
		tel, err := startTelemetry(context.Background(), cfg, nil, mets, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer tel.shutdown(slog.New(slog.DiscardHandler))
		rec := httptest.NewRecorder()
		mets.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	names := []string{"switchboard_trace_export_errors_total 0", "switchboard_trace_log_dropped_total 0", "switchboard_trace_log_write_errors_total 0"}
	var cfg config.Config
	cfg.Telemetry = config.Telemetry{Protocol: "http/protobuf", Sampler: 1, TraceLog: config.TraceLog{MaxSizeMB: 1, MaxFiles: 1}}
	off := scrape(cfg)
	cfg.Telemetry.TraceLog.Path = filepath.Join(t.TempDir(), "trace.jsonl")
	on := scrape(cfg)
	for _, n := range names {
		if !strings.Contains(on, n) {
			t.Errorf("/metrics lacks %s with the trace log on", n)
		}
		if name, _, _ := strings.Cut(n, " "); strings.Contains(off, name) {
			t.Errorf("/metrics has %s with telemetry off", name)
		}
	}
}
