package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/tools"
)

func stdioServer(t *testing.T, name, mode string) ServerConfig {
	return ServerConfig{
		Name:    name,
		Command: []string{testBinary(t)},
		Env:     map[string]string{"MCPTEST_SERVER": mode, "MCPTEST_TOKEN": "${MCPTEST_TOKEN}"},
	}
}

func testEnviron() []string {
	return append(os.Environ(), "MCPTEST_TOKEN=tok-123", "SWITCHBOARD_SECRET=gateway-only")
}

func names(m *Manager) []string {
	var out []string
	for _, tl := range m.Tools() {
		out = append(out, tl.Name)
	}
	return out
}

// TestStdio lists and calls the tools of a stdio server through the
// registry the gateway builds of them.
func TestStdio(t *testing.T) {
	rec := newRecorder()
	m := startManager(t, []ServerConfig{stdioServer(t, "local", "stdio")}, testEnviron(), rec, nil)
	reg := registry(t, m)

	t.Run("listing", func(t *testing.T) {
		got := names(m)
		want := []string{"local__add_tool", "local__big", "local__chart", "local__echo", "local__env", "local__fail",
			"local__pid", "local__slow", "local__stats", ToolName("local", "repos.list")}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("tools:\n got %v\nwant %v", got, want)
		}
		echo, _ := reg.Lookup("local__echo")
		if !strings.Contains(string(echo.Parameters), `"required":["text"]`) || echo.Description != "test tool echo" {
			t.Errorf("echo: schema %s, description %q", echo.Parameters, echo.Description)
		}
		if !strings.Contains(echo.SecurityWarning, `MCP server "local"`) {
			t.Errorf("security warning %q", echo.SecurityWarning)
		}
		st := m.Status()[0]
		if st.State != StateRunning || st.Transport != "stdio" || st.Tools != len(want) {
			t.Errorf("status %+v", st)
		}
	})

	t.Run("registry group", func(t *testing.T) {
		// As the gateway keeps a server's tools: a group of "server.tool".
		r, err := tools.NewRegistry()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.SetGroup("local", m.Group("local")); err != nil {
			t.Fatalf("SetGroup refuses tools: %v", err)
		}
		dotted := GatewayName("local", "repos.list")
		if got := r.Group("local"); len(got) != len(m.Tools()) || !slices.Contains(got, "local.echo") || !slices.Contains(got, dotted) {
			t.Fatalf("group %v", got)
		}
		res, err := run(t, r, "local.echo", `{"text":"grouped"}`)
		if err != nil || res.Content != "echo: grouped" {
			t.Fatalf("local.echo: %q, %v", res.Content, err)
		}
		rec.waitLog(t, "mcp: tool renamed: guides name it so", map[string]string{"server": "local", "tool": "repos.list", "name": dotted})
		if len(m.Group("nope")) != 0 {
			t.Error("a group for a server not configured")
		}
	})

	t.Run("invalid schema skipped with a warning", func(t *testing.T) {
		if _, ok := reg.Lookup("local__broken"); ok {
			t.Fatal("a tool with an invalid schema was offered")
		}
		rec.waitLog(t, "mcp: tool skipped", map[string]string{"server": "local", "tool": "broken", "err": "not valid JSON Schema"})
	})

	t.Run("stderr logged at debug", func(t *testing.T) {
		r := rec.waitLog(t, "mcp: server stderr", map[string]string{"server": "local", "line": "hello on stderr"})
		if r.Level != -4 {
			t.Errorf("stderr logged at %v", r.Level)
		}
	})

	t.Run("call", func(t *testing.T) {
		res, err := run(t, reg, "local__echo", `{"text":"hi"}`)
		if err != nil || res.Content != "echo: hi" {
			t.Fatalf("echo: %q, %v", res.Content, err)
		}
		res, err = run(t, reg, ToolName("local", "repos.list"), `{}`)
		if err != nil || res.Content != "acme/widgets" {
			t.Fatalf("repos.list: %q, %v", res.Content, err)
		}
	})

	t.Run("error result", func(t *testing.T) {
		_, err := run(t, reg, "local__fail", `{}`)
		if err == nil || !strings.Contains(err.Error(), "no such repository: acme/nope") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("image result", func(t *testing.T) {
		res, err := run(t, reg, "local__chart", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Images) != 1 || res.Images[0].MIMEType != "image/png" || res.Images[0].Data != base64.StdEncoding.EncodeToString(pngPixel) {
			t.Fatalf("images %+v", res.Images)
		}
		if !strings.Contains(res.Content, "here is the chart") || !strings.Contains(res.Content, "shown to the user") {
			t.Errorf("content %q", res.Content)
		}
	})

	t.Run("structured content", func(t *testing.T) {
		res, err := run(t, reg, "local__stats", `{}`)
		if err != nil || res.Content != `{"closed":5,"open":3}` {
			t.Fatalf("stats: %q, %v", res.Content, err)
		}
	})

	t.Run("huge result capped", func(t *testing.T) {
		res, err := run(t, reg, "local__big", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Content) > maxResultText+200 || !strings.Contains(res.Content, "[cut: the result was 200.0 KiB") {
			t.Fatalf("%d bytes, ends %q", len(res.Content), res.Content[len(res.Content)-80:])
		}
	})

	t.Run("environment not inherited", func(t *testing.T) {
		res, err := run(t, reg, "local__env", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		env := strings.Split(res.Content, "\n")
		if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "SWITCHBOARD_SECRET=") }) {
			t.Error("the gateway's own variable reached the server")
		}
		for _, want := range []string{"MCPTEST_TOKEN=tok-123", "PATH=" + os.Getenv("PATH")} {
			if !slices.Contains(env, want) {
				t.Errorf("the server lacks %q; it has %v", want, env)
			}
		}
	})

	t.Run("timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err := reg.Run(ctx, "local__slow", []byte(`{}`))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		// The server is still fine.
		if res, err := run(t, reg, "local__echo", `{"text":"after"}`); err != nil || res.Content != "echo: after" {
			t.Fatalf("echo after a timeout: %q, %v", res.Content, err)
		}
	})

	t.Run("list_changed", func(t *testing.T) {
		drainChanged(m)
		if _, err := run(t, reg, "local__add_tool", `{}`); err != nil {
			t.Fatal(err)
		}
		waitChanged(t, m)
		reg2 := registry(t, m)
		if _, ok := reg2.Lookup("local__late"); !ok {
			t.Fatalf("late not listed: %v", names(m))
		}
		if res, err := run(t, reg2, "local__late", `{}`); err != nil || res.Content != "late and well" {
			t.Fatalf("late: %q, %v", res.Content, err)
		}
	})
}

