package main

// Every example in README.md and docs/*.md is run or parsed as written, so
// the documentation cannot drift from the gateway: a newcomer copies these
// first. Shell blocks must each be claimed by a rule below, which runs them
// or says why it cannot (and what checks them instead); a new shell block
// no rule claims fails, and so does a rule that no longer claims a block.
// YAML blocks load as configuration, Markdown blocks that start with front
// matter load as guides, JSON blocks parse, and the systemd unit's settings
// load as configuration.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	gws "github.com/gorilla/websocket"
	"gopkg.in/yaml.v3"

	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/tools"
	"github.com/switchboard-gw/switchboard/tools/sandbox"
)

// docBlock is one fenced block of a document.
type docBlock struct {
	file string // relative to the module root
	line int    // of the opening fence
	lang string
	text string
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d (```%s)", b.file, b.line, b.lang) }

// docBlocks reads the fenced blocks of README.md and docs/*.md.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	var blocks []docBlock
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(f, "../../")
		var cur *docBlock
		var body []string
		indent := "" // of the opening fence: a block in a list item is indented
		for i, line := range strings.Split(string(data), "\n") {
			trimmed := strings.TrimLeft(line, " ")
			fence, isFence := strings.CutPrefix(strings.TrimRight(trimmed, " "), "```")
			switch {
			case isFence && cur == nil:
				cur = &docBlock{file: rel, line: i + 1, lang: fence}
				indent = line[:len(line)-len(trimmed)]
				body = body[:0]
			case isFence:
				cur.text = strings.Join(body, "\n") + "\n"
				blocks = append(blocks, *cur)
				cur = nil
			case cur != nil:
				body = append(body, strings.TrimPrefix(line, indent))
			}
		}
		if cur != nil {
			t.Fatalf("%s: unclosed fence", cur)
		}
	}
	if len(blocks) < 10 {
		t.Fatalf("found only %d blocks: is the reader broken?", len(blocks))
	}
	return blocks
}

// shellCommands splits a shell block into commands as a shell would read
// them: continuation lines joined, comments dropped, a here-document kept
// with its command.
func shellCommands(text string) []string {
	var cmds []string
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		cmd := stripComment(lines[i])
		for strings.HasSuffix(cmd, `\`) && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, `\`) + " " + strings.TrimSpace(stripComment(lines[i]))
		}
		if _, word, ok := strings.Cut(cmd, "<<"); ok {
			word = strings.Trim(strings.Fields(word)[0], `'"`)
			for i+1 < len(lines) {
				i++
				cmd += "\n" + lines[i]
				if lines[i] == word {
					break
				}
			}
		}
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

// stripComment drops a # comment that is outside quotes and starts a word.
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimRight(line[:i], " \t")
		}
	}
	return line
}

// shellRule claims the shell blocks whose first command matches.
type shellRule struct {
	first *regexp.Regexp
	// run executes the block's commands; nil when it cannot run here.
	run func(t *testing.T, cmds []string)
	// notRun says why not, and what checks the example instead.
	notRun string
}

