package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/storage"
)

// The doctor is driven in-process through run, as main drives it, against
// the project's fakes: an OpenAI-compatible server (openaitest) and
// httptest servers speaking Anthropic's and Gemini's wire.

// doctorSetup is a configuration in a directory of its own: the database
// under dir/data (not created), ports chosen at start (always free).
type doctorSetup struct {
	dir, config, dsn string
	// env is the gateway's whole environment: nothing from the developer's,
	// and a PATH holding only a bwrap that works.
	env []string
}

func newDoctorSetup(t *testing.T, providersYAML, extra string) *doctorSetup {
	t.Helper()
	dir := t.TempDir()
	guidesDir, err := filepath.Abs("../../guides")
	if err != nil {
		t.Fatal(err)
	}
	s := &doctorSetup{dir: dir, dsn: filepath.Join(dir, "data", "switchboard.db")}
	cfg := fmt.Sprintf("http:\n  addr: 127.0.0.1:0\nmetrics:\n  addr: 127.0.0.1:0\nstorage:\n  dsn: %s\nproviders:\n%s\nguides:\n  dir: %s\n  default: assistant\n%s",
		s.dsn, providersYAML, guidesDir, extra)
	s.config = filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(s.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s.env = []string{"PATH=" + fakeBwrap(t, "#!/bin/sh\nexit 0\n"), "USER=tester"}
	return s
}

// fakeBwrap is a directory holding a bwrap that is the given script.
func fakeBwrap(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// doctor runs `gateway doctor --config … args…` with the setup's
// environment plus env.
func (s *doctorSetup) doctor(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	argv := append([]string{"doctor", "--config", s.config}, args...)
	err := run(context.Background(), argv, strings.NewReader(""), &out, &errOut, append(append([]string(nil), s.env...), env...))
	if errOut.Len() > 0 {
		t.Logf("stderr: %s", errOut.String())
	}
	return out.String(), err
}

// row is the named check's row with its continuation lines, and its status.
func row(t *testing.T, out, name string) (status, text string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		rest, ok := strings.CutPrefix(l, name+"  ")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		block := []string{l}
		for _, next := range lines[i+1:] {
			if !strings.HasPrefix(next, " ") {
				break
			}
			block = append(block, next)
		}
		return fields[0], strings.Join(block, "\n")
	}
	t.Fatalf("no %q row in:\n%s", name, out)
	return "", ""
}

// wantRow checks a row's status and that it says each of want.
func wantRow(t *testing.T, out, name, status string, want ...string) string {
	t.Helper()
	got, text := row(t, out, name)
	if got != status {
		t.Errorf("%s is %s, want %s:\n%s", name, got, status, out)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s row lacks %q:\n%s", name, w, text)
		}
	}
	return text
}

func openAIProviderKey(baseURL, keyEnv string) string {
	return fmt.Sprintf("  - name: main\n    kind: openai\n    base_url: %s\n    api_key_env: %s\n    model: gpt-test", baseURL, keyEnv)
}

// A key the provider accepts: the row is OK, one real call was made with
// the configured model, and neither the key nor anything else fails.
func TestDoctorGoodKeyIsOK(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	const key = "sk-doctor-good-key-4242"
	s := newDoctorSetup(t, openAIProviderKey(llm.BaseURL(), "TEST_OPENAI_KEY"), "")
	out, err := s.doctor(t, []string{"TEST_OPENAI_KEY=" + key})
	if err != nil {
		t.Fatalf("doctor failed: %v\n%s", err, out)
	}
	wantRow(t, out, "provider main", "OK", "gpt-test answered", "key from TEST_OPENAI_KEY", llm.BaseURL())
	wantRow(t, out, "config", "OK")
	wantRow(t, out, "guides", "OK", "assistant, support")
	wantRow(t, out, "database", "OK", s.dsn, "not created yet")
	wantRow(t, out, "bubblewrap", "OK")
	// One call for the provider's model (and one per other model a guide
	// asks of it; the repository's guides name none).
	if reqs := llm.Requests(); len(reqs) == 0 || reqs[0].Model != "gpt-test" {
		t.Errorf("the provider got %d requests (%+v), want the first for gpt-test", len(reqs), reqs)
	}
	if strings.Contains(out, key) {
		t.Errorf("the key was printed:\n%s", out)
	}
	if !strings.Contains(out, "No problems found.") {
		t.Errorf("no summary:\n%s", out)
	}
	// The doctor wrote nothing where the database goes.
	if _, err := os.Stat(filepath.Dir(s.dsn)); !os.IsNotExist(err) {
		t.Errorf("the doctor created %s: %v", filepath.Dir(s.dsn), err)
	}
}

