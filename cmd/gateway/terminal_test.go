package main

// The terminal listener end to end: the real gateway reading a pipe, a
// file, /dev/null, a closed standard input, and a pseudo-terminal.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

	"github.com/creack/pty"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// terminalDeadline only turns a hang into a failure; nothing is timed.
const terminalDeadline = 90 * time.Second

// scriptedModel answers like a model that follows the words it gets:
// "time" asks for current_time (an ask tool), "form" shows a form with
// present; a tool's result is answered with "Done: <result>", and
// anything else with "You said: <text>".
func scriptedModel(r openaitest.Request) openaitest.Reply {
	last := r.Messages[len(r.Messages)-1]
	text := openaitest.Text(last.Content)
	id := fmt.Sprintf("call_%d", len(r.Messages))
	switch {
	case last.Role == "tool":
		return openaitest.Reply{Text: []string{"Done: ", text}}
	case last.Role == "user" && strings.Contains(text, "time"):
		return openaitest.Reply{Text: []string{"Checking."}, ToolCalls: []openaitest.ToolCall{{ID: id, Name: "current_time", Args: `{"timezone":"Europe/Berlin"}`}}}
	case last.Role == "user" && strings.Contains(text, "form"):
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: id, Name: "present", Args: `{"title":"Sign up",
			"text":"Tell us **who** you are, _please_.",
			"form":{"submit_label":"Join","inputs":[{"name":"name","label":"Name","required":true},{"name":"city","label":"City"}]}}`}}}
	}
	return openaitest.Reply{Text: []string{"You said: ", text}}
}

func scriptedGateway(t *testing.T) (*gateway, *openaitest.Server) {
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	llm.Respond(scriptedModel)
	return newGateway(t, openAIProvider(llm), ""), llm
}

// runPipe runs the gateway with input piped in and returns once it exits.
func (g *gateway) runPipe(input string, env ...string) (stdout, stderr string) {
	g.t.Helper()
	return g.runPipeArgs(nil, input, env...)
}

// runPipeArgs is runPipe with flags after --config.
func (g *gateway) runPipeArgs(args []string, input string, env ...string) (stdout, stderr string) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), terminalDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"--config", g.config}, args...)...)
	cmd.Env = append(hermeticEnv(), "GATEWAY_TEST_RUN_MAIN=1", "USER=tester", "TEST_OPENAI_KEY=sk-test")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		g.t.Fatalf("gateway with input %q: %v (a hang ends at the deadline)\nstdout:\n%s\nstderr:\n%s", input, err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// inOrder fails unless every want is in out, each after the one before.
func inOrder(t *testing.T, out string, wants ...string) {
	t.Helper()
	rest := out
	for _, want := range wants {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("output lacks %q (in this order: %q):\n%s", want, wants, out)
		}
		rest = rest[i+len(want):]
	}
}

// Lines after /reset go to the new conversation: none is lost with the
// session the listener leaves.
func TestPipeLinesAfterResetAreAnswered(t *testing.T) {
	g, _ := scriptedGateway(t)
	out, _ := g.runPipe("hello before\n/reset\nhello after reset\nand one more\n")
	inOrder(t, out, "You said: hello before", "started a new conversation", "You said: hello after reset", "You said: and one more")
}

// A form's field answers are the lines that follow the choice in the
// pipe, even when they were read while the turn that showed it ran.
func TestPipeFormAnswersFollowInThePipe(t *testing.T) {
	g, _ := scriptedGateway(t)
	out, _ := g.runPipe("show me the form\n1\nAda\nLondon\nthanks\n")
	inOrder(t, out,
		"┌ Sign up", "│ Tell us who you are, please.", "[1] Join (Name, City)",
		"Name (required): \n", "City: \n",
		`You said: Submitted "Sign up": {"city":"London","name":"Ada"}`,
		"You said: thanks")
	if strings.Contains(out, "│ Tell us **who**") {
		t.Errorf("Markdown markers are shown in a pipe:\n%s", out)
	}
}

// "a" answers "always": the tool is approved for the rest of the session
// and not asked about again.
func TestPipeAlwaysAllow(t *testing.T) {
	g, _ := scriptedGateway(t)
	out, _ := g.runPipe("what time is it?\na\nand the time now?\n")
	inOrder(t, out, "Approve? [y/N/a=always] ", "approved by tester (for this session)", "← current_time: ", "Done: ",
		"← current_time: ", "Done: ")
	if n := strings.Count(out, "Approve?"); n != 1 {
		t.Fatalf("asked %d times after always:\n%s", n, out)
	}
}

