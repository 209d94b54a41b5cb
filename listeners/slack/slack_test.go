package slack_test

// The listener end to end: the real slack-go client (Socket Mode and the Web
// API) against the fake Slack in slacktest, the real session manager on
// SQLite, and a scripted model on loopback.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// rig is a gateway with the Slack listener connected to a fake Slack.
type rig struct {
	t    *testing.T
	fake *slacktest.Server
	gw   *sessionstest.Gateway
	log  *slog.Logger
	cfg  slack.Config
	stop func() // stops the listener
}

var (
	alice = slacktest.User{ID: "U0ALICE", Name: "alice", DisplayName: "Alice"}
	bob   = slacktest.User{ID: "U0BOB", Name: "bob", RealName: "Bob Stone"}
)

func newRig(t *testing.T, tune func(*slack.Config)) *rig {
	t.Helper()
	return newTunedRig(t, nil, tune)
}

// newTunedRig is newRig with the session manager's configuration changed
// by manager (limits, idle timeout).
func newTunedRig(t *testing.T, manager func(*sessions.Config), tune func(*slack.Config)) *rig {
	t.Helper()
	return newTunedRigWith(t, manager, tune, nil, nil)
}

// newTunedRigWith is newTunedRig with options for the fake Slack, and the
// listener's log written to logs as well when it is not nil.
func newTunedRigWith(t *testing.T, manager func(*sessions.Config), tune func(*slack.Config), fakeOpts []slacktest.Option, logs io.Writer) *rig {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if logs != nil {
		log = slog.New(slog.NewTextHandler(logs, nil))
	}
	fake := slacktest.New(t, append([]slacktest.Option{slacktest.WithUsers(alice, bob)}, fakeOpts...)...)
	gw := sessionstest.NewTuned(t, "../../guides", log, manager)
	cfg := slack.Config{BotToken: fake.BotToken(), AppToken: fake.AppToken(), APIURL: fake.APIURL(), UpdateInterval: 20 * time.Millisecond}
	if tune != nil {
		tune(&cfg)
	}
	r := &rig{t: t, fake: fake, gw: gw, log: log, cfg: cfg}
	r.start()
	t.Cleanup(func() { r.stop() })
	return r
}