// A key the provider refuses (401): PROBLEM, saying the key was refused and
// which variable holds it; the exit status is 1.
func TestDoctorBadKeyIsAProblem(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	llm.Push(openaitest.Reply{Status: http.StatusUnauthorized})
	s := newDoctorSetup(t, openAIProviderKey(llm.BaseURL(), "TEST_OPENAI_KEY"), "")
	out, err := s.doctor(t, []string{"TEST_OPENAI_KEY=sk-doctor-bad-key-4242"})
	if err == nil || !strings.Contains(err.Error(), "1 problem") {
		t.Fatalf("doctor = %v, want 1 problem:\n%s", err, out)
	}
	wantRow(t, out, "provider main", "PROBLEM", "the key was refused", "HTTP 401", "check TEST_OPENAI_KEY (providers[0].api_key_env)")
	if strings.Contains(out, "sk-doctor-bad-key-4242") {
		t.Errorf("the key was printed:\n%s", out)
	}
}

// A provider that echoes the key in its error (OpenAI quotes part of it):
// the doctor still never prints it.
func TestDoctorNeverPrintsAKeyTheProviderEchoes(t *testing.T) {
	const key = "sk-doctor-echoed-key-4242"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error","code":"invalid_api_key"}}`,
			strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}))
	defer srv.Close()
	s := newDoctorSetup(t, openAIProviderKey(srv.URL+"/v1", "TEST_OPENAI_KEY"), "")
	out, err := s.doctor(t, []string{"TEST_OPENAI_KEY=" + key})
	if err == nil {
		t.Fatalf("doctor passed with a refused key:\n%s", out)
	}
	wantRow(t, out, "provider main", "PROBLEM", "the key was refused", "Incorrect API key provided: [secret]")
	if strings.Contains(out, key) {
		t.Errorf("the key was printed:\n%s", out)
	}
}

// A provider nobody listens for (a closed port on 127.0.0.1): PROBLEM,
// saying it is unreachable and which base_url to check.
func TestDoctorDownProviderIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	base := "http://" + closed + "/v1"
	s := newDoctorSetup(t, openAIProviderKey(base, "TEST_OPENAI_KEY"), "")
	out, err := s.doctor(t, []string{"TEST_OPENAI_KEY=sk-test"})
	if err == nil {
		t.Fatalf("doctor passed with a provider that is down:\n%s", out)
	}
	wantRow(t, out, "provider main", "PROBLEM", "unreachable", "connection refused", "providers[0].base_url ("+base+")")
}

// No key set, with fallback: demo: a WARN naming the variable, saying the
// demo model answers meanwhile; that alone does not fail the run.
func TestDoctorNoKeyWarnsAndPasses(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: openai\n    api_key_env: TEST_UNSET_OPENAI_KEY\n    fallback: demo\n    model: gpt-4o-mini", "")
	out, err := s.doctor(t, nil)
	if err != nil {
		t.Fatalf("doctor failed: %v\n%s", err, out)
	}
	wantRow(t, out, "provider main", "WARN", "TEST_UNSET_OPENAI_KEY is not set", "demo model answers meanwhile")
	wantRow(t, out, "listener discord", "INFO", "not enabled")
	wantRow(t, out, "listener websocket", "OK", "on loopback only")
	if !strings.Contains(out, "No problems found; 1 warning") {
		t.Errorf("summary:\n%s", out)
	}
}

// No key set and no fallback: a PROBLEM, since the gateway will not start,
// naming the variable and both ways out.
func TestDoctorNoKeyWithoutFallbackIsAProblem(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: openai\n    api_key_env: TEST_UNSET_OPENAI_KEY\n    model: gpt-4o-mini", "")
	out, err := s.doctor(t, nil)
	if err == nil {
		t.Fatalf("doctor passed:\n%s", out)
	}
	wantRow(t, out, "provider main", "PROBLEM", "TEST_UNSET_OPENAI_KEY", "will not start", "fallback: demo")
}

