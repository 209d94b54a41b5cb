package discord_test

// The listener end to end: the real discordgo (Gateway and REST) against
// the fake Discord in discordtest, the real session manager on SQLite, and
// a scripted model on loopback. discordgo's endpoints are process-wide
// (the listener points them at the fake): these tests do not run in
// parallel.

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/listeners/discord"
	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

const (
	alice = "1400000000000000001"
	bob   = "1400000000000000002"
)

type rig struct {
	t    *testing.T
	fake *discordtest.Server
	gw   *sessionstest.Gateway
	log  *slog.Logger
	cfg  discord.Config
	l    *discord.Listener
	stop func()
}

func newRig(t *testing.T, tune func(*discord.Config, *discordtest.Server)) *rig {
	t.Helper()
	return newRigWith(t, nil, tune)
}

// newTunedRig is newRig with the session manager's configuration changed
// by manager (limits, idle timeout).
func newTunedRig(t *testing.T, manager func(*sessions.Config)) *rig {
	t.Helper()
	return newRigWith(t, manager, nil)
}

func newRigWith(t *testing.T, manager func(*sessions.Config), tune func(*discord.Config, *discordtest.Server)) *rig {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	fake := discordtest.New(t,
		discordtest.WithUsers(discordtest.User{ID: alice, Username: "alice", GlobalName: "Alice"}, discordtest.User{ID: bob, Username: "bob", GlobalName: "Bob"}),
		discordtest.WithMembers(discordtest.Member{GuildID: discordtest.DefaultGuildID, UserID: alice, Nick: "Ali"},
			discordtest.Member{GuildID: discordtest.DefaultGuildID, UserID: bob}))
	gw := sessionstest.NewTuned(t, "../../guides", log, manager)
	cfg := discord.Config{Token: fake.Token(), APIURL: fake.APIURL(), EditInterval: 20 * time.Millisecond}
	if tune != nil {
		tune(&cfg, fake)
	}
	r := &rig{t: t, fake: fake, gw: gw, log: log, cfg: cfg}
	r.start()
	t.Cleanup(func() { r.stop() })
	return r
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// start runs a listener, created (so registered as the follower) before
// the manager recovers, as the gateway does.
func (r *rig) start() {
	r.t.Helper()
	l, err := discord.New(r.cfg, r.gw.Manager, r.log)
	if err != nil {
		r.t.Fatal(err)
	}
	r.l = l
	if err := r.gw.Manager.Recover(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	ready := len(r.fake.Identifies())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	r.stop = func() {
		cancel()
		if err := <-done; err != nil {
			r.t.Errorf("Run: %v", err)
		}
		r.stop = func() {}
	}
	r.eventually("the listener identified and registered its command", func() bool {
		return len(r.fake.Identifies()) > ready && r.fake.Calls(discordtest.RouteBulkOverwriteGlobalCommands) > 0
	})
}

func (r *rig) restart() {
	r.t.Helper()
	r.stop()
	r.gw.Restart()
	r.start()
}

func (r *rig) eventually(what string, cond func() bool) {
	r.t.Helper()
	waitFor(r.t, 15*time.Second, what, cond)
}

// waitFor polls cond until it holds, failing t after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// post is a person's message dispatched over the Gateway.
func (r *rig) post(m discordtest.UserMessage) discordtest.Message {
	r.t.Helper()
	msg, err := r.fake.PostUserMessage(m)
	if err != nil {
		r.t.Fatal(err)
	}
	return msg
}

// botMessages are the bot's messages in a channel.
func (r *rig) botMessages(channel string) []discordtest.Message {
	return botMessagesIn(r.fake, channel)
}

// botMessagesIn are the bot's messages in a channel of fake, ephemeral
// ones aside.
func botMessagesIn(fake *discordtest.Server, channel string) []discordtest.Message {
	var out []discordtest.Message
	for _, m := range fake.Messages(channel) {
		if m.AuthorID == fake.BotUserID() && !m.Ephemeral {
			out = append(out, m)
		}
	}
	return out
}

func allContent(msgs []discordtest.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Content + "\n")
	}
	return b.String()
}