// start runs a listener; as the gateway does, it is created (and so
// registered as the follower) before the manager recovers.
func (r *rig) start() {
	r.t.Helper()
	l, err := slack.New(r.cfg, r.gw.Manager, r.log)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.gw.Manager.Recover(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	conns := r.fake.Connections()
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
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := r.fake.WaitForConnections(wctx, conns+1); err != nil {
		r.t.Fatalf("the listener did not connect over Socket Mode: %v", err)
	}
}

// restart stops the listener and the manager and starts both again on the
// same database, as a gateway restart does.
func (r *rig) restart() {
	r.t.Helper()
	r.stop()
	r.gw.Restart()
	r.start()
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// send delivers an Events API event over Socket Mode and checks it is
// acknowledged.
func (r *rig) send(event map[string]any) slacktest.Envelope {
	r.t.Helper()
	env, err := r.fake.SendEvent(event)
	if err != nil {
		r.t.Fatal(err)
	}
	r.acked(env)
	return env
}

func (r *rig) acked(env slacktest.Envelope) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.fake.WaitForAck(ctx, env.EnvelopeID); err != nil {
		r.t.Fatalf("envelope %s was not acknowledged: %v", env.EnvelopeID, err)
	}
}

// eventually polls until cond holds; the deadline only turns a hang into a
// failure.
func (r *rig) eventually(what string, cond func() bool, seen ...func() string) {
	r.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			for _, s := range seen {
				r.t.Log(s())
			}
			r.t.Fatalf("never happened: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// botReplies are the bot's messages in a thread (or a DM's top level).
func (r *rig) botReplies(channel, threadTS string) []slacktest.Message {
	var msgs []slacktest.Message
	if threadTS == "" {
		msgs = r.fake.Messages(channel)
	} else {
		msgs = r.fake.Thread(channel, threadTS)
	}
	var out []slacktest.Message
	for _, m := range msgs {
		if m.User == r.fake.BotUserID() {
			out = append(out, m)
		}
	}
	return out
}

// allText joins the bot's messages' text.
func allText(msgs []slacktest.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Text)
		b.WriteString("\n")
	}
	return b.String()
}

// streamModes are the two ways a reply grows: Slack's native streaming,
// and, where the workspace refuses it, one message edited at most once per
// interval.
var streamModes = []struct {
	name   string
	native bool
}{{"native", true}, {"edited", false}}

// newModeRig is a rig whose fake Slack streams natively or refuses to.
func newModeRig(t *testing.T, native bool, tune func(*slack.Config)) *rig {
	r := newRig(t, tune)
	if !native {
		r.fake.SetStartStreamError("feature_not_enabled")
	}
	return r
}

// A mention in a channel is answered in a thread under it, growing as the
// model writes, in a handful of Web API calls; the envelope is
// acknowledged.
func TestMentionIsAnsweredInAThread(t *testing.T) {
	for _, mode := range streamModes {
		t.Run(mode.name, func(t *testing.T) {
			r := newModeRig(t, mode.native, func(c *slack.Config) { c.UpdateInterval = time.Second })
			r.gw.LLM.Push(openaitest.Reply{Text: []string{"It is ", "**noon** ", "in Tokyo."}})
			ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "what time is it in Tokyo?"})
			r.send(ev)
			root := ev["ts"].(string)

			want := "It is *noon* in Tokyo." // mrkdwn
			if mode.native {
				want = "It is **noon** in Tokyo." // markdown_text, which Slack renders
			}
			r.eventually("the answer in the thread", func() bool {
				m := r.botReplies("C1", root)
				return len(m) > 0 && strings.TrimSpace(m[len(m)-1].Text) == want && !m[len(m)-1].Streaming
			})
			replies := r.botReplies("C1", root)
			if len(replies) != 1 {
				t.Fatalf("%d bot messages in the thread, want 1 (the answer grown in place): %q", len(replies), allText(replies))
			}
			if top := r.botReplies("C1", ""); len(top) != 1 || top[0].ThreadTS != root {
				t.Fatalf("the answer is not in the thread: %+v", top)
			}
			calls := 0
			for _, m := range []string{"chat.postMessage", "chat.update", "chat.startStream", "chat.appendStream", "chat.stopStream"} {
				calls += r.fake.Calls(m)
			}
			if mode.native && (r.fake.Calls("chat.startStream") != 1 || r.fake.Calls("chat.stopStream") != 1 || r.fake.Calls("chat.postMessage") != 0) {
				t.Errorf("native: %d starts, %d stops, %d posts", r.fake.Calls("chat.startStream"), r.fake.Calls("chat.stopStream"), r.fake.Calls("chat.postMessage"))
			}
			if calls > 5 {
				t.Errorf("%d Web API calls for one short answer, want at most 5", calls)
			}
			req := r.gw.LLM.Requests()
			if len(req) != 1 {
				t.Fatalf("%d model calls", len(req))
			}
			if got := openaitest.Text(req[0].Messages[len(req[0].Messages)-1].Content); got != "what time is it in Tokyo?" {
				t.Fatalf("the model was asked %q (the mention must be taken out)", got)
			}
		})
	}
}

// Slack redelivers an event it thinks was lost, and a mention in a thread
// comes as app_mention and message both: each message is answered once.
func TestRedeliveredEventIsAnsweredOnce(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Once."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "hello"})
	env := r.send(ev)
	root := ev["ts"].(string)
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Once.") })

	again, err := r.fake.Redeliver(env, "timeout")
	if err != nil {
		t.Fatal(err)
	}
	r.acked(again)
	// The same message as a message event (it carries the mention).
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, TS: root, Text: r.fake.Mention() + " hello"}))

	// A later message in the thread is answered: the redeliveries were
	// handled by then (one worker per thread, in order).
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Next."}})
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "and now?"}))
	r.eventually("the next answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Next.") })
	if n := len(r.gw.LLM.Requests()); n != 2 {
		t.Fatalf("%d model calls, want 2 (hello once, then the next message)", n)
	}
	if text := allText(r.botReplies("C1", root)); strings.Count(text, "Once.") != 1 {
		t.Fatalf("answered twice:\n%s", text)
	}
}

// A reply in the thread needs no mention; a channel message without one is
// not for the bot, and neither are bots' messages.
func TestThreadRepliesAndWhatIsIgnored(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"First."}}, openaitest.Reply{Text: []string{"Second."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "start"})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("the first answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "First.") })

	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "chatting without a mention"}))
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: r.fake.BotUserID(), ThreadTS: root, Text: "the bot's own echo"}))
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C2", User: alice.ID, ThreadTS: "1700000000.000001", Text: "a thread that is no session"}))
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: bob.ID, ThreadTS: root, Text: "a follow-up from Bob"}))
	r.eventually("the follow-up's answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Second.") })
	req := r.gw.LLM.Requests()
	if len(req) != 2 {
		t.Fatalf("%d model calls, want 2", len(req))
	}
	last := req[1].Messages[len(req[1].Messages)-1]
	if got := openaitest.Text(last.Content); !strings.Contains(got, "a follow-up from Bob") {
		t.Fatalf("the model got %q", got)
	}
}