// The Slack listener's tokens, asked of a fake Slack through slack-go:
// good tokens are OK and name the bot and workspace; a refused bot token
// and an unset variable are problems that say what to do.
func TestDoctorSlack(t *testing.T) {
	fake := slacktest.New(t)
	slackYAML := func(extra string) string {
		return fmt.Sprintf("listeners:\n  slack: { enabled: true, bot_token_env: TEST_SLACK_BOT, app_token_env: TEST_SLACK_APP, api_url: %q%s }\n", fake.APIURL(), extra)
	}
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", slackYAML(""))
	good := []string{"TEST_SLACK_BOT=" + fake.BotToken(), "TEST_SLACK_APP=" + fake.AppToken()}
	out, err := s.doctor(t, good)
	if err != nil {
		t.Fatalf("good tokens: %v\n%s", err, out)
	}
	wantRow(t, out, "listener slack", "OK", "bot @", "socket mode")
	if strings.Contains(out, fake.BotToken()) || strings.Contains(out, fake.AppToken()) {
		t.Errorf("a token was printed:\n%s", out)
	}

	out, err = s.doctor(t, []string{"TEST_SLACK_BOT=xoxb-wrong", "TEST_SLACK_APP=" + fake.AppToken()})
	if err == nil {
		t.Fatalf("a refused bot token passed:\n%s", out)
	}
	wantRow(t, out, "listener slack", "PROBLEM", "refused the bot token in the environment variable TEST_SLACK_BOT", "invalid_auth", "Bot User OAuth Token")
	if strings.Contains(out, "xoxb-wrong") {
		t.Errorf("the token was printed:\n%s", out)
	}

	// Swapped tokens are told as such, naming which variable holds which,
	// not as a network problem.
	out, err = s.doctor(t, []string{"TEST_SLACK_BOT=" + fake.AppToken(), "TEST_SLACK_APP=" + fake.BotToken()})
	if err == nil {
		t.Fatalf("swapped tokens passed:\n%s", out)
	}
	text := wantRow(t, out, "listener slack", "PROBLEM", "swapped", "TEST_SLACK_BOT (listeners.slack.bot_token_env) holds the app-level token (xapp-)", "TEST_SLACK_APP (listeners.slack.app_token_env) the bot token (xoxb-)")
	if strings.Contains(text, "network") {
		t.Errorf("swapped tokens blamed on the network: %s", text)
	}

	out, _ = s.doctor(t, []string{"TEST_SLACK_BOT=" + fake.BotToken()})
	wantRow(t, out, "listener slack", "PROBLEM", "TEST_SLACK_APP is not set")

	h := newDoctorSetup(t, "  - name: main\n    kind: demo", slackYAML(", mode: http, signing_secret_env: TEST_SLACK_SIGNING"))
	out, _ = h.doctor(t, good)
	wantRow(t, out, "listener slack", "PROBLEM", "TEST_SLACK_SIGNING is not set")
	out, err = h.doctor(t, append(good, "TEST_SLACK_SIGNING=s3cret"))
	if err != nil {
		t.Fatalf("http mode: %v\n%s", err, out)
	}
	wantRow(t, out, "listener slack", "OK", "http mode", "/slack/events")
}

// The Discord listener's token, asked of a fake Discord: a good one is OK
// and names the bot; a refused one and an unset variable are problems.
func TestDoctorDiscord(t *testing.T) {
	fake := discordtest.New(t)
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", fmt.Sprintf(
		"listeners:\n  discord: { enabled: true, token_env: TEST_DISCORD_TOKEN, api_url: %q }\n", fake.APIURL()))
	out, err := s.doctor(t, []string{"TEST_DISCORD_TOKEN=" + fake.Token()})
	if err != nil {
		t.Fatalf("a good token: %v\n%s", err, out)
	}
	wantRow(t, out, "listener discord", "OK", "bot @"+discordtest.DefaultBotUsername)
	if strings.Contains(out, fake.Token()) {
		t.Errorf("the token was printed:\n%s", out)
	}
	out, err = s.doctor(t, []string{"TEST_DISCORD_TOKEN=wrong-token"})
	if err == nil {
		t.Fatalf("a refused token passed:\n%s", out)
	}
	wantRow(t, out, "listener discord", "PROBLEM", "refused the bot token in the environment variable TEST_DISCORD_TOKEN")
	out, _ = s.doctor(t, nil)
	wantRow(t, out, "listener discord", "PROBLEM", "TEST_DISCORD_TOKEN is not set")

	// The Message Content intent off in the portal: the Gateway would
	// close with 4014 and the bot read nothing. The doctor reads the
	// application's flags and says where to turn it on.
	off := discordtest.New(t, discordtest.WithPrivilegedIntents(1<<1))
	s = newDoctorSetup(t, "  - name: main\n    kind: demo", fmt.Sprintf(
		"listeners:\n  discord: { enabled: true, token_env: TEST_DISCORD_TOKEN, api_url: %q }\n", off.APIURL()))
	out, err = s.doctor(t, []string{"TEST_DISCORD_TOKEN=" + off.Token()})
	if err == nil {
		t.Fatalf("the intent off passed:\n%s", out)
	}
	wantRow(t, out, "listener discord", "PROBLEM", "Message Content intent is off", "4014", "Privileged Gateway Intents")
}

