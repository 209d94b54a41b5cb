package main

// Crash tests: the real gateway binary runs as a child process, is killed
// with SIGKILL at random points of its work and restarted on the same
// SQLite file, while WebSocket clients keep talking to it the way the
// protocol tells them to (resume_after, resend what is not acknowledged);
// then the stored history is audited. Plus SIGTERM draining and the
// refusal of a second gateway on the same database.
//
// A soak run:
//
//	go test ./cmd/gateway -run TestCrash -crash.kills=100
//
// Every run logs its seed; -crash.seed=N replays its random choices (the
// timing of a real process cannot be replayed, the choices can).
// -crash.points=mid-stream,approval limits the kill points, and
// -crash.keep keeps a failed test's database for a look with sqlite3.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gws "github.com/gorilla/websocket"
	_ "modernc.org/sqlite"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

var (
	crashSeed   = flag.Int64("crash.seed", 0, "seed of TestCrash's random choices (0: from the clock; every run logs the one it used)")
	crashKills  = flag.Int("crash.kills", 3, "how many times TestCrash kills the gateway with SIGKILL (a soak run: 100)")
	crashKeep   = flag.Bool("crash.keep", false, "when a test of crash_test.go fails, keep a copy of its database and config (the path is logged)")
	crashPoints = flag.String("crash.points", "", "comma-separated kill points TestCrash picks from (default all: "+strings.Join(allKillPoints, ",")+")")
)

// Kill points: what the gateway is doing when TestCrash kills it.
const (
	pointIdle       = "idle"        // nothing in flight
	pointAfterInput = "after-input" // right after a client sent an input
	pointMidStream  = "mid-stream"  // after a delta of a reply
	pointMidTool    = "mid-tool"    // after a tool_call
	pointApproval   = "approval"    // a confirmation_request nobody answered yet
)

var allKillPoints = []string{pointIdle, pointAfterInput, pointMidStream, pointMidTool, pointApproval}

const (
	crashClients   = 5
	minCrashInputs = 3 // every client asks at least one plain, calc and time question
	chunkDelay     = 15 * time.Millisecond
)

// ---------------------------------------------------------------------------
// The binary and its processes.

var gatewayBuild struct {
	once sync.Once
	path string
	err  error
}

const buildDirPrefix = "switchboard-gateway-test-"

// gatewayBinary builds ./cmd/gateway once per test run.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the gateway binary and runs it as a child process")
	}
	gatewayBuild.once.Do(func() { gatewayBuild.path, gatewayBuild.err = buildGatewayBinary() })
	if gatewayBuild.err != nil {
		t.Fatal(gatewayBuild.err)
	}
	return gatewayBuild.path
}

// buildGatewayBinary builds into a directory named after this process;
// directories of test processes that are gone are removed first (no test
// hook runs when the whole run ends).
func buildGatewayBinary() (string, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("module root: %w", err)
	}
	removeStaleBuilds()
	dir := filepath.Join(os.TempDir(), buildDirPrefix+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "gateway")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if p, err := exec.LookPath("go"); err == nil {
			goTool = p
		}
	}
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/gateway")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/gateway: %v\n%s", err, out)
	}
	return bin, nil
}

func removeStaleBuilds() {
	entries, _ := os.ReadDir(os.TempDir())
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), buildDirPrefix)
		pid, err := strconv.Atoi(rest)
		if !ok || err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}

// procLog collects the output of every start of a test's gateway.
type procLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *procLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *procLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// dumpOnFailure logs the gateway's output (its end, when long) if the
// test failed.
func (l *procLog) dumpOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		s := l.String()
		const keep = 64 << 10
		if len(s) > keep {
			s = "…" + s[len(s)-keep:]
		}
		t.Logf("gateway stderr:\n%s", s)
	})
}

var crashListenRE = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

// addrWatch copies the gateway's stderr to the log and reports the
// address it listens on.
type addrWatch struct {
	log  *procLog
	line []byte
	addr chan string
}

func (w *addrWatch) Write(p []byte) (int, error) {
	_, _ = w.log.Write(p)
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		if m := crashListenRE.FindSubmatch(w.line[:i]); m != nil {
			select {
			case w.addr <- string(m[1]):
			default:
			}
		}
		w.line = w.line[i+1:]
	}
	return len(p), nil
}

// gatewayProc is one run of the binary.
type gatewayProc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	err  error // the exit status, once done is closed
}

var startCount atomic.Int64

// startGatewayProc starts the binary with stdin closed and returns once it
// listens (or failed to).
func startGatewayProc(t *testing.T, bin, cfg string, log *procLog, args ...string) (*gatewayProc, error) {
	t.Helper()
	fmt.Fprintf(log, "=== %s gateway start #%d ===\n", time.Now().Format("15:04:05.000"), startCount.Add(1))
	cmd := exec.Command(bin, append([]string{"--config", cfg}, args...)...)
	cmd.Env = hermeticEnv()
	w := &addrWatch{log: log, addr: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = log, w
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &gatewayProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	select {
	case p.addr = <-w.addr:
		return p, nil
	case <-p.done:
		return p, fmt.Errorf("the gateway exited before listening: %v", p.err)
	case <-time.After(30 * time.Second):
		p.kill()
		return p, errors.New("the gateway did not listen within 30s")
	}
}

func (p *gatewayProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *gatewayProc) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// wait waits for the exit; ok is false if it did not come in time.
func (p *gatewayProc) wait(timeout time.Duration) (exitErr error, ok bool) {
	select {
	case <-p.done:
		return p.err, true
	case <-time.After(timeout):
		return nil, false
	}
}

// terminate sends SIGTERM and waits for the exit.
func (p *gatewayProc) terminate(timeout time.Duration) (exitErr error, ok bool) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	return p.wait(timeout)
}

// ---------------------------------------------------------------------------
// Configuration and the scripted model.

type crashSetup struct {
	dir, config, db string
}

var graceProbe struct {
	once sync.Once
	ok   bool
}

// shutdownGraceSupported reports whether the configuration knows
// sessions.shutdown_grace yet.
func shutdownGraceSupported() bool {
	graceProbe.once.Do(func() {
		dir, err := os.MkdirTemp("", "switchboard-config-probe-")
		if err != nil {
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "config.yaml")
		if os.WriteFile(path, []byte("sessions:\n  shutdown_grace: 1s\n"), 0o644) != nil {
			return
		}
		_, err = config.Load(path, nil, nil)
		graceProbe.ok = err == nil || !strings.Contains(err.Error(), "shutdown_grace")
	})
	return graceProbe.ok
}

const crashGuide = `---
name: crash
description: Answers the crash tests' questions
tools: [current_time, calculator]
approval: { default: ask, auto: [calculator] }
memory: { policy: sliding-window, window: 20 }
---
You answer test questions, using the tools when asked to.
`

