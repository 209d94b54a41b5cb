package discord_test

// Files people attach in Discord (issue 25), against the fake Discord and
// its signed CDN: an attachment with a message in a thread or a DM lands
// in the conversation's workspace and the model is told; the other places
// of a shared conversation show the share, a Slack thread's too; what
// cannot come is refused to its sender.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/discord"
	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

var rain = []byte("city,rain\nBrest,31\n") // 19 B

// sessionOf is the session a Discord place shows.
func (r *rig) sessionOf(place string) string {
	r.t.Helper()
	b, err := r.gw.Manager.Binding(context.Background(), discord.Channel, place)
	if err != nil {
		r.t.Fatalf("%s is not bound: %v", place, err)
	}
	return b.SessionID
}

// An attachment with a mention lands in the new thread's workspace,
// downloaded from its signed CDN URL, and the model reads it with the
// question; a message in the thread with an attachment and no text comes
// the same way, before the text that follows it. The thread shows no
// line for its own shares.
func TestAttachmentsInAThread(t *testing.T) {
	dir := t.TempDir()
	r := newRigWith(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}), nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Brest is wetter."}}, openaitest.Reply{Text: []string{"Two files now."}}, openaitest.Reply{Text: []string{"Noted."}})
	m := r.post(discordtest.UserMessage{AuthorID: alice, Content: "which city is wetter?", MentionBot: true,
		Attachments: []discordtest.Attachment{{Filename: "rain.csv", ContentType: "text/csv", Data: rain}}})
	var thread string
	r.eventually("the answer in a thread", func() bool {
		got, _ := r.fake.Message(m.ChannelID, m.ID)
		thread = got.ThreadID
		return thread != "" && strings.Contains(allContent(r.botMessages(thread)), "Brest is wetter.")
	})
	id := r.sessionOf(thread)
	if got := sessionstest.Uploaded(t, dir, id); got["rain.csv"] != string(rain) {
		t.Fatalf("the workspace holds %v", got)
	}
	if !r.gw.LLM.Asked("which city is wetter?") || !r.gw.LLM.Asked("rain.csv (text/csv, 19 B) at /workspace/uploads/rain.csv") {
		t.Fatal("the model was not told of the file")
	}
	if d := r.fake.Downloads(); len(d) != 1 || d[0].Status != 200 {
		t.Fatalf("downloads %+v", d)
	}

	web := r.gw.Open(switchboard.Author{Channel: "web", ID: "w1", Name: "Wendy"}, sessions.AttachOptions{SessionID: id, AfterSeq: -1})
	r.post(discordtest.UserMessage{ChannelID: thread, AuthorID: bob, Attachments: []discordtest.Attachment{{Filename: "notes.md", Data: []byte("# Notes\n")}}})
	r.post(discordtest.UserMessage{ChannelID: thread, AuthorID: bob, Content: "and this after"})
	var order []string
	web.Await("both of Bob's messages", func(ev switchboard.Event) bool {
		if p, err := ev.Payload(); err == nil {
			if m, ok := p.(*switchboard.MessageData); ok && m.Role == switchboard.RoleUser {
				order = append(order, fmt.Sprintf("%q %d", m.Content, len(m.Files)))
			}
		}
		return len(order) == 2
	})
	if order[0] != `"" 1` || order[1] != `"and this after" 0` {
		t.Fatalf("Bob's messages reached the session as %v: the file message first, with its file", order)
	}
	r.eventually("the second answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Two files now.") })
	if got := sessionstest.Uploaded(t, dir, id); got["notes.md"] != "# Notes\n" {
		t.Fatalf("the workspace holds %v", got)
	}
	if text := allContent(r.botMessages(thread)); strings.Contains(text, "shared") {
		t.Fatalf("the thread echoes its own shares: %s", text)
	}
}

// In a DM an attachment alone is a message.
func TestAnAttachmentInADM(t *testing.T) {
	dir := t.TempDir()
	r := newRigWith(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}), nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Got it."}})
	dm := r.fake.DM(alice)
	r.post(discordtest.UserMessage{ChannelID: dm.ID, AuthorID: alice, Attachments: []discordtest.Attachment{{Filename: "rain.csv", Data: rain}}})
	r.eventually("the answer", func() bool { return strings.Contains(allContent(r.botMessages(dm.ID)), "Got it.") })
	if got := sessionstest.Uploaded(t, dir, r.sessionOf(dm.ID)); got["rain.csv"] != string(rain) {
		t.Fatalf("the workspace holds %v", got)
	}
}

