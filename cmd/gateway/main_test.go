package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/internal/pgtest"
	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// The tests run the gateway's own main in a child process (this test
// binary, re-executed), talking to it through pipes like a user would.
func TestMain(m *testing.M) {
	if os.Getenv("GATEWAY_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	if os.Getenv("GATEWAY_TEST_MCP_SERVER") == "1" {
		serveTestMCP() // mcp_test.go: an MCP server for the gateway to start
		os.Exit(0)
	}
	// A PostgreSQL server for the tests of replicas (doctor_postgres_test.go,
	// health_test.go, crashreplica_test.go): each test makes a database of
	// its own on it.
	pgtest.Main(m, &pg)
}

var pg *pgtest.Server

type gateway struct {
	t      *testing.T
	dir    string
	config string
}

func newGateway(t *testing.T, providerYAML string, extra string) *gateway {
	t.Helper()
	dir := t.TempDir()
	guidesDir, err := filepath.Abs("../../guides")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`http:
  addr: 127.0.0.1:0
storage:
  dsn: %s
providers:
%s
guides:
  dir: %s
  default: assistant
listeners:
  stdin: { enabled: true }
%s`, filepath.Join(dir, "data", "switchboard.db"), providerYAML, guidesDir, extra)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return &gateway{t: t, dir: dir, config: path}
}

// run starts the gateway with input on stdin and returns its output and
// logs once it exits.
func (g *gateway) run(input string, env ...string) (stdout, stderr string, err error) {
	g.t.Helper()
	cmd := exec.Command(os.Args[0], "--config", g.config)
	cmd.Env = append(hermeticEnv(), "GATEWAY_TEST_RUN_MAIN=1", "USER=tester")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// hermeticEnv drops anything that would configure the gateway from the
// developer's own environment.
func hermeticEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SWITCHBOARD_") || strings.HasPrefix(k, "OTEL_") || strings.HasSuffix(k, "_API_KEY") || k == "GATEWAY_TEST_RUN_MAIN" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func openAIProvider(llm *openaitest.Server) string {
	return fmt.Sprintf(`  - name: main
    kind: openai
    base_url: %s
    api_key_env: TEST_OPENAI_KEY
    model: gpt-test`, llm.BaseURL())
}

func TestPipeToolApprovalAndMemoryAcrossRestart(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	llm.Push(
		openaitest.Reply{Text: []string{"Let me look."}, ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "current_time", Args: `{"timezone":"Europe/Berlin"}`}}},
	)
	llm.Respond(func(r openaitest.Request) openaitest.Reply {
		last := r.Messages[len(r.Messages)-1]
		return openaitest.Reply{Text: []string{"It is ", openaitest.Text(last.Content)}}
	})
	g := newGateway(t, openAIProvider(llm), "")

	out, logs, err := g.runArgs([]string{"--session", "terminal"}, "what time is it?\ny\n")
	if err != nil {
		t.Fatalf("gateway failed: %v\nstdout:\n%s\nstderr:\n%s", err, out, logs)
	}
	for _, want := range []string{
		"Let me look.",
		`→ current_time {"timezone":"Europe/Berlin"}`,
		"Approve? [y/N/a=always]",
		"approved by tester",
		"← current_time: ",
		"It is 20",
		"Europe/Berlin",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(logs, "sk-test") {
		t.Error("the API key was logged")
	}

	// A restart remembers the conversation.
	llm.Respond(func(r openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Text: []string{"You asked the time."}}
	})
	out, logs, err = g.runArgs([]string{"--session", "terminal"}, "what did I ask?\n")
	if err != nil {
		t.Fatalf("second run failed: %v\n%s\n%s", err, out, logs)
	}
	if !strings.Contains(out, "You asked the time.") {
		t.Fatalf("second run output:\n%s", out)
	}
	reqs := llm.Requests()
	last := reqs[len(reqs)-1]
	var seen []string
	for _, m := range last.Messages {
		seen = append(seen, m.Role+":"+openaitest.Text(m.Content))
	}
	joined := strings.Join(seen, "\n")
	if !strings.Contains(joined, "user:what time is it?") || !strings.Contains(joined, "tool:") || !strings.Contains(joined, "user:what did I ask?") {
		t.Fatalf("the restarted gateway sent no memory of the first run:\n%s", joined)
	}
}

