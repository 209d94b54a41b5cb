package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// server is a gateway child process serving HTTP, with stdin off.
type server struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	logs *strings.Builder
	done chan error
}

var listeningRE = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

// serve starts the gateway and returns once it is listening.
func (g *gateway) serve(env []string, sets ...string) *server {
	g.t.Helper()
	args := []string{"--config", g.config, "--set", "listeners.stdin.enabled=false"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(hermeticEnv(), "GATEWAY_TEST_RUN_MAIN=1"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		g.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	s := &server{t: g.t, cmd: cmd, logs: &strings.Builder{}, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.logs.WriteString(sc.Text() + "\n")
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		s.done <- cmd.Wait()
	}()
	g.t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	select {
	case s.addr = <-addr:
	case err := <-s.done:
		g.t.Fatalf("gateway exited before listening: %v\n%s", err, s.logs)
	case <-time.After(20 * time.Second):
		g.t.Fatal("gateway did not start listening")
	}
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Fatalf("gateway exited with %v\n%s", err, s.logs)
		}
	case <-time.After(20 * time.Second):
		s.t.Fatal("gateway did not stop on SIGTERM")
	}
}

func (s *server) get(path string) (int, string, string) {
	s.t.Helper()
	resp, err := http.Get("http://" + s.addr + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

type frame struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func readUntil(t *testing.T, c *gws.Conn, done func(frame) bool) []frame {
	t.Helper()
	var got []frame
	for {
		_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
		var f frame
		if err := c.ReadJSON(&f); err != nil {
			t.Fatalf("reading /ws after %d frames: %v", len(got), err)
		}
		got = append(got, f)
		if done(f) {
			return got
		}
	}
}

// The binary's HTTP side: the demo page, the widget, health, a whole turn
// over /ws against a scripted model, the metrics that turn left behind, and
// a clean stop that tells WebSocket clients to reconnect elsewhere.
func TestHTTPServesWidgetWebSocketHealthAndMetrics(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	llm.Push(openaitest.Reply{Text: []string{"Hello ", "from ", "the model."}})
	g := newGateway(t, openAIProvider(llm), "")
	s := g.serve([]string{"TEST_OPENAI_KEY=k"})

	if code, _, body := s.get("/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, ctype, body := s.get("/"); code != 200 || !strings.HasPrefix(ctype, "text/html") || !strings.Contains(body, "widget.js") {
		t.Fatalf("/ = %d %s, want the demo page embedding widget.js:\n%.300s", code, ctype, body)
	}
	if code, ctype, _ := s.get("/widget.js"); code != 200 || !strings.Contains(ctype, "javascript") {
		t.Fatalf("/widget.js = %d %s", code, ctype)
	}

	c, _, err := gws.DefaultDialer.Dial("ws://"+s.addr+"/ws", http.Header{"Origin": {"http://" + s.addr}})
	if err != nil {
		t.Fatalf("dial /ws: %v", err)
	}
	defer c.Close()
	if err := c.WriteJSON(map[string]any{"type": "hello", "user": map[string]string{"name": "Ada"}}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, func(f frame) bool { return f.Type == "ready" })
	if err := c.WriteJSON(map[string]any{"type": "input", "id": "m1", "text": "hi"}); err != nil {
		t.Fatal(err)
	}
	frames := readUntil(t, c, func(f frame) bool {
		return f.Type == "message" && strings.Contains(string(f.Data), `"role":"assistant"`)
	})
	if last := frames[len(frames)-1]; !strings.Contains(string(last.Data), "Hello from the model.") {
		t.Fatalf("final message = %s", last.Data)
	}
	readUntil(t, c, func(f frame) bool { return f.Type == "state" && strings.Contains(string(f.Data), `"idle"`) })

	code, _, metrics := s.get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`switchboard_turns_total{outcome="answered"} 1`,
		`switchboard_websocket_connections 1`,
		`switchboard_sessions_live 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The three tokens may arrive together and be sent as fewer deltas.
	if !regexp.MustCompile(`switchboard_events_total\{type="delta"\} [123]\n`).MatchString(metrics) {
		t.Errorf("/metrics counts no delta events:\n%s", metrics)
	}

	s.stop()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ce *gws.CloseError
	for {
		if _, _, err = c.ReadMessage(); err != nil {
			break
		}
	}
	if !errors.As(err, &ce) || ce.Code != gws.CloseGoingAway {
		t.Fatalf("on shutdown the client got %v, want close 1001 (going away)", err)
	}
}

func TestWebSocketFromAnotherSiteIsRefused(t *testing.T) {
	g := newGateway(t, "  - name: main\n    kind: demo", "")
	s := g.serve(nil)
	_, resp, err := gws.DefaultDialer.Dial("ws://"+s.addr+"/ws", http.Header{"Origin": {"https://evil.example"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("dial from another origin: err=%v resp=%v, want 403", err, resp)
	}
	// A second gateway needs a database of its own.
	s2 := g.serve(nil, "listeners.websocket.allowed_origins=https://shop.example", "storage.dsn="+filepath.Join(g.dir, "second.db"))
	c, _, err := gws.DefaultDialer.Dial("ws://"+s2.addr+"/ws", http.Header{"Origin": {"https://shop.example"}})
	if err != nil {
		t.Fatalf("a configured origin was refused: %v", err)
	}
	c.Close()
}

// Without authentication, /ws is only served on loopback unless the
// operator says a proxy in front authenticates.
func TestUnauthenticatedWebSocketBeyondLoopbackNeedsConsent(t *testing.T) {
	g := newGateway(t, "  - name: main\n    kind: demo", "")
	out, logs, err := g.run("", "SWITCHBOARD_HTTP__ADDR=0.0.0.0:0")
	if err == nil {
		t.Fatalf("started on 0.0.0.0 with auth none:\n%s", out)
	}
	if !strings.Contains(logs, "auth.mode is none") || !strings.Contains(logs, "allow_unauthenticated") {
		t.Fatalf("the refusal does not say what to set:\n%s", logs)
	}

	s := g.serve(nil, "http.addr=0.0.0.0:0", "listeners.websocket.auth.allow_unauthenticated=true")
	s.stop()

	_, logs, err = g.run("", "SWITCHBOARD_LISTENERS__WEBSOCKET__AUTH__MODE=jwt",
		"SWITCHBOARD_LISTENERS__WEBSOCKET__AUTH__JWT_SECRET_ENV=TEST_UNSET_JWT_SECRET")
	if err == nil || !strings.Contains(logs, "TEST_UNSET_JWT_SECRET is not set") {
		t.Fatalf("jwt mode with an unset secret variable: err=%v\n%s", err, logs)
	}
}