// A DM needs no mention and is answered in the conversation itself, the
// streamed answer as a reply to the message (Slack streams only replies).
func TestDirectMessage(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hi Alice."}})
	q := r.fake.MessageEvent(slacktest.UserMessage{Channel: "D1", User: alice.ID, Text: "hi"})
	r.send(q)
	r.eventually("the answer in the DM", func() bool { return strings.Contains(allText(r.botReplies("D1", "")), "Hi Alice.") })
	if m := r.botReplies("D1", ""); m[0].ThreadTS != q["ts"] {
		t.Fatalf("a DM answer is not a reply to the message it answers: %+v", m[0])
	}
}

// approvalCard finds the open approval card in a thread.
func (r *rig) approvalCard(channel, root string) (slacktest.Message, bool) {
	for _, m := range r.botReplies(channel, root) {
		if strings.Contains(string(m.Blocks), `"sb_approve"`) {
			return m, true
		}
	}
	return slacktest.Message{}, false
}

func (r *rig) click(user, channel, ts, actionID string) {
	r.t.Helper()
	payload, err := r.fake.BlockActions(slacktest.BlockActionsSpec{User: user, Channel: channel, MessageTS: ts, Actions: []slacktest.Action{{ActionID: actionID}}})
	if err != nil {
		r.t.Fatal(err)
	}
	env, err := r.fake.SendInteraction(payload)
	if err != nil {
		r.t.Fatal(err)
	}
	r.acked(env)
}

// A tool that needs consent shows a card with buttons. Someone who may not
// approve is told so, privately, and the card stays open; the thread's
// owner approves, the card says so without buttons and the answer goes on.
func TestApprovalByButton(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"Asia/Tokyo"}`}}},
		openaitest.Reply{Text: []string{"It is late in Tokyo."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "time in Tokyo?"})
	r.send(ev)
	root := ev["ts"].(string)
	var card slacktest.Message
	r.eventually("the approval card", func() (ok bool) { card, ok = r.approvalCard("C1", root); return ok })
	for _, want := range []string{`"sb_deny"`, `"sb_always"`, "current_time"} {
		if !strings.Contains(string(card.Blocks), want) {
			t.Errorf("the card lacks %s: %s", want, card.Blocks)
		}
	}

	r.click(bob.ID, "C1", card.TS, "sb_approve")
	r.eventually("Bob is told he may not approve", func() bool {
		for _, e := range r.fake.Ephemerals("C1") {
			if e.User == bob.ID {
				return true
			}
		}
		return false
	})
	if m, _ := r.fake.Message("C1", card.TS); !strings.Contains(string(m.Blocks), `"sb_approve"`) {
		t.Fatalf("the card lost its buttons after a refused click: %s", m.Blocks)
	}

	r.click(alice.ID, "C1", card.TS, "sb_approve")
	r.eventually("the answer after approval", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "It is late in Tokyo.") })
	m, _ := r.fake.Message("C1", card.TS)
	if strings.Contains(string(m.Blocks), `"actions"`) || !strings.Contains(string(m.Blocks)+m.Text, "Approved by") || !strings.Contains(string(m.Blocks)+m.Text, "Alice") {
		t.Fatalf("the card after approval: %s / %q, want no buttons and who approved", m.Blocks, m.Text)
	}
}

// The same request answered from another channel (a web approver) updates
// the Slack card: the thread shows whatever happens to its session.
func TestApprovalFromElsewhereUpdatesTheCard(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{}`}}},
		openaitest.Reply{Text: []string{"Done."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "time?"})
	r.send(ev)
	root := ev["ts"].(string)
	var card slacktest.Message
	r.eventually("the approval card", func() (ok bool) { card, ok = r.approvalCard("C1", root); return ok })

	b, err := r.gw.Manager.Binding(context.Background(), slack.Channel, slacktest.DefaultTeamID+":C1:"+root)
	if err != nil {
		t.Fatal(err)
	}
	web := switchboard.Author{Channel: "web", ID: "carol", Name: "Carol"}
	sub, err := r.gw.Manager.Attach(context.Background(), sessions.AttachOptions{SessionID: b.SessionID, Author: web, Role: collaboration.Approver, AfterSeq: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if len(sub.Ready.Pending) != 1 {
		t.Fatalf("pending = %+v", sub.Ready.Pending)
	}
	if _, err := r.gw.Manager.Submit(context.Background(), b.SessionID, switchboard.Input{
		Kind: switchboard.InputConfirm, Author: web, ConfirmationID: sub.Ready.Pending[0].ConfirmationID, Approved: true,
	}); err != nil {
		t.Fatal(err)
	}
	r.eventually("the card updated", func() bool {
		m, _ := r.fake.Message("C1", card.TS)
		return strings.Contains(string(m.Blocks)+m.Text, "Carol") && !strings.Contains(string(m.Blocks), `"sb_approve"`)
	})
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Done.") })
}

// A very long answer is continued in the next messages, never cut: every
// word arrives, each message within what Slack takes, every call accepted.
func TestLongAnswerIsContinued(t *testing.T) {
	for _, mode := range streamModes {
		t.Run(mode.name, func(t *testing.T) {
			r := newModeRig(t, mode.native, nil)
			var words []string
			for i := range 10_000 {
				words = append(words, fmt.Sprintf("w%d", i))
			}
			var chunks []string
			for i := 0; i < len(words); i += 500 {
				chunks = append(chunks, strings.Join(words[i:min(i+500, len(words))], " ")+" ")
			}
			r.gw.LLM.Push(openaitest.Reply{Text: chunks})
			ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "write a lot"})
			r.send(ev)
			root := ev["ts"].(string)
			r.eventually("the last word", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "w9999") })
			replies := r.botReplies("C1", root)
			if len(replies) < 2 {
				t.Fatalf("%d messages for %d characters", len(replies), len(strings.Join(words, " ")))
			}
			got := strings.Fields(allText(replies))
			if strings.Join(got, " ") != strings.Join(words, " ") {
				t.Fatalf("the words arrived changed: %d words, want %d", len(got), len(words))
			}
			for _, m := range replies {
				limit := 4000 // what Slack shows of a message's text unfolded
				if m.MarkdownText {
					limit = 12_000 // markdown_text
				}
				if n := len([]rune(m.Text)); n > limit {
					t.Errorf("a message of %d characters", n)
				}
			}
		})
	}
}

