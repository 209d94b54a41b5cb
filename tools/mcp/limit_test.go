package mcp

// A server's answer over the bound, over each transport: the test server
// (the SDK's) answers the tool huge with hugeMarker, which the writer
// between it and the wire replaces with hugeSize bytes streamed from a
// small buffer, so the answer is the SDK's own message with the right id,
// yet never held whole by either side.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	hugeMarker = "@@huge-answer@@"
	hugeSize   = 256 << 20
	// testLimitMB is the servers' max_response_mb in these tests,
	// testLimit the same in bytes.
	testLimitMB = 2
	testLimit   = testLimitMB << 20
)

// addHuge gives the test server the tool huge.
func addHuge(s *sdk.Server) {
	s.AddTool(&sdk.Tool{Name: "huge", Description: "test tool huge", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return textResult(hugeMarker), nil
		})
}

// writeExpanded writes p to w with hugeMarker, if p has it, replaced by
// hugeSize bytes of "x" from a 32 KiB buffer, stopping at w's first error.
func writeExpanded(w io.Writer, p []byte) error {
	i := bytes.Index(p, []byte(hugeMarker))
	if i < 0 {
		_, err := w.Write(p)
		return err
	}
	if _, err := w.Write(p[:i]); err != nil {
		return err
	}
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	for done := 0; done < hugeSize; {
		n, err := w.Write(chunk[:min(len(chunk), hugeSize-done)])
		done += n
		if err != nil {
			return err
		}
	}
	_, err := w.Write(p[i+len(hugeMarker):])
	return err
}

