package telemetry

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTheTraceLogRotatesBySizeAndKeepsNFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	r, err := openRotating(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	// 12 lines of 40 bytes: two fit a file (80), a third would pass 100.
	for i := range 12 {
		if _, err := fmt.Fprintf(r, "%-39s\n", fmt.Sprintf(`{"n":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(string(b)), " ")
	}
	for name, want := range map[string]string{
		path: `{"n":10} {"n":11}`, path + ".1": `{"n":8} {"n":9}`, path + ".2": `{"n":6} {"n":7}`,
	} {
		if got := read(name); got != want {
			t.Errorf("%s = %s, want %s", filepath.Base(name), got, want)
		}
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Errorf("a third old file was kept (max_files 2): %v", err)
	}
	// A reopened log appends, and rotates on what the file already holds.
	r, err = openRotating(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(r, "%-39s\n", `{"n":12}`)
	r.Close()
	if got := read(path); got != `{"n":12}` {
		t.Errorf("after reopening, %s = %s", filepath.Base(path), got)
	}
	if got := read(path + ".1"); got != `{"n":10} {"n":11}` {
		t.Errorf("after reopening, .1 = %s", got)
	}
}

// A full buffer drops the line, counts it and says so once; it never
// waits.
func TestAFullTraceLogDropsAndCountsInsteadOfWaiting(t *testing.T) {
	var logged bytes.Buffer
	l := &traceLog{lines: make(chan []byte, 2), done: make(chan struct{}), log: slog.New(slog.NewTextHandler(&logged, nil))}
	// No writer runs: the buffer fills.
	for range 5 {
		l.put([]byte("{}\n"))
	}
	if got := l.dropped.Load(); got != 3 {
		t.Fatalf("dropped %d lines, want 3", got)
	}
	if n := strings.Count(logged.String(), "level=ERROR"); n != 1 {
		t.Fatalf("%d error lines for one burst of drops, want 1:\n%s", n, logged.String())
	}
}

func TestTheTraceLogIsFlushedOnClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "trace.jsonl")
	l, err := openTraceLog(TraceLogConfig{Path: path, MaxBytes: 1 << 20, MaxFiles: 1}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		l.put(fmt.Appendf(nil, `{"n":%d}`+"\n", i))
	}
	if err := l.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")) + int(l.dropped.Load()); n != 1000 {
		t.Fatalf("%d lines written or counted as dropped, want 1000", n)
	}
	if l.dropped.Load() != 0 {
		t.Fatalf("%d lines dropped with a 4096-line buffer", l.dropped.Load())
	}
	l.put([]byte("{}\n")) // after close: ignored, not a panic
}

func TestAPathThatCannotBeWrittenFailsAtOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := openTraceLog(TraceLogConfig{Path: filepath.Join(dir, "file", "trace.jsonl")}, slog.Default())
	if err == nil || !strings.Contains(err.Error(), "telemetry.trace_log.path") {
		t.Fatalf("err = %v, want one naming telemetry.trace_log.path", err)
	}
}

func TestTemplate(t *testing.T) {
	for in, want := range map[string]string{
		"/api/chat.postMessage":                                   "chat.postMessage",
		"/api/v10/channels/123/messages/456":                      "channels/{id}/messages/{id}",
		"/api/v9/interactions/99/tok-en/callback":                 "interactions/{id}/{token}/callback",
		"/api/v10/webhooks/42/aW50ZXJhY3Rpb24/messages/@original": "webhooks/{id}/{token}/messages/@original",
		"/api/files/" + strings.Repeat("x", 40):                   "files/{token}",
		"/v1/traces":                                              "v1/traces",
		"/api/vx/users":                                           "vx/users",
	} {
		if got := template(in); got != want {
			t.Errorf("template(%q) = %q, want %q", in, got, want)
		}
	}
}