// mention posts a mention in the default channel and returns the thread
// the bot opened from it.
func (r *rig) mention(user, text string) (discordtest.Message, string) {
	r.t.Helper()
	m := r.post(discordtest.UserMessage{AuthorID: user, Content: text, MentionBot: true})
	var thread string
	r.eventually("a thread opened from the mention", func() bool {
		got, _ := r.fake.Message(m.ChannelID, m.ID)
		thread = got.ThreadID
		return thread != ""
	})
	return m, thread
}

// A mention opens a thread from the message, named after it, and the
// answer streams in there by edits, in a handful of REST calls.
func TestMentionOpensAThread(t *testing.T) {
	r := newRig(t, func(c *discord.Config, _ *discordtest.Server) { c.EditInterval = time.Second })
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"It is ", "**noon** ", "in Tokyo."}})
	m, thread := r.mention(alice, "what time is it in Tokyo?")
	if thread != m.ID {
		t.Fatalf("thread %s, want the message's id %s", thread, m.ID)
	}
	ch, _ := r.fake.Channel(thread)
	if ch.ParentID != discordtest.DefaultChannelID || !strings.Contains(ch.Name, "what time is it in Tokyo") {
		t.Fatalf("thread %+v", ch)
	}
	r.eventually("the answer in the thread", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "It is **noon** in Tokyo.") })
	if n := len(r.botMessages(thread)); n != 1 {
		t.Fatalf("%d bot messages in the thread, want 1 edited into place", n)
	}
	if n := len(r.botMessages(discordtest.DefaultChannelID)); n != 0 {
		t.Fatalf("%d bot messages in the channel itself", n)
	}
	calls := r.fake.Calls(discordtest.RouteCreateMessage) + r.fake.Calls(discordtest.RouteEditMessage) + r.fake.Calls(discordtest.RouteStartThreadFromMessage)
	if calls > 5 {
		t.Errorf("%d REST calls for a short answer, want at most 5", calls)
	}
	req := r.gw.LLM.Requests()
	if got := openaitest.Text(req[0].Messages[len(req[0].Messages)-1].Content); got != "what time is it in Tokyo?" {
		t.Fatalf("the model was asked %q", got)
	}
}

// A reply in the thread needs no mention; a replayed MESSAGE_CREATE is
// answered once; channel chatter, bots and DMs are told apart.
func TestThreadRepliesReplayAndDM(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"First."}})
	m, thread := r.mention(alice, "start")
	r.eventually("the first answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "First.") })
	if err := r.fake.Redispatch(m.ChannelID, m.ID); err != nil {
		t.Fatal(err)
	}
	r.post(discordtest.UserMessage{AuthorID: alice, Content: "chatter without a mention"})
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Second."}})
	r.post(discordtest.UserMessage{ChannelID: thread, AuthorID: bob, Content: "a follow-up from Bob"})
	r.eventually("the follow-up's answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Second.") })
	if n := len(r.gw.LLM.Requests()); n != 2 {
		t.Fatalf("%d model calls, want 2 (the replay and the chatter are not answered)", n)
	}
	if n := len(r.fake.Threads()); n != 1 {
		t.Fatalf("%d threads, want 1", n)
	}

	dm := r.fake.DM(alice)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hi in private."}})
	r.post(discordtest.UserMessage{ChannelID: dm.ID, AuthorID: alice, Content: "hi"})
	r.eventually("the DM answer", func() bool { return strings.Contains(allContent(r.botMessages(dm.ID)), "Hi in private.") })
}

// A 9,000-character answer with a code block arrives whole, each message
// within 2,000 characters with its code blocks closed and reopened.
func TestLongAnswerContinues(t *testing.T) {
	r := newRig(t, nil)
	var lines []string
	for i := range 400 {
		lines = append(lines, fmt.Sprintf("x%03d = %d", i, i*i))
	}
	text := "Here:\n\n```python\n" + strings.Join(lines, "\n") + "\n```\n\nThat is all."
	var chunks []string
	for i := 0; i < len(text); i += 500 {
		chunks = append(chunks, text[i:min(i+500, len(text))])
	}
	r.gw.LLM.Push(openaitest.Reply{Text: chunks})
	_, thread := r.mention(alice, "code please")
	r.eventually("the end", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "That is all.") })
	msgs := r.botMessages(thread)
	if len(msgs) < 3 {
		t.Fatalf("%d messages for %d characters", len(msgs), len(text))
	}
	for i, m := range msgs {
		if n := len([]rune(m.Content)); n > 2000 {
			t.Errorf("message %d has %d characters", i, n)
		}
		if strings.Count(m.Content, "```")%2 != 0 {
			t.Errorf("message %d leaves a code block open:\n%s", i, m.Content)
		}
	}
	all := allContent(msgs)
	for _, l := range []string{lines[0], lines[200], lines[399]} {
		if !strings.Contains(all, l) {
			t.Errorf("%q is missing", l)
		}
	}
}

