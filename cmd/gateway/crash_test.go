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
//
// The parts: crashproc_test.go (the binary as a child process, its
// configuration and scripted model), crashclient_test.go (the clients) and
// crashaudit_test.go (what the stored history must satisfy).

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"regexp"
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
	pointCompaction = "compaction"  // while the model writes a summary of the window
)

var allKillPoints = []string{pointIdle, pointAfterInput, pointMidStream, pointMidTool, pointApproval, pointCompaction}

const (
	crashClients   = 5
	minCrashInputs = 3 // every client asks at least one plain, calc and time question
	chunkDelay     = 15 * time.Millisecond
)

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
	// Summaries the model was asked for, for the compaction kill point.
	summaries atomic.Int64

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
	case pointCompaction:
		n := h.summaries.Load()
		reached = waitFor(patience, func() bool { return h.summaries.Load() > n })
		jitter = time.Duration(rng.IntN(int(5*chunkDelay/time.Microsecond))) * time.Microsecond
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
	log := &procLog{}
	log.dumpOnFailure(t)
	h := &crashRun{t: t, bin: bin, setup: writeCrashSetup(t, llm.BaseURL(), "5s"), log: log}
	llm.Respond(crashModel(chunkDelay, &h.summaries))
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
	t.Logf("seed %d: %d kills [%s]; %d sessions, %d events, %d inputs (%d resent), %d interrupted turns (%d given up), %d already_resolved, %d compactions, %d reconnects, connection errors %v",
		seed, kills, strings.Join(pts, ", "), len(h.clients), total.events, inputs, resent, total.interrupted, total.gaveUp, total.alreadyResolved, total.compactions, reconnects, connErrs)
	if total.compactions == 0 {
		t.Errorf("no conversation was compacted: the guide's window of 6 should have been passed")
	}
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
		drainMidTurn(t, "q1-1 tell me a story", "delta", answerText("q1-1", "plain"))
	})

	t.Run("turn outlasting the grace is resumed at the next start", func(t *testing.T) {
		llm := openaitest.New()
		t.Cleanup(llm.Close)
		var hang atomic.Bool
		hang.Store(true)
		model := crashModel(chunkDelay, nil)
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
		db, session := drainMidTurn(t, "q1-1 please calc 2+3", "tool_call", answerText("q1-1", "after calculator"))
		msgs, err := loadMessages(db, session)
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

// drainMidTurn sends text, sends SIGTERM once an event of type at
// arrives, and checks that the turn finishes within the grace: the client
// gets the answer (containing want) live, the gateway exits 0, and the
// stored history is whole, without an interrupted marker or "Stopped.".
// It returns the stored database and the session, for further checks.
func drainMidTurn(t *testing.T, text, at, want string) (*sql.DB, string) {
	t.Helper()
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	llm.Respond(crashModel(150*time.Millisecond, nil)) // an answer takes ~750ms
	setup, _, gw := startDrainGateway(t, llm, "5s")
	p := dialPeer(t, gw.addr, map[string]any{"type": "hello", "guide": "crash", "user": map[string]string{"id": "u1"}})
	p.send(map[string]any{"type": "input", "id": "c1-1", "text": text})
	if _, err := p.until(10*time.Second, func(f wsFrame) bool { return f.Type == at }); err != nil {
		t.Fatalf("no %s: %v", at, err)
	}
	t.Logf("%s SIGTERM", time.Now().Format("15:04:05.000"))
	_ = gw.cmd.Process.Signal(syscall.SIGTERM)
	f, err := p.until(20*time.Second, isAssistantMessage)
	if err != nil {
		t.Errorf("the client did not get the answer of the turn under way at SIGTERM (after %s): %v; it got:\n%s", at, err, p.history())
	} else if !strings.Contains(string(f.Data), want) {
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
	return db, p.session
}

func TestSecondGatewayRefused(t *testing.T) {
	bin := gatewayBinary(t)
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	llm.Respond(crashModel(0, nil))
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