// What cannot come is refused to its sender, with the message, in a
// sentence that says why: an attachment whose link has expired (the CDN
// answers 404), one announced larger than allowed (not downloaded), a
// viewer's (not downloaded). Nothing reaches the model or stays in the
// workspace, and the thread goes on.
func TestAttachmentsRefused(t *testing.T) {
	dir := t.TempDir()
	r := newRigWith(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{FileBytes: 100}), nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hello there."}})
	_, thread := r.mention(alice, "hi")
	r.eventually("the thread", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Hello there.") })
	id := r.sessionOf(thread)
	asked := len(r.gw.LLM.Requests())

	for _, tc := range []struct {
		name string
		att  discordtest.Attachment
		want string
		got  bool // downloaded
	}{
		{"expired", discordtest.Attachment{Filename: "old.csv", Data: rain, Expires: time.Now().Add(-time.Hour)},
			"Discord no longer serves old.csv (its link has expired, or the file was deleted); attach it again.", true},
		{"too large", discordtest.Attachment{Filename: "big.csv", Data: []byte(strings.Repeat("x,", 100))}, "big.csv is 200 B; a file may be at most 100 B.", false},
	} {
		before := len(r.fake.Downloads())
		r.post(discordtest.UserMessage{ChannelID: thread, AuthorID: alice, Content: tc.name, Attachments: []discordtest.Attachment{tc.att}})
		r.eventually(tc.name+": the sender told", func() bool { return r.told(thread, alice, "Not sent: "+tc.want) == 1 })
		if got := len(r.fake.Downloads()) > before; got != tc.got {
			t.Errorf("%s: downloaded %v, want %v", tc.name, got, tc.got)
		}
	}

	w := r.webConversation()
	dm := r.joinDM(w.Share("viewer"))
	r.post(discordtest.UserMessage{ChannelID: dm, AuthorID: bob, Content: "mine", Attachments: []discordtest.Attachment{{Filename: "rain.csv", Data: rain}}})
	r.eventually("Bob told", func() bool {
		return r.told(dm, bob, "Not sent: Bob is a viewer in this session and may not send files.") == 1
	})

	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Still here."}})
	r.post(discordtest.UserMessage{ChannelID: thread, AuthorID: alice, Content: "still there?"})
	r.eventually("the thread answered after the refusals", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Still here.") })
	if n := len(r.gw.LLM.Requests()); n != asked+1 {
		t.Fatalf("the model was asked %d times for refused files", n-asked-1)
	}
	if got := sessionstest.Uploaded(t, dir, id); len(got) != 0 {
		t.Fatalf("refused files left in the workspace: %v", got)
	}
	if n := len(r.fake.Downloads()); n != 1 {
		t.Fatalf("%d downloads, want the expired one's alone", n)
	}
}

// A file shared in another place of the conversation shows in Discord as
// a line saying who shared what, with where they are.
func TestSharesFromElsewhere(t *testing.T) {
	dir := t.TempDir()
	r := newRigWith(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}), nil)
	w := r.webConversation()
	dm := r.joinDM(w.Share("member"))
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"A chart."}}, openaitest.Reply{Text: []string{"Rain."}})
	for _, text := range []string{"", "this one too"} {
		w.SayWithFile(text, "rain.csv", rain)
	}
	r.eventually("both shares in Bob's DM", func() bool {
		text := allContent(r.botMessages(dm))
		return strings.Contains(text, "📎 **Alice · Web** shared rain.csv (19 B)\n") &&
			strings.Contains(text, "**Alice · Web**: this one too\n📎 **Alice** shared rain.csv (19 B)")
	})
}

// One conversation in Slack and in Discord: Alice shares a file in her
// Slack thread, and Bob's Discord DM, which joined the conversation,
// shows that she did; the file is in the conversation's workspace once.
func TestASlackShareShowsInDiscord(t *testing.T) {
	dir := t.TempDir()
	r := newRigWith(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}), nil)
	sl := startSlack(t, r.gw)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hello Alice."}}, openaitest.Reply{Text: []string{"A file!"}})

	salice := slacktest.User{ID: "U0ALICE", Name: "alice", DisplayName: "Alice"}
	sl.AddUser(salice)
	ev := sl.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: salice.ID, Text: "hi"})
	sl.send(t, ev)
	root := ev["ts"].(string)
	sl.send(t, sl.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: salice.ID, ThreadTS: root, Text: "/share member"}))
	var code string
	r.eventually("Alice's invite code, in Slack", func() bool {
		for _, e := range sl.Ephemerals("C1") {
			if m := sessionstest.InviteCode.FindStringSubmatch(e.Text); m != nil {
				code = m[1]
			}
		}
		return code != ""
	})
	dm := r.joinDM(code)

	sl.send(t, sl.MessageEvent(slacktest.UserMessage{Channel: "C1", User: salice.ID, ThreadTS: root, Text: "the rain",
		Files: []slacktest.UserFile{{Name: "rain.csv", Mimetype: "text/csv", Data: rain}}}))
	r.eventually("the share in Bob's Discord DM", func() bool {
		return strings.Contains(allContent(r.botMessages(dm)), "**Alice · Slack**: the rain\n📎 **Alice** shared rain.csv (19 B)")
	})
	b, err := r.gw.Manager.Binding(context.Background(), slack.Channel, slacktest.DefaultTeamID+":C1:"+root)
	if err != nil {
		t.Fatal(err)
	}
	if got := sessionstest.Uploaded(t, dir, b.SessionID); len(got) != 1 || got["rain.csv"] != string(rain) {
		t.Fatalf("the workspace holds %v", got)
	}
	r.eventually("the answer in Discord too", func() bool { return strings.Contains(allContent(r.botMessages(dm)), "A file!") })
}

// slackSide is a Slack listener on the same gateway, against a fake Slack.
type slackSide struct{ *slacktest.Server }

// startSlack runs a Slack listener on gw's manager until the test ends.
func startSlack(t *testing.T, gw *sessionstest.Gateway) slackSide {
	t.Helper()
	fake := slacktest.New(t)
	l, err := slack.New(slack.Config{BotToken: fake.BotToken(), AppToken: fake.AppToken(), APIURL: fake.APIURL(), UpdateInterval: 20 * time.Millisecond},
		gw.Manager, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Slack's Run: %v", err)
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := fake.WaitForConnections(wctx, 1); err != nil {
		t.Fatalf("the Slack listener did not connect: %v", err)
	}
	return slackSide{fake}
}

// send delivers a Slack event and waits for its acknowledgement.
func (s slackSide) send(t *testing.T, event map[string]any) {
	t.Helper()
	env, err := s.SendEvent(event)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.WaitForAck(ctx, env.EnvelopeID); err != nil {
		t.Fatalf("Slack's envelope was not acknowledged: %v", err)
	}
}