// writeCrashSetup writes the guide and config.yaml into a new temp dir.
func writeCrashSetup(t *testing.T, modelBaseURL, grace string) crashSetup {
	t.Helper()
	dir := t.TempDir()
	guides := filepath.Join(dir, "guides")
	if err := os.MkdirAll(guides, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(guides, "crash.md"), []byte(crashGuide), 0o644); err != nil {
		t.Fatal(err)
	}
	sessions := ""
	if grace != "" {
		if shutdownGraceSupported() {
			sessions = "sessions:\n  shutdown_grace: " + grace + "\n"
		} else {
			t.Logf("the configuration does not know sessions.shutdown_grace yet: left out")
		}
	}
	s := crashSetup{dir: dir, config: filepath.Join(dir, "config.yaml"), db: filepath.Join(dir, "gw.db")}
	if *crashKeep {
		// Registered before any gateway starts, so it runs after they are
		// stopped.
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			keep, err := os.MkdirTemp("", "switchboard-crash-kept-")
			if err == nil {
				err = os.CopyFS(keep, os.DirFS(dir))
			}
			t.Logf("kept a copy of %s in %s (%v)", dir, keep, err)
		})
	}
	cfg := fmt.Sprintf(`http:
  addr: 127.0.0.1:0
storage:
  dsn: %s
providers:
  - name: main
    kind: openai
    base_url: %s
    api_key: test
    model: gpt-test
guides:
  dir: %s
  default: crash
listeners:
  websocket:
    enabled: true
  stdin:
    enabled: false
%s`, s.db, modelBaseURL, guides, sessions)
	if err := os.WriteFile(s.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

var questionIDRE = regexp.MustCompile(`q\d+-\d+`)

// questionID is the "q<client>-<n>" a question starts with.
func questionID(text string) string { return questionIDRE.FindString(text) }

// answerText is the whole answer the scripted model gives to a question.
func answerText(qid, kind string) string { return strings.Join(answerChunks(qid, kind), "") }

func answerChunks(qid, kind string) []string {
	return []string{"Answer", " to ", qid, " (", kind, ")."}
}

// crashModel answers like a model using tools: after a tool result, the
// final answer; to a question about the time, a current_time call; to one
// asking to calc, a calculator call; otherwise a plain answer. Answers
// stream in six chunks, delay apart, and name the question they answer.
func crashModel(delay time.Duration) func(openaitest.Request) openaitest.Reply {
	var calls atomic.Int64
	return func(r openaitest.Request) openaitest.Reply {
		if len(r.Messages) == 0 {
			return openaitest.Reply{Text: []string{"no messages"}}
		}
		question := ""
		for i := len(r.Messages) - 1; i >= 0; i-- {
			if r.Messages[i].Role == "user" {
				question = openaitest.Text(r.Messages[i].Content)
				break
			}
		}
		qid := questionID(question)
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == "tool":
			tool := "tool"
			if prev := r.Messages[len(r.Messages)-2]; len(prev.ToolCalls) > 0 {
				tool = prev.ToolCalls[0].Function.Name
			}
			return openaitest.Reply{Text: answerChunks(qid, "after "+tool), Delay: delay}
		case strings.Contains(question, "time"):
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{
				ID: fmt.Sprintf("call_%d", calls.Add(1)), Name: "current_time", Args: `{}`,
			}}}
		case strings.Contains(question, "calc"):
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{
				ID: fmt.Sprintf("call_%d", calls.Add(1)), Name: "calculator", Args: `{"expression":"2+3"}`,
			}}}
		}
		return openaitest.Reply{Text: answerChunks(qid, "plain"), Delay: delay}
	}
}

// ---------------------------------------------------------------------------
// Wire types.

type wsFrame struct {
	Seq     int64           `json:"seq"`
	Session string          `json:"session"`
	Type    string          `json:"type"`
	Data    json.RawMessage `json:"data"`
}

type seenEvent struct {
	Type string
	Data json.RawMessage
}

// sameData compares event data as JSON values, leaving out the HTML the
// WebSocket listener renders for clients (html, text_html).
func sameData(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	for _, v := range []any{x, y} {
		if m, ok := v.(map[string]any); ok {
			delete(m, "html")
			delete(m, "text_html")
		}
	}
	return reflect.DeepEqual(x, y)
}