// An approval request left open by the last run is shown when the
// terminal comes back, and the first line answers it; a command typed
// meanwhile goes to the session. (A pipe continues the terminal's
// conversation only with --session terminal.)
func TestPipeApprovalOpenAcrossRestart(t *testing.T) {
	g, _ := scriptedGateway(t)
	terminal := []string{"--session", "terminal"}
	out, _ := g.runPipeArgs(terminal, "what time is it?\n")
	inOrder(t, out, "Checking.", `Run current_time {"timezone":"Europe/Berlin"}? Approve? [y/N/a=always] `)

	out, _ = g.runPipeArgs(terminal, "/pending\ny\n")
	inOrder(t, out, "Waiting for approval:", `Run current_time {"timezone":"Europe/Berlin"}? Approve? [y/N/a=always] `,
		"approved by tester", "← current_time: ", "Done: ")
	if strings.Contains(out, "Checking.") {
		t.Errorf("a pipe replayed the conversation:\n%s", out)
	}
}

// A piped one-off is not the person's conversation: each run starts a new
// one. --session terminal continues the terminal's, --session ID that
// conversation; an id that is no conversation of theirs stops the run.
func TestPipeOneOffStartsANewConversation(t *testing.T) {
	g, llm := scriptedGateway(t)
	// remembered: the model's last request carried text from before.
	remembered := func(text string) bool {
		reqs := llm.Requests()
		last := reqs[len(reqs)-1]
		for _, m := range last.Messages[:len(last.Messages)-1] {
			if strings.Contains(openaitest.Text(m.Content), text) {
				return true
			}
		}
		return false
	}
	out, _ := g.runPipe("a first one-off\n")
	inOrder(t, out, "You said: a first one-off")
	out, _ = g.runPipe("a second one-off\n")
	inOrder(t, out, "You said: a second one-off")
	if remembered("a first one-off") {
		t.Error("a piped one-off continued the conversation of the one before")
	}

	// The terminal's conversation is its own…
	terminal := []string{"--session", "terminal"}
	out, _ = g.runPipeArgs(terminal, "the terminal's first words\n")
	inOrder(t, out, "You said: the terminal's first words")
	if remembered("one-off") {
		t.Error("the terminal's conversation has the one-offs in it")
	}
	out, _ = g.runPipe("a third one-off\n")
	inOrder(t, out, "You said: a third one-off")
	if remembered("the terminal's first words") {
		t.Error("a piped one-off continued the terminal's conversation")
	}

	// …and a pipe continues it when asked to…
	out, _ = g.runPipeArgs(terminal, "the terminal's second words\n")
	inOrder(t, out, "You said: the terminal's second words")
	if !remembered("the terminal's first words") || remembered("one-off") {
		t.Error("--session terminal did not continue the terminal's conversation (alone)")
	}

	// …or the one it names.
	db := openAuditDB(t, filepath.Join(g.dir, "data", "switchboard.db"))
	where := func() map[string]string {
		rows, err := db.Query(`SELECT id FROM sessions`)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		in := map[string]string{}
		for _, sid := range ids {
			msgs, err := loadMessages(db, sid)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				if m.Role == switchboard.RoleUser {
					in[m.Content] = sid
				}
			}
		}
		return in
	}
	first := where()["a first one-off"]
	out, _ = g.runPipeArgs([]string{"--session", first}, "back to the first one-off\n")
	inOrder(t, out, "You said: back to the first one-off")
	if !remembered("a first one-off") || remembered("the terminal's") || remembered("second one-off") {
		t.Errorf("--session %s did not continue that conversation (alone)", first)
	}

	in := where()
	var own string
	if err := db.QueryRow(`SELECT id FROM sessions WHERE key = 'stdin'`).Scan(&own); err != nil {
		t.Fatal(err)
	}
	if in["the terminal's first words"] != own || in["the terminal's second words"] != own {
		t.Errorf("the terminal's words are not in its own conversation %s: %v", own, in)
	}
	if a, b, c := in["a first one-off"], in["a second one-off"], in["a third one-off"]; a == own || b == own || c == own || a == b || b == c || in["back to the first one-off"] != a {
		t.Errorf("the one-offs are not conversations of their own: %v (the terminal's is %s)", in, own)
	}

	// A session that is not there stops the run, named.
	stdout, stderr, err := g.runArgs([]string{"--session", "s_nothere"}, "hello\n")
	if err == nil || !strings.Contains(stderr, "s_nothere") {
		t.Errorf("--session of no conversation: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
}

// runArgs runs the gateway with flags and input piped in, and returns its
// output and how it exited.
func (g *gateway) runArgs(args []string, input string, env ...string) (stdout, stderr string, err error) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), terminalDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"--config", g.config}, args...)...)
	cmd.Env = append(append(hermeticEnv(), "GATEWAY_TEST_RUN_MAIN=1", "USER=tester", "TEST_OPENAI_KEY=sk-test"), env...)
	cmd.Stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// listeners.stdin.enabled auto answers a pipe and a redirected file.
