package main

// The crash tests' parts: the gateway binary as a child process, its
// configuration and scripted model, and the wire types (see crash_test.go).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
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
		if m := listeningRE.FindSubmatch(w.line[:i]); m != nil {
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

// crashSetup is a crash test's directory, its config.yaml, and its
// storage.dsn (db): an SQLite file in dir, or a PostgreSQL database.
type crashSetup struct {
	dir, config, db string
}

const crashGuide = `---
name: crash
description: Answers the crash tests' questions
tools: [current_time, calculator]
approval: { default: ask, auto: [calculator] }
memory: { policy: compact, window: 6 }
---
You answer test questions, using the tools when asked to.
`

// writeCrashSetup writes the guide and config.yaml into a new temp dir,
// the store an SQLite file in it.
func writeCrashSetup(t *testing.T, modelBaseURL, grace string) crashSetup {
	t.Helper()
	dir := t.TempDir()
	return writeCrashConfig(t, dir, modelBaseURL, grace, filepath.Join(dir, "gw.db"), "")
}

// writeReplicaSetup is writeCrashSetup for replicas sharing the
// PostgreSQL database dsn, holding a conversation for lease unrenewed; each
// start names its replica (--set storage.replica=…).
func writeReplicaSetup(t *testing.T, modelBaseURL, grace, dsn string, lease time.Duration) crashSetup {
	t.Helper()
	dir := t.TempDir()
	return writeCrashConfig(t, dir, modelBaseURL, grace, dsn,
		fmt.Sprintf("  lease: %s\n  data_dir: %s\n", lease, filepath.Join(dir, "data")))
}

// writeCrashConfig writes the guide and config.yaml into dir, with the
// store dsn and more of the storage section.
func writeCrashConfig(t *testing.T, dir, modelBaseURL, grace, dsn, storage string) crashSetup {
	t.Helper()
	guides := filepath.Join(dir, "guides")
	if err := os.MkdirAll(guides, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(guides, "crash.md"), []byte(crashGuide), 0o644); err != nil {
		t.Fatal(err)
	}
	sessions := ""
	if grace != "" {
		sessions = "sessions:\n  shutdown_grace: " + grace + "\n"
	}
	s := crashSetup{dir: dir, config: filepath.Join(dir, "config.yaml"), db: dsn}
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
metrics:
  addr: ""
storage:
  dsn: %q
%sproviders:
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
%s`, s.db, storage, modelBaseURL, guides, sessions)
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
// The guide compacts its window of 6: a request for a summary (told to
// summarized, when not nil, with the last question it covers) is answered
// with notes, slowly, so a kill can land in the middle of one.
func crashModel(delay time.Duration, summarized func(qid string)) func(openaitest.Request) openaitest.Reply {
	var calls atomic.Int64
	return func(r openaitest.Request) openaitest.Reply {
		if len(r.Messages) == 0 {
			return openaitest.Reply{Text: []string{"no messages"}}
		}
		if r.Messages[0].Role == "system" && strings.Contains(openaitest.Text(r.Messages[0].Content), "You keep the memory of a conversation") {
			if summarized != nil {
				qid := ""
				for _, m := range r.Messages {
					if ids := questionIDRE.FindAllString(openaitest.Text(m.Content), -1); len(ids) > 0 {
						qid = ids[len(ids)-1]
					}
				}
				summarized(qid)
			}
			return openaitest.Reply{Text: []string{"NOTES:", " the", " questions", " asked", " so", " far."}, Delay: delay}
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