func TestPipeDenial(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	llm.Push(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "current_time", Args: `{}`}}})
	llm.Respond(func(r openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Text: []string{"Told: ", openaitest.Text(r.Messages[len(r.Messages)-1].Content)}}
	})
	g := newGateway(t, openAIProvider(llm), "")
	out, logs, err := g.run("time?\nn\n", "TEST_OPENAI_KEY=sk-test")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, logs)
	}
	if !strings.Contains(out, "denied by tester") || !strings.Contains(out, "the user denied this tool call") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestNoCredentialsAnswersWithTheLabelledDemoModel(t *testing.T) {
	g2 := newGateway(t, `  - name: main
    kind: openai
    api_key_env: TEST_UNSET_OPENAI_KEY
    fallback: demo
    model: gpt-4o-mini`, "")
	out, logs, err := g2.run("hello\n")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, logs)
	}
	if !strings.Contains(logs, "TEST_UNSET_OPENAI_KEY") || !strings.Contains(logs, "demo model") {
		t.Errorf("start-up did not say which variable enables a real model:\n%s", logs)
	}
	if !strings.Contains(out, "offline demo model") {
		t.Errorf("the demo reply is not labelled:\n%s", out)
	}
}

func TestDemoModelToolApprovalInPipe(t *testing.T) {
	g := demoGateway(t)
	out, logs, err := g.run("what time is it in Berlin?\ny\n")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, logs)
	}
	for _, want := range []string{`→ current_time {"timezone":"Europe/Berlin"}`, "Approve? [y/N/a=always]", "in Berlin (Europe/Berlin)."} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// What the tool tells the model is not shown to people as the answer.
	if strings.Contains(out, "The tool current_time says:") {
		t.Errorf("the demo model leaked model-facing text:\n%s", out)
	}
}

// demoGateway names a key variable that is not set, with the demo model
// as its fallback, so the demo model answers.
func demoGateway(t *testing.T) *gateway {
	return newGateway(t, `  - name: main
    kind: openai
    api_key_env: TEST_UNSET_OPENAI_KEY
    fallback: demo`, "")
}

// A provider whose key is not set, without fallback: demo, stops the
// gateway from starting, naming the provider and the variable: a typo in
// api_key_env must not put a production gateway on the demo model.
func TestUnsetKeyWithoutFallbackFailsStartUp(t *testing.T) {
	g := newGateway(t, `  - name: main
    kind: openai
    api_key_env: TEST_UNSET_OPENAI_KEY
    model: gpt-4o-mini`, "")
	out, logs, err := g.run("hello\n")
	if err == nil {
		t.Fatalf("started without the key:\n%s\n%s", out, logs)
	}
	for _, want := range []string{"providers[0] (main)", "TEST_UNSET_OPENAI_KEY", "fallback: demo"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(out, "offline demo model") {
		t.Errorf("the demo model answered:\n%s", out)
	}
}

func TestBadConfigurationFailsWithTheKeyNamed(t *testing.T) {
	g := newGateway(t, `  - name: main
    kind: demo`, "htpp:\n  addr: x\n")
	out, logs, err := g.run("")
	if err == nil {
		t.Fatalf("a config with an unknown key started:\n%s", out)
	}
	if !strings.Contains(logs, "htpp") {
		t.Fatalf("the error does not name the key:\n%s", logs)
	}
}

func TestGuideTypoFailsStartUpWithFileAndLine(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "assistant.md"), []byte("---\nname: assistant\ntemprature: 0.3\n---\nHi.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, "  - name: main\n    kind: demo", "")
	cmd := exec.Command(os.Args[0], "--config", g.config, "--set", "guides.dir="+dir)
	cmd.Env = append(hermeticEnv(), "GATEWAY_TEST_RUN_MAIN=1")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("started with a broken guide:\n%s", out)
	}
	if !strings.Contains(string(out), "assistant.md:3") || !strings.Contains(string(out), "temprature") {
		t.Fatalf("error does not name file, line and key:\n%s", out)
	}
}