// TestStdioKilledMidCall kills the server while a call waits on it: the
// call fails at once with an error the model can read, the server is
// started again, and its tools work again.
func TestStdioKilledMidCall(t *testing.T) {
	rec := newRecorder()
	m := startManager(t, []ServerConfig{stdioServer(t, "local", "stdio")}, testEnviron(), rec, nil)
	reg := registry(t, m)
	pid := serverPID(t, reg)

	errc := make(chan error, 1)
	go func() {
		// No deadline of its own: only the server's death can end it.
		_, err := reg.Run(context.Background(), "local__slow", []byte(`{}`))
		errc <- err
	}()
	rec.waitLog(t, "mcp: server stderr", map[string]string{"server": "local", "line": "slow call started"})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "MCP server local stopped answering during the call") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call hangs after the server died")
	}

	waitFor(t, m, "the restart", func() bool {
		st := m.Status()[0]
		return st.State == StateRunning && st.Restarts == 1
	})
	if st := m.Status()[0]; !strings.Contains(st.LastError, "signal: killed") {
		t.Errorf("last error %q", st.LastError)
	}
	if res, err := run(t, reg, "local__echo", `{"text":"again"}`); err != nil || res.Content != "echo: again" {
		t.Fatalf("echo after the restart: %q, %v", res.Content, err)
	}
	if pid2 := serverPID(t, reg); pid2 == pid {
		t.Error("the same process answers after the restart")
	}
}