// approvalMessage finds the open approval in a thread.
func (r *rig) approvalMessage(thread string) (discordtest.Message, bool) {
	return approvalIn(r.botMessages(thread))
}

// approvalIn is the approval card among msgs.
func approvalIn(msgs []discordtest.Message) (discordtest.Message, bool) {
	for _, m := range msgs {
		if strings.Contains(string(m.Components), "sb:approve:") {
			return m, true
		}
	}
	return discordtest.Message{}, false
}

func customID(t *testing.T, m discordtest.Message, prefix string) string {
	t.Helper()
	var rows []struct {
		Components []struct {
			CustomID string `json:"custom_id"`
		} `json:"components"`
	}
	if err := json.Unmarshal(m.Components, &rows); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		for _, c := range row.Components {
			if strings.HasPrefix(c.CustomID, prefix) {
				return c.CustomID
			}
		}
	}
	t.Fatalf("no %s… in %s", prefix, m.Components)
	return ""
}

func (r *rig) click(thread, messageID, user, custom string) {
	r.t.Helper()
	in, err := r.fake.ClickButton(thread, messageID, user, custom)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.fake.WaitForAck(ctx, in.ID); err != nil {
		r.t.Fatalf("the click was not acknowledged: %v", err)
	}
}

// A tool that needs consent shows buttons; a click from someone who may
// not approve is acknowledged and refused privately, the buttons stay; the
// owner's click approves, the message loses its buttons and says who.
func TestApprovalByButton(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"Asia/Tokyo"}`}}},
		openaitest.Reply{Text: []string{"It is late in Tokyo."}},
	)
	_, thread := r.mention(alice, "time in Tokyo?")
	var card discordtest.Message
	r.eventually("the approval", func() (ok bool) { card, ok = r.approvalMessage(thread); return ok })
	approve := customID(t, card, "sb:approve:")

	r.click(thread, card.ID, bob, approve)
	r.eventually("Bob is told privately", func() bool {
		for _, m := range r.fake.Ephemerals(thread) {
			if strings.Contains(m.Content, "owner") {
				return true
			}
		}
		return false
	})
	if m, _ := r.fake.Message(thread, card.ID); !strings.Contains(string(m.Components), "sb:approve:") {
		t.Fatalf("the buttons went after a refused click: %s", m.Components)
	}

	r.click(thread, card.ID, alice, approve)
	r.eventually("the answer after approval", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "It is late in Tokyo.") })
	r.eventually("the approval edited", func() bool {
		m, _ := r.fake.Message(thread, card.ID)
		return !strings.Contains(string(m.Components), "sb:approve:") && strings.Contains(m.Content+string(m.Embeds), "Approved by")
	})
	for _, a := range r.fake.Acks() {
		if a.Latency > 3*time.Second {
			t.Errorf("an interaction acknowledged after %s", a.Latency)
		}
	}
}

// The same request approved from the web updates the Discord message.
func TestApprovalFromElsewhere(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{}`}}},
		openaitest.Reply{Text: []string{"Done."}},
	)
	_, thread := r.mention(alice, "time?")
	var card discordtest.Message
	r.eventually("the approval", func() (ok bool) { card, ok = r.approvalMessage(thread); return ok })
	b, err := r.gw.Manager.Binding(context.Background(), discord.Channel, thread)
	if err != nil {
		t.Fatal(err)
	}
	web := switchboard.Author{Channel: "web", ID: "carol", Name: "Carol"}
	sub, err := r.gw.Manager.Attach(context.Background(), sessions.AttachOptions{SessionID: b.SessionID, Author: web, Role: collaboration.Approver, AfterSeq: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := r.gw.Manager.Submit(context.Background(), b.SessionID, switchboard.Input{
		Kind: switchboard.InputConfirm, Author: web, ConfirmationID: sub.Ready.Pending[0].ConfirmationID, Approved: true,
	}); err != nil {
		t.Fatal(err)
	}
	r.eventually("the message edited", func() bool {
		m, _ := r.fake.Message(thread, card.ID)
		return strings.Contains(m.Content+string(m.Embeds), "Carol") && !strings.Contains(string(m.Components), "sb:approve:")
	})
	r.eventually("the answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Done.") })
}

