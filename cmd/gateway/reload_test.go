package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// copyGuides is a folder of the shipped guides that a test may edit.
func copyGuides(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "guides")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"assistant.md", "support.md"} {
		data, err := os.ReadFile(filepath.Join("../../guides", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// replaceIn rewrites a file with old replaced by new, which must be there.
func replaceIn(t *testing.T, file, old, new string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s has no %q", file, old)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// reloads is switchboard_config_reloads_total{what, result} now.
func (s *server) reloads(what, result string) float64 {
	s.t.Helper()
	_, _, body := s.get("/metrics")
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "switchboard_config_reloads_total{") ||
			!strings.Contains(line, `what="`+what+`"`) || !strings.Contains(line, `result="`+result+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			s.t.Fatalf("metric line %q: %v", line, err)
		}
		return v
	}
	s.t.Fatalf("/metrics has no switchboard_config_reloads_total{what=%q,result=%q}", what, result)
	return 0
}

// waitReloads waits until n reloads of what ended with result (20 s at
// most, then the test fails).
func (s *server) waitReloads(what, result string, n float64) {
	s.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); s.reloads(what, result) < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			s.t.Fatalf("no %s reload ending %s (%v of %v)", what, result, s.reloads(what, result), n)
		}
	}
}

// hup sends SIGHUP.
func (s *server) hup() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		s.t.Fatal(err)
	}
}