// serveHuge runs the test server with the tool huge on stdin/stdout.
func serveHuge() {
	s := newTestServer(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	addHuge(s)
	err := s.Run(context.Background(), &sdk.IOTransport{Reader: os.Stdin, Writer: expandingStdout{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "test server:", err)
		os.Exit(1)
	}
}

// expandingStdout is stdout through writeExpanded. The SDK writes each
// message whole in one Write.
type expandingStdout struct{}

func (expandingStdout) Write(p []byte) (int, error) {
	if err := writeExpanded(os.Stdout, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (expandingStdout) Close() error { return nil }

// expandingWriter is an http.ResponseWriter through writeExpanded. With
// length, it holds the status back until the body's first Write, to send
// the expanded body's Content-Length with it; else the body goes chunked.
type expandingWriter struct {
	http.ResponseWriter
	length bool
	code   int // the status held back
}

func (w *expandingWriter) WriteHeader(code int) {
	if w.length {
		w.code = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *expandingWriter) Write(p []byte) (int, error) {
	if w.length && bytes.Contains(p, []byte(hugeMarker)) {
		w.Header().Set("Content-Length", strconv.Itoa(len(p)-len(hugeMarker)+hugeSize))
	}
	w.sendHeader()
	if err := writeExpanded(w.ResponseWriter, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *expandingWriter) sendHeader() {
	if w.code != 0 {
		w.ResponseWriter.WriteHeader(w.code)
		w.code = 0
	}
}

func (w *expandingWriter) Flush() {
	w.sendHeader()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// hugeHTTPServer serves the test server with the tool huge over
// Streamable HTTP: calls are answered with event streams, or with
// application/json bodies (chunked, or with a Content-Length).
func hugeHTTPServer(t *testing.T, json, length bool) *httptest.Server {
	t.Helper()
	s := newTestServer(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	addHuge(s)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{JSONResponse: json})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&expandingWriter{ResponseWriter: w, length: length}, r)
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts
}

// allocated is what the whole process allocated while f ran: the bytes
// any copy of an answer took, whether or not collected since.
func allocated(f func()) int {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return int(after.TotalAlloc - before.TotalAlloc)
}

// TestHTTPAnswerTooLarge: a Streamable HTTP server answering a call with
// 256 MiB, as an event or as a JSON body, costs the gateway a few times
// its bound, no more; the call fails with an error telling the model to
// ask for less, and the session goes on.
func TestHTTPAnswerTooLarge(t *testing.T) {
	for _, c := range []struct {
		name         string
		json, length bool
	}{
		{"event stream", false, false},
		{"json", true, false},
		{"json with length", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := hugeHTTPServer(t, c.json, c.length)
			rec := newRecorder()
			cfg := ServerConfig{Name: "docs", URL: ts.URL + "/mcp", MaxResponseMB: testLimitMB}
			m := startManager(t, []ServerConfig{cfg}, testEnviron(), rec, nil)
			reg := registry(t, m)

			var err error
			alloc := allocated(func() { _, err = run(t, reg, "docs__huge", `{}`) })
			t.Logf("the call allocated %s", size(alloc))
			if alloc > 4*testLimit {
				t.Errorf("the call allocated %s, more than 4 times the bound of %s", size(alloc), size(testLimit))
			}
			want := "MCP server docs: the answer was larger than " + size(testLimit) + ", the gateway's limit, and was dropped; the call itself may have taken effect. Ask the tool for less"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v", err)
			}
			rec.waitLog(t, "mcp: answer too large; dropped", map[string]string{"server": "docs", "tool": "huge", "limit": size(testLimit)})

			// The same session answers the next calls, a large answer
			// within the bound too.
			if res, err := run(t, reg, "docs__echo", `{"text":"still here"}`); err != nil || res.Content != "echo: still here" {
				t.Fatalf("echo after: %q, %v", res.Content, err)
			}
			if res, err := run(t, reg, "docs__big", `{}`); err != nil || !strings.Contains(res.Content, "[cut: the result was 200.0 KiB") {
				t.Fatalf("big after: %v", err)
			}
			if st := m.Status()[0]; st.State != StateRunning || st.Restarts != 0 {
				t.Errorf("status %+v", st)
			}
		})
	}
}

// TestStdioAnswerTooLarge: a stdio server writing a line of 256 MiB costs
// the gateway a few times its bound, no more; the call fails with an error
// telling the model to ask for less, and the server is restarted.
func TestStdioAnswerTooLarge(t *testing.T) {
	cfg := stdioServer(t, "local", "huge")
	cfg.MaxResponseMB = testLimitMB
	m := startManager(t, []ServerConfig{cfg}, testEnviron(), newRecorder(), nil)
	reg := registry(t, m)
	pid := serverPID(t, reg)

	var err error
	alloc := allocated(func() { _, err = run(t, reg, "local__huge", `{}`) })
	t.Logf("the call allocated %s", size(alloc))
	if alloc > 4*testLimit {
		t.Errorf("the call allocated %s, more than 4 times the bound of %s", size(alloc), size(testLimit))
	}
	want := "MCP server local sent a message larger than " + size(testLimit) + ", the gateway's limit, during the call (most likely the answer), so it is being restarted and the call may or may not have taken effect. Ask the tool for less"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v", err)
	}

	waitFor(t, m, "the restart", func() bool {
		st := m.Status()[0]
		return st.State == StateRunning && st.Restarts == 1
	})
	if st := m.Status()[0]; !strings.Contains(st.LastError, "larger than "+size(testLimit)+", the gateway's limit") {
		t.Errorf("last error %q", st.LastError)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the first server process %d is still there: %v", pid, err)
	}
	if res, err := run(t, reg, "local__echo", `{"text":"again"}`); err != nil || res.Content != "echo: again" {
		t.Fatalf("echo after the restart: %q, %v", res.Content, err)
	}
	if pid2 := serverPID(t, reg); pid2 == pid {
		t.Error("the same process answers after the restart")
	}
}

// TestStandaloneEventTooLarge: an event over the bound on the server's
// own stream (a GET) is dropped, and the stream goes on.
func TestStandaloneEventTooLarge(t *testing.T) {
	ts := httptest.NewServer(expandHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: 1\ndata: {\"a\":1}\n\n")
		io.WriteString(w, "data: \""+hugeMarker+"\"\n\n")
		io.WriteString(w, ": keep-alive\r\n\r\nid: 3\r\ndata: {\"b\":2}\r\n\r\n")
	})))
	defer ts.Close()
	rec := newRecorder()
	client := &http.Client{Transport: &limitTransport{base: http.DefaultTransport, max: 1 << 20, log: slog.New(rec), server: "docs"}}
	resp, err := client.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := "id: 1\ndata: {\"a\":1}\n\n: keep-alive\r\n\r\nid: 3\r\ndata: {\"b\":2}\r\n\r\n"; string(got) != want {
		t.Errorf("read %q\nwant %q", got, want)
	}
	rec.waitLog(t, "mcp: server message too large; dropped", map[string]string{"server": "docs", "limit": "1.0 MiB"})
}

// expandHandler serves h through writeExpanded.
func expandHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&expandingWriter{ResponseWriter: w}, r)
	})
}

// TestErrorBodyCut: the body of a refusal, which the SDK reads whole for a
// JSON-RPC error, is cut at the bound.
func TestErrorBodyCut(t *testing.T) {
	ts := httptest.NewServer(expandHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, hugeMarker)
	})))
	defer ts.Close()
	client := &http.Client{Transport: &limitTransport{base: http.DefaultTransport, max: 1 << 20, log: slog.New(newRecorder()), server: "docs"}}
	resp, err := client.Post(ts.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != 1<<20 {
		t.Errorf("read %d bytes, %v", n, err)
	}
}