// TestStdioDownAnswersAtOnce: while a dead server waits to be started
// again, its tools answer at once that it is not running.
func TestStdioDownAnswersAtOnce(t *testing.T) {
	m := startManager(t, []ServerConfig{stdioServer(t, "local", "stdio")}, testEnviron(), newRecorder(), func(m *Manager) {
		m.backoffMin, m.backoffMax = time.Hour, time.Hour
	})
	reg := registry(t, m)
	if err := syscall.Kill(serverPID(t, reg), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "the server down", func() bool { return m.Status()[0].State == StateRestarting })
	if got := names(m); !slices.Contains(got, "local__echo") {
		t.Fatalf("a down server's tools are still offered; got %v", got)
	}
	_, err := run(t, reg, "local__echo", `{"text":"hi"}`)
	if err == nil || !strings.Contains(err.Error(), "MCP server local is not running (restarting); try again later") {
		t.Fatalf("err = %v", err)
	}
}

// TestStdioStartFails: a server that cannot start does not stop the rest;
// it is tried again and reported.
func TestStdioStartFails(t *testing.T) {
	rec := newRecorder()
	m := startManager(t, []ServerConfig{
		{Name: "missing", Command: []string{"/nonexistent/mcp-server"}},
		stdioServer(t, "local", "stdio"),
	}, testEnviron(), rec, nil)
	waitFor(t, m, "retries", func() bool { return m.Status()[0].Restarts >= 2 })
	st := m.Status()
	if st[0].State != StateRestarting && st[0].State != StateStarting || !strings.Contains(st[0].LastError, "no such file") {
		t.Errorf("missing: %+v", st[0])
	}
	if st[1].State != StateRunning {
		t.Errorf("local: %+v", st[1])
	}
	if got := names(m); slices.ContainsFunc(got, func(n string) bool { return strings.HasPrefix(n, "missing__") }) {
		t.Errorf("tools of a server never up: %v", got)
	}
	rec.waitLog(t, "mcp: server down; starting it again", map[string]string{"server": "missing"})
}

// TestStdioClose: Close stops the child, also one that ignores stdin's end
// and SIGTERM, without waiting for a call under way, which fails; the
// tools then say the server is stopped.
func TestStdioClose(t *testing.T) {
	for _, mode := range []string{"stdio", "stubborn"} {
		t.Run(mode, func(t *testing.T) {
			rec := newRecorder()
			m := startManager(t, []ServerConfig{stdioServer(t, "local", mode)}, testEnviron(), rec, func(m *Manager) {
				m.grace = 100 * time.Millisecond
			})
			reg := registry(t, m)
			pid := serverPID(t, reg)
			errc := make(chan error, 1)
			go func() {
				// No deadline of its own: only Close can end it.
				_, err := reg.Run(context.Background(), "local__slow", []byte(`{}`))
				errc <- err
			}()
			rec.waitLog(t, "mcp: server stderr", map[string]string{"server": "local", "line": "slow call started"})

			m.Close()
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Fatalf("the server process %d is still there after Close: %v", pid, err)
			}
			select {
			case err := <-errc:
				if err == nil || !strings.Contains(err.Error(), "MCP server local was stopped during the call") {
					t.Errorf("the call under way: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the call under way hangs after Close")
			}
			if st := m.Status()[0]; st.State != StateStopped {
				t.Errorf("status %+v", st)
			}
			if _, err := run(t, reg, "local__echo", `{"text":"hi"}`); err == nil || !strings.Contains(err.Error(), "MCP server local is stopped") {
				t.Errorf("err = %v", err)
			}
		})
	}
}

func serverPID(t *testing.T, reg *tools.Registry) int {
	t.Helper()
	res, err := run(t, reg, "local__pid", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(res.Content)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