var shellRules = []shellRule{
	{first: regexp.MustCompile(`^make run$`),
		notRun: "the Makefile's targets: make test is the run this test belongs to, make run serves until stopped (the printf examples run the same binary and config), make bench runs for minutes"},
	{first: regexp.MustCompile(`^export OPENAI_API_KEY=sk-\.\.\.$`),
		notRun: "needs a real OpenAI key; the openai provider is tested against its wire fake (providers/openai) and the doctor's key check in TestDoctorGoodKeyIsOK and TestDoctorBadKeyIsAProblem"},
	{first: regexp.MustCompile(`^printf '[^']*' \| \./bin/gateway --config config\.yaml$`), run: runPipeExamples},
	{first: regexp.MustCompile(`^go install \S+@latest$`), run: runGoInstallExample},
	{first: regexp.MustCompile(`^make docker\b`),
		notRun: "needs a Docker engine, which CI lacks; the image's config passes the doctor in TestDoctorContainerConfig and its static build is TestVersionStaticBuild"},
	{first: regexp.MustCompile(`^cat > \.env\.gateway <<EOF`),
		notRun: "docker compose needs a Docker engine, which CI lacks; compose.yaml's config is deploy/container.yaml, checked by TestDoctorContainerConfig"},
	{first: regexp.MustCompile(`^pw=\$\(openssl rand -hex 24\)$`),
		notRun: "docker compose needs a Docker engine, which CI lacks; the replicas' compose file is parsed, and each replica's settings loaded as configuration, by the yaml example (loadExampleCompose)"},
	{first: regexp.MustCompile(`^sudo useradd `),
		notRun: "installs a system user and files under /etc and /usr/local; the unit that uses them is checked by the ini example"},
	{first: regexp.MustCompile(`^sudo systemctl daemon-reload$`),
		notRun: "needs systemd as PID 1, which the test machine lacks; the unit's settings are checked by the ini example"},
	{first: regexp.MustCompile(`^sudo systemd-run `),
		notRun: "needs systemd as PID 1; the doctor it runs is TestDoctor*, on deploy/container.yaml in TestDoctorContainerConfig"},
	{first: regexp.MustCompile(`^websocat ws://127\.0\.0\.1:8080/ws$`), run: runWebsocatExample},
	{first: regexp.MustCompile(`^curl -sS http://127\.0\.0\.1:8080/v1/models `), run: runOpenAICurlExamples},
	{first: regexp.MustCompile(`^curl -sS -o /dev/null -D headers\.txt http://127\.0\.0\.1:8080/v1/chat/completions `), run: runOpenAISessionExample},
	{first: regexp.MustCompile(`^curl -sSN http://127\.0\.0\.1:8080/v1/chat/completions `), run: runOpenAIProgressExample},
	{first: regexp.MustCompile(`^curl -sS -o first\.json http://127\.0\.0\.1:8080/v1/responses `), run: runOpenAIResponsesExample},
	{first: regexp.MustCompile(`^gateway status\b`),
		notRun: "asks a running gateway; TestSlackListenerInTheGateway runs gateway status against the built gateway, not ready and ready"},
	{first: regexp.MustCompile(`^sqlite3 /var/lib/switchboard/switchboard\.db "\.backup `),
		notRun: "copies a production database with the sqlite3 program (SQLite's online backup, not the gateway's code); the test machine has neither"},
	{first: regexp.MustCompile(`^docker run --rm -v switchboard-data:/data `),
		notRun: "needs a Docker engine, which CI lacks"},
	{first: regexp.MustCompile(`^export DISCORD_BOT_TOKEN=`),
		notRun: "needs a Discord application; the doctor's Discord check runs against the fake Discord in TestDoctorDiscord, the listener in listeners/discord's tests"},
	{first: regexp.MustCompile(`^docker run --rm -d --name jaeger `),
		notRun: "needs a Docker engine and Jaeger's image; the same export (OTEL_EXPORTER_OTLP_ENDPOINT, OTLP/HTTP) goes to a decoding receiver in TestTheGatewayTracesATurnAndWritesTheTraceLog, OTLP/gRPC in telemetry's TestGRPCExportWorks"},
	{first: regexp.MustCompile(`^jq -s 'map\(select\(\.type == "model_response"\)\)`), run: runJQExamples},
	{first: regexp.MustCompile(`^export SLACK_BOT_TOKEN=`),
		notRun: "needs a Slack workspace; the doctor's Slack check runs against the fake Slack in TestDoctorSlack, the listener in listeners/slack's tests"},
}