// Slack's 429 is waited out as Retry-After says; the answer still arrives.
func TestRateLimitIsHonoured(t *testing.T) {
	r := newRig(t, nil)
	r.fake.RateLimit("chat.startStream", time.Second, 1)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"After the wait."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "hi"})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "After the wait.") })
	reqs := r.fake.Requests("chat.startStream")
	if len(reqs) < 2 {
		t.Fatalf("%d startStream calls, want the refused one and the retry", len(reqs))
	}
}

// Only the listed channels and users are answered; the others are told
// privately, and nothing reaches the model.
func TestAllowLists(t *testing.T) {
	r := newRig(t, func(c *slack.Config) { c.AllowedUsers = []string{alice.ID} })
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: bob.ID, Text: "hi"})
	r.send(ev)
	r.eventually("Bob is told", func() bool { return len(r.fake.Ephemerals("C1")) == 1 })
	if n := len(r.gw.LLM.Requests()); n != 0 {
		t.Fatalf("%d model calls for someone not allowed", n)
	}
}

// A restart between the approval request and the click: the button on the
// card posted before it still works, and the card is updated; the tool
// call is one line of the answer. A restart that lost the record of what
// was shown (killed between posting and recording) posts nothing twice,
// the tool line included: the thread's messages say what they show.
func TestRestartKeepsTheThread(t *testing.T) {
	for _, mode := range streamModes {
		t.Run(mode.name, func(t *testing.T) {
			r := newModeRig(t, mode.native, nil)
			r.gw.LLM.Push(
				openaitest.Reply{Text: []string{"Let me check."}, ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
				openaitest.Reply{Text: []string{"It is time."}},
			)
			ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "time?"})
			r.send(ev)
			root := ev["ts"].(string)
			var card slacktest.Message
			r.eventually("the approval card", func() (ok bool) { card, ok = r.approvalCard("C1", root); return ok })
			before := len(r.botReplies("C1", root))

			r.restart()
			r.click(alice.ID, "C1", card.TS, "sb_approve")
			r.eventually("the answer after the restart, with its tool line", func() bool {
				m := r.botReplies("C1", root)
				return strings.Contains(allText(m), "It is time.") && strings.Contains(showsAll(m), "used current_time") && !m[len(m)-1].Streaming
			})
			r.eventually("the old card updated", func() bool {
				m, _ := r.fake.Message("C1", card.TS)
				return strings.Contains(string(m.Blocks)+m.Text, "Approved by") && !strings.Contains(string(m.Blocks), `"sb_approve"`)
			})
			after := r.botReplies("C1", root)
			if strings.Count(allText(after), "Let me check.") != 1 {
				t.Fatalf("the first reply was posted again:\n%s", allText(after))
			}
			if n := strings.Count(showsAll(after), "used current_time"); n != 1 {
				t.Fatalf("the tool line shown %d times:\n%s", n, showsAll(after))
			}
			checkNoToolMessages(t, after)

			// Forget how far the thread was rendered, as a kill between posting
			// and recording would, and restart: everything is replayed, nothing
			// is posted twice.
			addr := slacktest.DefaultTeamID + ":C1:" + root
			b, err := r.gw.Manager.Binding(context.Background(), slack.Channel, addr)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.gw.DB.Unbind(context.Background(), slack.Channel, addr); err != nil {
				t.Fatal(err)
			}
			if err := r.gw.DB.Bind(context.Background(), switchboard.Binding{Channel: slack.Channel, Address: addr, SessionID: b.SessionID, CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			posts := r.fake.Calls("chat.postMessage")
			r.restart()
			r.eventually("the thread caught up", func() bool {
				b, _ := r.gw.Manager.Binding(context.Background(), slack.Channel, addr)
				return b.RenderedSeq > 0
			})
			r.eventually("the replay recorded to the end", func() bool {
				b, _ := r.gw.Manager.Binding(context.Background(), slack.Channel, addr)
				last, _ := r.gw.DB.LastSeq(context.Background(), b.SessionID)
				return b.RenderedSeq == last
			})
			if n := r.fake.Calls("chat.postMessage"); n != posts {
				t.Fatalf("the replay posted %d messages again:\n%s", n-posts, allText(r.botReplies("C1", root)))
			}
			if len(r.botReplies("C1", root)) != len(after) || before >= len(after) {
				for _, m := range r.botReplies("C1", root) {
					t.Logf("%s %q %s", m.TS, m.Text, m.Metadata)
				}
				t.Fatalf("thread: %d bot messages before the approval, %d after, %d after the replay", before, len(after), len(r.botReplies("C1", root)))
			}
			if n := strings.Count(showsAll(r.botReplies("C1", root)), "used current_time"); n != 1 {
				t.Fatalf("after the replay, the tool line shown %d times:\n%s", n, showsAll(r.botReplies("C1", root)))
			}
		})
	}
}

// cardMessage finds the bot's message holding a control.
func (r *rig) cardMessage(channel, root, actionID string) (slacktest.Message, bool) {
	for _, m := range r.botReplies(channel, root) {
		if strings.Contains(string(m.Blocks), `"`+actionID+`"`) {
			return m, true
		}
	}
	return slacktest.Message{}, false
}

func (r *rig) interact(payload map[string]any, err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
	env, err := r.fake.SendInteraction(payload)
	if err != nil {
		r.t.Fatal(err)
	}
	r.acked(env)
}

// lastUserText is what the model was last told by the user.
func (r *rig) lastUserText() string {
	req := r.gw.LLM.Requests()
	if len(req) == 0 {
		return ""
	}
	msgs := req[len(req)-1].Messages
	return openaitest.Text(msgs[len(msgs)-1].Content)
}

// A card from present shows in Block Kit; its button, its select (25
// options) and its form (a modal, opened with the click's trigger) come
// back to the model as the user's actions.
func TestCardsButtonsSelectAndForm(t *testing.T) {
	r := newRig(t, nil)
	var opts []string
	for i := range 25 {
		opts = append(opts, fmt.Sprintf(`{"label":"City %d","value":"city-%d"}`, i, i))
	}
	card := `{"title":"Pick one","text":"Choose **well**.","fields":[{"label":"Shop","value":"Main St"}],
		"buttons":[{"label":"Yes","value":"y","style":"primary"},{"label":"No","value":"n"}],
		"select":{"placeholder":"A city","options":[` + strings.Join(opts, ",") + `]},
		"form":{"submit_label":"Send","inputs":[{"name":"name","label":"Name","required":true},{"name":"note","label":"Note","type":"textarea"}]}}`
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "present", Args: card}}},
		openaitest.Reply{Text: []string{"Shown."}},
		openaitest.Reply{Text: []string{"You said yes."}},
		openaitest.Reply{Text: []string{"Nice city."}},
		openaitest.Reply{Text: []string{"Thanks, Ada."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "show me a card"})
	r.send(ev)
	root := ev["ts"].(string)
	var msg slacktest.Message
	r.eventually("the card", func() (ok bool) { msg, ok = r.cardMessage("C1", root, "sb_btn_0"); return ok })
	for _, want := range []string{`"header"`, "Pick one", "*well*", "Main St", `"static_select"`, "City 24", `"sb_form_0"`} {
		if !strings.Contains(string(msg.Blocks), want) {
			t.Errorf("the card lacks %s: %s", want, msg.Blocks)
		}
	}
	r.eventually("the model's answer to the card", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Shown.") })

	r.interact(r.fake.BlockActions(slacktest.BlockActionsSpec{User: alice.ID, Channel: "C1", MessageTS: msg.TS, Actions: []slacktest.Action{{ActionID: "sb_btn_0"}}}))
	r.eventually("the click's answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "You said yes.") })
	if got := r.lastUserText(); !strings.Contains(got, `Clicked "Yes"`) {
		t.Fatalf("the model was told %q", got)
	}

	choice := "city-17"
	// The option's value on the wire is its position, whatever the model chose.
	var wireValue string
	var blocks []map[string]any
	_ = json.Unmarshal(msg.Blocks, &blocks)
	for _, b := range blocks {
		els, _ := b["elements"].([]any)
		for _, e := range els {
			el, _ := e.(map[string]any)
			if el["action_id"] != "sb_sel_0" {
				continue
			}
			for _, o := range el["options"].([]any) {
				om := o.(map[string]any)
				if om["text"].(map[string]any)["text"] == "City 17" {
					wireValue = om["value"].(string)
				}
			}
		}
	}
	if wireValue == "" || len(wireValue) > 150 {
		t.Fatalf("option value %q", wireValue)
	}
	r.interact(r.fake.BlockActions(slacktest.BlockActionsSpec{User: alice.ID, Channel: "C1", MessageTS: msg.TS, Actions: []slacktest.Action{{ActionID: "sb_sel_0", SelectedValue: wireValue}}}))
	r.eventually("the choice's answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Nice city.") })
	if got := r.lastUserText(); !strings.Contains(got, `Chose "City 17"`) {
		t.Fatalf("the model was told %q (want the choice of %s)", got, choice)
	}

	r.interact(r.fake.BlockActions(slacktest.BlockActionsSpec{User: alice.ID, Channel: "C1", MessageTS: msg.TS, Actions: []slacktest.Action{{ActionID: "sb_form_0"}}}))
	var view slacktest.View
	r.eventually("the form's modal", func() bool {
		views := r.fake.Views()
		if len(views) == 0 {
			return false
		}
		view = views[len(views)-1]
		return true
	})
	r.interact(r.fake.ViewSubmission(slacktest.ViewSubmissionSpec{User: alice.ID, ViewID: view.ID, Values: map[string]map[string]string{
		"sb_in_0": {"sb_in_0": "Ada"}, "sb_in_1": {"sb_in_1": "by the sea"},
	}}))
	r.eventually("the form's answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Thanks, Ada.") })
	if got := r.lastUserText(); !strings.Contains(got, "Ada") || !strings.Contains(got, "by the sea") {
		t.Fatalf("the model was told %q", got)
	}
}