func short(b []byte, n int) string {
	s := string(b)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func isAssistantMessage(f wsFrame) bool {
	if f.Type != "message" {
		return false
	}
	var md switchboard.MessageData
	return json.Unmarshal(f.Data, &md) == nil && md.Role == switchboard.RoleAssistant
}

func errorCode(f wsFrame) string {
	var ed switchboard.ErrorData
	_ = json.Unmarshal(f.Data, &ed)
	return ed.Code
}

// ---------------------------------------------------------------------------
// TestCrash.

// crashRun is the gateway under test: its current process and what the
// clients have seen of it.
type crashRun struct {
	t     *testing.T
	bin   string
	setup crashSetup
	log   *procLog

	mu   sync.Mutex
	proc *gatewayProc
	addr string // "" while the gateway is down
	gen  int    // how many times it was started

	paused atomic.Bool // clients start no new input (the idle kill point)
	hold   atomic.Bool // clients answer no approval request (the approval kill point)
	final  atomic.Bool // the kills are over: clients finish their inputs

	// Live events seen by all clients (not replays), for the kill points.
	inputsSent, deltas, toolCalls, confirmRequests atomic.Int64

	clients []*crashClient
}

func (h *crashRun) start() {
	h.t.Helper()
	p, err := startGatewayProc(h.t, h.bin, h.setup.config, h.log)
	if err != nil {
		h.t.Fatalf("start #%d: %v", h.gen+1, err)
	}
	h.mu.Lock()
	h.proc, h.addr = p, p.addr
	h.gen++
	h.mu.Unlock()
}

func (h *crashRun) current() (addr string, gen int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addr, h.gen
}

func (h *crashRun) kill() {
	h.mu.Lock()
	p := h.proc
	h.addr = ""
	h.mu.Unlock()
	p.kill()
	if p.err == nil || !strings.Contains(p.err.Error(), "killed") {
		h.t.Errorf("the gateway was SIGKILLed but exited with %v", p.err)
	}
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *crashRun) all(f func(*crashClient) bool) bool {
	for _, c := range h.clients {
		if !f(c) {
			return false
		}
	}
	return true
}

func (h *crashRun) report(f func(*crashClient) bool) string {
	var b strings.Builder
	for _, c := range h.clients {
		if !f(c) {
			b.WriteString(c.report())
		}
	}
	return b.String()
}

// killAt waits (a bounded time) for the point, then kills the gateway. It
// reports whether the point was reached.
func (h *crashRun) killAt(point string, rng *rand.Rand) bool {
	const patience = 3 * time.Second
	var reached bool
	jitter := time.Duration(0)
	switch point {
	case pointIdle:
		h.paused.Store(true)
		reached = waitFor(patience, func() bool { return h.all((*crashClient).idle) })
	case pointAfterInput:
		n := h.inputsSent.Load()
		reached = waitFor(patience, func() bool { return h.inputsSent.Load() > n })
		jitter = time.Duration(rng.IntN(5000)) * time.Microsecond
	case pointMidStream:
		n := h.deltas.Load()
		reached = waitFor(patience, func() bool { return h.deltas.Load() > n })
		jitter = time.Duration(rng.IntN(20000)) * time.Microsecond
	case pointMidTool:
		n := h.toolCalls.Load()
		reached = waitFor(patience, func() bool { return h.toolCalls.Load() > n })
		jitter = time.Duration(rng.IntN(20000)) * time.Microsecond
	case pointApproval:
		h.hold.Store(true)
		n := h.confirmRequests.Load()
		reached = waitFor(patience, func() bool { return h.confirmRequests.Load() > n })
	}
	time.Sleep(jitter)
	h.kill()
	h.paused.Store(false)
	h.hold.Store(false)
	return reached
}

func killPoints(t *testing.T) []string {
	if *crashPoints == "" {
		return allKillPoints
	}
	var out []string
	for _, p := range strings.Split(*crashPoints, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(allKillPoints, p) {
			t.Fatalf("-crash.points: unknown point %q (want %s)", p, strings.Join(allKillPoints, ", "))
		}
		out = append(out, p)
	}
	return out
}

func TestCrash(t *testing.T) {
	bin := gatewayBinary(t)
	seed := *crashSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	kills := *crashKills
	points := killPoints(t)
	t.Logf("crash seed %d, %d kills (replay: go test ./cmd/gateway -run 'TestCrash$' -crash.seed=%d -crash.kills=%d)", seed, kills, seed, kills)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))

	llm := openaitest.New()
	t.Cleanup(llm.Close) // after the gateway is gone: a request it holds open ends with it
	llm.Respond(crashModel(chunkDelay))
	log := &procLog{}
	log.dumpOnFailure(t)
	h := &crashRun{t: t, bin: bin, setup: writeCrashSetup(t, llm.BaseURL(), "5s"), log: log}
	h.start()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i := 1; i <= crashClients; i++ {
		c := newCrashClient(h, i, seed)
		h.clients = append(h.clients, c)
		wg.Go(func() { c.loop(ctx) })
	}
	caughtUp := func(gen int) func(*crashClient) bool {
		return func(c *crashClient) bool { return c.caughtUpOn(gen) }
	}
	if !waitFor(15*time.Second, func() bool { return h.all(caughtUp(1)) }) {
		t.Fatalf("the clients did not all open their sessions:\n%s", h.report(caughtUp(1)))
	}

	chosen := map[string]int{}
	missed := map[string]int{}
	for k := range kills {
		point := points[rng.IntN(len(points))]
		chosen[point]++
		if !h.killAt(point, rng) {
			missed[point]++
		}
		h.start()
		_, gen := h.current()
		if !waitFor(20*time.Second, func() bool { return h.all(caughtUp(gen)) }) {
			t.Fatalf("after kill %d (%s) and a restart, not every client resumed its session:\n%s", k+1, point, h.report(caughtUp(gen)))
		}
		// Half the time the next kill may cut the turns being resumed
		// (a crash during recovery); otherwise they end first, so a turn
		// is not cut again and again until the gateway gives it up.
		if rng.IntN(2) == 0 {
			marks := make([]int, len(h.clients))
			for i, c := range h.clients {
				marks[i] = c.inFlight()
			}
			waitFor(5*time.Second, func() bool {
				for i, c := range h.clients {
					if marks[i] >= 0 && c.inFlight() == marks[i] {
						return false
					}
				}
				return true
			})
		}
	}

	h.final.Store(true)
	if !waitFor(30*time.Second, func() bool { return h.all((*crashClient).finished) }) {
		t.Fatalf("after the last restart the clients' inputs were not all answered:\n%s\nthe end of their stored events:\n%s",
			h.report((*crashClient).finished), h.storedTails((*crashClient).finished))
	}
	cancel()
	wg.Wait()
	h.mu.Lock()
	p := h.proc
	h.mu.Unlock()
	exitErr, ok := p.terminate(30 * time.Second)
	if !ok {
		t.Fatal("the gateway did not exit within 30s of SIGTERM")
	}
	if exitErr != nil {
		t.Errorf("after SIGTERM the gateway exited with %v, want status 0", exitErr)
	}

	for _, c := range h.clients {
		for _, p := range c.problems {
			t.Errorf("client %d: %s", c.n, p)
		}
	}

	db := openAuditDB(t, h.setup.db)
	var total sessionStats
	inputs, resent, reconnects := 0, 0, 0
	connErrs := map[string]int{}
	for _, c := range h.clients {
		var texts []string
		for _, in := range c.inputs {
			texts = append(texts, in.text)
			resent += in.sends - 1
		}
		inputs += len(texts)
		reconnects += c.reconnects
		for code, n := range c.connErrs {
			connErrs[code] += n
		}
		st, fails := auditSession(db, c.session, texts, c.seen)
		total.add(st)
		reportFailures(t, fmt.Sprintf("session %s (client %d)", c.session, c.n), fails)
	}
	reportFailures(t, "store", auditStore(db, h.sessionIDs()))

	var pts []string
	for _, p := range allKillPoints {
		if chosen[p] > 0 {
			pts = append(pts, fmt.Sprintf("%s %d (%d not reached)", p, chosen[p], missed[p]))
		}
	}
	t.Logf("seed %d: %d kills [%s]; %d sessions, %d events, %d inputs (%d resent), %d interrupted turns (%d given up), %d already_resolved, %d reconnects, connection errors %v",
		seed, kills, strings.Join(pts, ", "), len(h.clients), total.events, inputs, resent, total.interrupted, total.gaveUp, total.alreadyResolved, reconnects, connErrs)
}

// storedTails lists the last stored events of the sessions of the clients
// for which f is false.
func (h *crashRun) storedTails(f func(*crashClient) bool) string {
	db, err := sql.Open("sqlite", "file:"+h.setup.db+"?mode=ro")
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	var b strings.Builder
	for _, c := range h.clients {
		if f(c) {
			continue
		}
		c.mu.Lock()
		session := c.session
		c.mu.Unlock()
		evs, err := loadEvents(db, session)
		if err != nil {
			fmt.Fprintf(&b, "session %s: %v\n", session, err)
			continue
		}
		fmt.Fprintf(&b, "session %s (client %d), %d events:\n%s\n", session, c.n, len(evs), describeEvents(evs, len(evs)-25, len(evs)))
		var turn string
		if tableExists(db, "pending_turns") && db.QueryRow(`SELECT data FROM pending_turns WHERE session_id = ?`, session).Scan(&turn) == nil {
			fmt.Fprintf(&b, "  its stored open turn: %s\n", turn)
			var p struct {
				Confirmations []struct {
					ID       string `json:"id"`
					Resolved bool   `json:"resolved"`
				} `json:"confirmations"`
			}
			_ = json.Unmarshal([]byte(turn), &p)
			for _, cf := range p.Confirmations {
				asked := slices.ContainsFunc(evs, func(ev evRow) bool {
					return ev.Type == "confirmation_request" && bytes.Contains(ev.Data, []byte(`"`+cf.ID+`"`))
				})
				if !cf.Resolved && !asked {
					fmt.Fprintf(&b, "  the open turn waits for approval %s, but no confirmation_request for it is stored: no client can answer it\n", cf.ID)
				}
			}
		}
	}
	return b.String()
}

func (h *crashRun) sessionIDs() []string {
	var ids []string
	for _, c := range h.clients {
		ids = append(ids, c.session)
	}
	return ids
}

func reportFailures(t *testing.T, what string, fails []string) {
	t.Helper()
	const max = 25
	if len(fails) == 0 {
		return
	}
	more := ""
	if len(fails) > max {
		more = fmt.Sprintf("\n… and %d more", len(fails)-max)
		fails = fails[:max]
	}
	t.Errorf("%s:\n%s%s", what, strings.Join(fails, "\n"), more)
}

// crashClient is a WebSocket client that behaves as docs/websocket.md
// asks: it resumes after its last seq, resends inputs it has not seen
// accepted (same id), and answers approval requests.
type crashClient struct {
	h      *crashRun
	n      int
	user   string
	rng    *rand.Rand // the client's goroutine only
	offset int        // where its questions start in the plain, calc, time cycle

	mu         sync.Mutex
	session    string
	seen       map[int64]seenEvent
	lastSeq    int64
	inputs     []*crashInput
	open       map[string]*openConfirm
	resolved   map[string]bool
	conns      int   // connections made
	connGen    int   // the gateway start the current connection is to
	readyLast  int64 // ready.last_seq of the current connection; -1 before ready
	caughtUp   bool  // the current connection has replayed up to readyLast
	dropConn   bool  // hello failed: reconnect
	lastState  string
	reconnects int
	connErrs   map[string]int
	problems   []string
	recent     []string
}