// Anthropic's and Gemini's wire, through their SDK adapters: a good key is
// OK, a refused key (Anthropic: 401 authentication_error; Gemini: 400
// API_KEY_INVALID) is a PROBLEM naming the variable. Each call asks for one
// token.
func TestDoctorAnthropicAndGeminiKeys(t *testing.T) {
	const good = "doctor-good-key-4242"
	var mu sync.Mutex
	var maxTokens []float64
	note := func(r *http.Request, path ...string) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		var v any = body
		for _, p := range path {
			m, _ := v.(map[string]any)
			v = m[p]
		}
		n, _ := v.(float64)
		mu.Lock()
		maxTokens = append(maxTokens, n)
		mu.Unlock()
	}
	anthropic := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		note(r, "max_tokens")
		if r.Header.Get("X-Api-Key") != good {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range [][2]string{
			{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":1}}`},
			{"message_stop", `{"type":"message_stop"}`},
		} {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e[0], e[1])
		}
	}))
	defer anthropic.Close()
	gemini := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		note(r, "generationConfig", "maxOutputTokens")
		if r.Header.Get("X-Goog-Api-Key") != good {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"candidates":[{"content":{"parts":[{"text":"ok"}],"role":"model"},"finishReason":"MAX_TOKENS","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4},"modelVersion":"gemini-test"}`+"\r\n\r\n")
	}))
	defer gemini.Close()

	provider := func(name, kind, base, env, model string) string {
		return fmt.Sprintf("  - name: %s\n    kind: %s\n    base_url: %s\n    api_key_env: %s\n    model: %s\n", name, kind, base, env, model)
	}
	s := newDoctorSetup(t, provider("demo", "demo", anthropic.URL, "UNUSED", "x")+
		provider("claude", "anthropic", anthropic.URL, "TEST_ANTHROPIC_KEY", "claude-test")+
		provider("claude-bad", "anthropic", anthropic.URL, "TEST_ANTHROPIC_BAD_KEY", "claude-test")+
		provider("gem", "gemini", gemini.URL+"/", "TEST_GEMINI_KEY", "gemini-test")+
		provider("gem-bad", "gemini", gemini.URL+"/", "TEST_GEMINI_BAD_KEY", "gemini-test"), "")
	out, err := s.doctor(t, []string{"TEST_ANTHROPIC_KEY=" + good, "TEST_ANTHROPIC_BAD_KEY=doctor-bad-key-1",
		"TEST_GEMINI_KEY=" + good, "TEST_GEMINI_BAD_KEY=doctor-bad-key-2"})
	if err == nil || !strings.Contains(err.Error(), "2 problems") {
		t.Fatalf("doctor = %v, want 2 problems:\n%s", err, out)
	}
	wantRow(t, out, "provider demo", "OK", "offline demo model")
	wantRow(t, out, "provider claude", "OK", "claude-test answered")
	wantRow(t, out, "provider claude-bad", "PROBLEM", "the key was refused", "HTTP 401", "TEST_ANTHROPIC_BAD_KEY (providers[2].api_key_env)")
	wantRow(t, out, "provider gem", "OK", "gemini-test answered")
	wantRow(t, out, "provider gem-bad", "PROBLEM", "the key was refused", "HTTP 400", "TEST_GEMINI_BAD_KEY (providers[4].api_key_env)")
	for _, secret := range []string{good, "doctor-bad-key-1", "doctor-bad-key-2"} {
		if strings.Contains(out, secret) {
			t.Errorf("a key was printed (%s):\n%s", secret, out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(maxTokens) != 4 {
		t.Errorf("%d calls, want one per provider with a key (4)", len(maxTokens))
	}
	for _, n := range maxTokens {
		if n != 1 {
			t.Errorf("a call asked for %v tokens, want 1: %v", n, maxTokens)
		}
	}
}

// A data directory the gateway cannot write to: PROBLEM naming it. Root
// writes anywhere, so as root the doctor runs as nobody, from the built
// binary (see stampedGateway), in a child process.
func TestDoctorReadOnlyDataDir(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	dataDir := filepath.Dir(s.dsn)
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dataDir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dataDir, 0o755) })

	var out string
	var err error
	if os.Geteuid() != 0 {
		out, err = s.doctor(t, nil)
	} else {
		out, err = doctorAsNobody(t, s)
	}
	if err == nil {
		t.Fatalf("doctor passed with a read-only data directory:\n%s", out)
	}
	wantRow(t, out, "database", "PROBLEM", dataDir+" is not writable", "permission denied", "fix: make "+dataDir+" writable")
}

