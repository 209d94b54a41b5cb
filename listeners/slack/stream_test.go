package slack_test

// Native streaming (issue 21): a streamed message is always a reply to a
// person's request, in a DM too; a refusal reaches only as far as Slack's
// error says.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// answered waits until the bot's last message in the thread (a DM's whole
// conversation when threadTS is "") says want and is no longer streaming,
// and returns the bot's messages there.
func (r *rig) answered(channel, threadTS, want string) []slacktest.Message {
	r.t.Helper()
	r.eventually("the answer "+want, func() bool {
		m := r.botReplies(channel, threadTS)
		return len(m) > 0 && strings.TrimSpace(m[len(m)-1].Text) == want && !m[len(m)-1].Streaming
	})
	return r.botReplies(channel, threadTS)
}

// shown is how the bot's messages look, for failures.
func shown(msgs []slacktest.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "\n  ts %s thread %q streamed %v streaming %v: %q", m.TS, m.ThreadTS, m.MarkdownText, m.Streaming, m.Text)
	}
	return b.String()
}

// startStreams are the chat.startStream calls so far.
func (r *rig) startStreams() []slacktest.Request { return r.fake.Requests("chat.startStream") }

// A DM answer streams natively, as a reply to the message it answers (Slack
// streams only replies); a channel thread's answer afterwards streams too.
func TestStreamedDMAnswerIsNative(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hi ", "Alice."}}, openaitest.Reply{Text: []string{"In ", "the thread."}})
	q := r.fake.MessageEvent(slacktest.UserMessage{Channel: "D1", User: alice.ID, Text: "hi"})
	r.send(q)
	qts := q["ts"].(string)

	dm := r.answered("D1", "", "Hi Alice.")
	starts := r.startStreams()
	if len(starts) == 0 {
		t.Fatal("no stream was started for the DM answer")
	}
	if p := starts[0].Params; starts[0].Error != "" || p.Get("channel") != "D1" || p.Get("thread_ts") != qts {
		t.Fatalf("the DM's stream started with %v (Slack answered %q), want a reply to the message answered (thread_ts %s)", p, starts[0].Error, qts)
	}
	if len(dm) != 1 || dm[0].ThreadTS != qts || !dm[0].MarkdownText {
		t.Fatalf("the DM holds:%s\nwant one streamed reply under the person's message", shown(dm))
	}

	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "and here?"})
	r.send(ev)
	root := ev["ts"].(string)
	in := r.answered("C1", root, "In the thread.")
	starts = r.startStreams()
	if len(starts) != 2 {
		t.Fatalf("%d streams started, want 2 (the DM's, the thread's)", len(starts))
	}
	if p := starts[1].Params; starts[1].Error != "" || p.Get("thread_ts") != root || p.Get("recipient_user_id") != alice.ID {
		t.Fatalf("the thread's stream started with %v (Slack answered %q)", p, starts[1].Error)
	}
	if len(in) != 1 || !in[0].MarkdownText {
		t.Fatalf("the thread holds:%s\nwant one streamed reply", shown(in))
	}
	if n := r.fake.Calls("chat.postMessage") + r.fake.Calls("chat.update"); n != 0 {
		t.Fatalf("%d posts and edits, want none: both answers streamed", n)
	}
}

// A stream refused for its own arguments leaves that reply to be posted
// and edited; the next reply, elsewhere, streams.
func TestStreamRefusedForOneReply(t *testing.T) {
	r := newRig(t, nil)
	r.fake.FailNext("chat.startStream", "invalid_arguments")
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Edited ", "into place."}}, openaitest.Reply{Text: []string{"Streamed."}})

	first := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "first"})
	r.send(first)
	m := r.answered("C1", first["ts"].(string), "Edited into place.")
	if len(m) != 1 || m[0].MarkdownText {
		t.Fatalf("the refused reply:%s\nwant one message posted and edited", shown(m))
	}
	if s := r.startStreams(); len(s) != 1 || s[0].Error != "invalid_arguments" {
		t.Fatalf("startStream calls: %+v, want the refused one", s)
	}
	posts := r.fake.Calls("chat.postMessage")

	second := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C2", User: bob.ID, Text: "second"})
	r.send(second)
	m = r.answered("C2", second["ts"].(string), "Streamed.")
	if len(m) != 1 || !m[0].MarkdownText {
		t.Fatalf("the next reply:%s\nwant it streamed", shown(m))
	}
	if s := r.startStreams(); len(s) != 2 || s[1].Error != "" {
		t.Fatalf("startStream calls: %+v, want the next reply's accepted", s)
	}
	if n := r.fake.Calls("chat.postMessage"); n != posts {
		t.Fatalf("%d more posts for the streamed reply", n-posts)
	}
}