// A 429 on an edit is waited out; op 7 mid-answer resumes the Gateway and
// nothing is lost or doubled.
func TestRateLimitAndReconnectMidAnswer(t *testing.T) {
	r := newRig(t, nil)
	gate := make(chan struct{})
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Part one. ", "Part two."}, Gate: gate})
	_, thread := r.mention(alice, "go")
	r.eventually("the answer started", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Part one.") })
	r.fake.RateLimit(discordtest.RouteEditMessage, 500*time.Millisecond, 1, false)
	r.fake.Reconnect()
	close(gate)
	r.eventually("the whole answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Part one. Part two.") })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.fake.WaitForResumes(ctx, 1); err != nil {
		t.Fatalf("no RESUME after op 7: %v", err)
	}
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Still here."}})
	r.post(discordtest.UserMessage{ChannelID: thread, AuthorID: alice, Content: "still there?"})
	r.eventually("an answer after the resume", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Still here.") })
	if n := len(r.botMessages(thread)); n != 2 {
		t.Fatalf("%d bot messages, want 2", n)
	}
}

// A card from present: its button, a select and a form (a modal) come
// back as the person's actions.
func TestCardButtonSelectAndForm(t *testing.T) {
	r := newRig(t, nil)
	var opts []string
	for i := range 25 {
		opts = append(opts, fmt.Sprintf(`{"label":"City %d","value":"city-%d"}`, i, i))
	}
	card := `{"title":"Pick one","text":"Choose **well**.","buttons":[{"label":"Yes","value":"y"},{"label":"No","value":"n"}],
		"select":{"placeholder":"A city","options":[` + strings.Join(opts, ",") + `]},
		"form":{"submit_label":"Send","inputs":[{"name":"name","label":"Name","required":true},{"name":"note","label":"Note","type":"textarea"}]}}`
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "present", Args: card}}},
		openaitest.Reply{Text: []string{"Shown."}},
		openaitest.Reply{Text: []string{"You said yes."}},
		openaitest.Reply{Text: []string{"Nice city."}},
		openaitest.Reply{Text: []string{"Thanks, Ada."}},
	)
	_, thread := r.mention(alice, "a card")
	var msg discordtest.Message
	r.eventually("the card", func() bool {
		for _, m := range r.botMessages(thread) {
			if strings.Contains(string(m.Components), "sb:btn:") {
				msg = m
				return true
			}
		}
		return false
	})
	r.eventually("the model's answer to the card", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Shown.") })
	lastUser := func() string {
		req := r.gw.LLM.Requests()
		msgs := req[len(req)-1].Messages
		return openaitest.Text(msgs[len(msgs)-1].Content)
	}

	r.click(thread, msg.ID, alice, customID(t, msg, "sb:btn:"))
	r.eventually("the click's answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "You said yes.") })
	if got := lastUser(); !strings.Contains(got, `Clicked "Yes"`) {
		t.Fatalf("the model was told %q", got)
	}

	var sel struct {
		Components []struct {
			CustomID string `json:"custom_id"`
			Options  []struct {
				Label string `json:"label"`
				Value string `json:"value"`
			} `json:"options"`
		} `json:"components"`
	}
	var rows []json.RawMessage
	_ = json.Unmarshal(msg.Components, &rows)
	value, selID := "", ""
	for _, row := range rows {
		_ = json.Unmarshal(row, &sel)
		for _, c := range sel.Components {
			for _, o := range c.Options {
				if o.Label == "City 17" {
					value, selID = o.Value, c.CustomID
				}
			}
		}
	}
	if value == "" {
		t.Fatalf("no option City 17 in %s", msg.Components)
	}
	in, err := r.fake.ChooseOptions(thread, msg.ID, alice, selID, value)
	if err != nil {
		t.Fatal(err)
	}
	_ = in
	r.eventually("the choice's answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Nice city.") })
	if got := lastUser(); !strings.Contains(got, `Chose "City 17"`) {
		t.Fatalf("the model was told %q", got)
	}

	form := customID(t, msg, "sb:form:")
	r.click(thread, msg.ID, alice, form)
	var modal discordtest.Modal
	r.eventually("the modal", func() bool {
		ms := r.fake.Modals()
		if len(ms) == 0 {
			return false
		}
		modal = ms[len(ms)-1]
		return true
	})
	var data struct {
		Components []struct {
			Components []struct {
				CustomID string `json:"custom_id"`
			} `json:"components"`
		} `json:"components"`
	}
	if err := json.Unmarshal(modal.Raw, &data); err != nil || len(data.Components) != 2 {
		t.Fatalf("modal %s: %v", modal.Raw, err)
	}
	inputs := []string{data.Components[0].Components[0].CustomID, data.Components[1].Components[0].CustomID}
	if _, err := r.fake.SubmitModal(discordtest.ModalSubmitInteraction{
		ChannelID: thread, UserID: alice, CustomID: modal.CustomID, MessageID: msg.ID,
		Fields: []discordtest.ModalField{{CustomID: inputs[0], Value: "Ada"}, {CustomID: inputs[1], Value: "by the sea"}},
	}); err != nil {
		t.Fatal(err)
	}
	r.eventually("the form's answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Thanks, Ada.") })
	if got := lastUser(); !strings.Contains(got, "Ada") || !strings.Contains(got, "by the sea") {
		t.Fatalf("the model was told %q", got)
	}
}