func TestAutoStdinAnswersAPipeAndAFile(t *testing.T) {
	g, _ := scriptedGateway(t)
	auto := "SWITCHBOARD_LISTENERS__STDIN__ENABLED=auto"
	out, _ := g.runPipe("hello from a pipe\n", auto)
	inOrder(t, out, "You said: hello from a pipe")

	file := g.dir + "/questions.txt"
	if err := os.WriteFile(file, []byte("hello from a file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := g.start(t, f, auto)
	p.waitExit(t)
	inOrder(t, p.stdout.String(), "You said: hello from a file")
}

// Standard input with nothing to say keeps the gateway serving HTTP:
// /dev/null and a closed stdin (a service) under auto, and an empty pipe
// under auto or true.
func TestStdinWithoutInputKeepsServing(t *testing.T) {
	for _, tc := range []struct {
		name, mode, stdin, log string
	}{
		{"dev null auto", "auto", "devnull", "no terminal chat: standard input is not a terminal, a pipe or a file"},
		{"closed auto", "auto", "closed", "no terminal chat: standard input is not a terminal, a pipe or a file"},
		{"empty pipe auto", "auto", "empty", "standard input ended before its first line"},
		{"empty pipe true", "true", "empty", "standard input ended before its first line"},
		{"dev null true", "true", "devnull", "standard input ended before its first line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := scriptedGateway(t)
			var p *proc
			env := "SWITCHBOARD_LISTENERS__STDIN__ENABLED=" + tc.mode
			switch tc.stdin {
			case "devnull":
				p = g.start(t, nil, env) // exec gives /dev/null
			case "empty":
				p = g.start(t, strings.NewReader(""), env)
			case "closed":
				p = g.start(t, nil, env, "closed")
			}
			p.stderr.waitFor(t, tc.log, p)
			addr := p.stderr.match(t, listeningRE)
			resp, err := http.Get("http://" + addr + "/healthz")
			if err != nil {
				t.Fatalf("/healthz after stdin: %v\n%s", err, p.stderr.String())
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/healthz: %s", resp.Status)
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := p.waitExit(t); err != nil {
				t.Fatalf("exit after SIGTERM: %v\n%s", err, p.stderr.String())
			}
		})
	}
}

// The terminal in a real pseudo-terminal: the banner, an approval asked
// with its question as the prompt, the gateway killed while it waits;
// after the restart the last messages, the open request again, "y"
// approves it, and /quit leaves.
func TestTerminalApprovalAcrossRestartInPty(t *testing.T) {
	bin := gatewayBinary(t)
	g := newGateway(t, "  - name: main\n    kind: demo", "metrics:\n  addr: \"\"\n")
	env := []string{"USER=tester", "TERM=xterm", "SWITCHBOARD_LISTENERS__STDIN__ENABLED=auto"}

	first := startPty(t, bin, g.config, env)
	first.expect(t, "Switchboard · session ")
	first.expect(t, "Hi! Ask me anything")
	first.expect(t, "Try: What time is it in Tokyo?")
	first.expect(t, "/quit or Ctrl-D to leave.")
	first.expect(t, "> ")
	first.send(t, "what time is it in Berlin?\r")
	first.expect(t, "Let me check the clock.")
	first.expect(t, `Run current_time {"timezone":"Europe/Berlin"}? Approve? [y/N/a=always] `)
	// A command while the request is open goes to the session, and the
	// question comes back as the prompt.
	first.send(t, "/pending\r")
	first.expect(t, "Waiting for approval:")
	first.expect(t, "Approve? [y/N/a=always] ")
	first.kill(t)
	notGlued(t, first.out.String())

	second := startPty(t, bin, g.config, env)
	second.expect(t, "Switchboard · session ")
	// The recap: the last messages, dimmed, one's own as typed.
	second.expect(t, "── earlier in this conversation ──")
	second.expect(t, "\x1b[2m> what time is it in Berlin?")
	if !strings.Contains(second.out.String(), "Let me check the clock.") {
		second.expect(t, "Let me check the clock.")
	}
	if strings.Contains(second.out.String(), "Hi! Ask me anything") {
		t.Errorf("a remembered conversation was greeted as a new one:\n%q", second.out.String())
	}
	// The request open before the restart, answered with y.
	second.expectAnywhere(t, `Run current_time {"timezone":"Europe/Berlin"}? Approve? [y/N/a=always] `)
	second.send(t, "y\r")
	second.expect(t, "approved by tester")
	second.expect(t, "← current_time: ")
	second.expect(t, "Europe/Berlin")
	second.expect(t, "> ")
	second.send(t, "/quit\r")
	if err := second.waitExit(t); err != nil {
		t.Fatalf("/quit: %v\n%q", err, second.out.String())
	}
	notGlued(t, second.out.String())
}

// Log lines never print into the chat. With standard error on the same
// terminal, as a person runs it, the chat says where the log goes (a file
// beside the database, which has it all) and a warning shows as a [log]
// line of its own, never as the log's "level=… msg=…".
func TestTerminalLogsStayOutOfTheChat(t *testing.T) {
	bin := gatewayBinary(t)
	// Without its key the provider answers with the demo model: a warning.
	g := newGateway(t, "  - name: main\n    kind: openai\n    api_key_env: TEST_UNSET_OPENAI_KEY\n    fallback: demo", "metrics:\n  addr: \"\"\n")
	env := []string{"USER=tester", "TERM=xterm", "SWITCHBOARD_LISTENERS__STDIN__ENABLED=auto"}
	logFile := filepath.Join(g.dir, "data", "gateway.log")

	p := startPtyWith(t, bin, g.config, env, true)
	p.expect(t, "[log] WARN no model provider credentials found")
	p.expect(t, "Switchboard · session ")
	p.expect(t, "The log goes to "+logFile+"; warnings and errors are shown here too.")
	p.expect(t, "> ")
	p.send(t, "what is 2*(3+4)?\r")
	p.expect(t, "2*(3+4) = 14")
	p.expect(t, "> ")
	p.send(t, "/quit\r")
	if err := p.waitExit(t); err != nil {
		t.Fatalf("/quit: %v\n%q", err, p.out.String())
	}
	chat := p.out.text()
	for _, bad := range []string{"level=", "msg=", "session created", "http listening"} {
		if strings.Contains(chat, bad) {
			t.Errorf("the chat shows the log (%q):\n%s", bad, chat)
		}
	}
	if !regexp.MustCompile(`(^|\n)(\x1b\[2m)?\[log\] WARN no model provider credentials found[^\n]*\n`).MatchString(chat) {
		t.Errorf("the warning is not on a line of its own:\n%q", chat)
	}
	logged, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`level=WARN msg="no model provider credentials found`, `msg="http listening"`, `msg="session created"`, `msg="shutting down`} {
		if !strings.Contains(string(logged), want) {
			t.Errorf("the log file lacks %q:\n%s", want, logged)
		}
	}
}

// The terminal joins a conversation shared from the web, over the real
// binary: a bad code is refused with its reason; run 1 joins Carol's
// session (her /share over /ws), sees her messages labelled and writes
// into it; run 2 starts in that session (the binding survives the
// restart), and /leave there brings the terminal back to its own, where
// run 3 starts. Where each line went is read from the database.
func TestPipeJoinsASharedSessionAcrossRestarts(t *testing.T) {
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	llm.Respond(scriptedModel)
	g := newGateway(t, openAIProvider(llm), "metrics:\n  addr: \"\"\n")

	// Run 1, with standard input held open while Carol shares.
	cmd := exec.Command(os.Args[0], "--config", g.config)
	cmd.Env = append(hermeticEnv(), "GATEWAY_TEST_RUN_MAIN=1", "USER=tester", "TEST_OPENAI_KEY=sk-test")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdout: newStream(), stderr: newStream(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.watch(t)
	typed := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	typed("/join aaaaaaaaaaaaaaaaaaaaaaaaaa")
	p.stdout.waitFor(t, "! Not joined: that invite code is not known.", p)
	p.stderr.waitFor(t, `msg="http listening"`, p)
	addr := p.stderr.match(t, listeningRE)

	carol := dialPeer(t, addr, map[string]any{"type": "hello", "user": map[string]string{"id": "carol", "name": "Carol"}})
	carolSays := func(id, text string, until func(wsFrame) bool) wsFrame {
		t.Helper()
		carol.send(map[string]any{"type": "input", "id": id, "text": text})
		f, err := carol.until(terminalDeadline, until)
		if err != nil {
			t.Fatalf("Carol's %q: %v\n%s", text, err, carol.history())
		}
		return f
	}
	carolSays("i1", "hello from the web", isAssistantMessage)
	f := carolSays("i2", "/share member", func(f wsFrame) bool { return f.Type == "error" && errorCode(f) == "info" })
	code := regexp.MustCompile(`Invite code ([a-z2-7]{26})`).FindStringSubmatch(string(f.Data))
	if code == nil {
		t.Fatalf("no invite code in %s", f.Data)
	}

	typed("/join " + code[1])
	p.stdout.waitFor(t, "Joined Carol's shared conversation as member. /leave returns to your own.", p)
	p.stdout.waitFor(t, "Carol · Web: hello from the web", p) // the recap
	typed("hello from the terminal")
	carolSees := func(text string) {
		t.Helper()
		if _, err := carol.until(terminalDeadline, func(f wsFrame) bool {
			var d switchboard.MessageData
			return f.Type == "message" && json.Unmarshal(f.Data, &d) == nil && d.Content == text && d.Channel == "stdin" && d.Place == "stdin:terminal"
		}); err != nil {
			t.Fatalf("Carol never saw the terminal's %q: %v\n%s", text, err, carol.history())
		}
	}
	carolSees("hello from the terminal")
	carolSays("i3", "and from the web again", isAssistantMessage)
	p.stdout.waitFor(t, "Carol · Web: and from the web again", p)
	stdin.Close()
	if err := p.waitExit(t); err != nil {
		t.Fatalf("run 1: %v\n%s", err, p.stderr.String())
	}

	// Run 2, continuing what the terminal shows, starts in Carol's
	// conversation; /leave comes home.
	terminal := []string{"--session", "terminal"}
	out, _ := g.runPipeArgs(terminal, "hello after the restart\n/leave\nback home\n")
	inOrder(t, out, "You said: ", "tester took this conversation out of a Terminal place", "Back in your own conversation.", "You said: back home")

	// Run 3 starts in its own.
	out, _ = g.runPipeArgs(terminal, "where now?\n")
	inOrder(t, out, "You said: where now?")

	db := openAuditDB(t, filepath.Join(g.dir, "data", "switchboard.db"))
	var own string
	if err := db.QueryRow(`SELECT id FROM sessions WHERE key = 'stdin'`).Scan(&own); err != nil {
		t.Fatal(err)
	}
	where := map[string]string{}
	for _, sid := range []string{carol.session, own} {
		msgs, err := loadMessages(db, sid)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Role == switchboard.RoleUser {
				where[m.Content] = sid
			}
		}
	}
	for text, want := range map[string]string{
		"hello from the terminal": carol.session, "hello after the restart": carol.session,
		"back home": own, "where now?": own,
	} {
		if where[text] != want {
			t.Errorf("%q is in session %q, want %q (Carol's is %s, the terminal's own %s)", text, where[text], want, carol.session, own)
		}
	}
}

// notGlued: the prompt "> " never follows the approval question.
func notGlued(t *testing.T, out string) {
	t.Helper()
	if regexp.MustCompile(`\[y/N[^\]]*\] *> `).MatchString(out) {
		t.Errorf("the prompt is glued to the approval question:\n%q", out)
	}
}

// ---------------------------------------------------------------------------
// Helpers.

// stream is output that a test waits on.
type stream struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
	mark    int // expect's position
}