// doctorAsNobody runs the doctor as uid 65534 from the built binary, in
// directories nobody may read.
func doctorAsNobody(t *testing.T, s *doctorSetup) (string, error) {
	t.Helper()
	bin := stampedGateway(t)
	// The test's own directories (t.TempDir makes them 0700).
	for _, p := range []string{s.dir, filepath.Dir(s.dir)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, start := range []string{filepath.Dir(s.dir), filepath.Dir(bin)} {
		for p := start; p != "/"; p = filepath.Dir(p) {
			if st, err := os.Stat(p); err != nil || st.Mode().Perm()&0o005 != 0o005 {
				t.Skipf("%s is not reachable by nobody, so the doctor cannot run as nobody here", p)
			}
		}
	}
	guides, _ := filepath.Abs("../../guides")
	cmd := exec.Command(bin, "doctor", "--config", s.config, "--set", "guides.dir="+guides)
	cmd.Env = s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, io.Discard
	err := cmd.Run()
	return out.String(), err
}

// Ports: one held by another program is a PROBLEM for http.addr (the
// gateway would not start) and a WARN for metrics.addr (it serves without
// them); one where something answers /healthz "ok" is called a gateway.
func TestDoctorPortInUse(t *testing.T) {
	// Another program: it takes connections and closes them unanswered.
	held := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return ln.Addr().String()
	}
	httpAddr, metricsAddr := held(), held()
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	out, err := s.doctor(t, nil, "--set", "http.addr="+httpAddr, "--set", "metrics.addr="+metricsAddr)
	if err == nil {
		t.Fatalf("doctor passed with http.addr in use:\n%s", out)
	}
	wantRow(t, out, "http.addr", "PROBLEM", httpAddr+" is in use by another program", "the gateway will not start")
	wantRow(t, out, "metrics.addr", "WARN", metricsAddr+" is in use by another program", "without metrics")

	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			io.WriteString(w, "ok\n")
		}
	}))
	defer other.Close()
	addr := strings.TrimPrefix(other.URL, "http://")
	out, err = s.doctor(t, nil, "--set", "http.addr="+addr)
	if err == nil {
		t.Fatalf("doctor passed with http.addr held by another gateway:\n%s", out)
	}
	wantRow(t, out, "http.addr", "PROBLEM", "in use by another gateway (it answers /healthz)", "not the one using this database")
}

// Beside a running gateway (a real one, in a child process) on the same
// configuration: the database and both ports are in use by it, which is
// INFO, not a problem; and the gateway goes on serving, undisturbed.
func TestDoctorBesideARunningGateway(t *testing.T) {
	g := newGateway(t, "  - name: main\n    kind: demo", "")
	srv := g.serve(nil, "metrics.addr=127.0.0.1:0")
	dsn := filepath.Join(g.dir, "data", "switchboard.db")
	before := dirNames(t, filepath.Dir(dsn))

	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"doctor", "--config", g.config, "--set", "http.addr=" + srv.addr, "--set", "metrics.addr=" + srv.metricsAddr},
		strings.NewReader(""), &out, &errOut, []string{"PATH=" + fakeBwrap(t, "#!/bin/sh\nexit 0\n")})
	if err != nil {
		t.Fatalf("doctor beside a running gateway: %v\n%s%s", err, out.String(), errOut.String())
	}
	pid := fmt.Sprintf("(pid %d)", srv.cmd.Process.Pid)
	wantRow(t, out.String(), "database", "INFO", dsn+" is in use by a running gateway "+pid, "journal_mode WAL")
	wantRow(t, out.String(), "http.addr", "INFO", "in use by the running gateway "+pid, "/healthz")
	wantRow(t, out.String(), "metrics.addr", "INFO", "in use by the running gateway "+pid, "/metrics")

	if after := dirNames(t, filepath.Dir(dsn)); after != before {
		t.Errorf("the doctor changed the data directory: %s, was %s", after, before)
	}
	if code, _, body := srv.get("/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("after the doctor, /healthz = %d %q", code, body)
	}
	srv.stop() // a clean exit: its lock was never taken from it
}

