package mcp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpServer serves a test server over Streamable HTTP on 127.0.0.1 (on
// addr, when given, to come back where it was), refusing requests without
// the bearer token. It counts the requests refused.
func httpServer(t *testing.T, addr string, refused *atomic.Int64, onSlow func(context.Context) error) *httptest.Server {
	t.Helper()
	if onSlow == nil {
		onSlow = func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}
	}
	srv := newTestServer(onSlow)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-123" {
			refused.Add(1)
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		ts.Listener.Close()
		ts.Listener = ln
	}
	ts.Start()
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts
}

func httpConfig(name, url string) ServerConfig {
	return ServerConfig{Name: name, URL: url + "/mcp", Headers: map[string]string{"Authorization": "Bearer ${MCPTEST_TOKEN}"}}
}

// TestHTTP lists and calls the tools of a Streamable HTTP server that
// wants a header whose value comes from the environment.
func TestHTTP(t *testing.T) {
	var refused atomic.Int64
	ts := httpServer(t, "", &refused, nil)
	rec := newRecorder()
	m := startManager(t, []ServerConfig{httpConfig("docs", ts.URL)}, testEnviron(), rec, nil)
	reg := registry(t, m)

	t.Run("listing", func(t *testing.T) {
		got := names(m)
		for _, want := range []string{"docs__echo", "docs__fail", "docs__chart", ToolName("docs", "repos.list")} {
			if !slices.Contains(got, want) {
				t.Errorf("%s not listed: %v", want, got)
			}
		}
		if slices.Contains(got, "docs__broken") {
			t.Error("a tool with an invalid schema was offered")
		}
		rec.waitLog(t, "mcp: tool skipped", map[string]string{"server": "docs", "tool": "broken"})
		if st := m.Status()[0]; st.State != StateRunning || st.Transport != "http" {
			t.Errorf("status %+v", st)
		}
		if n := refused.Load(); n != 0 {
			t.Errorf("%d requests came without the header", n)
		}
	})

	t.Run("call", func(t *testing.T) {
		res, err := run(t, reg, "docs__echo", `{"text":"over http"}`)
		if err != nil || res.Content != "echo: over http" {
			t.Fatalf("echo: %q, %v", res.Content, err)
		}
	})

	t.Run("error result", func(t *testing.T) {
		_, err := run(t, reg, "docs__fail", `{}`)
		if err == nil || !strings.Contains(err.Error(), "no such repository: acme/nope") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("image result", func(t *testing.T) {
		res, err := run(t, reg, "docs__chart", `{}`)
		if err != nil || len(res.Images) != 1 {
			t.Fatalf("chart: %+v, %v", res, err)
		}
	})

	t.Run("list_changed", func(t *testing.T) {
		drainChanged(m)
		if _, err := run(t, reg, "docs__add_tool", `{}`); err != nil {
			t.Fatal(err)
		}
		waitChanged(t, m)
		if res, err := run(t, registry(t, m), "docs__late", `{}`); err != nil || res.Content != "late and well" {
			t.Fatalf("late: %q, %v", res.Content, err)
		}
	})
}

// TestHTTPWrongToken: a server refusing the header is reported with the
// reason, and tried again.
func TestHTTPWrongToken(t *testing.T) {
	var refused atomic.Int64
	ts := httpServer(t, "", &refused, nil)
	environ := append(testEnviron(), "MCPTEST_TOKEN=wrong")
	m := startManager(t, []ServerConfig{httpConfig("docs", ts.URL)}, environ, newRecorder(), nil)
	waitFor(t, m, "a second try", func() bool { return m.Status()[0].Restarts >= 2 })
	if st := m.Status()[0]; st.State == StateRunning || !strings.Contains(st.LastError, "Unauthorized") {
		t.Errorf("status %+v", st)
	}
	if refused.Load() == 0 || len(m.Tools()) != 0 {
		t.Errorf("%d refused, tools %v", refused.Load(), names(m))
	}
}

// TestHTTPKilledMidCall: the server goes away while a call waits on it:
// the call fails with an error the model can read, the tools answer at once
// that the server is not running, and all works again once it is back.
func TestHTTPKilledMidCall(t *testing.T) {
	var refused atomic.Int64
	slow, release := make(chan struct{}, 1), make(chan struct{})
	// The server's session outlives its connections and waits for its
	// calls when closed, so the call is let go once nothing can carry its
	// answer.
	ts := httpServer(t, "", &refused, func(ctx context.Context) error {
		slow <- struct{}{}
		select {
		case <-ctx.Done():
		case <-release:
		}
		return errors.New("released")
	})
	addr := ts.Listener.Addr().String()
	m := startManager(t, []ServerConfig{httpConfig("docs", ts.URL)}, testEnviron(), newRecorder(), nil)
	reg := registry(t, m)

	errc := make(chan error, 1)
	go func() {
		// No deadline of its own: only the server's going can end it.
		_, err := reg.Run(context.Background(), "docs__slow", []byte(`{}`))
		errc <- err
	}()
	<-slow
	ts.Listener.Close()
	ts.CloseClientConnections()
	close(release)
	ts.Close()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "MCP server docs stopped answering during the call, so it may or may not have taken effect") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call hangs after the server went away")
	}

	_, err := run(t, reg, "docs__echo", `{"text":"hi"}`)
	if err == nil || !strings.Contains(err.Error(), "MCP server docs") {
		t.Fatalf("err = %v", err)
	}
	waitFor(t, m, "the server down", func() bool { return m.Status()[0].Restarts >= 1 })
	_, err = run(t, reg, "docs__echo", `{"text":"hi"}`)
	if err == nil || !strings.Contains(err.Error(), "MCP server docs is not running (restarting); try again later") {
		t.Fatalf("err = %v", err)
	}

	httpServer(t, addr, &refused, nil)
	waitFor(t, m, "the server back", func() bool { return m.Status()[0].State == StateRunning })
	if res, err := run(t, reg, "docs__echo", `{"text":"back"}`); err != nil || res.Content != "echo: back" {
		t.Fatalf("echo: %q, %v", res.Content, err)
	}
}