// Slack refusing a stream for the conversation (a channel type it streams
// nowhere in) keeps that place's replies edited without asking again; a
// reply in another place still streams.
func TestStreamRefusedForOnePlace(t *testing.T) {
	r := newRig(t, nil)
	r.fake.FailNext("chat.startStream", "channel_type_not_supported")
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"One."}}, openaitest.Reply{Text: []string{"Two."}}, openaitest.Reply{Text: []string{"Three."}})

	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "one"})
	r.send(ev)
	root := ev["ts"].(string)
	r.answered("C1", root, "One.")
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "two"}))
	m := r.answered("C1", root, "Two.")
	if len(m) != 2 || m[0].MarkdownText || m[1].MarkdownText {
		t.Fatalf("the place's replies:%s\nwant both posted and edited", shown(m))
	}
	if n := len(r.startStreams()); n != 1 {
		t.Fatalf("%d startStream calls, want the refused one only", n)
	}

	other := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C2", User: alice.ID, Text: "three"})
	r.send(other)
	m = r.answered("C2", other["ts"].(string), "Three.")
	if len(m) != 1 || !m[0].MarkdownText {
		t.Fatalf("a reply in another place:%s\nwant it streamed", shown(m))
	}
}

// Slack saying the method is not this app's (a scope it lacks) turns
// streaming off everywhere, with a warning that names the error and the
// fix; replies are edited into place.
func TestStreamRefusedForTheApp(t *testing.T) {
	logs := &syncBuffer{}
	r := newLoggedRig(t, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	r.fake.SetStartStreamError("missing_scope")
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"One."}}, openaitest.Reply{Text: []string{"Two."}})

	for i, text := range []string{"One.", "Two."} {
		ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C" + string(rune('1'+i)), User: alice.ID, Text: "hi"})
		r.send(ev)
		if m := r.answered(ev["channel"].(string), ev["ts"].(string), text); len(m) != 1 || m[0].MarkdownText {
			t.Fatalf("reply %d:%s\nwant it posted and edited", i+1, shown(m))
		}
	}
	if n := len(r.startStreams()); n != 1 {
		t.Fatalf("%d startStream calls, want 1: the app may not stream", n)
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "missing_scope") || !strings.Contains(out, "chat:write") {
		t.Fatalf("no warning naming Slack's error and the fix:\n%s", out)
	}
}

// newLoggedRig is newRig logging to log.
func newLoggedRig(t *testing.T, log *slog.Logger) *rig {
	t.Helper()
	fake := slacktest.New(t, slacktest.WithUsers(alice, bob))
	gw := sessionstest.NewTuned(t, "../../guides", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	cfg := slack.Config{BotToken: fake.BotToken(), AppToken: fake.AppToken(), APIURL: fake.APIURL(), UpdateInterval: 20 * time.Millisecond}
	r := &rig{t: t, fake: fake, gw: gw, log: log, cfg: cfg}
	r.start()
	t.Cleanup(func() { r.stop() })
	return r
}

// A reply in the thread a DM answer streamed into goes on with the DM's
// conversation (the model sees what came before), and its answer streams
// into that thread too; another DM thread is a conversation of its own.
func TestReplyUnderAStreamedDMAnswerContinuesTheDM(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Forty-two."}}, openaitest.Reply{Text: []string{"As I said."}}, openaitest.Reply{Text: []string{"New here."}})
	q := r.fake.MessageEvent(slacktest.UserMessage{Channel: "D1", User: alice.ID, Text: "the answer?"})
	r.send(q)
	qts := q["ts"].(string)
	r.answered("D1", "", "Forty-two.")

	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "D1", User: alice.ID, ThreadTS: qts, Text: "say it again"}))
	r.eventually("the answer in the thread", func() bool { return strings.Contains(allText(r.fake.Thread("D1", qts)), "As I said.") })
	req := r.gw.LLM.Requests()
	var history []string
	for _, m := range req[len(req)-1].Messages {
		history = append(history, openaitest.Text(m.Content))
	}
	if !strings.Contains(strings.Join(history, "\n"), "the answer?") {
		t.Fatalf("the reply in the thread started a new conversation; the model saw:\n%s", strings.Join(history, "\n"))
	}
	if _, err := r.gw.Manager.Binding(context.Background(), slack.Channel, slacktest.DefaultTeamID+":D1:"+qts); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("the answer's thread was bound as a conversation of its own: %v", err)
	}
	if starts := r.startStreams(); len(starts) != 2 || starts[1].Params.Get("thread_ts") != qts {
		t.Fatalf("startStream calls %+v, want the second under %s too", starts, qts)
	}

	other := r.fake.MessageEvent(slacktest.UserMessage{Channel: "D1", User: alice.ID, ThreadTS: "1700000000.000001", Text: "fresh"})
	r.send(other)
	r.eventually("the other thread answered", func() bool {
		return strings.Contains(allText(r.fake.Thread("D1", "1700000000.000001")), "New here.")
	})
	if _, err := r.gw.Manager.Binding(context.Background(), slack.Channel, slacktest.DefaultTeamID+":D1:1700000000.000001"); err != nil {
		t.Fatalf("a DM thread of its own is not its own conversation: %v", err)
	}
}