func newStream() *stream { return &stream{changed: make(chan struct{})} }

func (s *stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	close(s.changed)
	s.changed = make(chan struct{})
	return len(p), nil
}

func (s *stream) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// text is the output with a terminal's \r\n as \n.
func (s *stream) text() string { return strings.ReplaceAll(s.String(), "\r\n", "\n") }

// find waits until f finds something in the text, the process exits, or
// the deadline passes.
func (s *stream) find(t *testing.T, what string, f func(string) bool, exited <-chan struct{}) {
	t.Helper()
	deadline := time.After(terminalDeadline)
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		if f(s.text()) {
			return
		}
		select {
		case <-changed:
		case <-exited:
			if f(s.text()) {
				return
			}
			t.Fatalf("the gateway exited without printing %q:\n%q", what, s.text())
		case <-deadline:
			t.Fatalf("no %q within %s:\n%q", what, terminalDeadline, s.text())
		}
	}
}

// waitFor waits until the output contains want.
func (s *stream) waitFor(t *testing.T, want string, p *proc) {
	t.Helper()
	s.find(t, want, func(text string) bool { return strings.Contains(text, want) }, p.done)
}

// match returns the first submatch of re in the output.
func (s *stream) match(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	m := re.FindStringSubmatch(s.text())
	if m == nil {
		t.Fatalf("no %s in:\n%s", re, s.text())
	}
	return m[1]
}