func TestPipeCardChoiceByNumber(t *testing.T) {
	g := demoGateway(t)
	out, logs, err := g.run("show me some options\n3\n")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, logs)
	}
	for _, want := range []string{"┌ Try the demo", "[3] What is 2^10?", `→ calculator {"expression":"2^10"}`, "2^10 = 1024"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The gateway with the Discord listener on, wired as in production,
// against a fake Discord: a mention opens a thread answered by the demo
// model; a token variable that is not set stops start-up saying which.
func TestDiscordListenerInTheGateway(t *testing.T) {
	fake := discordtest.New(t)
	g := newGateway(t, "  - name: main\n    kind: demo", fmt.Sprintf(
		"  discord: { enabled: true, token_env: TEST_DISCORD_TOKEN, api_url: %q }\n", fake.APIURL()))
	if _, logs, err := g.run(""); err == nil || !strings.Contains(logs, "TEST_DISCORD_TOKEN is not set") {
		t.Fatalf("started without the token: %v\n%s", err, logs)
	}
	srv := g.serve([]string{"TEST_DISCORD_TOKEN=" + fake.Token()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fake.WaitForReady(ctx); err != nil {
		t.Fatalf("no Gateway session: %v\n%s", err, srv.logs)
	}
	m, err := fake.PostUserMessage(discordtest.UserMessage{AuthorID: "1400000000000000009", Content: "what is 2*(3+4)?", MentionBot: true})
	if err != nil {
		t.Fatal(err)
	}
	for {
		got, _ := fake.Message(m.ChannelID, m.ID)
		var text string
		if got.ThreadID != "" {
			for _, bm := range fake.Messages(got.ThreadID) {
				if bm.AuthorID == fake.BotUserID() {
					text += bm.Content
				}
			}
		}
		if strings.Contains(text, "= 14") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no answer in a thread (got %q)\n%s", text, srv.logs)
		case <-time.After(20 * time.Millisecond):
		}
	}
	srv.stop()
}

// The gateway with the Slack listener on, wired as in production, against
// a fake Slack: a mention is answered in its thread by the demo model; a
// token variable that is not set, or a token Slack refuses, stops
// start-up saying which.
func TestSlackListenerInTheGateway(t *testing.T) {
	fake := slacktest.New(t)
	g := newGateway(t, "  - name: main\n    kind: demo", fmt.Sprintf(
		"  slack: { enabled: true, bot_token_env: TEST_SLACK_BOT, app_token_env: TEST_SLACK_APP, api_url: %q }\n", fake.APIURL()))

	_, _, err := g.run("", "TEST_SLACK_APP="+fake.AppToken())
	if err == nil {
		t.Fatal("started without the bot token")
	}
	// A token Slack refuses leaves the gateway serving, the listener down:
	// /readyz says so with the variable to fix, and so does the metric;
	// /healthz (liveness) stays ok.
	bad := g.serve([]string{"TEST_SLACK_BOT=xoxb-wrong", "TEST_SLACK_APP=" + fake.AppToken()})
	ready := bad.readyz(func(r readyzBody, code int) bool {
		return code == http.StatusServiceUnavailable && r.part("slack").State == "down"
	})
	if st := ready.part("slack"); !strings.Contains(st.Reason, "bot token in the environment variable TEST_SLACK_BOT") || !strings.Contains(st.Reason, "invalid_auth") || !strings.Contains(st.Fix, "xoxb-") || ready.Ready {
		t.Fatalf("/readyz with a refused bot token: %+v", ready)
	}
	if ws := ready.part("websocket"); ws.State != "up" {
		t.Fatalf("/readyz: websocket %+v", ws)
	}
	if code, _, body := bad.get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if _, _, m := bad.get("/metrics"); !strings.Contains(m, `switchboard_component_up{component="slack",kind="listener"} 0`) {
		t.Fatalf("no metric of the listener down:\n%s", m)
	}
	// gateway status says the same, one line a part, and fails.
	var status, statusErr strings.Builder
	err = run(context.Background(), []string{"status", "--url", "http://" + bad.addr + "/readyz"}, strings.NewReader(""), &status, &statusErr, nil)
	if err == nil || !strings.Contains(err.Error(), "not ready: slack is down") {
		t.Fatalf("gateway status: %v\n%s", err, status.String())
	}
	for _, want := range []string{"NOT READY", "listener", "slack", "down", "fix: put the app's Bot User OAuth Token", "websocket"} {
		if !strings.Contains(status.String(), want) {
			t.Errorf("gateway status lacks %q:\n%s", want, status.String())
		}
	}
	bad.stop()

	srv := g.serve([]string{"TEST_SLACK_BOT=" + fake.BotToken(), "TEST_SLACK_APP=" + fake.AppToken()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fake.WaitForConnections(ctx, 1); err != nil {
		t.Fatalf("no Socket Mode connection: %v\n%s", err, srv.logs)
	}
	srv.readyz(func(r readyzBody, code int) bool {
		return code == http.StatusOK && r.Ready && r.part("slack").State == "up"
	})
	var ok strings.Builder
	if err := run(context.Background(), []string{"status", "--url", "http://" + srv.addr + "/readyz"}, strings.NewReader(""), &ok, io.Discard, nil); err != nil || !strings.Contains(ok.String(), ": ready") {
		t.Fatalf("gateway status of a ready gateway: %v\n%s", err, ok.String())
	}
	ev := fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: "U0ANN", Text: "what is 2*(3+4)?"})
	if _, err := fake.SendEvent(ev); err != nil {
		t.Fatal(err)
	}
	root := ev["ts"].(string)
	for {
		var text string
		for _, m := range fake.Thread("C1", root) {
			if m.User == fake.BotUserID() {
				text += m.Text
			}
		}
		if strings.Contains(text, "= 14") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no answer in the thread (got %q)\n%s", text, srv.logs)
		case <-time.After(20 * time.Millisecond):
		}
	}
	srv.stop()
}

// Slack's HTTP mode through the gateway's own server: a signed event at
// /slack/events is answered in its thread; a forged one is refused (401)
// and /slack/ is served whatever the Host guard says of other pages.
func TestSlackHTTPModeInTheGateway(t *testing.T) {
	fake := slacktest.New(t)
	g := newGateway(t, "  - name: main\n    kind: demo", fmt.Sprintf(
		"  slack: { enabled: true, mode: http, bot_token_env: TEST_SLACK_BOT, signing_secret_env: TEST_SLACK_SIGNING, api_url: %q }\n", fake.APIURL()))
	const secret = "test-signing-secret"
	srv := g.serve([]string{"TEST_SLACK_BOT=" + fake.BotToken(), "TEST_SLACK_SIGNING=" + secret})
	ev := fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: "U0ANN", Text: "what is 6*7?"})
	body, err := fake.EventCallback(ev)
	if err != nil {
		t.Fatal(err)
	}
	post := func(secret string) int {
		t.Helper()
		for {
			req, err := slacktest.SignedRequest("http://"+srv.addr+"/slack/events", secret, body, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable { // not connected to Slack yet
				return resp.StatusCode
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if code := post("forged"); code != http.StatusUnauthorized {
		t.Fatalf("a forged signature: %d", code)
	}
	if code := post(secret); code != http.StatusOK {
		t.Fatalf("a signed event: %d\n%s", code, srv.logs)
	}
	root := ev["ts"].(string)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var text string
		for _, m := range fake.Thread("C1", root) {
			if m.User == fake.BotUserID() {
				text += m.Text
			}
		}
		if strings.Contains(text, "= 42") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer in the thread (got %q)\n%s", text, srv.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.stop()
}
