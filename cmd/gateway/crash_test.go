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
// The parts: crashrun_test.go (a run: the gateways, the kills, the end and
// the audit), crashproc_test.go (the binary as a child process, its
// configuration and scripted model), crashclient_test.go (the clients) and
// crashaudit_test.go (what the stored history must satisfy, on SQLite or
// PostgreSQL). crashreplica_test.go runs the same on three replicas
// sharing one PostgreSQL database.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
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
	crashKeep   = flag.Bool("crash.keep", false, "when a crash test fails, keep a copy of its directory: config and SQLite database (a PostgreSQL database is dropped with the test)")
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

func TestCrash(t *testing.T) {
	gatewayBinary(t)
	seed := crashSeedOf()
	kills := *crashKills
	points := killPoints(t)
	t.Logf("crash seed %d, %d kills (replay: go test ./cmd/gateway -run 'TestCrash$' -crash.seed=%d -crash.kills=%d)", seed, kills, seed, kills)

	llm := openaitest.New()
	t.Cleanup(llm.Close) // after the gateway is gone: a request it holds open ends with it
	h := newCrashRun(t, writeCrashSetup(t, llm.BaseURL(), "5s"), 1)
	h.begin(llm, crashClients, seed)
	tally, total := h.killAndAudit(kills, points, seed)
	t.Logf("seed %d: %d kills %s; %d sessions, %s", seed, kills, tally, len(h.clients), total)
	if total.compactions == 0 {
		t.Errorf("no conversation was compacted: the guide's window of 6 should have been passed")
	}
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
func noStopped(t *testing.T, db storedHistory, session string) {
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
			db, err := openStoredHistory(setup.db)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			noStopped(t, db, p.session)
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

		db := openAudit(t, setup.db)
		st, fails := auditSession(db, p.session, []string{text}, mergeSeen(p.seen, p2.seen))
		reportFailures(t, "stored history", fails)
		if st.interrupted != 1 {
			t.Errorf("%d interrupted errors are stored, want 1", st.interrupted)
		}
		noStopped(t, db, p.session)
	})

	t.Run("tool step finishes within the grace", func(t *testing.T) {
		db, session := drainMidTurn(t, "q1-1 please calc 2+3", "tool_call", answerText("q1-1", "after calculator"))
		msgs, err := loadContext(db, session)
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
func drainMidTurn(t *testing.T, text, at, want string) (storedHistory, string) {
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

	db := openAudit(t, setup.db)
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