func dirNames(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// An existing database nobody uses: it is read (header, schema version)
// without a file being added beside it; a file that is not a database is
// a PROBLEM.
func TestDoctorExistingDatabase(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	db, err := storage.Open(context.Background(), s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := dirNames(t, filepath.Dir(s.dsn))
	out, err := s.doctor(t, nil)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	wantRow(t, out, "database", "OK", s.dsn, "journal_mode WAL", "schema version", "no gateway is using it", "WAL works there")
	if after := dirNames(t, filepath.Dir(s.dsn)); after != before {
		t.Errorf("the doctor changed the data directory: %s, was %s", after, before)
	}

	if err := os.WriteFile(s.dsn, bytes.Repeat([]byte("not a database "), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = s.doctor(t, nil)
	if err == nil {
		t.Fatalf("doctor passed with a file that is not a database:\n%s", out)
	}
	wantRow(t, out, "database", "PROBLEM", "not an SQLite database")
}

// The database held by a store of this very process (as a gateway holds
// it): INFO naming the pid, and the store keeps its lock.
func TestDoctorDoesNotTakeTheLock(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	db, err := storage.Open(context.Background(), s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out, err := s.doctor(t, nil)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	wantRow(t, out, "database", "INFO", fmt.Sprintf("in use by a running gateway (pid %d)", os.Getpid()))
	if _, err := storage.Open(context.Background(), s.dsn); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("after the doctor, a second Open = %v; want it refused, the lock still held", err)
	}
}

// A configuration the gateway refuses is shown as it would show it; a
// secret kept in a SWITCHBOARD_* variable gets the advice to rename it.
func TestDoctorConfigErrors(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "htpp:\n  addr: x\n")
	out, err := s.doctor(t, nil)
	if err == nil {
		t.Fatalf("doctor passed a config with an unknown key:\n%s", out)
	}
	wantRow(t, out, "config", "PROBLEM", `unknown key "htpp"`)

	s = newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	out, err = s.doctor(t, []string{"SWITCHBOARD_BOT_TOKEN=doctor-secret-token"})
	if err == nil {
		t.Fatalf("doctor passed with SWITCHBOARD_BOT_TOKEN set:\n%s", out)
	}
	wantRow(t, out, "config", "PROBLEM", "SWITCHBOARD_BOT_TOKEN", "read as a config key", "rename it")
	if strings.Contains(out, "doctor-secret-token") {
		t.Errorf("the variable's value was printed:\n%s", out)
	}
}

// A guide naming a provider that is not configured stops start-up, and the
// doctor says which guide.
func TestDoctorGuideErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "assistant.md"), []byte("---\nname: assistant\nprovider: nowhere\n---\nHi.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	out, err := s.doctor(t, nil, "--set", "guides.dir="+dir)
	if err == nil {
		t.Fatalf("doctor passed a guide naming a missing provider:\n%s", out)
	}
	wantRow(t, out, "guides", "PROBLEM", `provider "nowhere" is not configured`, "assistant.md")
}

// bubblewrap: missing, or unable to create a namespace, is a WARN with the
// fix; neither fails the run. The bwrap used is the one on the PATH of the
// environment the gateway gets.
func TestDoctorBubblewrap(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	for _, c := range []struct {
		name, path, status string
		want               []string
	}{
		{"missing", t.TempDir(), "WARN", []string{"bwrap is not on PATH", "sandboxed python tool", "apt-get install bubblewrap"}},
		{"no namespaces", fakeBwrap(t, "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"), "WARN",
			[]string{"cannot create a sandbox: bwrap: No permissions to create new namespace", "user namespaces"}},
		{"works", fakeBwrap(t, "#!/bin/sh\n[ \"$*\" = '--ro-bind / / --unshare-all true' ] || exit 3\n"), "OK", []string{"can create a sandbox"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.env = []string{"PATH=" + c.path}
			out, err := s.doctor(t, nil)
			if err != nil {
				t.Fatalf("doctor: %v\n%s", err, out)
			}
			wantRow(t, out, "bubblewrap", c.status, c.want...)
		})
	}
}

// The container's configuration (deploy/container.yaml, copied into the
// image) passes the doctor once the token variable is set, and names that
// variable while it is not.
func TestDoctorContainerConfig(t *testing.T) {
	cfg, err := filepath.Abs("../../deploy/container.yaml")
	if err != nil {
		t.Fatal(err)
	}
	guides, _ := filepath.Abs("../../guides")
	dir := t.TempDir()
	env := []string{"PATH=" + fakeBwrap(t, "#!/bin/sh\nexit 0\n"),
		// What the image and compose.yaml give differently from a test.
		"SWITCHBOARD_STORAGE__DSN=" + filepath.Join(dir, "switchboard.db"), "SWITCHBOARD_GUIDES__DIR=" + guides,
		"SWITCHBOARD_HTTP__ADDR=0.0.0.0:0", "SWITCHBOARD_METRICS__ADDR=0.0.0.0:0"}
	s := &doctorSetup{dir: dir, config: cfg, env: env}

	out, err := s.doctor(t, nil)
	if err == nil {
		t.Fatalf("the container config passed without GATEWAY_TOKEN:\n%s", out)
	}
	wantRow(t, out, "listener websocket", "PROBLEM", "GATEWAY_TOKEN is not set")

	// In production a missing key stops start-up (no demo fallback here).
	out, err = s.doctor(t, []string{"GATEWAY_TOKEN=doctor-container-token-4242"})
	if err == nil || !strings.Contains(out, "1 problem") {
		t.Fatalf("the container config with GATEWAY_TOKEN and no OPENAI_API_KEY: %v\n%s", err, out)
	}
	wantRow(t, out, "listener websocket", "OK", "auth token (1 token)")
	wantRow(t, out, "provider main", "PROBLEM", "OPENAI_API_KEY", "will not start")
	wantRow(t, out, "listener stdin", "INFO", "not enabled")
	if strings.Contains(out, "doctor-container-token-4242") {
		t.Errorf("the token was printed:\n%s", out)
	}
}

// gateway healthcheck: exit 0 when /healthz answers ok, an error
// otherwise; without --url it asks the config's http.addr over loopback.
func TestDoctorHealthcheck(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" || !healthy.Load() {
			http.Error(w, "nope", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	hc := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"healthcheck"}, args...), strings.NewReader(""), &out, &errOut, nil)
		return out.String(), err
	}
	if out, err := hc("--url", srv.URL+"/healthz"); err != nil || out != "ok\n" {
		t.Errorf("healthy: %q, %v", out, err)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	if out, err := hc("--config", s.config, "--set", "http.addr=0.0.0.0:"+port); err != nil || out != "ok\n" {
		t.Errorf("healthy, from the config's 0.0.0.0 address: %q, %v", out, err)
	}
	healthy.Store(false)
	if _, err := hc("--url", srv.URL+"/healthz"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("unhealthy: %v, want an error naming the 503", err)
	}
}