// /switchboard is registered once per start; usage runs in the thread's
// conversation, help is for the caller alone.
func TestSlashCommand(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hi."}})
	_, thread := r.mention(alice, "hi")
	r.eventually("the answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Hi.") })
	if n := r.fake.Calls(discordtest.RouteBulkOverwriteGlobalCommands); n != 1 {
		t.Fatalf("commands registered %d times", n)
	}
	if !strings.Contains(string(r.fake.Commands("")), `"usage"`) {
		t.Fatalf("registered: %s", r.fake.Commands(""))
	}
	if _, err := r.fake.RunCommand(discordtest.CommandInteraction{ChannelID: thread, UserID: alice, Name: "switchboard",
		Options: []discordtest.CommandOption{discordtest.Subcommand("usage")}}); err != nil {
		t.Fatal(err)
	}
	r.eventually("/usage answered in the thread", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Tokens used in this session") })
}

// A restart between the request and the click: the button still works and
// the message is edited into the decision, its question gone; the tool
// call is one line of the answer, and nothing is posted twice.
func TestRestartBetweenRequestAndClick(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{}`}}},
		openaitest.Reply{Text: []string{"After the restart."}},
	)
	_, thread := r.mention(alice, "time?")
	var card discordtest.Message
	r.eventually("the approval", func() (ok bool) { card, ok = r.approvalMessage(thread); return ok })
	before := len(r.botMessages(thread))
	r.restart()
	r.click(thread, card.ID, alice, customID(t, card, "sb:approve:"))
	r.eventually("the answer with its tool line", func() bool {
		all := allContent(r.botMessages(thread))
		return strings.Contains(all, "After the restart.") && strings.Contains(all, "-# used current\\_time · ")
	})
	r.eventually("the approval edited", func() bool {
		m, _ := r.fake.Message(thread, card.ID)
		return !strings.Contains(string(m.Components), "sb:approve:")
	})
	msgs := r.botMessages(thread)
	if n := len(msgs); n != before+1 { // the answer
		t.Fatalf("%d bot messages after the restart, %d before: posted twice?\n%s", n, before, allContent(msgs))
	}
	checkNoToolMessages(t, msgs)
	if n := strings.Count(allContent(msgs), "used current"); n != 1 {
		t.Fatalf("the tool line shown %d times:\n%s", n, allContent(msgs))
	}
	m, _ := r.fake.Message(thread, card.ID)
	if shown := shows(m); strings.Contains(shown, "Approve `") || !strings.Contains(shown, "Tool call `current_time`") ||
		!regexp.MustCompile(`Approved by .* · <t:\d+:f>`).MatchString(shown) {
		t.Fatalf("the card decided after a restart: %s", shown)
	}
}