// proc is one run of the gateway.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *stream
	done           chan struct{}
	err            error
	out            *stream // the terminal, for startPty
	pty            *os.File
}

// start runs the gateway (this test binary) with stdin as given: nil is
// /dev/null; "closed" as the last extra runs it with standard input closed.
func (g *gateway) start(t *testing.T, stdin any, env string, extra ...string) *proc {
	t.Helper()
	args := []string{"--config", g.config}
	name := os.Args[0]
	if len(extra) > 0 && extra[0] == "closed" {
		args = append([]string{"-c", `exec "$0" "$@" <&-`, name}, args...)
		name = "/bin/sh"
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(hermeticEnv(), "GATEWAY_TEST_RUN_MAIN=1", "USER=tester", "TEST_OPENAI_KEY=sk-test", env)
	switch in := stdin.(type) {
	case *os.File:
		cmd.Stdin = in
	case *strings.Reader:
		cmd.Stdin = in
	}
	p := &proc{cmd: cmd, stdout: newStream(), stderr: newStream(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.watch(t)
	return p
}

func (p *proc) watch(t *testing.T) {
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("gateway stderr:\n%s", p.stderr.String())
		}
	})
}

// waitExit waits for the process to end and returns its exit status.
func (p *proc) waitExit(t *testing.T) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(terminalDeadline):
		t.Fatalf("the gateway did not exit within %s", terminalDeadline)
		return nil
	}
}