type crashInput struct {
	id, text string
	sent     bool // on the current connection, or before it was known
	accepted bool // a user message with its text was seen
	answered bool // an assistant message (or an error) followed
	endedBy  string
	sends    int
	resendAt time.Time
}

type openConfirm struct {
	due      time.Time
	sentConn int // the connection it was last sent on
}

func newCrashClient(h *crashRun, n int, seed int64) *crashClient {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(n)))
	return &crashClient{
		h: h, n: n, user: fmt.Sprintf("u%d", n), rng: rng, offset: rng.IntN(3),
		seen: map[int64]seenEvent{}, open: map[string]*openConfirm{}, resolved: map[string]bool{},
		connErrs: map[string]int{}, readyLast: -1,
	}
}

func (c *crashClient) problem(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func (c *crashClient) current() *crashInput {
	if len(c.inputs) == 0 {
		return nil
	}
	return c.inputs[len(c.inputs)-1]
}

func (c *crashClient) wantsMore() bool {
	return !c.h.final.Load() || len(c.inputs) < minCrashInputs
}

func (c *crashClient) caughtUpOn(gen int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session != "" && c.connGen == gen && c.caughtUp
}

// idle: nothing of this client's is in flight.
func (c *crashClient) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.current()
	return c.caughtUp && len(c.open) == 0 && (cur == nil || cur.answered && c.lastState == "idle")
}

// inFlight is the number of the input whose turn is under way, -1 if none.
func (c *crashClient) inFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.current(); cur != nil && !cur.answered {
		return len(c.inputs)
	}
	return -1
}

func (c *crashClient) finished() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.current()
	return c.caughtUp && len(c.open) == 0 && cur != nil && cur.answered && !c.wantsMore()
}

func (c *crashClient) report() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "client %d (session %s): last seq %d, connected to start #%d (ready.last_seq %d, caught up %v), %d inputs, open approvals %v\n",
		c.n, c.session, c.lastSeq, c.connGen, c.readyLast, c.caughtUp, len(c.inputs), slices.Sorted(maps.Keys(c.open)))
	for _, in := range c.inputs {
		if !in.answered {
			fmt.Fprintf(&b, "  input %s %q: sent %v (%d times), accepted %v, answered %v\n", in.id, in.text, in.sent, in.sends, in.accepted, in.answered)
		}
	}
	for _, p := range c.problems {
		fmt.Fprintf(&b, "  problem: %s\n", p)
	}
	fmt.Fprintf(&b, "  last events:\n    %s\n", strings.Join(c.recent, "\n    "))
	return b.String()
}

func (c *crashClient) note(f wsFrame) {
	if f.Type == "ready" && len(c.recent) > 0 && strings.HasPrefix(c.recent[len(c.recent)-1], "0 ready") {
		c.recent = c.recent[:len(c.recent)-1] // the last one says enough
	}
	c.recent = append(c.recent, fmt.Sprintf("%d %s %s", f.Seq, f.Type, short(f.Data, 120)))
	if len(c.recent) > 16 {
		c.recent = c.recent[1:]
	}
}

// approvalDelay is how long the client takes to approve: now and then long
// enough for a kill to land while the request is open.
func (c *crashClient) approvalDelay() time.Duration {
	if c.rng.IntN(4) == 0 {
		return time.Duration(200+c.rng.IntN(300)) * time.Millisecond
	}
	return time.Duration(c.rng.IntN(30)) * time.Millisecond
}

// loop connects, and reconnects with backoff, until ctx ends.
func (c *crashClient) loop(ctx context.Context) {
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		if addr, gen := c.h.current(); addr != "" && c.connect(ctx, addr, gen) {
			backoff = 10 * time.Millisecond
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// connect runs one connection; it reports whether one was made.
func (c *crashClient) connect(ctx context.Context, addr string, gen int) bool {
	d := gws.Dialer{HandshakeTimeout: 3 * time.Second}
	conn, _, err := d.DialContext(ctx, "ws://"+addr+"/ws", http.Header{"Origin": {"http://" + addr}})
	if err != nil {
		return false
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	c.mu.Lock()
	c.conns++
	c.connGen, c.readyLast, c.caughtUp, c.dropConn = gen, -1, false, false
	hello := map[string]any{"type": "hello", "user": map[string]string{"id": c.user}}
	if c.session == "" {
		hello["guide"] = "crash"
	} else {
		hello["session"], hello["resume_after"] = c.session, c.lastSeq
		c.reconnects++
	}
	err = c.write(conn, hello)
	c.mu.Unlock()
	if err != nil {
		return true
	}

	frames := make(chan wsFrame, 64)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			_, b, err := conn.ReadMessage()
			if err != nil {
				readErr <- err
				return
			}
			var f wsFrame
			if err := json.Unmarshal(b, &f); err != nil {
				f = wsFrame{Type: "unparseable", Data: b}
			}
			select {
			case frames <- f:
			case <-done:
				return
			}
		}
	}()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case f := <-frames:
			c.handle(f)
		case <-readErr:
			// Everything read before the error is queued: take it.
			for {
				select {
				case f := <-frames:
					c.handle(f)
				default:
					return true
				}
			}
		case <-tick.C:
		case <-ctx.Done():
			return true
		}
		if err := c.act(conn); err != nil {
			return true
		}
	}
}

// write sends a frame; c.mu is held.
func (c *crashClient) write(conn *gws.Conn, v any) error {
	_ = conn.SetWriteDeadline(time.Now().Add(3 * time.Second))
	return conn.WriteJSON(v)
}

// act sends what is due: approvals, a resent or the next input.
func (c *crashClient) act(conn *gws.Conn) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropConn {
		return errors.New("reconnect")
	}
	if !c.caughtUp {
		return nil
	}
	now := time.Now()
	if !c.h.hold.Load() {
		for _, id := range slices.Sorted(maps.Keys(c.open)) {
			oc := c.open[id]
			if oc.sentConn == c.conns || now.Before(oc.due) {
				continue
			}
			if err := c.write(conn, map[string]any{"type": "confirm", "confirmation_id": id, "approved": true}); err != nil {
				return err
			}
			oc.sentConn = c.conns
		}
	}
	cur := c.current()
	switch {
	case cur != nil && !cur.sent:
		if now.Before(cur.resendAt) {
			return nil
		}
	case (cur == nil || cur.answered) && !c.h.paused.Load() && c.wantsMore():
		k := len(c.inputs) + 1
		qid := fmt.Sprintf("q%d-%d", c.n, k)
		text := qid + " what is new?"
		switch (k + c.offset) % 3 {
		case 1:
			text = qid + " please calc 2+3"
		case 2:
			text = qid + " what time is it?"
		}
		cur = &crashInput{id: fmt.Sprintf("c%d-%d", c.n, k), text: text}
		c.inputs = append(c.inputs, cur)
	default:
		return nil
	}
	if err := c.write(conn, map[string]any{"type": "input", "id": cur.id, "text": cur.text}); err != nil {
		return err
	}
	cur.sent = true
	cur.sends++
	c.h.inputsSent.Add(1)
	return nil
}