// /switchboard goes to the thread the person last wrote in (Slack sends
// commands without their thread) and is answered there; /reset starts a
// new conversation in the same thread; alone, it explains itself privately.
func TestSlashCommandAndReset(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hi."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "hi"})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Hi.") })
	addr := slacktest.DefaultTeamID + ":C1:" + root
	first, err := r.gw.Manager.Binding(context.Background(), slack.Channel, addr)
	if err != nil {
		t.Fatal(err)
	}

	command := func(user, text string) slacktest.Ack {
		t.Helper()
		env, err := r.fake.SendSlashCommand(r.fake.SlashCommand(user, "C1", "/switchboard", text))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ack, err := r.fake.WaitForAck(ctx, env.EnvelopeID)
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	if ack := command(alice.ID, ""); !strings.Contains(string(ack.Payload), "ephemeral") || !strings.Contains(string(ack.Payload), "last wrote in") {
		t.Fatalf("/switchboard alone: %s", ack.Payload)
	}
	if ack := command(bob.ID, "usage"); !strings.Contains(string(ack.Payload), "Which conversation") {
		t.Fatalf("a command from someone who wrote nowhere here: %s", ack.Payload)
	}
	command(alice.ID, "usage")
	r.eventually("/usage answered in the thread", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Tokens used in this session") })

	command(alice.ID, "reset")
	r.eventually("the thread bound to a new conversation", func() bool {
		b, err := r.gw.Manager.Binding(context.Background(), slack.Channel, addr)
		return err == nil && b.SessionID != first.SessionID
	})
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Fresh start."}})
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "again"}))
	r.eventually("the new conversation answers in the thread", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Fresh start.") })
	req := r.gw.LLM.Requests()
	for _, m := range req[len(req)-1].Messages {
		if strings.Contains(openaitest.Text(m.Content), "hi") && m.Role == "user" {
			t.Fatalf("the new conversation remembers the old one: %+v", req[len(req)-1].Messages)
		}
	}
}

