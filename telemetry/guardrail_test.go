package telemetry

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/sessions"
)

// A guardrail's decision is a "guardrail" line naming the rule and what
// it did, never what it matched: the step carries no text to write.
func TestAGuardrailDecisionIsALineWithoutTheMatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	tel, err := Setup(context.Background(), Config{TraceLog: TraceLogConfig{Path: path}, CaptureContent: true},
		func(string) string { return "" }, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	tel.Mark(context.Background(), sessions.Step{Kind: sessions.StepGuardrail, Session: "s_1", Turn: "t_1", Guide: "support",
		Side: "input", Rule: "email", Decision: "mask", Count: 2, By: "slack:U1", Channel: "slack"})
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l Line
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(b))), &l); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	want := Line{Time: l.Time, Type: "guardrail", Session: "s_1", Turn: "t_1", TraceID: l.TraceID, SpanID: l.SpanID, Guide: "support",
		Side: "input", Rule: "email", Action: "mask", Count: 2, By: "slack:U1", Channel: "slack"}
	if !sameLine(l, want) {
		t.Fatalf("line %+v, want %+v", l, want)
	}
}

func sameLine(a, b Line) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