// TestHTTPCloseMidCall: Close does not wait for a call under way, which
// fails.
func TestHTTPCloseMidCall(t *testing.T) {
	var refused atomic.Int64
	slow, release := make(chan struct{}, 1), make(chan struct{})
	ts := httpServer(t, "", &refused, func(ctx context.Context) error {
		slow <- struct{}{}
		select {
		case <-ctx.Done():
		case <-release:
		}
		return errors.New("released")
	})
	// Before the server's cleanup, which waits for its calls.
	t.Cleanup(func() { close(release) })
	m := startManager(t, []ServerConfig{httpConfig("docs", ts.URL)}, testEnviron(), newRecorder(), nil)
	reg := registry(t, m)
	errc := make(chan error, 1)
	go func() {
		_, err := reg.Run(context.Background(), "docs__slow", []byte(`{}`))
		errc <- err
	}()
	<-slow
	m.Close()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "MCP server docs was stopped during the call") {
			t.Errorf("the call under way: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call under way hangs after Close")
	}
	if st := m.Status()[0]; st.State != StateStopped {
		t.Errorf("status %+v", st)
	}
}

// TestHTTPHeaderNotSentElsewhere: the configured headers go to the
// server's host only, not to a host a redirect points at.
func TestHTTPHeaderNotSentElsewhere(t *testing.T) {
	var got atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization") + "|")
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	defer other.Close()
	redirect := httptest.NewServer(http.RedirectHandler(other.URL+"/mcp", http.StatusTemporaryRedirect))
	defer redirect.Close()

	m := startManager(t, []ServerConfig{httpConfig("docs", redirect.URL)}, testEnviron(), newRecorder(), nil)
	if st := m.Status()[0]; st.State == StateRunning {
		t.Fatalf("connected through a redirect to a 404: %+v", st)
	}
	if v, _ := got.Load().(string); v != "|" {
		t.Fatalf("the redirected request carried Authorization %q", strings.TrimSuffix(v, "|"))
	}
	if err := errors.New(m.Status()[0].LastError); err.Error() == "" {
		t.Error("no error recorded")
	}
}