// A new AI-app thread offers the guide's prompts; a turn in it shows as the
// thread's status, cleared at the end.
func TestAssistantThread(t *testing.T) {
	r := newRig(t, func(c *slack.Config) {
		c.Greeting, c.Suggestions = "Hi! Try one:", []string{"What time is it in Tokyo?", "What is 2*(3+4)?"}
	})
	ev, threadTS := r.fake.AssistantThreadStartedEvent(alice.ID, "D0ALICE1", "")
	r.send(ev)
	r.eventually("suggested prompts", func() bool { return len(r.fake.SuggestedPrompts()) == 1 })
	sp := r.fake.SuggestedPrompts()[0]
	if sp.ThreadTS != threadTS || len(sp.Prompts) != 2 || sp.Prompts[0].Message != "What time is it in Tokyo?" {
		t.Fatalf("suggested prompts: %+v", sp)
	}

	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Here."}})
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "D0ALICE1", User: alice.ID, ThreadTS: threadTS, Text: "What is 2*(3+4)?"}))
	r.eventually("the answer in the assistant thread", func() bool { return strings.Contains(allText(r.botReplies("D0ALICE1", threadTS)), "Here.") })
	r.eventually("the status cleared", func() bool {
		st := r.fake.AssistantStatuses()
		return len(st) >= 2 && st[len(st)-1].Status == ""
	})
	st := r.fake.AssistantStatuses()
	if st[0].Status != "is thinking…" || st[0].ThreadTS != threadTS {
		t.Fatalf("statuses: %+v", st)
	}
}