// TestFramer: where frames end, and what a frame over the bound becomes.
func TestFramer(t *testing.T) {
	const max = 64 << 10
	long := strings.Repeat("y", 40<<10) // longer than frameReadSize
	over := func() ([]byte, error) { return nil, tooLargeError{max} }
	cases := []struct {
		name    string
		in      string
		event   bool
		tooLong func() ([]byte, error)
		want    []string
		err     string // the error after the frames; "" for io.EOF
	}{
		{name: "lines", in: "a\n\nb\r\n" + long + "\nlast",
			want: []string{"a\n", "\n", "b\r\n", long + "\n", "last"}},
		{name: "messages broken over lines", in: "{\"a\":[1,\n2]}\n" + `{"s":"\"}]\\"}` + "\n[\n]\n",
			want: []string{"{\"a\":[1,\n2]}\n", `{"s":"\"}]\\"}` + "\n", "[\n]\n"}},
		{name: "line over", in: "a\n" + long + long + "\nb\n", tooLong: over,
			want: []string{"a\n"}, err: "larger than 64.0 KiB"},
		{name: "message over in short lines", in: "{}\n[\n" + strings.Repeat("1,\n", max/3) + "1]\n{}\n", tooLong: over,
			want: []string{"{}\n"}, err: "larger than 64.0 KiB"},
		{name: "events", in: "data: 1\n\n:c\r\n\r\r\nid: 2\ndata: " + long + "\n\ndata: 3", event: true,
			want: []string{"data: 1\n\n", ":c\r\n\r\r\n", "id: 2\ndata: " + long + "\n\n", "data: 3"}},
		{name: "event dropped", in: "data: 1\n\ndata: " + long + "\ndata: " + long + "\n\ndata: 3\n\n", event: true,
			tooLong: func() ([]byte, error) { return []byte("data: instead\n\n"), nil },
			want:    []string{"data: 1\n\n", "data: instead\n\n", "data: 3\n\n"}},
		{name: "event replaced, the stream ended", in: "data: 1\n\ndata: " + long + long + "\n\ndata: 3\n\n", event: true,
			tooLong: func() ([]byte, error) { return []byte("data: instead\n\n"), io.EOF },
			want:    []string{"data: 1\n\n", "data: instead\n\n"}},
	}
	for _, c := range cases {
		for _, one := range []bool{false, true} {
			var r io.Reader = strings.NewReader(c.in)
			if one {
				r = iotest.OneByteReader(r)
			}
			tooLong := c.tooLong
			if tooLong == nil {
				tooLong = func() ([]byte, error) {
					t.Errorf("%s: over the bound", c.name)
					return nil, io.ErrUnexpectedEOF
				}
			}
			f := newFramer(r, max, c.event, tooLong)
			var got []string
			for f.err == nil {
				f.next()
				got = append(got, string(f.buf))
			}
			if got[len(got)-1] == "" {
				got = got[:len(got)-1] // the end
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("%s (one byte at a time: %v): %d frames %.60q, want %d %.60q", c.name, one, len(got), got, len(c.want), c.want)
			}
			if c.err == "" && f.err != io.EOF || c.err != "" && (f.err == nil || !strings.Contains(f.err.Error(), c.err)) {
				t.Errorf("%s: err %v, want %q", c.name, f.err, c.err)
			}
		}
	}

	// Read hands the frames on as any reader would.
	in := "{\"a\":1}\n" + long + "\n\nlast"
	if err := iotest.TestReader(newFramer(strings.NewReader(in), max, false, over), []byte(in)); err != nil {
		t.Error(err)
	}
}

func TestReadAtMost(t *testing.T) {
	const limit = 100 << 10
	for _, c := range []struct {
		n    int
		over bool
	}{{0, false}, {limit - 1, false}, {limit, false}, {limit + 1, true}, {3 * limit, true}} {
		b, err := readAtMost(strings.NewReader(strings.Repeat("z", c.n)), limit)
		if over := errors.As(err, new(tooLargeError)); over != c.over || !over && (err != nil || len(b) != c.n) {
			t.Errorf("%d bytes: %d read, %v", c.n, len(b), err)
		}
	}
}

// TestAnsweredTooLarge: the answer put in place of one over the bound is
// the SDK's JSON-RPC error for the call, told from a server's own errors.
func TestAnsweredTooLarge(t *testing.T) {
	body := tooLargeAnswer([]byte(`7`), 8<<20)
	if want := `{"jsonrpc":"2.0","id":7,"error":{"code":-32099,"message":"the MCP server's message was larger than 8.0 MiB, the gateway's limit (max_response_mb)"}}`; string(body) != want {
		t.Errorf("answer %s", body)
	}
	msg, err := jsonrpc.DecodeMessage(body)
	resp, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok || resp.Error == nil {
		t.Fatalf("decoded %#v, %v", msg, err)
	}
	err = fmt.Errorf("calling %q: %w", "tools/call", resp.Error)
	if !answeredTooLarge(err, 8<<20) {
		t.Error("not told as the gateway's answer")
	}
	if answeredTooLarge(err, 4<<20) || answeredTooLarge(fmt.Errorf("x: %w", &jsonrpc.Error{Code: codeTooLarge, Message: "too big"}), 8<<20) {
		t.Error("a server's own error told as the gateway's answer")
	}
}