func (c *crashClient) handle(f wsFrame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.note(f)
	if f.Seq == 0 {
		c.connectionEvent(f)
		return
	}
	if prev, ok := c.seen[f.Seq]; ok {
		if prev.Type != f.Type || !sameData(prev.Data, f.Data) {
			c.problem("seq %d was %s %s, and came again as %s %s", f.Seq, prev.Type, short(prev.Data, 200), f.Type, short(f.Data, 200))
		}
		return
	}
	if f.Seq != c.lastSeq+1 {
		c.problem("seq %d came after seq %d (a gap or a step back)", f.Seq, c.lastSeq)
	}
	c.seen[f.Seq] = seenEvent{f.Type, f.Data}
	c.lastSeq = max(c.lastSeq, f.Seq)
	live := c.readyLast >= 0 && f.Seq > c.readyLast
	now := time.Now()
	switch f.Type {
	case "message":
		var md switchboard.MessageData
		_ = json.Unmarshal(f.Data, &md)
		switch md.Role {
		case switchboard.RoleUser:
			i := slices.IndexFunc(c.inputs, func(in *crashInput) bool { return in.text == md.Content })
			switch {
			case i < 0:
				c.problem("seq %d: a user message the client never sent: %q", f.Seq, md.Content)
			case c.inputs[i].accepted:
				c.problem("seq %d: input %s accepted a second time", f.Seq, c.inputs[i].id)
			default:
				c.inputs[i].accepted = true
			}
		case switchboard.RoleAssistant:
			if cur := c.current(); cur != nil && cur.accepted && !cur.answered {
				cur.answered = true
			} else {
				c.problem("seq %d: an assistant message with no question waiting for it: %q", f.Seq, md.Content)
			}
		}
	case "error":
		switch code := errorCode(f); code {
		case "interrupted", switchboard.ErrCodeAlreadyResolved:
		default:
			cur := c.current()
			switch {
			case cur != nil && cur.accepted && !cur.answered:
				cur.answered, cur.endedBy = true, code
			case cur != nil && cur.sent && !cur.accepted:
				cur.sent, cur.resendAt = false, now.Add(100*time.Millisecond)
			}
		}
	case "confirmation_request":
		var cr switchboard.ConfirmationRequestData
		_ = json.Unmarshal(f.Data, &cr)
		if !c.resolved[cr.ConfirmationID] && c.open[cr.ConfirmationID] == nil {
			c.open[cr.ConfirmationID] = &openConfirm{due: now.Add(c.approvalDelay())}
		}
		if live {
			c.h.confirmRequests.Add(1)
		}
	case "confirmation_resolved":
		var cr switchboard.ConfirmationResolvedData
		_ = json.Unmarshal(f.Data, &cr)
		delete(c.open, cr.ConfirmationID)
		c.resolved[cr.ConfirmationID] = true
	case "delta":
		if live {
			c.h.deltas.Add(1)
		}
	case "tool_call":
		if live {
			c.h.toolCalls.Add(1)
		}
	case "state":
		var sd switchboard.StateData
		_ = json.Unmarshal(f.Data, &sd)
		c.lastState = sd.State
	}
	if !c.caughtUp && c.readyLast >= 0 && c.lastSeq >= c.readyLast {
		c.catchUp()
	}
}

// connectionEvent handles ready and the errors answering our frames.
func (c *crashClient) connectionEvent(f wsFrame) {
	switch f.Type {
	case "ready":
		var rd switchboard.ReadyData
		_ = json.Unmarshal(f.Data, &rd)
		if c.session == "" {
			c.session = rd.Session
		} else if rd.Session != c.session {
			c.problem("resumed session %s but got ready for %s", c.session, rd.Session)
		}
		if rd.LastSeq < c.lastSeq {
			c.problem("ready.last_seq %d is below seq %d, which the client was already sent: events it saw are gone", rd.LastSeq, c.lastSeq)
		}
		c.readyLast = rd.LastSeq
		if c.lastSeq >= c.readyLast {
			c.catchUp()
		}
	case "error":
		code := errorCode(f)
		c.connErrs[code]++
		if c.readyLast < 0 {
			c.dropConn = true // hello failed: try again
			return
		}
		switch code {
		case switchboard.ErrCodeBusy, switchboard.ErrCodeInternal:
			if cur := c.current(); cur != nil && cur.sent && !cur.accepted {
				cur.sent, cur.resendAt = false, time.Now().Add(100*time.Millisecond)
			}
		default:
			c.problem("the gateway refused a frame: %s", short(f.Data, 200))
		}
	default:
		c.problem("unexpected seq-0 event %s %s", f.Type, short(f.Data, 200))
	}
}

// catchUp: the connection has replayed what was stored when it attached.
// What is still not acknowledged is sent again.
func (c *crashClient) catchUp() {
	c.caughtUp = true
	if cur := c.current(); cur != nil && cur.sent && !cur.accepted {
		cur.sent = false
	}
}

// ---------------------------------------------------------------------------
// The audit of the stored history.

type evRow struct {
	Seq  int64
	Type string
	Data json.RawMessage
}

type sessionStats struct {
	events, interrupted, alreadyResolved, gaveUp int
}

func (s *sessionStats) add(o sessionStats) {
	s.events += o.events
	s.interrupted += o.interrupted
	s.alreadyResolved += o.alreadyResolved
	s.gaveUp += o.gaveUp
}

func openAuditDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return db
}