// A code block longer than a message is closed at the end of one message
// and reopened at the start of the next, so each renders as code.
func TestLongCodeBlockIsReopened(t *testing.T) {
	for _, mode := range streamModes {
		t.Run(mode.name, func(t *testing.T) {
			r := newModeRig(t, mode.native, nil)
			var lines []string
			for i := range 1500 {
				lines = append(lines, fmt.Sprintf("line_%04d = %d", i, i*i))
			}
			code := "Here:\n\n```\n" + strings.Join(lines, "\n") + "\n```\n\nDone."
			var chunks []string
			for i := 0; i < len(code); i += 700 {
				chunks = append(chunks, code[i:min(i+700, len(code))])
			}
			r.gw.LLM.Push(openaitest.Reply{Text: chunks})
			ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "code"})
			r.send(ev)
			root := ev["ts"].(string)
			r.eventually("the end", func() bool {
				m := r.botReplies("C1", root)
				return len(m) > 0 && strings.Contains(m[len(m)-1].Text, "Done.") && !m[len(m)-1].Streaming
			})
			replies := r.botReplies("C1", root)
			if len(replies) < 2 {
				t.Fatalf("%d messages", len(replies))
			}
			for i, m := range replies {
				fences := 0
				for _, l := range strings.Split(m.Text, "\n") {
					if strings.HasPrefix(strings.TrimSpace(l), "```") {
						fences++
					}
				}
				if fences%2 != 0 {
					t.Errorf("message %d of %d leaves a code block open (%d fences)", i+1, len(replies), fences)
				}
			}
			all := allText(replies)
			for _, l := range []string{lines[0], lines[749], lines[1499]} {
				if !strings.Contains(all, l) {
					t.Errorf("%q is missing", l)
				}
			}
		})
	}
}

// A card's inline image (a chart the model made) is uploaded into the
// thread, as Slack shows images it holds.
func TestInlineImageIsUploaded(t *testing.T) {
	r := newRig(t, nil)
	// A 1×1 PNG.
	const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "present", Args: `{"title":"Chart","image":{"url":"data:image/png;base64,` + png + `","alt":"a dot"}}`}}},
		openaitest.Reply{Text: []string{"There it is."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "chart"})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("the image uploaded", func() bool { fs := r.fake.Files(); return len(fs) == 1 && fs[0].Completed })
	f := r.fake.Files()[0]
	if !strings.HasSuffix(f.Name, ".png") || len(f.Content) < 60 || !f.Completed || f.ThreadTS != root || f.AltText != "a dot" {
		t.Fatalf("file %+v, want the PNG completed into thread %s", f, root)
	}
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "There it is.") })
}