// startPty runs the gateway binary with its standard input and output on
// a pseudo-terminal (logs apart).
func startPty(t *testing.T, bin, config string, env []string) *proc {
	t.Helper()
	return startPtyWith(t, bin, config, env, false)
}

// startPtyWith is startPty, with standard error on the terminal too
// when sharedStderr (as a person runs it).
func startPtyWith(t *testing.T, bin, config string, env []string, sharedStderr bool) *proc {
	t.Helper()
	cmd := exec.Command(bin, "--config", config)
	for _, kv := range hermeticEnv() {
		if k, _, _ := strings.Cut(kv, "="); k != "NO_COLOR" && k != "TERM" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	p := &proc{cmd: cmd, out: newStream(), stderr: newStream(), done: make(chan struct{})}
	if !sharedStderr {
		cmd.Stderr = p.stderr
	}
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	p.pty = f
	t.Cleanup(func() { f.Close() })
	go func() { _, _ = io.Copy(p.out, f) }() // until the terminal closes
	p.watch(t)
	return p
}

// expect waits for want after what the last expect matched.
func (p *proc) expect(t *testing.T, want string) {
	t.Helper()
	p.out.find(t, want, func(text string) bool {
		i := strings.Index(text[min(p.out.mark, len(text)):], want)
		if i < 0 {
			return false
		}
		p.out.mark += i + len(want)
		return true
	}, p.done)
}

// expectAnywhere waits for want anywhere in the output, and moves on
// from its last occurrence.
func (p *proc) expectAnywhere(t *testing.T, want string) {
	t.Helper()
	p.out.find(t, want, func(text string) bool {
		i := strings.LastIndex(text, want)
		if i < 0 {
			return false
		}
		p.out.mark = max(p.out.mark, i+len(want))
		return true
	}, p.done)
}

func (p *proc) send(t *testing.T, s string) {
	t.Helper()
	if _, err := p.pty.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func (p *proc) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}
