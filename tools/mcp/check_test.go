package mcp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// check runs Check and wants a *Problem of it, or none.
func check(t *testing.T, ctx context.Context, c ServerConfig, environ []string) (Report, *Problem) {
	t.Helper()
	rep, err := Check(ctx, c, environ)
	if err == nil {
		return rep, nil
	}
	p, ok := errors.AsType[*Problem](err)
	if !ok {
		t.Fatalf("Check returned %T %v, want a *Problem", err, err)
	}
	if p.Reason == "" || p.Fix == "" {
		t.Errorf("a problem without a reason or a fix: %+v", p)
	}
	return rep, p
}

func wantProblem(t *testing.T, p *Problem, reason, fix []string) {
	t.Helper()
	if p == nil {
		t.Fatal("no problem reported")
	}
	for _, w := range reason {
		if !strings.Contains(p.Reason, w) {
			t.Errorf("the reason lacks %q:\n%s", w, p.Reason)
		}
	}
	for _, w := range fix {
		if !strings.Contains(p.Fix, w) {
			t.Errorf("the fix lacks %q:\n%s", w, p.Fix)
		}
	}
}

func TestCheckStdio(t *testing.T) {
	rep, p := check(t, t.Context(), stdioServer(t, "local", "stdio"), testEnviron())
	if p != nil {
		t.Fatalf("problem: %s (fix: %s)", p.Reason, p.Fix)
	}
	// The listing of TestStdio: ten tools offered, broken left out.
	if rep.Tools != 10 || rep.Transport != "stdio" || rep.Server != "mcptest 1" || rep.Protocol == "" {
		t.Errorf("report %+v", rep)
	}
	if got, want := rep.Summary(), "10 tools over stdio ("+testBinary(t)+")"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	details := strings.Join(rep.Details(), "\n")
	for _, w := range []string{"server mcptest 1, protocol " + rep.Protocol + ", tools listed in ", "left out: broken: inputSchema is not valid JSON Schema"} {
		if !strings.Contains(details, w) {
			t.Errorf("details lack %q:\n%s", w, details)
		}
	}
}

// The program is looked for on the PATH of the environment given, and run
// with its arguments.
func TestCheckStdioOnPath(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\nexec " + strconv.Quote(testBinary(t)) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "mcp-local"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := stdioServer(t, "local", "stdio")
	c.Command = []string{"mcp-local", "--verbose", "two words"}
	environ := []string{"PATH=/nonexistent:" + dir, "MCPTEST_TOKEN=tok-123"}
	rep, p := check(t, t.Context(), c, environ)
	if p != nil {
		t.Fatalf("problem: %s", p.Reason)
	}
	if want := filepath.Join(dir, "mcp-local") + ` --verbose "two words"`; rep.Program != want || rep.Tools != 10 {
		t.Errorf("program %q (want %q), %d tools", rep.Program, want, rep.Tools)
	}
}

func TestCheckStdioProgramMissing(t *testing.T) {
	environ := []string{"PATH=" + t.TempDir()}
	for _, c := range []struct {
		name    string
		command []string
		reason  []string
		fix     []string
	}{
		{"not on PATH", []string{"mcp-nowhere", "--stdio"}, []string{"the command mcp-nowhere is not on the gateway's PATH (" + environ[0][5:] + ")"},
			[]string{"install it, or give its full path in tools.mcp[x].command"}},
		{"a launcher", []string{"npx", "-y", "@acme/server"}, []string{"the command npx is not on the gateway's PATH"}, []string{"install Node.js"}},
		{"a path", []string{"/nonexistent/mcp-server"}, []string{"the program /nonexistent/mcp-server does not exist"}, []string{"tools.mcp[x].command"}},
		{"not executable", []string{writeFile(t, "server.js", 0o644)}, []string{"is not executable"}, []string{"chmod +x"}},
		{"not a program", []string{writeFile(t, "server.js", 0o755)}, []string{"server.js cannot be started: exec format error"}, []string{"an executable for this machine"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, p := check(t, t.Context(), ServerConfig{Name: "x", Command: c.command}, environ)
			wantProblem(t, p, c.reason, c.fix)
		})
	}
}

func writeFile(t *testing.T, name string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("console.log('hi')\n"), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// A server that exits at once: its exit status and its last stderr lines,
// the token it was given not among them.
func TestCheckStdioExits(t *testing.T) {
	start := time.Now()
	_, p := check(t, t.Context(), stdioServer(t, "local", "exit"), testEnviron())
	wantProblem(t, p, []string{"the process exited during the MCP handshake (initialize) (exit status 3); its stderr ends:",
		"\n  test server: starting with token [secret]", "\n  test server: no database, giving up"}, []string{"run it by hand to see why: " + testBinary(t) + " (the gateway gives it PATH, HOME and tools.mcp[local].env"})
	if strings.Contains(p.Reason, "tok-123") {
		t.Errorf("the token was quoted:\n%s", p.Reason)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the check took %s", d)
	}
}

// A program that prints something else than MCP on stdout.
func TestCheckStdioNotMCP(t *testing.T) {
	_, p := check(t, t.Context(), stdioServer(t, "local", "garbage"), testEnviron())
	wantProblem(t, p, []string{"the MCP handshake (initialize) failed: its stdout carried something other than MCP messages (invalid character", "; it wrote nothing on stderr"}, []string{"nothing but MCP messages"})
}

// A server that never answers the handshake is a problem once the time is
// up, and its process is stopped (it ignores its stdin's end; SIGTERM).
func TestCheckStdioHangs(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, p := check(t, ctx, stdioServer(t, "local", "hang"), testEnviron())
	wantProblem(t, p, []string{"no answer to the MCP handshake (initialize) within 500ms, so the process was stopped", "\n  test server: pid "},
		[]string{"npx -y"})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the check took %s", d)
	}
	_, after, _ := strings.Cut(p.Reason, "test server: pid ")
	pid, err := strconv.Atoi(strings.TrimSpace(after))
	if err != nil {
		t.Fatalf("no pid in %q", p.Reason)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server process %d is still there: %v", pid, err)
	}
}