// Where buttons are blocked, writing "approve" in the thread answers the
// request; a socket Slack drops mid-answer is reconnected and the answer
// completes.
func TestTypedApprovalAndDroppedSocket(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{}`}}},
		openaitest.Reply{Text: []string{"Approved ", "and ", "answered."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "time?"})
	r.send(ev)
	root := ev["ts"].(string)
	var card slacktest.Message
	r.eventually("the approval card", func() (ok bool) { card, ok = r.approvalCard("C1", root); return ok })

	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "Approve"}))
	r.fake.DropConnections()
	r.eventually("the answer after the drop", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Approved and answered.") })
	m, _ := r.fake.Message("C1", card.TS)
	if strings.Contains(string(m.Blocks), `"sb_approve"`) {
		t.Fatalf("the card still has buttons: %s", m.Blocks)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.fake.WaitForConnections(ctx, 2); err != nil {
		t.Fatalf("no reconnection: %v", err)
	}
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Still here."}})
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "still there?"}))
	r.eventually("an answer over the new socket", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Still here.") })
}

// The gateway stopped mid-reply (its stream left open in Slack): after the
// restart the open stream is stopped, the thread says the answer was
// interrupted, the turn is answered again, and nothing is posted twice or
// left streaming.
func TestRestartMidReply(t *testing.T) {
	r := newRig(t, nil)
	gate := make(chan struct{})
	r.gw.LLM.Push(
		openaitest.Reply{Text: []string{"First part. ", "never sent"}, Gate: gate},
		openaitest.Reply{Text: []string{"Whole answer."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "tell me"})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("the reply streaming", func() bool {
		m := r.botReplies("C1", root)
		return len(m) == 1 && m[0].Streaming && strings.Contains(m[0].Text, "First part.")
	})
	r.restart()
	close(gate)
	r.eventually("the turn answered again", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Whole answer.") })
	r.eventually("nothing left streaming", func() bool {
		for _, m := range r.botReplies("C1", root) {
			if m.Streaming {
				return false
			}
		}
		return true
	})
	text := allText(r.botReplies("C1", root))
	if strings.Count(text, "First part.") != 1 || !strings.Contains(text, "interrupted") {
		t.Fatalf("thread after the restart:\n%s", text)
	}
}

// A payload Slack refuses (invalid_blocks) never loses what it showed: it
// is posted again as its plain text (here the approval card, which then
// says how to answer by writing), and the turn goes on.
func TestRefusedBlocksAreSentAsText(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"Europe/Paris"}`}}},
		openaitest.Reply{Text: []string{"Done."}},
	)
	r.fake.FailNext("chat.postMessage", "invalid_blocks")
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "time in Paris?"})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("the card as text", func() bool {
		for _, m := range r.botReplies("C1", root) {
			if strings.Contains(m.Text, "current_time") && strings.Contains(m.Text, "*approve*") && m.Blocks == nil {
				return true
			}
		}
		return false
	})
	reqs := r.fake.Requests("chat.postMessage")
	if len(reqs) < 2 || reqs[0].Error != "invalid_blocks" {
		t.Fatalf("postMessage calls: %d, the first answered %q; want it refused and sent again", len(reqs), reqs[0].Error)
	}
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "approve"}))
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Done.") })
}

// A Slack DM joins a conversation started on the web with an invite code:
// it is shown a short recap, then everything live, labelled with who wrote
// it and where; what is written in Slack reaches the web once; a bad code
// is refused privately and binds nothing.
func TestJoinASharedConversation(t *testing.T) {
	r := newRig(t, nil)
	web := switchboard.Author{Channel: "web", ID: "alice-web", Name: "Alice"}
	w := r.gw.Open(web, sessions.AttachOptions{})
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Before you came."}})
	w.Say("an early question")
	code := w.Share("member")

	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "D0BOBDM1", User: bob.ID, Text: "/join notacode"}))
	r.eventually("a bad code refused privately", func() bool {
		for _, e := range r.fake.Ephemerals("D0BOBDM1") {
			if strings.Contains(e.Text, "not known") {
				return true
			}
		}
		return false
	})
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "D0BOBDM1", User: bob.ID, Text: "/join " + code}))
	r.eventually("the recap in the DM", func() bool {
		text := allText(r.botReplies("D0BOBDM1", ""))
		return strings.Contains(text, "Before you came.") && strings.Contains(text, "Alice · Web")
	})

	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Answer to the web."}})
	w.Say("a live question")
	r.eventually("the live exchange in the DM", func() bool {
		text := allText(r.botReplies("D0BOBDM1", ""))
		return strings.Contains(text, "a live question") && strings.Contains(text, "Answer to the web.")
	})

	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Answer to Bob."}})
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "D0BOBDM1", User: bob.ID, Text: "hello from slack"}))
	seen := 0
	deadline := time.After(15 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-w.Sub.Events():
			if ev.Type == switchboard.EventMessage && strings.Contains(string(ev.Data), "hello from slack") {
				seen++
			}
			done = ev.Type == switchboard.EventMessage && strings.Contains(string(ev.Data), "Answer to Bob.")
		case <-deadline:
			t.Fatal("the web never saw the Slack exchange")
		}
	}
	if seen != 1 {
		t.Fatalf("the web saw Bob's message %d times", seen)
	}
	if text := allText(r.botReplies("D0BOBDM1", "")); strings.Contains(text, "Bob Stone · Slack") {
		t.Fatalf("Bob's own message was echoed back to his DM:\n%s", text)
	}
}
