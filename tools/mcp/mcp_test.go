package mcp

// The test server is built on the same SDK. Over stdio it is this test
// binary run again with MCPTEST_SERVER set (TestMain); over Streamable
// HTTP it is served by httptest on 127.0.0.1.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-gw/switchboard/tools"
)

func TestMain(m *testing.M) {
	switch os.Getenv("MCPTEST_SERVER") {
	case "stdio":
		serveStdio(false)
		return
	case "stubborn":
		serveStdio(true)
		return
	case "huge":
		serveHuge()
		return
	case "exit":
		// A server that cannot start: it complains and exits at once.
		fmt.Fprintln(os.Stderr, "test server: starting with token", os.Getenv("MCPTEST_TOKEN"))
		fmt.Fprintln(os.Stderr, "test server: no database, giving up")
		os.Exit(3)
	case "hang":
		// A server that never answers the handshake, nor exits when its
		// stdin closes.
		fmt.Fprintln(os.Stderr, "test server: pid", os.Getpid())
		time.Sleep(time.Hour)
		return
	case "garbage":
		// A program that is no MCP server: it prints text on stdout.
		fmt.Println("Usage: server [--port N]")
		io.Copy(io.Discard, os.Stdin)
		return
	}
	os.Exit(m.Run())
}

// serveStdio runs the test server on stdin/stdout until stdin closes. A
// stubborn server ignores SIGTERM and does not exit when stdin closes, so
// only SIGKILL ends it.
func serveStdio(stubborn bool) {
	if stubborn {
		signal.Ignore(syscall.SIGTERM)
	}
	fmt.Fprintln(os.Stderr, "test server: hello on stderr")
	onSlow := func(ctx context.Context) error {
		fmt.Fprintln(os.Stderr, "test server: slow call started")
		<-ctx.Done()
		return ctx.Err()
	}
	err := newTestServer(onSlow).Run(context.Background(), &sdk.StdioTransport{})
	if stubborn {
		select {}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test server:", err)
		os.Exit(1)
	}
}

// pngPixel is a 1×1 PNG.
var pngPixel = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

func textResult(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// newTestServer has one tool per behaviour under test. A call of slow
// runs onSlow, which tells the test it is under way and waits.
func newTestServer(onSlow func(context.Context) error) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "mcptest", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	add := func(name, schema string, h sdk.ToolHandler) {
		s.AddTool(&sdk.Tool{Name: name, Description: "test tool " + name, InputSchema: json.RawMessage(schema)}, h)
	}
	add("echo", `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`,
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Text string }
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return textResult("echo: " + in.Text), nil
		})
	add("fail", `{"type":"object"}`, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such repository: acme/nope"}}}, nil
	})
	add("chart", `{"type":"object"}`, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "here is the chart"},
			&sdk.ImageContent{Data: pngPixel, MIMEType: "image/png"},
		}}, nil
	})
	add("stats", `{"type":"object"}`, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]any{"open": 3, "closed": 5}}, nil
	})
	add("big", `{"type":"object"}`, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return textResult(strings.Repeat("0123456789abcdef", 200<<10/16)), nil
	})
	add("env", `{"type":"object"}`, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return textResult(strings.Join(os.Environ(), "\n")), nil
	})
	add("pid", `{"type":"object"}`, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return textResult(fmt.Sprint(os.Getpid())), nil
	})
	add("slow", `{"type":"object"}`, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, onSlow(ctx)
	})
	add("add_tool", `{"type":"object"}`, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		s.AddTool(&sdk.Tool{Name: "late", Description: "added at run time", InputSchema: obj},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return textResult("late and well"), nil
			})
		return textResult("added"), nil
	})
	// Not valid JSON Schema: minimum must be a number.
	add("broken", `{"type":"object","properties":{"n":{"type":"integer","minimum":"zero"}}}`,
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return textResult("unreachable"), nil
		})
	// A name the model may not see as it is.
	add("repos.list", `{"type":"object"}`, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return textResult("acme/widgets"), nil
	})
	return s
}

// recorder is a slog handler that keeps every record, for the tests to
// look for warnings and stderr lines.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
	attrs   []slog.Attr
	root    *recorder
	wake    chan struct{}
}

func newRecorder() *recorder {
	r := &recorder{wake: make(chan struct{})}
	r.root = r
	return r
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(r.attrs...)
	root := r.root
	root.mu.Lock()
	root.records = append(root.records, rec)
	close(root.wake)
	root.wake = make(chan struct{})
	root.mu.Unlock()
	return nil
}

func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &recorder{root: r.root, attrs: append(append([]slog.Attr{}, r.attrs...), as...)}
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

// find returns the first record with the message whose attributes
// include want (key → value, as text).
func (r *recorder) find(msg string, want map[string]string) (slog.Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.records {
		if rec.Message != msg {
			continue
		}
		got := map[string]string{}
		rec.Attrs(func(a slog.Attr) bool { got[a.Key] = a.Value.String(); return true })
		ok := true
		for k, v := range want {
			if !strings.Contains(got[k], v) {
				ok = false
			}
		}
		if ok {
			return rec, true
		}
	}
	return slog.Record{}, false
}

// waitLog waits for a record like find's.
func (r *recorder) waitLog(t *testing.T, msg string, want map[string]string) slog.Record {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		wake := r.wake
		r.mu.Unlock()
		if rec, ok := r.find(msg, want); ok {
			return rec
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("no log record %q with %v", msg, want)
		}
	}
}

// waitFor waits until cond holds, re-checking at every state change of
// the manager. The deadline only keeps a broken test from hanging.
func waitFor(t *testing.T, m *Manager, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		w := m.watching()
		if cond() {
			return
		}
		select {
		case <-w:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; status %+v", what, m.Status())
		}
	}
}

// waitChanged waits for Changed to fire.
func waitChanged(t *testing.T, m *Manager) {
	t.Helper()
	select {
	case <-m.Changed():
	case <-time.After(20 * time.Second):
		t.Fatal("Changed did not fire")
	}
}

func drainChanged(m *Manager) {
	select {
	case <-m.Changed():
	default:
	}
}

// fast makes restarts quick, so the tests need not wait out real backoff.
func fast(m *Manager) {
	m.backoffMin, m.backoffMax = 10*time.Millisecond, 50*time.Millisecond
	m.grace = 2 * time.Second
}

// startManager starts a manager on servers and closes it at the end.
func startManager(t *testing.T, servers []ServerConfig, environ []string, rec *recorder, tune func(*Manager)) *Manager {
	t.Helper()
	m, err := New(servers, environ, slog.New(rec))
	if err != nil {
		t.Fatal(err)
	}
	fast(m)
	if tune != nil {
		tune(m)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return m
}

// registry is what the gateway will build of the manager's tools.
func registry(t *testing.T, m *Manager) *tools.Registry {
	t.Helper()
	r, err := tools.NewRegistry(m.Tools()...)
	if err != nil {
		t.Fatalf("the registry refuses the MCP tools: %v", err)
	}
	return r
}

func run(t *testing.T, r *tools.Registry, name, args string) (tools.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return r.Run(ctx, name, json.RawMessage(args))
}

func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