func TestDocumentationExamples(t *testing.T) {
	blocks := docBlocks(t)
	for _, r := range shellRules {
		if !slices.ContainsFunc(blocks, func(b docBlock) bool {
			cmds := shellCommands(b.text)
			return b.lang == "sh" && len(cmds) > 0 && r.first.MatchString(cmds[0])
		}) {
			t.Errorf("shell rule %q claims no block any more: remove it", r.first)
		}
	}
	for _, b := range blocks {
		t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) {
			switch b.lang {
			case "sh":
				cmds := shellCommands(b.text)
				if len(cmds) == 0 {
					t.Fatalf("%s: an empty shell block", b)
				}
				i := slices.IndexFunc(shellRules, func(r shellRule) bool { return r.first.MatchString(cmds[0]) })
				if i < 0 {
					t.Fatalf("%s: no rule runs this example (add one to shellRules, or say there why it cannot run):\n%s", b, b.text)
				}
				if shellRules[i].run == nil {
					t.Skipf("not run: %s", shellRules[i].notRun)
				}
				shellRules[i].run(t, cmds)
			case "yaml":
				if composeRE.MatchString(b.text) {
					loadExampleCompose(t, b)
					return
				}
				loadExampleConfig(t, b)
			case "markdown":
				loadExampleGuide(t, b)
			case "json":
				var v any
				if err := json.Unmarshal([]byte(b.text), &v); err != nil {
					t.Errorf("%s: not JSON: %v\n%s", b, err, b.text)
				}
			case "ini":
				loadExampleUnit(t, b)
			default:
				// html, css, js, go, python: embedding snippets for other
				// programs, exercised by the browser tests and the
				// protocol's wire tests; untagged blocks are transcripts.
				t.Skipf("%q blocks are not run", b.lang)
			}
		})
	}
}

// exampleEnv is the environment an example runs in: nothing of the
// caller's configuration or keys, and ports the machine has free (the
// command is unchanged; SWITCHBOARD_* variables are config keys).
func exampleEnv() []string {
	return append(hermeticEnv(), "SWITCHBOARD_HTTP__ADDR=127.0.0.1:0", "SWITCHBOARD_METRICS__ADDR=", "USER=ann")
}

// exampleCheckout is a directory laid out like the repository after
// make build: bin/gateway, config.yaml and guides/.
func exampleCheckout(t *testing.T) string {
	t.Helper()
	bin := gatewayBinary(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "bin", "gateway")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "guides"), os.DirFS("../../guides")); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pipeAnswers is what the gateway with the offline demo model shows after
// each line the README pipes in, as the README shows it.
var pipeAnswers = map[string][]string{
	"what is 2*(3+4)?":           {"2*(3+4) = 14"},
	"what time is it in Berlin?": {`Run current_time {"timezone":"Europe/Berlin"}? Approve?`},
	"y":                          {"approved by ann", "in Berlin (Europe/Berlin)."},
	"/reset":                     {"started a new conversation"},
	"what is 6*7?":               {"6*7 = 42"},
}

var printfRE = regexp.MustCompile(`^printf '([^']*)' \|`)

// runPipeExamples runs each printf line with sh in a copy of the
// repository, one after the other (each a conversation of its own, as a
// pipe is without --session), and checks that every line piped in was
// answered, in order, and the gateway exited.
func runPipeExamples(t *testing.T, cmds []string) {
	dir := exampleCheckout(t)
	for _, cmd := range cmds {
		m := printfRE.FindStringSubmatch(cmd)
		if m == nil {
			t.Fatalf("not a printf example: %s", cmd)
		}
		ctx, cancel := context.WithTimeout(context.Background(), terminalDeadline)
		c := exec.CommandContext(ctx, "sh", "-c", cmd)
		c.Dir, c.Env = dir, exampleEnv()
		var out, errOut strings.Builder
		c.Stdout, c.Stderr = &out, &errOut
		err := c.Run()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v (a hang ends at the deadline)\nstdout:\n%s\nstderr:\n%s", cmd, err, out.String(), errOut.String())
		}
		var wants []string
		for _, line := range strings.Split(strings.TrimSuffix(m[1], `\n`), `\n`) {
			want, ok := pipeAnswers[line]
			if !ok {
				t.Fatalf("%s: the test does not know what %q should answer (add it to pipeAnswers)", cmd, line)
			}
			wants = append(wants, want...)
		}
		inOrder(t, out.String(), wants...)
	}
}