// Interactions over HTTP: a signed PING is answered PONG, a signed click
// approves, a forged one is refused (401) and changes nothing.
func TestHTTPInteractions(t *testing.T) {
	r := newRig(t, func(c *discord.Config, fake *discordtest.Server) { c.PublicKey = hex.EncodeToString(fake.PublicKey()) })
	srv := httptest.NewServer(r.l.Handler())
	defer srv.Close()
	url := srv.URL + discord.InteractionsPath
	ctx := context.Background()

	d, err := r.fake.PostInteraction(ctx, url, r.fake.NewPing())
	if err != nil || d.Status != http.StatusOK || !strings.Contains(string(d.Body), `"type":1`) {
		t.Fatalf("PING: %+v, %v", d, err)
	}

	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{}`}}},
		openaitest.Reply{Text: []string{"Over HTTP."}},
	)
	_, thread := r.mention(alice, "time?")
	var card discordtest.Message
	r.eventually("the approval", func() (ok bool) { card, ok = r.approvalMessage(thread); return ok })
	click, err := r.fake.NewComponentInteraction(discordtest.ComponentInteraction{ChannelID: thread, MessageID: card.ID, UserID: alice, CustomID: customID(t, card, "sb:approve:")})
	if err != nil {
		t.Fatal(err)
	}

	forged, err := discordtest.SignedInteraction(url, ed25519.NewKeyFromSeed(make([]byte, 32)), click.Payload, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(forged)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a forged signature: %d", resp.StatusCode)
	}
	if m, _ := r.fake.Message(thread, card.ID); !strings.Contains(string(m.Components), "sb:approve:") {
		t.Fatal("a forged click approved")
	}

	d, err = r.fake.PostInteraction(ctx, url, click)
	if err != nil || !d.Accepted {
		t.Fatalf("a signed click: %+v, %v", d, err)
	}
	r.eventually("the answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Over HTTP.") })
}

// A reply streams by edits no closer together than the edit interval, and
// the thread shows the typing indicator while the model thinks.
func TestEditsWithinTheRateAndTyping(t *testing.T) {
	const interval = 150 * time.Millisecond
	r := newRig(t, func(c *discord.Config, _ *discordtest.Server) { c.EditInterval = interval })
	var chunks []string
	for i := range 20 {
		chunks = append(chunks, fmt.Sprintf("word%d ", i))
	}
	r.gw.LLM.Push(openaitest.Reply{Text: chunks, Delay: 40 * time.Millisecond})
	_, thread := r.mention(alice, "slowly")
	r.eventually("the whole answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "word19") })
	var edits []time.Time
	for _, req := range r.fake.Requests(discordtest.RouteEditMessage) {
		if req.Params["channel.id"] == thread {
			edits = append(edits, req.Received)
		}
	}
	if len(edits) < 2 {
		t.Fatalf("%d edits: the reply did not stream", len(edits))
	}
	for i := 1; i < len(edits)-1; i++ { // the last edit is the final text, sent at once
		if gap := edits[i].Sub(edits[i-1]); gap < interval-20*time.Millisecond {
			t.Errorf("edits %d and %d %s apart, want at least %s", i-1, i, gap, interval)
		}
	}
	typed := false
	for _, ty := range r.fake.TypingCalls() {
		typed = typed || ty.ChannelID == thread
	}
	if !typed {
		t.Error("no typing indicator in the thread")
	}
}

// A global 429 holds back every request, from every thread, until its
// Retry-After has passed; nothing is lost. Thread B writes only once
// thread A's reply got the 429, so without the hold B's reply would go out
// at once.
func TestGlobalRateLimitBacksOffEverything(t *testing.T) {
	const retry = 3 * time.Second
	r := newRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"A opened."}}, openaitest.Reply{Text: []string{"B opened."}})
	_, a := r.mention(alice, "thread a")
	r.eventually("thread A answered", func() bool { return strings.Contains(allContent(r.botMessages(a)), "A opened.") })
	_, b := r.mention(bob, "thread b")
	r.eventually("thread B answered", func() bool { return strings.Contains(allContent(r.botMessages(b)), "B opened.") })

	r.fake.RateLimit(discordtest.RouteCreateMessage, retry, 1, true)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"A again."}})
	r.post(discordtest.UserMessage{ChannelID: a, AuthorID: alice, Content: "again"})
	var limited time.Time
	r.eventually("A's reply limited", func() bool {
		for _, req := range r.fake.Requests(discordtest.RouteCreateMessage) {
			if req.Status == http.StatusTooManyRequests {
				limited = req.Received
				return true
			}
		}
		return false
	})
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"B again."}})
	r.post(discordtest.UserMessage{ChannelID: b, AuthorID: bob, Content: "again"})
	r.eventually("both answers", func() bool {
		return strings.Contains(allContent(r.botMessages(a)), "A again.") && strings.Contains(allContent(r.botMessages(b)), "B again.")
	})
	// Thread B's requests are all made after the 429 was answered (A's
	// typing may have been on its way already).
	for _, route := range []string{discordtest.RouteCreateMessage, discordtest.RouteEditMessage, discordtest.RouteTriggerTyping} {
		for _, req := range r.fake.Requests(route) {
			if d := req.Received.Sub(limited); req.Params["channel.id"] == b && d > 0 && d < retry-200*time.Millisecond {
				t.Errorf("%s sent %s after a global 429 of %s", route, d, retry)
			}
		}
	}
}

// A Discord DM joins a conversation started on the web with an invite
// code: a recap, then the live exchange labelled with who and where; what
// is written in Discord reaches the web once.
func TestJoinASharedConversation(t *testing.T) {
	r := newRig(t, nil)
	web := switchboard.Author{Channel: "web", ID: "alice-web", Name: "Alice"}
	w := r.gw.Open(web, sessions.AttachOptions{})
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Before you came."}})
	w.Say("an early question")
	code := w.Share("member")
	dm := r.fake.DM(bob)
	r.post(discordtest.UserMessage{ChannelID: dm.ID, AuthorID: bob, Content: "/join " + code})
	r.eventually("the recap in the DM", func() bool {
		text := allContent(r.botMessages(dm.ID))
		return strings.Contains(text, "Before you came.") && strings.Contains(text, "Alice · Web")
	})
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Answer to Bob."}})
	r.post(discordtest.UserMessage{ChannelID: dm.ID, AuthorID: bob, Content: "hello from discord"})
	seen := 0
	deadline := time.After(15 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-w.Sub.Events():
			if ev.Type == switchboard.EventMessage && strings.Contains(string(ev.Data), "hello from discord") {
				seen++
			}
			done = ev.Type == switchboard.EventMessage && strings.Contains(string(ev.Data), "Answer to Bob.")
		case <-deadline:
			t.Fatal("the web never saw the Discord exchange")
		}
	}
	if seen != 1 {
		t.Fatalf("the web saw Bob's message %d times", seen)
	}
	r.eventually("the answer in the DM", func() bool { return strings.Contains(allContent(r.botMessages(dm.ID)), "Answer to Bob.") })
	if strings.Contains(allContent(r.botMessages(dm.ID)), "Bob · Discord") {
		t.Fatal("Bob's own message was echoed back to his DM")
	}
}

// Messages written in a thread reach its conversation in the order they
// were written, however fast they come: discordgo runs each event's
// handlers on a goroutine of its own unless told otherwise, which let two
// messages overtake each other.
func TestMessagesKeepTheirOrder(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Ready."}})
	_, th := r.mention(alice, "count with me")
	r.eventually("the first answer", func() bool { return strings.Contains(allContent(r.botMessages(th)), "Ready.") })
	const n = 40
	for i := range n {
		r.gw.LLM.Push(openaitest.Reply{Text: []string{fmt.Sprintf("ok %02d", i)}})
	}
	for i := range n {
		r.post(discordtest.UserMessage{ChannelID: th, AuthorID: alice, Content: fmt.Sprintf("m%02d", i)})
	}
	b, err := r.gw.Manager.Binding(context.Background(), discord.Channel, th)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	r.eventually("every message stored", func() bool {
		evs, err := r.gw.DB.EventsAfter(context.Background(), b.SessionID, 0, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, ev := range evs {
			var d switchboard.MessageData
			if ev.Type == switchboard.EventMessage && json.Unmarshal(ev.Data, &d) == nil && d.Role == switchboard.RoleUser && strings.HasPrefix(d.Content, "m") {
				got = append(got, d.Content)
			}
		}
		return len(got) == n
	})
	for i, m := range got {
		if want := fmt.Sprintf("m%02d", i); m != want {
			t.Fatalf("message %d stored as %s: the order was %v", i, m, got)
		}
	}
}
