package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// One conversation in every channel at once (issue 14), through the built
// binary: Alice starts it in the browser (/ws) and shares it; Carol joins
// from a Slack DM, Dan from a Discord DM, Terry from the gateway's own
// terminal. Each says something; each message reaches every other place
// exactly once, in the same order everywhere. Dan approves a tool call in
// Discord: the web and Slack see it decided by him. Alice makes Carol a
// viewer: Slack refuses Carol's next message and nobody sees it. The
// gateway is killed mid-turn and started again: the answer it was writing
// reaches Slack and Discord, and a new code still lets someone in.

// sharedModel answers "Noted M-X" to a message carrying the marker m-x (the
// markers are lower case, the answers upper case, so the one is never
// taken for the other), calls current_time for "time?", and after the
// tool, says what it said. "slow" answers are held until release.
func sharedModel(release <-chan struct{}) func(openaitest.Request) openaitest.Reply {
	marker := regexp.MustCompile(`m-[a-z0-9]+`)
	return func(r openaitest.Request) openaitest.Reply {
		last := r.Messages[len(r.Messages)-1]
		text := openaitest.Text(last.Content)
		if last.Role == "tool" {
			return openaitest.Reply{Text: []string{"The tool said: " + text}}
		}
		if strings.Contains(text, "time?") {
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_t", Name: "current_time", Args: `{"timezone":"UTC"}`}}}
		}
		if strings.Contains(text, "slow") {
			<-release
		}
		m := marker.FindString(text)
		return openaitest.Reply{Text: []string{"Noted ", strings.ToUpper(m), "."}}
	}
}

// terminalProc is a gateway whose standard input stays open: its terminal
// listener is one of the channels.
type terminalProc struct {
	*gatewayProc
	stdin io.WriteCloser
	mu    sync.Mutex
	out   bytes.Buffer
}

func (p *terminalProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *terminalProc) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *terminalProc) say(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatalf("terminal: %v", err)
	}
}