// runJQExamples runs the trace log's jq examples on a trace log the
// gateway wrote in a piped conversation with the demo model, whose tool
// asks for approval: each must run, and the first find a model call.
func runJQExamples(t *testing.T, cmds []string) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("jq is not installed (.ci/run does not install it); the trace log's lines are decoded field by field in TestATurnWithAToolAndAnApprovalIsTraced")
	}
	dir := exampleCheckout(t)
	ctx, cancel := context.WithTimeout(context.Background(), terminalDeadline)
	defer cancel()
	gw := exec.CommandContext(ctx, filepath.Join(dir, "bin", "gateway"), "--config", "config.yaml")
	gw.Dir, gw.Env = dir, append(exampleEnv(), "SWITCHBOARD_TELEMETRY__TRACE_LOG__PATH=data/trace.jsonl")
	gw.Stdin = strings.NewReader("what time is it in Berlin?\ny\n")
	if out, err := gw.CombinedOutput(); err != nil {
		t.Fatalf("the gateway: %v\n%s", err, out)
	}
	for i, cmd := range cmds {
		c := exec.CommandContext(ctx, "sh", "-c", cmd)
		c.Dir = dir
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		if i == 0 && !strings.Contains(string(out), `"model_response"`) {
			t.Errorf("%s found no model call:\n%s", cmd, out)
		}
	}
}

// runGoInstallExample checks what go install needs of the path (the
// module proxy is not reached from a test): it is this module's
// cmd/gateway, a main package, and the binary it names answers version.
func runGoInstallExample(t *testing.T, cmds []string) {
	path := strings.TrimSuffix(strings.Fields(cmds[0])[2], "@latest")
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	module := strings.TrimPrefix(strings.SplitN(string(mod), "\n", 2)[0], "module ")
	if path != module+"/cmd/gateway" {
		t.Errorf("go install %s: the module is %s, its command %s/cmd/gateway", path, module, module)
	}
	src, err := os.ReadFile("main.go")
	if err != nil || !strings.Contains(string(src), "\npackage main\n") {
		t.Errorf("cmd/gateway is not a main package: %v", err)
	}
	for _, cmd := range cmds[1:] {
		if cmd != "gateway version" {
			t.Fatalf("unexpected command after go install: %s", cmd)
		}
		out, err := exec.Command(gatewayBinary(t), "version").Output()
		if err != nil || !strings.HasPrefix(string(out), "Switchboard gateway ") {
			t.Errorf("gateway version: %q, %v", out, err)
		}
	}
}

// runWebsocatExample starts the README's gateway and types the block's
// frames into /ws as websocat would: hello is answered with ready, the
// input with the model's reply.
func runWebsocatExample(t *testing.T, cmds []string) {
	_, a := startExampleGateway(t, nil)
	// websocat sends the Origin of the URL it dials, as the check expects.
	url := strings.Replace(strings.Fields(cmds[0])[1], "127.0.0.1:8080", a, 1)
	conn, _, err := gws.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	defer conn.Close()
	for _, f := range cmds[1:] {
		var typed struct{ Type string }
		if err := json.Unmarshal([]byte(f), &typed); err != nil {
			t.Fatalf("the example's frame %s is not JSON: %v", f, err)
		}
		if err := conn.WriteMessage(gws.TextMessage, []byte(f)); err != nil {
			t.Fatal(err)
		}
		switch typed.Type {
		case "hello":
			readUntil(t, conn, func(f frame) bool { return f.Type == "ready" })
		case "input":
			readUntil(t, conn, func(f frame) bool {
				return f.Type == "message" && strings.Contains(string(f.Data), `"role":"assistant"`)
			})
		default:
			t.Fatalf("the test does not know what a %q frame should get back", typed.Type)
		}
	}
}