// wsClient is a /ws connection that has said hello.
func wsClient(t *testing.T, s *server) *gws.Conn {
	t.Helper()
	c, _, err := gws.DefaultDialer.Dial("ws://"+s.addr+"/ws", http.Header{"Origin": {"http://" + s.addr}})
	if err != nil {
		t.Fatalf("dial /ws: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.WriteJSON(map[string]any{"type": "hello", "user": map[string]string{"name": "Ada"}}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, func(f frame) bool { return f.Type == "ready" })
	return c
}

// wsTurn sends text and reads until the answer is in and the session idle.
func wsTurn(t *testing.T, c *gws.Conn, id, text string) {
	t.Helper()
	if err := c.WriteJSON(map[string]any{"type": "input", "id": id, "text": text}); err != nil {
		t.Fatalf("sending %s on the same connection: %v", id, err)
	}
	readUntil(t, c, func(f frame) bool {
		return f.Type == "message" && strings.Contains(string(f.Data), `"role":"assistant"`)
	})
	readUntil(t, c, func(f frame) bool { return f.Type == "state" && strings.Contains(string(f.Data), `"idle"`) })
}

// lastSystemPrompt is the system message of the model's last request.
func lastSystemPrompt(t *testing.T, llm *openaitest.Server) string {
	t.Helper()
	system, ok := llm.LastSystem()
	if !ok {
		t.Fatal("the model was never called")
	}
	return system
}

// A guide edited on disk is the next turn's system prompt, on a /ws
// connection that stays open; a broken edit keeps the edited guide
// running, says the file and line on /readyz (still ready) and in the
// doctor, and counts as a failed reload.
func TestGuideEditedOnDiskTakesTheNextTurnOnAnOpenConnection(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	g, gdir := editableGateway(t, llm)
	s := g.serve([]string{"TEST_OPENAI_KEY=k"})
	c := wsClient(t, s)

	wsTurn(t, c, "m1", "hi")
	if p := lastSystemPrompt(t, llm); !strings.Contains(p, "You are a helpful, friendly assistant") {
		t.Fatalf("first system prompt = %.80q", p)
	}
	guide := filepath.Join(gdir, "assistant.md")
	replaceIn(t, guide, "You are a helpful, friendly assistant", "You are the reloaded assistant")
	s.waitReloads("guides", "ok", 1)
	wsTurn(t, c, "m2", "again")
	if p := lastSystemPrompt(t, llm); !strings.Contains(p, "You are the reloaded assistant") {
		t.Fatalf("after the edit the system prompt = %.80q, want the edited guide's", p)
	}

	// A typo on line 4: the edited guide runs on.
	replaceIn(t, guide, "temperature: 0.7", "temprature: 0.7")
	s.waitReloads("guides", "error", 1)
	ready := s.readyz(func(r readyzBody, code int) bool { return r.part("guides").State == "degraded" })
	if st := ready.part("guides"); !ready.Ready || !strings.Contains(st.Reason, guide+`:4: unknown key "temprature"`) {
		t.Fatalf("/readyz after a broken edit: %+v", ready)
	}
	wsTurn(t, c, "m3", "still there?")
	if p := lastSystemPrompt(t, llm); !strings.Contains(p, "You are the reloaded assistant") {
		t.Fatalf("after a broken edit the system prompt = %.80q, want the last good one", p)
	}
	// The doctor reads the files itself: it shows what the next reload
	// would do.
	var out, errOut strings.Builder
	err := run(context.Background(), []string{"doctor", "--config", g.config}, strings.NewReader(""), &out, &errOut,
		[]string{"TEST_OPENAI_KEY=k", "USER=tester"})
	if err == nil || !strings.Contains(out.String(), guide+`:4: unknown key "temprature"`) {
		t.Fatalf("gateway doctor: %v\n%s", err, out.String())
	}

	// Fixed, the guide is in again and /readyz says all is well.
	replaceIn(t, guide, "temprature: 0.7", "temperature: 0.7")
	s.waitReloads("guides", "ok", 2)
	s.readyz(func(r readyzBody, code int) bool { return r.part("guides").State == "up" })

	// The connection was never dropped: the same one is closed only by the
	// shutdown, with 1001.
	s.stop()
	var ce *gws.CloseError
	for {
		if _, _, err = c.ReadMessage(); err != nil {
			break
		}
	}
	if !errors.As(err, &ce) || ce.Code != gws.CloseGoingAway {
		t.Fatalf("the connection ended with %v, want the shutdown's 1001", err)
	}
}

// editableGateway is a gateway on llm whose guides are a copy, gdir, that
// the test may edit.
func editableGateway(t *testing.T, llm *openaitest.Server) (g *gateway, gdir string) {
	t.Helper()
	shipped, err := filepath.Abs("../../guides")
	if err != nil {
		t.Fatal(err)
	}
	gdir = copyGuides(t)
	g = newGateway(t, openAIProvider(llm), "")
	replaceIn(t, g.config, "  dir: "+shipped, "  dir: "+gdir)
	return g, gdir
}

// SIGHUP: a provider's base URL and model swapped for the next turn, a
// restart-only key named in a warning, a broken config.yaml changing
// nothing (with its file and line on /readyz).
func TestSIGHUPSwapsTheProviderAndNamesRestartOnlyKeys(t *testing.T) {
	llm, llm2 := openaitest.New(), openaitest.New()
	defer llm.Close()
	defer llm2.Close()
	g, gdir := editableGateway(t, llm)
	if err := os.WriteFile(filepath.Join(gdir, "pinned.md"), []byte("---\nprovider: main\n---\nYou use main.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := g.serve([]string{"TEST_OPENAI_KEY=k"})
	c := wsClient(t, s)
	wsTurn(t, c, "m1", "hi")

	replaceIn(t, g.config, llm.BaseURL(), llm2.BaseURL())
	replaceIn(t, g.config, "model: gpt-test", "model: gpt-swapped")
	replaceIn(t, g.config, "http:\n", "http:\n  idle_timeout: 61s\n")
	replaceIn(t, g.config, "guides:\n", "sessions:\n  max_live: 5\nguides:\n")
	s.hup()
	s.waitReloads("config", "ok", 1)
	before := len(llm.Requests())
	wsTurn(t, c, "m2", "again")
	if n := len(llm.Requests()); n != before {
		t.Fatalf("the old base URL got %d calls after the reload", n-before)
	}
	if reqs := llm2.Requests(); len(reqs) != 1 || reqs[0].Model != "gpt-swapped" {
		t.Fatalf("the new base URL got %d calls (%+v), want one for gpt-swapped", len(reqs), reqs)
	}

	// A broken file: nothing changes, and /readyz says where (still ready).
	good, err := os.ReadFile(g.config)
	if err != nil {
		t.Fatal(err)
	}
	replaceIn(t, g.config, "model: gpt-swapped", "model: [gpt-swapped")
	s.hup()
	s.waitReloads("config", "error", 1)
	ready := s.readyz(func(r readyzBody, code int) bool { return r.part("config").State == "degraded" })
	if st := ready.part("config"); !ready.Ready || !strings.Contains(st.Reason, "config.yaml:") {
		t.Fatalf("/readyz after a broken config.yaml: %+v", ready)
	}
	wsTurn(t, c, "m3", "still?")
	if reqs := llm2.Requests(); len(reqs) != 2 || reqs[1].Model != "gpt-swapped" {
		t.Fatalf("after a broken config the model got %+v, want the running one unchanged", reqs)
	}
	// A guide naming a provider the new config renames: refused whole,
	// the guides' check made before anything is put in force.
	if err := os.WriteFile(g.config, []byte(strings.Replace(string(good), "name: main", "name: renamed", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	s.hup()
	s.waitReloads("config", "error", 2)
	wsTurn(t, c, "m4", "and now?")
	if reqs := llm2.Requests(); len(reqs) != 3 {
		t.Fatalf("after a refused config the model got %d calls, want 3", len(reqs))
	}

	s.stop()
	logs := s.logs.String()
	for _, want := range []string{
		`config keys changed, take effect after a restart: http.idle_timeout`,
		`config reloaded`, `applied="providers, sessions.max_live"`,
		`config not reloaded: the running configuration is unchanged`,
		`guide \"pinned\"`, `provider \"main\" is not configured`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "take effect after a restart: http.idle_timeout, providers") {
		t.Error("providers were reported as needing a restart")
	}
}

// SIGHUP applies Slack's allow list to the next message: someone refused
// before is answered after.
func TestSIGHUPAppliesSlackAllowedUsers(t *testing.T) {
	fake := slacktest.New(t)
	g := newGateway(t, "  - name: main\n    kind: demo", fmt.Sprintf(
		"  slack: { enabled: true, bot_token_env: TEST_SLACK_BOT, app_token_env: TEST_SLACK_APP, api_url: %q, allowed_users: [U0ANN] }\n", fake.APIURL()))
	s := g.serve([]string{"TEST_SLACK_BOT=" + fake.BotToken(), "TEST_SLACK_APP=" + fake.AppToken()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fake.WaitForConnections(ctx, 1); err != nil {
		t.Fatalf("no Socket Mode connection: %v", err)
	}
	ask := func(text string) string {
		ev := fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: "U0BOB", Text: text})
		if _, err := fake.SendEvent(ev); err != nil {
			t.Fatal(err)
		}
		return ev["ts"].(string)
	}
	answered := func(root string) bool {
		for _, m := range fake.Thread("C1", root) {
			if m.User == fake.BotUserID() && strings.Contains(m.Text, "= 14") {
				return true
			}
		}
		return false
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s never came", what)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	refused := ask("what is 2*(3+4)?")
	waitFor("Bob's refusal", func() bool { return len(fake.Ephemerals("C1")) == 1 })
	if answered(refused) {
		t.Fatal("Bob, not allowed, was answered")
	}

	replaceIn(t, g.config, "allowed_users: [U0ANN]", "allowed_users: [U0ANN, U0BOB]")
	s.hup()
	s.waitReloads("config", "ok", 1)
	root := ask("what is 2*(3+4)?")
	waitFor("Bob's answer after the reload", func() bool { return answered(root) })
	if n := len(fake.Ephemerals("C1")); n != 1 {
		t.Fatalf("%d refusals, want only the one before the reload", n)
	}
	s.stop()
}

// SIGHUP puts a budget in force for the next turn, on a connection that
// stays open, and reports no restart for it.
func TestSIGHUPAppliesABudget(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	g, _ := editableGateway(t, llm)
	s := g.serve([]string{"TEST_OPENAI_KEY=k"})
	c := wsClient(t, s)
	wsTurn(t, c, "m1", "hi")

	replaceIn(t, g.config, "guides:\n", "budgets:\n  - { scope: overall, period: day, tokens: 1 }\nguides:\n")
	s.hup()
	s.waitReloads("config", "ok", 1)
	before := len(llm.Requests())
	if err := c.WriteJSON(map[string]any{"type": "input", "id": "m2", "text": "again"}); err != nil {
		t.Fatal(err)
	}
	got := readUntil(t, c, func(f frame) bool { return f.Type == "error" })
	if f := got[len(got)-1]; !strings.Contains(string(f.Data), "budget_exceeded") {
		t.Fatalf("after the reload: %s, want a budget_exceeded error", f.Data)
	}
	if n := len(llm.Requests()); n != before {
		t.Fatalf("the model was called %d more times after the budget was reached", n-before)
	}
	s.stop()
	logs := s.logs.String()
	if !strings.Contains(logs, `applied=budgets`) || strings.Contains(logs, "take effect after a restart") {
		t.Fatalf("budgets not reported as applied, or as needing a restart:\n%s", logs)
	}
}

// changedKeys names each key that differs, lists by entry; collapse makes
// them the keys an operator wrote.
func TestChangedKeys(t *testing.T) {
	a, err := config.Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := a
	b.HTTP.Addr = "127.0.0.1:9"
	b.Providers = []config.Provider{{Name: "x", Kind: "demo"}}
	b.Listeners.Slack.AllowedUsers = []string{"U1"}
	got := strings.Join(collapse(changedKeys(a, b)), ", ")
	if got != "http.addr, listeners.slack.allowed_users, providers" {
		t.Fatalf("changed keys = %s", got)
	}
	if keys := changedKeys(a, a); len(keys) != 0 {
		t.Fatalf("an unchanged config has changed keys %v", keys)
	}
	r := &reloader{}
	r.owned = []string{"listeners.slack.allowed_users"}
	for key, want := range map[string]bool{"providers[0].model": true, "providers.len": true, "listeners.slack.allowed_users[0]": true, "listeners.slack.allowed_users.len": true, "http.addr": false, "storage.dsn": false, "providersx": false} {
		if r.reloads(key) != want {
			t.Errorf("reloads(%s) = %v, want %v", key, !want, want)
		}
	}
}

// SIGHUP adds an MCP server (its tools offered to a guide that names
// them, its health on /readyz) and removes it; a removal while a guide
// still names the server is refused whole.
func TestSIGHUPAddsAndRemovesAnMCPServer(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	g, gdir := editableGateway(t, llm)
	s := g.serve([]string{"TEST_OPENAI_KEY=k", "TEST_TRACKER_TOKEN=trk-1"})

	withMCP := fmt.Sprintf("tools:\n  mcp:\n    - name: tracker\n      command: [%q]\n      env: { GATEWAY_TEST_MCP_SERVER: \"1\", TRACKER_TOKEN: \"${TEST_TRACKER_TOKEN}\" }\n", os.Args[0])
	plain, err := os.ReadFile(g.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.config, append(append([]byte(nil), plain...), withMCP...), 0o644); err != nil {
		t.Fatal(err)
	}
	s.hup()
	s.waitReloads("config", "ok", 1)
	s.readyz(func(r readyzBody, code int) bool { return r.part("mcp tracker").State == "up" })

	// A guide naming the server's tools comes in, and is offered them.
	guidesOK := s.reloads("guides", "ok")
	if err := os.WriteFile(filepath.Join(gdir, "triage.md"), []byte("---\ntools: [tracker.*]\napproval: { default: auto }\n---\nYou triage issues.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.waitReloads("guides", "ok", guidesOK+1)
	c, _, err := gws.DefaultDialer.Dial("ws://"+s.addr+"/ws", http.Header{"Origin": {"http://" + s.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteJSON(map[string]any{"type": "hello", "guide": "triage", "user": map[string]string{"name": "Ada"}}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, func(f frame) bool { return f.Type == "ready" })
	wsTurn(t, c, "m1", "anything new?")
	reqs := llm.Requests()
	var offered []string
	for _, tl := range reqs[len(reqs)-1].Tools {
		offered = append(offered, tl.Function.Name)
	}
	if got := strings.Join(offered, ","); got != "tracker__close_all,tracker__create_issue" {
		t.Fatalf("tools offered after the server was added: %s", got)
	}

	// Removed while triage names it: refused, the server runs on.
	if err := os.WriteFile(g.config, plain, 0o644); err != nil {
		t.Fatal(err)
	}
	s.hup()
	s.waitReloads("config", "error", 1)
	if st := s.readyz(func(r readyzBody, code int) bool { return true }).part("mcp tracker"); st.State != "up" {
		t.Fatalf("after a refused removal the server is %+v", st)
	}
	// The guide gone, the removal goes through: the server's part with it.
	guidesOK = s.reloads("guides", "ok")
	if err := os.Remove(filepath.Join(gdir, "triage.md")); err != nil {
		t.Fatal(err)
	}
	s.waitReloads("guides", "ok", guidesOK+1)
	s.hup()
	s.waitReloads("config", "ok", 2)
	s.readyz(func(r readyzBody, code int) bool { return r.part("mcp tracker").Name == "" })
	s.stop()
	if logs := s.logs.String(); !strings.Contains(logs, `tool \"tracker.*\": no MCP server \"tracker\" is configured`) {
		t.Errorf("the refused removal's reason is not in the log:\n%s", logs)
	}
}