// An unset ${VAR} is the server's problem, every one named; New refuses
// it too, naming it, so the gateway does not start.
func TestCheckUnsetVariable(t *testing.T) {
	c := stdioServer(t, "local", "stdio")
	environ := []string{"PATH=" + os.Getenv("PATH")}
	_, p := check(t, t.Context(), c, environ)
	wantProblem(t, p, []string{"${MCPTEST_TOKEN} (env.MCPTEST_TOKEN) is not set in the gateway's environment, so the gateway will not start"},
		[]string{"export MCPTEST_TOKEN=… where the gateway runs, or take it out of tools.mcp[local]"})
	if _, err := New([]ServerConfig{c}, environ, nil); err == nil || !strings.Contains(err.Error(), "${MCPTEST_TOKEN} is not set") {
		t.Errorf("New: %v", err)
	}

	h := ServerConfig{Name: "remote", URL: "https://mcp.example.com/mcp", Headers: map[string]string{
		"Authorization": "Bearer ${MCP_TOKEN}", "X-Org": "${MCP_ORG}", "X-Team": "${MCP_ORG}-a"}}
	_, p = check(t, t.Context(), h, nil)
	wantProblem(t, p, []string{"${MCP_TOKEN} (headers.Authorization), ${MCP_ORG} (headers.X-Org), ${MCP_ORG} (headers.X-Team) are not set"},
		[]string{"export MCP_TOKEN=… MCP_ORG=… where the gateway runs"})
}

func TestCheckInvalid(t *testing.T) {
	_, p := check(t, t.Context(), ServerConfig{Name: "x", Command: []string{"a"}, URL: "https://x.example/mcp"}, nil)
	wantProblem(t, p, []string{"tools.mcp[x]: set command (a stdio server) or url"}, nil)
}

func TestCheckHTTP(t *testing.T) {
	var refused atomic.Int64
	ts := httpServer(t, "", &refused, nil)

	t.Run("ok", func(t *testing.T) {
		rep, p := check(t, t.Context(), httpConfig("remote", ts.URL), testEnviron())
		if p != nil {
			t.Fatalf("problem: %s", p.Reason)
		}
		if got, want := rep.Summary(), "10 tools over Streamable HTTP ("+ts.URL+"/mcp)"; got != want || rep.Server != "mcptest 1" {
			t.Errorf("summary %q, want %q; report %+v", got, want, rep)
		}
	})

	t.Run("wrong token", func(t *testing.T) {
		environ := []string{"MCPTEST_TOKEN=wrong-token"}
		_, p := check(t, t.Context(), httpConfig("remote", ts.URL), environ)
		wantProblem(t, p, []string{"POST " + ts.URL + "/mcp answered 401 Unauthorized to the MCP handshake (initialize)", "\n  no token"},
			[]string{"tools.mcp[remote].headers"})
	})

	t.Run("500", func(t *testing.T) {
		bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "database unavailable", http.StatusInternalServerError)
		}))
		defer bad.Close()
		_, p := check(t, t.Context(), ServerConfig{Name: "remote", URL: bad.URL + "/mcp"}, nil)
		wantProblem(t, p, []string{"answered 500 Internal Server Error to the MCP handshake (initialize)", "database unavailable"}, []string{"its own logs"})
	})

	t.Run("404", func(t *testing.T) {
		none := httptest.NewServer(http.NotFoundHandler())
		defer none.Close()
		_, p := check(t, t.Context(), ServerConfig{Name: "remote", URL: none.URL + "/api"}, nil)
		wantProblem(t, p, []string{"answered 404 Not Found to the MCP handshake"}, []string{"…/mcp"})
	})

	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, p := check(t, t.Context(), ServerConfig{Name: "remote", URL: "http://" + addr + "/mcp"}, nil)
		wantProblem(t, p, []string{"http://" + addr + "/mcp cannot be reached", "connection refused"}, []string{"is running"})
	})

	t.Run("hangs", func(t *testing.T) {
		release := make(chan struct{})
		stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
		defer stuck.Close()
		defer close(release)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, p := check(t, ctx, ServerConfig{Name: "remote", URL: stuck.URL + "/mcp"}, nil)
		wantProblem(t, p, []string{"no answer from " + stuck.URL + "/mcp to the MCP handshake (initialize) within 300ms"}, nil)
	})

	t.Run("header value not shown", func(t *testing.T) {
		echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad token "+r.Header.Get("Authorization"), http.StatusForbidden)
		}))
		defer echo.Close()
		_, p := check(t, t.Context(), ServerConfig{Name: "remote", URL: echo.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer ${MCPTEST_TOKEN}"}}, testEnviron())
		wantProblem(t, p, []string{"answered 403 Forbidden", "bad token [secret]"}, nil)
		if strings.Contains(p.Reason, "tok-123") {
			t.Errorf("the token was quoted: %s", p.Reason)
		}
	})
}

// The time a check had is said rounded up to a tenth of a second, so the
// doctor's --timeout 1s reads "within 1s" however long the start took.
func TestCeilTenth(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{999 * time.Millisecond, time.Second},
		{901 * time.Millisecond, time.Second},
		{time.Second, time.Second},
		{time.Second + time.Millisecond, 1100 * time.Millisecond},
		{30 * time.Millisecond, 100 * time.Millisecond},
	} {
		if got := ceilTenth(c.in); got != c.want {
			t.Errorf("ceilTenth(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