// startExampleGateway runs the built gateway in a copy of the repository
// with config.yaml, the args and the example environment plus env, and
// returns the copy and the address it listens on; it is killed when the
// test ends.
func startExampleGateway(t *testing.T, env []string, args ...string) (dir, addr string) {
	t.Helper()
	dir = exampleCheckout(t)
	log := &procLog{}
	log.dumpOnFailure(t)
	c := exec.Command(filepath.Join(dir, "bin", "gateway"), append([]string{"--config", "config.yaml"}, args...)...)
	c.Dir, c.Env = dir, append(exampleEnv(), env...)
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				listening <- m[1]
			}
		}
	}()
	select {
	case addr = <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not listen")
	}
	return dir, addr
}

// runOpenAICurlExamples runs docs/openai-api.md's curl commands with sh
// against the built gateway, its API enabled with the doc's first key
// (CI_OPENAI_KEY) and the offline demo model, and checks each answer: the
// models listed, a completion in the OpenAI shape, a stream ending in
// [DONE] after its usage.
func runOpenAICurlExamples(t *testing.T, cmds []string) {
	const key = "sk-example-key-of-the-docs-000000000"
	dir, a := startExampleGateway(t, []string{"CI_OPENAI_KEY=" + key},
		"--set", "listeners.openai.enabled=true", "--set", "listeners.openai.keys=[{name: ci, key_env: CI_OPENAI_KEY}]",
		"--set", "listeners.stdin.enabled=false")
	if len(cmds) != 3 {
		t.Fatalf("the doc has %d curl commands; this test checks three (models, a completion, a stream)", len(cmds))
	}
	outs := make([]string, len(cmds))
	for i, cmd := range cmds {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		sh := exec.CommandContext(ctx, "sh", "-c", strings.ReplaceAll(cmd, "127.0.0.1:8080", a))
		sh.Dir, sh.Env = dir, append(exampleEnv(), "CI_OPENAI_KEY="+key)
		out, err := sh.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		outs[i] = string(out)
	}
	var models struct {
		Data []struct{ ID, Object string }
	}
	if err := json.Unmarshal([]byte(outs[0]), &models); err != nil || !slices.ContainsFunc(models.Data, func(m struct{ ID, Object string }) bool {
		return m.ID == "assistant" && m.Object == "model"
	}) {
		t.Errorf("models: %v\n%s", err, outs[0])
	}
	var res struct {
		Object  string
		Choices []struct {
			Message      struct{ Role, Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		}
	}
	if err := json.Unmarshal([]byte(outs[1]), &res); err != nil || res.Object != "chat.completion" || len(res.Choices) != 1 ||
		!strings.Contains(res.Choices[0].Message.Content, "42") || res.Choices[0].FinishReason != "stop" {
		t.Errorf("completion: %v\n%s", err, outs[1])
	}
	events := strings.Split(strings.TrimSpace(outs[2]), "\n\n")
	if n := len(events); n < 4 || events[n-1] != "data: [DONE]" || !strings.Contains(events[n-2], `"usage"`) ||
		!strings.Contains(events[0], `"role":"assistant"`) || !strings.Contains(outs[2], "42") {
		t.Errorf("stream:\n%s", outs[2])
	}
}

// runOpenAIScript runs a doc's OpenAI API commands as one sh script
// (they share variables and files) against the built gateway, its API
// enabled with the doc's first key (CI_OPENAI_KEY) and the offline demo
// model, and returns the copy it ran in and the script's output.
func runOpenAIScript(t *testing.T, cmds []string) (dir string, out []byte) {
	const key = "sk-example-key-of-the-docs-000000000"
	dir, a := startExampleGateway(t, []string{"CI_OPENAI_KEY=" + key},
		"--set", "listeners.openai.enabled=true", "--set", "listeners.openai.keys=[{name: ci, key_env: CI_OPENAI_KEY}]",
		"--set", "listeners.stdin.enabled=false")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-ec", strings.ReplaceAll(strings.Join(cmds, "\n"), "127.0.0.1:8080", a))
	sh.Dir, sh.Env = dir, append(exampleEnv(), "CI_OPENAI_KEY="+key)
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return dir, out
}

// runOpenAISessionExample runs docs/openai-api.md's stored conversation
// as one sh script (its commands share a variable) against the built
// gateway, and checks that the second request is answered in the session
// the first opened, named by the response's header.
func runOpenAISessionExample(t *testing.T, cmds []string) {
	dir, out := runOpenAIScript(t, cmds)
	first, err := os.ReadFile(filepath.Join(dir, "headers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?im)^X-Switchboard-Session: (s_\S+)\r?$`).FindSubmatch(first)
	if m == nil {
		t.Fatalf("the first response names no session:\n%s", first)
	}
	if !regexp.MustCompile(`(?im)^X-Switchboard-Session: `+regexp.QuoteMeta(string(m[1]))+`\r?$`).Match(out) ||
		!strings.Contains(string(out), `"object":"chat.completion"`) || !strings.Contains(string(out), "48") {
		t.Errorf("the second request, in session %s:\n%s", m[1], out)
	}
	// The list, the output's last line, names the session.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var list struct {
		Object string
		Data   []struct{ ID, Model string }
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &list); err != nil || list.Object != "list" || len(list.Data) != 1 ||
		list.Data[0].ID != string(m[1]) || list.Data[0].Model != "assistant" {
		t.Errorf("the sessions listed: %v\n%s", err, lines[len(lines)-1])
	}
}

// runOpenAIProgressExample runs docs/openai-api.md's stream with the
// guide's tools' progress against the built gateway, and checks that the
// demo model's calculator call and its result come as chunks of their
// own before the answer.
func runOpenAIProgressExample(t *testing.T, cmds []string) {
	_, out := runOpenAIScript(t, cmds)
	var types []string
	for _, ev := range strings.Split(strings.TrimSpace(string(out)), "\n\n") {
		var c struct {
			Choices     []json.RawMessage
			Switchboard *struct{ Type string }
		}
		if data, ok := strings.CutPrefix(ev, "data: "); ok && json.Unmarshal([]byte(data), &c) == nil && c.Switchboard != nil {
			if len(c.Choices) != 0 {
				t.Errorf("a progress chunk with choices: %s", ev)
			}
			types = append(types, c.Switchboard.Type)
		}
	}
	if !slices.Equal(types, []string{"tool_call", "tool_response"}) || !strings.Contains(string(out), "42") || !strings.HasSuffix(strings.TrimSpace(string(out)), "data: [DONE]") {
		t.Errorf("progress %q; the stream:\n%s", types, out)
	}
}

// runOpenAIResponsesExample runs docs/openai-api.md's Responses API
// commands (runOpenAIScript), and checks them:
// a stored response, one continuing it by its id, and a stream of named
// events ending in response.completed.
func runOpenAIResponsesExample(t *testing.T, cmds []string) {
	dir, out := runOpenAIScript(t, cmds)
	raw, err := os.ReadFile(filepath.Join(dir, "first.json"))
	if err != nil {
		t.Fatal(err)
	}
	type response struct {
		ID, Object, Status string
		Store              bool
		Previous           string `json:"previous_response_id"`
		Output             []struct {
			Content []struct{ Type, Text string }
		}
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		}
	}
	text := func(r response) string {
		var b strings.Builder
		for _, o := range r.Output {
			for _, c := range o.Content {
				b.WriteString(c.Text)
			}
		}
		return b.String()
	}
	var first, second response
	if err := json.Unmarshal(raw, &first); err != nil || first.Object != "response" || first.Status != "completed" || !first.Store ||
		!strings.HasPrefix(first.ID, "resp_") || !strings.Contains(text(first), "42") || first.Usage.TotalTokens == 0 {
		t.Fatalf("the stored response: %v\n%s", err, raw)
	}
	// The second response is the first line of the output, the stream
	// the rest.
	line, stream, _ := strings.Cut(string(out), "\n")
	if err := json.Unmarshal([]byte(line), &second); err != nil || second.Previous != first.ID || !second.Store ||
		second.ID == first.ID || !strings.Contains(text(second), "48") {
		t.Errorf("the continued response, after %s: %v\n%s", first.ID, err, line)
	}
	events := strings.Split(strings.TrimSpace(stream), "\n\n")
	if n := len(events); n < 9 || !strings.HasPrefix(events[0], "event: response.created\n") ||
		!strings.HasPrefix(events[n-1], "event: response.completed\n") || !strings.Contains(events[n-1], `"total_tokens"`) ||
		!strings.Contains(stream, "42") {
		t.Errorf("stream:\n%s", stream)
	}
}

// envRefRE finds the variables a config example names for its secrets.
var envRefRE = regexp.MustCompile(`\w+_env:\s*(\w+)`)

// loadExampleConfig loads a YAML block as a config file on its own (the
// defaults fill the rest) with every variable it names set, as a reader
// following the doc would have them.
func loadExampleConfig(t *testing.T, b docBlock) {
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(b.text), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=/nonexistent"}
	for _, m := range envRefRE.FindAllStringSubmatch(b.text, -1) {
		env = append(env, m[1]+"=example-secret-of-at-least-thirty-two-bytes-000")
	}
	if _, err := config.Load(file, nil, env); err != nil {
		t.Errorf("%s does not load as a config file: %v\n%s", b, err, b.text)
	}
}

// loadExampleGuide loads a Markdown block with front matter as a guide
// file, and checks it against the built-in tools and the providers the
// README's config example names (main, and backup as the fallback).
func loadExampleGuide(t *testing.T, b docBlock) {
	if !strings.HasPrefix(b.text, "---\n") {
		t.Skip("Markdown without front matter is prose, not a guide")
	}
	name := "example" // a guide's name is its file's
	if m := regexp.MustCompile(`(?m)^name:\s*(\S+)`).FindStringSubmatch(b.text); m != nil {
		name = m[1]
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(b.text), 0o644); err != nil {
		t.Fatal(err)
	}
	// The guides it hands off to are its colleagues in the folder: each
	// is there, as the reader's folder would have it.
	if m := regexp.MustCompile(`(?m)^handoffs:\s*\[([^\]]*)\]`).FindStringSubmatch(b.text); m != nil {
		for _, other := range strings.Split(m[1], ",") {
			other = strings.TrimSpace(other)
			if err := os.WriteFile(filepath.Join(dir, other+".md"), []byte("---\ndescription: a colleague\n---\nYou help.\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, err := guides.LoadDir(dir)
	if err != nil {
		t.Fatalf("%s does not load as a guide: %v", b, err)
	}
	// Every tool the gateway can offer: the built-ins, the sandbox's, and
	// the MCP servers the docs' examples configure.
	all := append(tools.Builtins(time.Now), append(tools.MemoryTools(nil, time.Now), tools.RecallTool(nil))...)
	sb, err := sandbox.New(sandbox.Config{Enabled: true, Dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, sb.Tools()...)
	var names []string
	for _, tool := range all {
		names = append(names, tool.Name)
	}
	if err := c.Check([]string{"main", "backup"}, names, []string{"github", "docs"}); err != nil {
		t.Errorf("%s: %v", b, err)
	}
}

// loadExampleUnit checks the systemd unit: its Environment= settings are
// config keys that load over the configuration it installs
// (deploy/container.yaml, copied to /etc/switchboard/config.yaml).
func loadExampleUnit(t *testing.T, b docBlock) {
	if !strings.Contains(b.text, "[Service]") {
		t.Fatalf("%s: only systemd units are known as ini blocks", b)
	}
	env := []string{"GATEWAY_TOKEN=example-token"}
	for _, line := range strings.Split(b.text, "\n") {
		if v, ok := strings.CutPrefix(line, "Environment="); ok {
			env = append(env, v)
		}
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok && !strings.Contains(v, "--config /etc/switchboard/config.yaml") {
			t.Errorf("%s: ExecStart %q does not use the config the doc installs", b, v)
		}
	}
	if len(env) < 2 {
		t.Fatalf("%s: no Environment= settings found", b)
	}
	cfg, err := config.Load("../../deploy/container.yaml", nil, env)
	if err != nil {
		t.Fatalf("%s: its settings do not load: %v", b, err)
	}
	switch {
	case config.IsPostgres(cfg.Storage.DSN):
		// A replica's: its files go to the shared storage.data_dir, which
		// ProtectSystem=strict leaves read-only unless the unit says.
		if cfg.Storage.DataDir == "" || !strings.Contains(b.text, "\nReadWritePaths="+cfg.Storage.DataDir+"\n") {
			t.Errorf("%s: a replica's unit needs storage.data_dir (%q) and ReadWritePaths= naming it", b, cfg.Storage.DataDir)
		}
	case cfg.Storage.DSN != "/var/lib/switchboard/switchboard.db":
		t.Errorf("%s: storage.dsn is %q, not the StateDirectory", b, cfg.Storage.DSN)
	}
}

// composeRE tells a compose file from a configuration: services at the top.
var composeRE = regexp.MustCompile(`(?m)^services:\s*$`)

// loadExampleCompose checks a compose file: it parses (anchors and merge
// keys too); each gateway service's SWITCHBOARD_* settings load as config
// keys over the image's configuration (deploy/container.yaml) with its
// secrets set; a PostgreSQL storage.dsn names a service of the file; and
// a load balancer's configuration in it reaches every gateway on its port.
func loadExampleCompose(t *testing.T, b docBlock) {
	var file struct {
		Services map[string]struct {
			Image       string         `yaml:"image"`
			Environment map[string]any `yaml:"environment"`
		} `yaml:"services"`
		Configs map[string]struct {
			Content string `yaml:"content"`
		} `yaml:"configs"`
	}
	if err := yaml.Unmarshal([]byte(b.text), &file); err != nil {
		t.Fatalf("%s: not YAML: %v", b, err)
	}
	var proxies []string
	for _, c := range file.Configs {
		proxies = append(proxies, c.Content)
	}
	gateways := 0
	for name, svc := range file.Services {
		if !strings.HasPrefix(svc.Image, "switchboard") {
			continue
		}
		gateways++
		env := []string{"GATEWAY_TOKEN=example-token", "OPENAI_API_KEY=sk-example"}
		for k, v := range svc.Environment {
			env = append(env, fmt.Sprintf("%s=%v", k, v))
		}
		cfg, err := config.Load("../../deploy/container.yaml", nil, env)
		if err != nil {
			t.Errorf("%s: service %s: its settings do not load: %v", b, name, err)
			continue
		}
		if config.IsPostgres(cfg.Storage.DSN) {
			u, err := url.Parse(cfg.Storage.DSN)
			if _, ok := file.Services[u.Hostname()]; err != nil || !ok {
				t.Errorf("%s: service %s: storage.dsn's host %q is no service of the file", b, name, u.Hostname())
			}
		}
		_, port, _ := net.SplitHostPort(cfg.HTTP.Addr)
		for _, p := range proxies {
			if !strings.Contains(p, name+":"+port) {
				t.Errorf("%s: the load balancer's configuration does not reach %s:%s:\n%s", b, name, port, p)
			}
		}
	}
	if gateways == 0 {
		t.Errorf("%s: a compose file with no gateway (image switchboard…)", b)
	}
}