func startTerminalGateway(t *testing.T, bin, cfg string, log *procLog, env []string) *terminalProc {
	t.Helper()
	fmt.Fprintf(log, "=== %s gateway start #%d ===\n", time.Now().Format("15:04:05.000"), startCount.Add(1))
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Env = append(hermeticEnv(), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	tp := &terminalProc{stdin: in}
	w := &addrWatch{log: log, addr: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(tp, log), w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &gatewayProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	select {
	case p.addr = <-w.addr:
	case <-p.done:
		t.Fatalf("the gateway exited before listening: %v", p.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not listen within 30s")
	}
	tp.gatewayProc = p
	return tp
}

// eventually polls cond until it holds, or fails the test saying what.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// markersIn lists the lower-case markers (people's messages) in text, in
// order.
func markersIn(text string) []string {
	return regexp.MustCompile(`m-[a-z0-9]+`).FindAllString(text, -1)
}

func TestOneConversationInEveryChannel(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	llm.Respond(sharedModel(release))
	carol := slacktest.User{ID: "U0CAROL", Name: "carol", RealName: "Carol Smith", DisplayName: "Carol"}
	slack := slacktest.New(t, slacktest.WithUsers(carol))
	discord := discordtest.New(t)
	const dan = "1400000000000000042"
	discord.AddUser(discordtest.User{ID: dan, Username: "dan", GlobalName: "Dan"})

	dir := t.TempDir()
	guides, _ := filepath.Abs("../../guides")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`http:
  addr: 127.0.0.1:0
storage:
  dsn: %s
providers:
  - name: main
    kind: openai
    base_url: %s
    api_key_env: TEST_OPENAI_KEY
    model: gpt-test
guides:
  dir: %s
  default: assistant
listeners:
  stdin: { enabled: true }
  slack: { enabled: true, bot_token_env: TEST_SLACK_BOT, app_token_env: TEST_SLACK_APP, api_url: %q }
  discord: { enabled: true, token_env: TEST_DISCORD_TOKEN, api_url: %q }
`, filepath.Join(dir, "switchboard.db"), llm.BaseURL(), guides, slack.APIURL(), discord.APIURL())), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"TEST_OPENAI_KEY=sk-test", "TEST_SLACK_BOT=" + slack.BotToken(), "TEST_SLACK_APP=" + slack.AppToken(),
		"TEST_DISCORD_TOKEN=" + discord.Token(), "USER=terry"}
	bin := gatewayBinary(t)
	log := &procLog{}
	log.dumpOnFailure(t)
	gw := startTerminalGateway(t, bin, cfg, log, env)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := slack.WaitForConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := discord.WaitForReady(ctx); err != nil {
		t.Fatal(err)
	}

	// Alice, in the browser, starts and shares.
	alice := dialPeer(t, gw.addr, map[string]any{"type": "hello", "user": map[string]string{"id": "alice", "name": "Alice"}})
	aliceSays := func(id, text string) {
		t.Helper()
		alice.send(map[string]any{"type": "input", "id": id, "text": text})
	}
	aliceSaw := func(pred func(wsFrame) bool, what string) wsFrame {
		t.Helper()
		f, err := alice.until(30*time.Second, pred)
		if err != nil {
			t.Fatalf("the web never saw %s: %v\n%s", what, err, alice.history())
		}
		return f
	}
	answered := func(marker string) {
		t.Helper()
		aliceSaw(func(f wsFrame) bool {
			return f.Type == "message" && strings.Contains(string(f.Data), "Noted "+strings.ToUpper(marker))
		}, "the answer to "+marker)
	}
	aliceSays("1", "hello, m-first")
	answered("m-first")
	aliceSays("2", "/share approver uses 5")
	share := aliceSaw(func(f wsFrame) bool { return f.Type == "error" && strings.Contains(string(f.Data), "Invite code") }, "the invite code")
	var notice switchboard.ErrorData
	_ = json.Unmarshal(share.Data, &notice)
	code := regexp.MustCompile(`Invite code ([a-z2-7]{26})`).FindStringSubmatch(notice.Message)[1]
	if !strings.HasPrefix(notice.Link, "http://"+gw.addr+"/s/") {
		t.Errorf("the invite link is %q; want one at the gateway's address %s", notice.Link, gw.addr)
	}

	// Carol (Slack DM), Dan (Discord DM) and Terry (the terminal) join.
	const carolDM = "D0CAROLDM"
	if _, err := slack.SendEvent(slack.MessageEvent(slacktest.UserMessage{Channel: carolDM, User: carol.ID, Text: "join " + code})); err != nil {
		t.Fatal(err)
	}
	dm := discord.DM(dan)
	if _, err := discord.PostUserMessage(discordtest.UserMessage{ChannelID: dm.ID, AuthorID: dan, Content: "/join " + code}); err != nil {
		t.Fatal(err)
	}
	gw.say(t, "/join "+code)
	slackText := func() string {
		var b strings.Builder
		for _, m := range slack.Messages(carolDM) {
			if m.User == slack.BotUserID() {
				b.WriteString(m.Text + "\n")
			}
		}
		return b.String()
	}
	discordText := func() string {
		var b strings.Builder
		for _, m := range discord.Messages(dm.ID) {
			if m.AuthorID == discord.BotUserID() {
				b.WriteString(m.Content + "\n")
			}
		}
		return b.String()
	}
	eventually(t, "the recap in Slack", func() bool { return strings.Contains(slackText(), "m-first") })
	eventually(t, "the recap in Discord", func() bool { return strings.Contains(discordText(), "m-first") })
	eventually(t, "the recap in the terminal", func() bool { return strings.Contains(gw.stdout(), "m-first") })

	// Each writes, in turn; each message is answered before the next.
	aliceSays("3", "from the web, m-web")
	answered("m-web")
	if _, err := slack.SendEvent(slack.MessageEvent(slacktest.UserMessage{Channel: carolDM, User: carol.ID, Text: "from slack, m-slack"})); err != nil {
		t.Fatal(err)
	}
	answered("m-slack")
	if _, err := discord.PostUserMessage(discordtest.UserMessage{ChannelID: dm.ID, AuthorID: dan, Content: "from discord, m-discord"}); err != nil {
		t.Fatal(err)
	}
	answered("m-discord")
	gw.say(t, "from the terminal, m-term")
	answered("m-term")
	eventually(t, "every answer in Slack", func() bool { return strings.Contains(slackText(), "Noted M-TERM") })
	eventually(t, "every answer in Discord", func() bool { return strings.Contains(discordText(), "Noted M-TERM") })
	eventually(t, "every answer in the terminal", func() bool { return strings.Contains(gw.stdout(), "Noted M-TERM") })

	// Exactly once, in the same order, labelled with who and where; never
	// echoed into the place it was written in.
	var webSaw []string
	for seq := int64(1); seq <= alice.lastSeq; seq++ {
		if ev := alice.seen[seq]; ev.Type == "message" && strings.Contains(string(ev.Data), `"role":"user"`) {
			webSaw = append(webSaw, markersIn(string(ev.Data))...)
		}
	}
	all := []string{"m-first", "m-web", "m-slack", "m-discord", "m-term"}
	without := func(own string) []string {
		var out []string
		for _, m := range all {
			if m != own {
				out = append(out, m)
			}
		}
		return out
	}
	check := func(place string, got, want []string) {
		t.Helper()
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s shows the people's messages %v; want %v (each once, in order, not its own)", place, got, want)
		}
	}
	check("the web", webSaw, all)
	check("Slack", markersIn(slackText()), without("m-slack"))
	check("Discord", markersIn(discordText()), without("m-discord"))
	check("the terminal", markersIn(gw.stdout()), without("m-term"))
	for place, text := range map[string]string{"Slack": slackText(), "Discord": discordText(), "the terminal": gw.stdout()} {
		if place != "Slack" && !strings.Contains(text, "Carol · Slack") || place != "Discord" && !strings.Contains(text, "Dan · Discord") {
			t.Errorf("%s does not say who wrote from where:\n%s", place, text)
		}
	}

	// An approval shown everywhere, decided in Discord.
	aliceSays("4", "what is the time?")
	req := aliceSaw(func(f wsFrame) bool { return f.Type == "confirmation_request" }, "the approval request")
	var cr switchboard.ConfirmationRequestData
	_ = json.Unmarshal(req.Data, &cr)
	var card discordtest.Message
	eventually(t, "the approval card in Discord", func() bool {
		for _, m := range discord.Messages(dm.ID) {
			if strings.Contains(string(m.Components), "sb:approve:") {
				card = m
				return true
			}
		}
		return false
	})
	eventually(t, "the approval card in Slack", func() bool {
		for _, m := range slack.Messages(carolDM) {
			if strings.Contains(string(m.Blocks), `"sb_approve"`) {
				return true
			}
		}
		return false
	})
	var approve string
	for _, id := range regexp.MustCompile(`sb:approve:[^"]+`).FindAllString(string(card.Components), -1) {
		approve = id
	}
	if _, err := discord.ClickButton(dm.ID, card.ID, dan, approve); err != nil {
		t.Fatal(err)
	}
	res := aliceSaw(func(f wsFrame) bool { return f.Type == "confirmation_resolved" }, "the decision")
	var rd switchboard.ConfirmationResolvedData
	_ = json.Unmarshal(res.Data, &rd)
	if !rd.Approved || rd.By != "Dan" || rd.Channel != "discord" || rd.ConfirmationID != cr.ConfirmationID {
		t.Errorf("decided: %+v; want approved by Dan from discord", rd)
	}
	aliceSaw(func(f wsFrame) bool { return f.Type == "message" && strings.Contains(string(f.Data), "The tool said") }, "the tool's answer")
	eventually(t, "the Slack card decided by Dan, without buttons", func() bool {
		for _, m := range slack.Messages(carolDM) {
			if strings.Contains(m.Text+string(m.Blocks), "Approved by Dan") && !strings.Contains(string(m.Blocks), `"sb_approve"`) {
				return true
			}
		}
		return false
	})

	// Carol becomes a viewer: her next message is refused, privately.
	aliceSays("5", "/role Carol viewer")
	aliceSaw(func(f wsFrame) bool {
		return f.Type == "message" && strings.Contains(string(f.Data), "made Carol a viewer")
	}, "the role change")
	if _, err := slack.SendEvent(slack.MessageEvent(slacktest.UserMessage{Channel: carolDM, User: carol.ID, Text: "may I, m-viewer"})); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Carol told she may not write", func() bool {
		for _, e := range slack.Ephemerals(carolDM) {
			if strings.Contains(e.Text, "viewer") {
				return true
			}
		}
		return false
	})

	// Killed mid-turn: after the restart the answer reaches the bound
	// places, and a new code lets someone in.
	aliceSays("6", "a slow one, m-slow")
	aliceSaw(func(f wsFrame) bool { return f.Type == "state" && strings.Contains(string(f.Data), "thinking") }, "the slow turn start")
	gw.kill()
	releaseOnce.Do(func() { close(release) })
	gw = startTerminalGateway(t, bin, cfg, log, env)
	eventually(t, "the resumed answer in Slack", func() bool { return strings.Contains(slackText(), "Noted M-SLOW") })
	eventually(t, "the resumed answer in Discord", func() bool { return strings.Contains(discordText(), "Noted M-SLOW") })
	for place, text := range map[string]string{"Slack": slackText(), "Discord": discordText()} {
		if n := strings.Count(text, "Noted M-SLOW"); n != 1 {
			t.Errorf("%s shows the resumed answer %d times", place, n)
		}
		if strings.Contains(text, "m-viewer") {
			t.Errorf("%s shows the viewer's refused message", place)
		}
	}
	alice = dialPeer(t, gw.addr, map[string]any{"type": "hello", "session": alice.session, "resume_after": 0, "user": map[string]string{"id": "alice", "name": "Alice"}})
	aliceSays("7", "/share member uses 1")
	share = aliceSaw(func(f wsFrame) bool { return f.Type == "error" && strings.Contains(string(f.Data), "Invite code") }, "a new invite code")
	_ = json.Unmarshal(share.Data, &notice)
	code2 := regexp.MustCompile(`Invite code ([a-z2-7]{26})`).FindStringSubmatch(notice.Message)[1]
	const erinDM = "D0ERINDM"
	if _, err := slack.SendEvent(slack.MessageEvent(slacktest.UserMessage{Channel: erinDM, User: "U0ERIN", Text: "join " + code2})); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Erin's recap after the restart", func() bool {
		for _, m := range slack.Messages(erinDM) {
			if m.User == slack.BotUserID() && strings.Contains(m.Text, "M-SLOW") {
				return true
			}
		}
		return false
	})
	// Used up, and withdrawn: refused, binding nothing.
	if _, err := slack.SendEvent(slack.MessageEvent(slacktest.UserMessage{Channel: "D0FRANKDM", User: "U0FRANK", Text: "join " + code2})); err != nil {
		t.Fatal(err)
	}
	aliceSays("8", "/unshare")
	aliceSaw(func(f wsFrame) bool { return f.Type == "error" && strings.Contains(string(f.Data), "withdrawn") }, "the codes withdrawn")
	if _, err := discord.PostUserMessage(discordtest.UserMessage{ChannelID: discord.DM("1400000000000000077").ID, AuthorID: "1400000000000000077", Content: "/join " + code}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a used-up code refused", func() bool {
		for _, e := range slack.Ephemerals("D0FRANKDM") {
			if strings.Contains(e.Text, "used as many times") {
				return true
			}
		}
		return false
	})
	eventually(t, "a withdrawn code refused", func() bool {
		for _, m := range discord.Messages(discord.DM("1400000000000000077").ID) {
			if strings.Contains(m.Content, "withdrawn") {
				return true
			}
		}
		return false
	})
	gw.stdin.Close()
}