func loadEvents(db *sql.DB, session string) ([]evRow, error) {
	rows, err := db.Query(`SELECT seq, type, data FROM events WHERE session_id = ? ORDER BY seq`, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var evs []evRow
	for rows.Next() {
		var ev evRow
		var data string
		if err := rows.Scan(&ev.Seq, &ev.Type, &data); err != nil {
			return nil, err
		}
		ev.Data = json.RawMessage(data)
		evs = append(evs, ev)
	}
	return evs, rows.Err()
}

func loadMessages(db *sql.DB, session string) ([]switchboard.Message, error) {
	rows, err := db.Query(`SELECT data FROM messages WHERE session_id = ? ORDER BY id`, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var msgs []switchboard.Message
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var m switchboard.Message
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			return nil, fmt.Errorf("message %s: %w", data, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, rows.Err()
}

func tableExists(db *sql.DB, name string) bool {
	var n int
	_ = db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&n)
	return n > 0
}

// auditStore checks what must be empty once every turn is answered.
func auditStore(db *sql.DB, sessions []string) []string {
	var fails []string
	if tableExists(db, "inbox") {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM inbox`).Scan(&n); err != nil {
			fails = append(fails, "inbox: "+err.Error())
		} else if n != 0 {
			fails = append(fails, fmt.Sprintf("the inbox still holds %d inputs after every input was answered", n))
		}
	}
	if tableExists(db, "pending_turns") {
		for _, s := range sessions {
			var n int
			if err := db.QueryRow(`SELECT COUNT(*) FROM pending_turns WHERE session_id = ?`, s).Scan(&n); err == nil && n != 0 {
				fails = append(fails, fmt.Sprintf("session %s still has a suspended turn after every input was answered", s))
			}
		}
	}
	return fails
}

func describeEvents(evs []evRow, from, to int) string {
	from, to = max(from, 0), min(to, len(evs))
	var b strings.Builder
	for _, ev := range evs[from:to] {
		fmt.Fprintf(&b, "    %d %s %s\n", ev.Seq, ev.Type, short(ev.Data, 140))
	}
	return strings.TrimRight(b.String(), "\n")
}

// auditSession checks one session's stored history against what its client
// sent (inputs, in order) and saw (seen, by seq).
func auditSession(db *sql.DB, session string, inputs []string, seen map[int64]seenEvent) (sessionStats, []string) {
	var st sessionStats
	var fails []string
	failf := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }
	if session == "" {
		return st, []string{"the client never got a session"}
	}
	evs, err := loadEvents(db, session)
	if err != nil {
		return st, []string{"events: " + err.Error()}
	}
	msgs, err := loadMessages(db, session)
	if err != nil {
		return st, []string{"messages: " + err.Error()}
	}
	st.events = len(evs)

	// 1. Seqs are 1..N.
	bySeq := map[int64]evRow{}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) && len(fails) == 0 {
			failf("stored seqs are not 1..%d: position %d holds seq %d", len(evs), i+1, ev.Seq)
		}
		bySeq[ev.Seq] = ev
	}

	// 2. What a client was sent is what is stored, under the same seq.
	seqs := make([]int64, 0, len(seen))
	for seq := range seen {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
		got, ok := bySeq[seq]
		switch {
		case !ok:
			failf("seq %d (%s %s) was sent to the client but is not stored", seq, seen[seq].Type, short(seen[seq].Data, 140))
		case got.Type != seen[seq].Type || !sameData(got.Data, seen[seq].Data):
			failf("seq %d: the client got %s %s, the store has %s %s", seq, seen[seq].Type, short(seen[seq].Data, 140), got.Type, short(got.Data, 140))
		}
	}

	// 3. Each input is one user message, as an event and in the context.
	userEvents, userMsgs := map[string]int{}, map[string]int{}
	for _, ev := range evs {
		var md switchboard.MessageData
		if ev.Type == "message" && json.Unmarshal(ev.Data, &md) == nil && md.Role == switchboard.RoleUser {
			userEvents[md.Content]++
		}
	}
	for _, m := range msgs {
		if m.Role == switchboard.RoleUser {
			userMsgs[m.Content]++
		}
	}
	for _, text := range inputs {
		if n := userEvents[text]; n != 1 {
			failf("input %q is stored as %d user message events, want 1", text, n)
		}
		if n := userMsgs[text]; n != 1 {
			failf("input %q is stored as %d user messages in the context, want 1", text, n)
		}
	}
	for text := range userEvents {
		if !slices.Contains(inputs, text) {
			failf("a user message event nobody sent: %q", text)
		}
	}

	// 4. Between two user messages: one answer, and no error but the
	// marker of a turn cut short; deltas that never got their message are
	// followed by that marker. The one error a turn may end with is the
	// gateway giving up on a turn cut every time it ran (sessions'
	// maxResumes): an internal error after the turn's interrupted markers.
	type turnSpan struct {
		start, end  int
		text        string
		answers     int
		interrupted int
		gaveUp      bool
		errs        []string
	}
	giveUps := map[int]bool{} // indexes of the give-up errors
	var turns []*turnSpan
	var cur *turnSpan
	closed := map[string]bool{}
	lastDelta := map[string]int{}
	for i, ev := range evs {
		switch ev.Type {
		case "message":
			var md switchboard.MessageData
			_ = json.Unmarshal(ev.Data, &md)
			closed[md.ID] = true
			switch md.Role {
			case switchboard.RoleUser:
				if cur != nil {
					cur.end = i
				}
				cur = &turnSpan{start: i, end: len(evs), text: md.Content}
				turns = append(turns, cur)
			case switchboard.RoleAssistant:
				if cur == nil {
					failf("seq %d: an assistant message before any user message", ev.Seq)
					continue
				}
				cur.answers++
				if qid := questionID(cur.text); !strings.Contains(md.Content, qid) {
					failf("seq %d: the answer %q is not the answer to %q", ev.Seq, md.Content, cur.text)
				}
			}
		case "delta":
			var dd switchboard.DeltaData
			_ = json.Unmarshal(ev.Data, &dd)
			lastDelta[dd.MessageID] = i
		case "error":
			switch code := errorCode(wsFrame{Data: ev.Data}); code {
			case "interrupted":
				st.interrupted++
				if cur != nil {
					cur.interrupted++
				}
			case switchboard.ErrCodeAlreadyResolved:
				st.alreadyResolved++ // a client resent an approval the gateway had already taken
			case switchboard.ErrCodeInternal:
				if cur != nil && cur.interrupted > 0 && cur.answers == 0 && !cur.gaveUp {
					cur.gaveUp = true
					giveUps[i] = true
					st.gaveUp++
					continue
				}
				fallthrough
			default:
				if cur != nil {
					cur.errs = append(cur.errs, code)
				}
				failf("seq %d: error %s: the scripted model never fails, so no turn should end in an error:\n%s", ev.Seq, short(ev.Data, 200), describeEvents(evs, i-8, i+2))
			}
		}
	}
	gaveUp := map[string]bool{}
	for _, tr := range turns {
		switch {
		case tr.gaveUp && tr.answers != 0:
			failf("the turn of %q (seq %d to %d) was given up, yet has %d assistant messages:\n%s",
				tr.text, evs[tr.start].Seq, evs[tr.end-1].Seq, tr.answers, describeEvents(evs, tr.start, min(tr.end, tr.start+60)))
		case tr.gaveUp:
			gaveUp[tr.text] = true
		case tr.answers != 1 && len(tr.errs) == 0:
			failf("the turn of %q (seq %d to %d) has %d assistant messages, want 1:\n%s",
				tr.text, evs[tr.start].Seq, evs[tr.end-1].Seq, tr.answers, describeEvents(evs, tr.start, min(tr.end, tr.start+60)))
		}
	}
	var orphans []string
	for id := range lastDelta {
		if !closed[id] {
			orphans = append(orphans, id)
		}
	}
	slices.SortFunc(orphans, func(a, b string) int { return lastDelta[a] - lastDelta[b] })
	for _, id := range orphans {
		j, next := lastDelta[id], -1
		for k := j + 1; k < len(evs) && next < 0; k++ {
			var dd switchboard.DeltaData
			switch evs[k].Type {
			case "error", "message":
				next = k
			case "delta":
				if json.Unmarshal(evs[k].Data, &dd) == nil && dd.MessageID != id {
					next = k
				}
			}
		}
		if next < 0 || evs[next].Type != "error" || errorCode(wsFrame{Data: evs[next].Data}) != "interrupted" && !giveUps[next] {
			failf("the deltas of %s (the last at seq %d) never got their message and are not followed by an interrupted error:\n%s",
				id, evs[j].Seq, describeEvents(evs, j-3, max(next, j)+3))
		}
	}

	// Every approval request is resolved once, after it was asked (all
	// the clients approve; none expires).
	asked, resolved := map[string]int{}, map[string]int{}
	for _, ev := range evs {
		switch ev.Type {
		case "confirmation_request":
			var cr switchboard.ConfirmationRequestData
			_ = json.Unmarshal(ev.Data, &cr)
			asked[cr.ConfirmationID]++
		case "confirmation_resolved":
			var cr switchboard.ConfirmationResolvedData
			_ = json.Unmarshal(ev.Data, &cr)
			if asked[cr.ConfirmationID] == 0 {
				failf("seq %d: approval %s resolved before it was asked", ev.Seq, cr.ConfirmationID)
			}
			if !cr.Approved {
				failf("seq %d: approval %s resolved as denied (by %s), though the client approves everything", ev.Seq, cr.ConfirmationID, cr.By)
			}
			resolved[cr.ConfirmationID]++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(asked)) {
		if resolved[id] != 1 {
			failf("approval %s was resolved %d times, want 1", id, resolved[id])
		}
	}

	// 5. In the context: tool calls are followed by all their results at
	// once, and each question has one final answer (none if given up).
	answers := -1 // final answers since the last user message; -1 before any
	question := ""
	endQuestion := func() {
		want := 1
		if gaveUp[question] {
			want = 0
		}
		if answers >= 0 && answers != want {
			failf("context: %q is followed by %d final assistant messages, want %d", question, answers, want)
		}
	}
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case switchboard.RoleUser:
			endQuestion()
			question, answers = m.Content, 0
		case switchboard.RoleAssistant:
			if answers < 0 {
				failf("context: message %d, from the assistant, comes before any user message", i)
			}
			if len(m.ToolCalls) == 0 {
				answers++
				if qid := questionID(question); !strings.Contains(m.Content, qid) {
					failf("context: the answer %q is not the answer to %q", m.Content, question)
				}
				continue
			}
			want := map[string]bool{}
			for _, tc := range m.ToolCalls {
				want[tc.ID] = true
			}
			k := i + 1
			for ; k < len(msgs) && msgs[k].Role == switchboard.RoleTool && want[msgs[k].ToolCallID]; k++ {
				delete(want, msgs[k].ToolCallID)
			}
			if len(want) > 0 {
				failf("context: the tool calls of message %d (after %q) are not followed by all their results at once: missing %v", i, question, slices.Sorted(maps.Keys(want)))
			}
			i = k - 1
		case switchboard.RoleTool:
			failf("context: message %d is a tool result (%s) that does not follow its call (after %q)", i, m.ToolCallID, question)
		}
	}
	endQuestion()
	return st, fails
}

// ---------------------------------------------------------------------------
// A simple synchronous client for the smaller tests.

type wsPeer struct {
	t       *testing.T
	conn    *gws.Conn
	frames  chan wsFrame
	closed  chan error
	session string
	lastSeq int64
	seen    map[int64]seenEvent
	log     []string // every frame, for failure messages
}

// history lists the frames received, oldest first.
func (p *wsPeer) history() string { return "    " + strings.Join(p.log, "\n    ") }

func dialPeer(t *testing.T, addr string, hello map[string]any) *wsPeer {
	t.Helper()
	conn, _, err := gws.DefaultDialer.Dial("ws://"+addr+"/ws", http.Header{"Origin": {"http://" + addr}})
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	p := &wsPeer{t: t, conn: conn, frames: make(chan wsFrame, 1024), closed: make(chan error, 1), seen: map[int64]seenEvent{}}
	go func() {
		for {
			_, b, err := conn.ReadMessage()
			if err != nil {
				p.closed <- err
				return
			}
			var f wsFrame
			if err := json.Unmarshal(b, &f); err != nil {
				f = wsFrame{Type: "unparseable", Data: b}
			}
			p.frames <- f
		}
	}()
	p.send(hello)
	f, err := p.until(10*time.Second, func(f wsFrame) bool { return f.Type == "ready" || f.Seq == 0 && f.Type == "error" })
	if err != nil || f.Type != "ready" {
		t.Fatalf("hello: got %s %s, %v", f.Type, f.Data, err)
	}
	var rd switchboard.ReadyData
	_ = json.Unmarshal(f.Data, &rd)
	p.session = rd.Session
	return p
}

func (p *wsPeer) send(v any) {
	p.t.Helper()
	if err := p.conn.WriteJSON(v); err != nil {
		p.t.Fatalf("send %v: %v", v, err)
	}
}

// until reads events until one satisfies pred; it fails when the
// connection closes or timeout passes first.
func (p *wsPeer) until(timeout time.Duration, pred func(wsFrame) bool) (wsFrame, error) {
	deadline := time.After(timeout)
	for {
		var f wsFrame
		select {
		case f = <-p.frames:
		case <-deadline:
			return wsFrame{}, fmt.Errorf("nothing of the kind within %s", timeout)
		case err := <-p.closed:
			p.closed <- err // for the next call
			// The frames read before the close come first.
			for len(p.frames) > 0 {
				f := <-p.frames
				p.record(f)
				if pred(f) {
					return f, nil
				}
			}
			return wsFrame{}, fmt.Errorf("the connection closed: %w", err)
		}
		p.record(f)
		if pred(f) {
			return f, nil
		}
	}
}

func (p *wsPeer) record(f wsFrame) {
	p.log = append(p.log, fmt.Sprintf("%s %d %s %s", time.Now().Format("15:04:05.000"), f.Seq, f.Type, short(f.Data, 120)))
	if f.Seq > 0 {
		p.seen[f.Seq] = seenEvent{f.Type, f.Data}
		p.lastSeq = max(p.lastSeq, f.Seq)
	}
}

// startDrainGateway starts a gateway on a new setup and opens a session.
func startDrainGateway(t *testing.T, llm *openaitest.Server, grace string) (crashSetup, *procLog, *gatewayProc) {
	t.Helper()
	bin := gatewayBinary(t)
	log := &procLog{}
	log.dumpOnFailure(t)
	setup := writeCrashSetup(t, llm.BaseURL(), grace)
	p, err := startGatewayProc(t, bin, setup.config, log)
	if err != nil {
		t.Fatal(err)
	}
	return setup, log, p
}

// expectCleanExit waits for the gateway to exit after SIGTERM, with 0.
func expectCleanExit(t *testing.T, p *gatewayProc, timeout time.Duration) {
	t.Helper()
	exitErr, ok := p.wait(timeout)
	if !ok {
		t.Fatalf("the gateway did not exit within %s of SIGTERM", timeout)
	}
	if exitErr != nil {
		t.Errorf("after SIGTERM the gateway exited with %v, want status 0", exitErr)
	}
}

func mergeSeen(ms ...map[int64]seenEvent) map[int64]seenEvent {
	out := map[int64]seenEvent{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// noStopped: a turn SIGTERM cut is resumed, never stored as stopped.
func noStopped(t *testing.T, db *sql.DB, session string) {
	t.Helper()
	evs, err := loadEvents(db, session)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == "error" && errorCode(wsFrame{Data: ev.Data}) == switchboard.ErrCodeCancelled || bytes.Contains(ev.Data, []byte("Stopped.")) {
			t.Errorf("seq %d: the turn cut by SIGTERM was stored as stopped: %s %s", ev.Seq, ev.Type, ev.Data)
		}
	}
}

func TestSIGTERMDrains(t *testing.T) {
	gatewayBinary(t)

	t.Run("turn finishes within the grace", func(t *testing.T) {
		llm := openaitest.New()
		t.Cleanup(llm.Close)
		llm.Respond(crashModel(150 * time.Millisecond)) // an answer takes ~750ms
		setup, _, gw := startDrainGateway(t, llm, "5s")
		p := dialPeer(t, gw.addr, map[string]any{"type": "hello", "guide": "crash", "user": map[string]string{"id": "u1"}})
		text := "q1-1 tell me a story"
		p.send(map[string]any{"type": "input", "id": "c1-1", "text": text})
		if _, err := p.until(10*time.Second, func(f wsFrame) bool { return f.Type == "delta" }); err != nil {
			t.Fatalf("no reply started: %v", err)
		}
		t.Logf("%s SIGTERM", time.Now().Format("15:04:05.000"))
		_ = gw.cmd.Process.Signal(syscall.SIGTERM)
		f, err := p.until(20*time.Second, isAssistantMessage)
		if err != nil {
			t.Errorf("the client did not get the answer that was streaming at SIGTERM: %v; it got:\n%s", err, p.history())
		} else if want := answerText("q1-1", "plain"); !strings.Contains(string(f.Data), want) {
			t.Errorf("the answer is %s, want %q", f.Data, want)
		}
		expectCleanExit(t, gw, 30*time.Second)

		db := openAuditDB(t, setup.db)
		st, fails := auditSession(db, p.session, []string{text}, p.seen)
		reportFailures(t, "stored history", fails)
		if st.interrupted != 0 {
			t.Errorf("the turn finished within the grace, yet %d interrupted errors are stored", st.interrupted)
		}
		noStopped(t, db, p.session)
	})

	t.Run("turn outlasting the grace is resumed at the next start", func(t *testing.T) {
		llm := openaitest.New()
		t.Cleanup(llm.Close)
		var hang atomic.Bool
		hang.Store(true)
		model := crashModel(chunkDelay)
		llm.Respond(func(r openaitest.Request) openaitest.Reply {
			if hang.Load() {
				return openaitest.Reply{Hang: true}
			}
			return model(r)
		})
		setup, log, gw := startDrainGateway(t, llm, "1s")
		p := dialPeer(t, gw.addr, map[string]any{"type": "hello", "guide": "crash", "user": map[string]string{"id": "u1"}})
		text := "q1-1 tell me a story"
		p.send(map[string]any{"type": "input", "id": "c1-1", "text": text})
		if !waitFor(10*time.Second, func() bool { return len(llm.Requests()) > 0 }) {
			t.Fatal("the model was not called")
		}
		if _, ok := gw.terminate(30 * time.Second); !ok {
			t.Fatal("the gateway did not exit within 30s of SIGTERM with a 1s grace")
		}
		expectCleanExit(t, gw, time.Second)
		func() {
			db := openAuditDB(t, setup.db)
			noStopped(t, db, p.session)
			db.Close()
		}()

		hang.Store(false)
		gw2, err := startGatewayProc(t, gatewayBinary(t), setup.config, log)
		if err != nil {
			t.Fatal(err)
		}
		p2 := dialPeer(t, gw2.addr, map[string]any{"type": "hello", "session": p.session, "resume_after": p.lastSeq, "user": map[string]string{"id": "u1"}})
		interrupted := false
		f, err := p2.until(20*time.Second, func(f wsFrame) bool {
			if f.Seq > 0 && f.Type == "error" && errorCode(f) == "interrupted" {
				interrupted = true
			}
			return isAssistantMessage(f)
		})
		if err != nil {
			t.Fatalf("after the restart the client got no answer: %v", err)
		}
		if !interrupted {
			t.Errorf("after the restart the answer came without an interrupted error before it")
		}
		if want := answerText("q1-1", "plain"); !strings.Contains(string(f.Data), want) {
			t.Errorf("the answer is %s, want %q", f.Data, want)
		}
		if _, ok := gw2.terminate(30 * time.Second); !ok {
			t.Fatal("the restarted gateway did not exit within 30s of SIGTERM")
		}
		expectCleanExit(t, gw2, time.Second)

		db := openAuditDB(t, setup.db)
		st, fails := auditSession(db, p.session, []string{text}, mergeSeen(p.seen, p2.seen))
		reportFailures(t, "stored history", fails)
		if st.interrupted != 1 {
			t.Errorf("%d interrupted errors are stored, want 1", st.interrupted)
		}
		noStopped(t, db, p.session)
	})

	t.Run("tool step finishes within the grace", func(t *testing.T) {
		llm := openaitest.New()
		t.Cleanup(llm.Close)
		llm.Respond(crashModel(150 * time.Millisecond))
		setup, _, gw := startDrainGateway(t, llm, "5s")
		p := dialPeer(t, gw.addr, map[string]any{"type": "hello", "guide": "crash", "user": map[string]string{"id": "u1"}})
		text := "q1-1 please calc 2+3"
		p.send(map[string]any{"type": "input", "id": "c1-1", "text": text})
		if _, err := p.until(10*time.Second, func(f wsFrame) bool { return f.Type == "tool_call" }); err != nil {
			t.Fatalf("no tool call: %v", err)
		}
		t.Logf("%s SIGTERM", time.Now().Format("15:04:05.000"))
		_ = gw.cmd.Process.Signal(syscall.SIGTERM)
		f, err := p.until(20*time.Second, isAssistantMessage)
		if err != nil {
			t.Errorf("the client did not get the answer of the turn running a tool at SIGTERM: %v; it got:\n%s", err, p.history())
		} else if want := answerText("q1-1", "after calculator"); !strings.Contains(string(f.Data), want) {
			t.Errorf("the answer is %s, want %q", f.Data, want)
		}
		expectCleanExit(t, gw, 30*time.Second)

		db := openAuditDB(t, setup.db)
		st, fails := auditSession(db, p.session, []string{text}, p.seen)
		reportFailures(t, "stored history", fails)
		if st.interrupted != 0 {
			t.Errorf("the turn finished within the grace, yet %d interrupted errors are stored", st.interrupted)
		}
		noStopped(t, db, p.session)
		msgs, err := loadMessages(db, p.session)
		if err != nil {
			t.Fatal(err)
		}
		var roles []string
		for _, m := range msgs {
			roles = append(roles, string(m.Role))
		}
		if got := strings.Join(roles, ","); got != "user,assistant,tool,assistant" {
			t.Errorf("stored context: %s, want user,assistant,tool,assistant", got)
		}
	})
}

func TestSecondGatewayRefused(t *testing.T) {
	bin := gatewayBinary(t)
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	llm.Respond(crashModel(0))
	log := &procLog{}
	log.dumpOnFailure(t)
	setup := writeCrashSetup(t, llm.BaseURL(), "5s")
	first, err := startGatewayProc(t, bin, setup.config, log)
	if err != nil {
		t.Fatal(err)
	}

	second := exec.Command(bin, "--config", setup.config, "--set", "http.addr=127.0.0.1:0")
	second.Env = hermeticEnv()
	var stderr bytes.Buffer
	second.Stdout, second.Stderr = &stderr, &stderr
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- second.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(15 * time.Second):
		_ = second.Process.Kill()
		<-exited
		t.Fatalf("a second gateway on the same database was still running after 15s:\n%s", stderr.String())
	}
	if err == nil {
		t.Errorf("a second gateway on the same database exited with status 0:\n%s", stderr.String())
	}
	out := stderr.String()
	if !strings.Contains(out, setup.db) {
		t.Errorf("the second gateway's error does not name the database file %s:\n%s", setup.db, out)
	}
	pid := first.cmd.Process.Pid
	if !regexp.MustCompile(`\bpid\b\D{0,3}` + strconv.Itoa(pid) + `\b`).MatchString(out) {
		t.Errorf("the second gateway's error does not say \"pid %d\" (the first gateway's):\n%s", pid, out)
	}

	// The first one is unharmed.
	p := dialPeer(t, first.addr, map[string]any{"type": "hello", "guide": "crash", "user": map[string]string{"id": "u1"}})
	p.send(map[string]any{"type": "input", "id": "c1-1", "text": "q1-1 still there?"})
	f, err := p.until(20*time.Second, isAssistantMessage)
	if err != nil {
		t.Fatalf("the first gateway no longer answers: %v", err)
	}
	if want := answerText("q1-1", "plain"); !strings.Contains(string(f.Data), want) {
		t.Errorf("the answer is %s, want %q", f.Data, want)
	}
	if _, ok := first.terminate(30 * time.Second); !ok {
		t.Fatal("the first gateway did not exit within 30s of SIGTERM")
	}
	expectCleanExit(t, first, time.Second)
}