// mcpHTTPServer is a Streamable HTTP MCP server with three tools, built on
// the SDK the gateway uses, that wants the bearer token given.
func mcpHTTPServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "docs", Version: "2.1"}, nil)
	for _, name := range []string{"search", "fetch", "outline"} {
		s.AddTool(&sdk.Tool{Name: name, Description: "docs " + name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: name}}}, nil
			})
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts
}

// Each MCP server has a row of its own, checked as start-up would start
// it: a stdio server started and listed (the tracker of mcp_test.go, this
// test binary), one whose program is not on PATH, one that exits at once
// (its stderr quoted), one whose ${VAR} is not set (on its row, not the
// guides'; the gateway itself refuses to start, naming it), a Streamable
// HTTP server that answers and one that answers 500.
func TestDoctorMCPServers(t *testing.T) {
	const docsToken = "docs-token-4242-secret"
	docs := mcpHTTPServer(t, docsToken)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream database unavailable", http.StatusInternalServerError)
	}))
	defer broken.Close()
	tracker := func(name, tokenVar string) string {
		return fmt.Sprintf("    - name: %s\n      command: [%q]\n      env: { GATEWAY_TEST_MCP_SERVER: \"1\", TRACKER_TOKEN: \"${%s}\" }\n", name, os.Args[0], tokenVar)
	}
	mcpYAML := "tools:\n  mcp:\n" +
		tracker("tracker", "TEST_TRACKER_TOKEN") +
		"    - name: missing\n      command: [switchboard-test-no-such-mcp, --stdio]\n" +
		"    - name: dies\n      command: [/bin/sh, -c, \"echo 'dies: starting' >&2; echo 'dies: TRACKER_TOKEN is required' >&2; exit 2\"]\n" +
		tracker("unset", "TEST_UNSET_TOKEN") +
		fmt.Sprintf("    - name: docs\n      url: %s/mcp\n      headers: { Authorization: \"Bearer ${TEST_DOCS_TOKEN}\" }\n", docs.URL) +
		fmt.Sprintf("    - name: broken\n      url: %s/mcp\n", broken.URL)
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", mcpYAML)
	env := []string{"TEST_TRACKER_TOKEN=trk-123", "TEST_DOCS_TOKEN=" + docsToken}
	out, err := s.doctor(t, env)
	if err == nil {
		t.Fatalf("doctor passed with MCP servers that fail:\n%s", out)
	}
	wantRow(t, out, "mcp tracker", "OK", "2 tools over stdio ("+os.Args[0]+")", "server tracker 1, protocol ", "tools listed in ")
	wantRow(t, out, "mcp missing", "PROBLEM", "the command switchboard-test-no-such-mcp is not on the gateway's PATH",
		"fix: install it, or give its full path in tools.mcp[missing].command")
	wantRow(t, out, "mcp dies", "PROBLEM", "the process exited during the MCP handshake (initialize) (exit status 2); its stderr ends:",
		"dies: starting", "dies: TRACKER_TOKEN is required", "fix: run it by hand to see why: /bin/sh -c")
	wantRow(t, out, "mcp unset", "PROBLEM", "${TEST_UNSET_TOKEN} (env.TRACKER_TOKEN) is not set in the gateway's environment, so the gateway will not start",
		"fix: export TEST_UNSET_TOKEN=… where the gateway runs")
	wantRow(t, out, "mcp docs", "OK", "3 tools over Streamable HTTP ("+docs.URL+"/mcp)", "server docs 2.1")
	wantRow(t, out, "mcp broken", "PROBLEM", "POST "+broken.URL+"/mcp answered 500 Internal Server Error to the MCP handshake (initialize)",
		"upstream database unavailable", "fix: the server failed")
	// The unset variable is the server's row only.
	if _, guides := row(t, out, "guides"); strings.Contains(guides, "TEST_UNSET_TOKEN") || strings.Contains(guides, "tools.mcp") {
		t.Errorf("the guides row reports the server's variable:\n%s", guides)
	}
	if n := strings.Count(out, "TEST_UNSET_TOKEN"); n != 2 {
		t.Errorf("TEST_UNSET_TOKEN is named %d times, want twice (the row and its fix):\n%s", n, out)
	}
	if strings.Contains(out, docsToken) || strings.Contains(out, "trk-123") {
		t.Errorf("a token was printed:\n%s", out)
	}

	// The gateway itself does not start so, and says which variable.
	g := newGateway(t, "  - name: main\n    kind: demo", "tools:\n  mcp:\n"+tracker("unset", "TEST_UNSET_TOKEN"))
	_, stderr, err := g.run("")
	if err == nil || !strings.Contains(stderr, "${TEST_UNSET_TOKEN} is not set") {
		t.Errorf("the gateway with an unset ${VAR}: %v\n%s", err, stderr)
	}
}

// A stdio server that does not answer the handshake is a problem once the
// doctor's --timeout is up, and it is stopped.
func TestDoctorMCPServerHangs(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "tools:\n  mcp:\n    - name: slow\n      command: [/bin/sleep, \"30\"]\n")
	start := time.Now()
	out, err := s.doctor(t, nil, "--timeout", "1s")
	if err == nil {
		t.Fatalf("doctor passed a server that does not answer:\n%s", out)
	}
	wantRow(t, out, "mcp slow", "PROBLEM", "no answer to the MCP handshake (initialize) within 1s, so the process was stopped", "it wrote nothing on stderr")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the doctor took %s", d)
	}
}
