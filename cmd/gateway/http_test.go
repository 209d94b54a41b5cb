package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard/health"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// server is a gateway child process serving HTTP, with stdin off.
type server struct {
	t           *testing.T
	cmd         *exec.Cmd
	addr        string
	metricsAddr string // when the metrics listener is on, and logged first
	logs        *strings.Builder
	done        chan error
}

var (
	// The line's other attributes (a replica's name) may come first.
	listeningRE        = regexp.MustCompile(`msg="http listening"(?: \S+)*? addr=(\S+)`)
	metricsListeningRE = regexp.MustCompile(`msg="metrics listening"(?: \S+)*? addr=(\S+)`)
)

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
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			s.logs.WriteString(sc.Text() + "\n")
			if m := metricsListeningRE.FindStringSubmatch(sc.Text()); m != nil {
				s.metricsAddr = m[1]
			}
			mu.Unlock()
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
		mu.Lock()
		defer mu.Unlock()
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
	return s.getFrom(s.addr, path, "")
}

// getFrom GETs path from addr, with host as the Host header if not "".
func (s *server) getFrom(addr, path, host string) (int, string, string) {
	s.t.Helper()
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

// readyzBody is GET /readyz's answer.
type readyzBody struct {
	Ready bool            `json:"ready"`
	Parts []health.Status `json:"components"`
}

// part is the status of the named part ("slack"), empty if none.
func (r readyzBody) part(name string) health.Status {
	for _, p := range r.Parts {
		if p.Name == name {
			return p
		}
	}
	return health.Status{}
}

// readyz GETs /readyz until cond holds of its answer (20 s at most) and
// returns that answer.
func (s *server) readyz(cond func(readyzBody, int) bool) readyzBody {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _, body := s.get("/readyz")
		var r readyzBody
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			s.t.Fatalf("/readyz: %d %q: %v", code, body, err)
		}
		if cond(r, code) {
			return r
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("/readyz never as wanted; last %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	s := g.serve([]string{"TEST_OPENAI_KEY=k"}, "metrics.addr=127.0.0.1:0")

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

	// Metrics are served on their own listener, and beside the chat only
	// because http.addr is loopback here (make run's /metrics). The turn
	// is counted just after its end is published (the idle state goes
	// with the answer's write), so the count may come a moment later.
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, _, body := s.get("/metrics")
		if code == http.StatusOK && strings.Contains(body, "switchboard_turns_total") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics on a loopback http.addr = %d, want the metrics with the turn counted", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s.metricsAddr == "" {
		t.Fatalf("no metrics listener logged:\n%s", s.logs)
	}
	code, _, metrics := s.getFrom(s.metricsAddr, "/metrics", "")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`switchboard_turns_total{outcome="answered"} 1`,
		`switchboard_websocket_connections 1`,
		`switchboard_sessions_live 1`,
		// The turn's two messages, the user's and the answer, indexed
		// for recall; nothing remembered or compacted.
		"switchboard_recall_indexed_messages 2\n",
		"switchboard_memories_stored 0\n",
		"switchboard_summaries_stored 0\n",
		"switchboard_recall_index_bytes ",
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

// A JWT secret from the environment is held to the same length as one in
// the file: a one-byte secret would let anyone sign tokens.
func TestShortJWTSecretFromTheEnvironmentIsRefused(t *testing.T) {
	g := newGateway(t, "  - name: main\n    kind: demo", "")
	_, logs, err := g.run("", "SWITCHBOARD_LISTENERS__WEBSOCKET__AUTH__MODE=jwt",
		"SWITCHBOARD_LISTENERS__WEBSOCKET__AUTH__JWT_SECRET_ENV=TEST_SHORT_JWT_SECRET", "TEST_SHORT_JWT_SECRET=k")
	if err == nil || !strings.Contains(logs, "TEST_SHORT_JWT_SECRET") || !strings.Contains(logs, "must be at least 32 bytes") {
		t.Fatalf("jwt mode with a 1-byte secret from the environment: err=%v\n%s", err, logs)
	}
}

// DNS rebinding: with auth none, a page on rebind.attacker.example whose
// name now resolves to 127.0.0.1 is not the gateway's own origin. Every
// route answers only for a loopback Host or http.public_url's host.
func TestOnlyLoopbackOrPublicHostsAreServed(t *testing.T) {
	g := newGateway(t, "  - name: main\n    kind: demo", "")
	s := g.serve(nil, "metrics.addr=127.0.0.1:0", "http.public_url=https://chat.example.com")
	_, port, _ := net.SplitHostPort(s.addr)
	_, mport, _ := net.SplitHostPort(s.metricsAddr)
	for _, r := range []struct{ addr, port, path string }{
		{s.addr, port, "/"}, {s.addr, port, "/widget.js"}, {s.addr, port, "/ws"}, {s.addr, port, "/healthz"},
		{s.addr, port, "/s/aaaaaaaaaaaaaaaaaaaaaaaaaa"}, // an invite link's page
		{s.metricsAddr, mport, "/metrics"},
	} {
		for _, host := range []string{"rebind.attacker.example:" + r.port, "rebind.attacker.example", "127.0.0.1.attacker.example:" + r.port} {
			code, _, body := s.getFrom(r.addr, r.path, host)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "not served") {
				t.Errorf("GET %s with Host %s = %d %.80q, want 421", r.path, host, code, body)
			}
		}
		if r.path == "/ws" {
			continue // not an upgrade: 400 whatever the host
		}
		for _, host := range []string{"localhost:" + r.port, "127.0.0.1:" + r.port, "127.1.2.3", "[::1]:" + r.port} {
			if code, _, body := s.getFrom(r.addr, r.path, host); code != 200 {
				t.Errorf("GET %s with Host %s = %d %.80q, want 200", r.path, host, code, body)
			}
		}
		if r.addr == s.addr {
			if code, _, body := s.getFrom(r.addr, r.path, "chat.example.com"); code != 200 {
				t.Errorf("GET %s with the public host = %d %.80q, want 200", r.path, code, body)
			}
		}
	}
	// The WebSocket itself, from the rebound page and from the public one.
	h := http.Header{"Origin": {"http://rebind.attacker.example:" + port}}
	d := gws.Dialer{NetDial: func(network, _ string) (net.Conn, error) { return net.Dial(network, s.addr) }}
	if _, resp, err := d.Dial("ws://rebind.attacker.example:"+port+"/ws", h); err == nil || resp == nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("a rebound page's WebSocket: err=%v resp=%v, want 421", err, resp)
	}
	c, _, err := d.Dial("ws://chat.example.com/ws", http.Header{"Origin": {"https://chat.example.com"}})
	if err != nil {
		t.Fatalf("the public origin's WebSocket was refused: %v", err)
	}
	c.Close()
}

// An idle keep-alive connection is closed after http.idle_timeout, and a
// short http.read_timeout does not cut a WebSocket.
func TestIdleConnectionsAreClosed(t *testing.T) {
	g := newGateway(t, "  - name: main\n    kind: demo", "")
	s := g.serve(nil, "http.idle_timeout=200ms", "http.read_timeout=300ms", "metrics.addr=")
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: "+s.addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /healthz: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// Now idle: the server hangs up (EOF), well before our own deadline.
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle keep-alive connection: read = %v, want EOF (closed by the server)", err)
	}

	// A WebSocket quiet for longer than read_timeout is still served.
	c, _, err := gws.DefaultDialer.Dial("ws://"+s.addr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteJSON(map[string]any{"type": "hello"}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, func(f frame) bool { return f.Type == "ready" })
	time.Sleep(time.Second) // quiet for over three read timeouts
	if err := c.WriteJSON(map[string]any{"type": "input", "id": "m1", "text": "/help"}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, func(f frame) bool { return f.Type == "message" && strings.Contains(string(f.Data), "Commands") })
}
