package slack_test

// Files people share in Slack (issue 25), against the fake Slack: a file
// with a message in a thread or a DM lands in the conversation's
// workspace and the model is told; the other places of a shared
// conversation show the share; what cannot come is refused to its sender
// alone, privately, before or instead of its download.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

var rain = []byte("city,rain\nBrest,31\n") // 19 B

// sessionOf is the session a Slack place shows.
func (r *rig) sessionOf(address string) string {
	r.t.Helper()
	b, err := r.gw.Manager.Binding(context.Background(), slack.Channel, slacktest.DefaultTeamID+":"+address)
	if err != nil {
		r.t.Fatalf("%s is not bound: %v", address, err)
	}
	return b.SessionID
}

// A file shared with a mention lands in the new thread's workspace,
// downloaded with the bot token, and the model reads it with the
// question; a reply in the thread with a file and no text comes the same
// way, before the text that follows it. The thread shows no line for its
// own shares (they are there already); a web page of the conversation
// gets the files with the messages.
func TestFilesInAThread(t *testing.T) {
	dir := t.TempDir()
	r := newTunedRig(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}), nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Brest is wetter."}}, openaitest.Reply{Text: []string{"Two files now."}}, openaitest.Reply{Text: []string{"Noted."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "which city is wetter?",
		Files: []slacktest.UserFile{{Name: "rain.csv", Mimetype: "text/csv", Data: rain}}})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Brest is wetter.") })
	id := r.sessionOf("C1:" + root)
	if got := sessionstest.Uploaded(t, dir, id); got["rain.csv"] != string(rain) {
		t.Fatalf("the workspace holds %v", got)
	}
	if !r.gw.LLM.Asked("which city is wetter?") || !r.gw.LLM.Asked("rain.csv (text/csv, 19 B) at /workspace/uploads/rain.csv") || !r.gw.LLM.Asked("Brest,31") {
		t.Fatalf("the model was not told of the file: %q", r.lastUserText())
	}
	if d := r.fake.Downloads(); len(d) != 1 || d[0].Token != r.fake.BotToken() || d[0].Status != 200 {
		t.Fatalf("downloads %+v", d)
	}

	web := r.gw.Open(switchboard.Author{Channel: "web", ID: "w1", Name: "Wendy"}, sessions.AttachOptions{SessionID: id, AfterSeq: -1})
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: bob.ID, ThreadTS: root,
		Files: []slacktest.UserFile{{Name: "notes.md", Data: []byte("# Notes\n")}}}))
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: bob.ID, ThreadTS: root, Text: "and this after"}))
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
	r.eventually("the second answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Two files now.") })
	if got := sessionstest.Uploaded(t, dir, id); got["notes.md"] != "# Notes\n" {
		t.Fatalf("the workspace holds %v", got)
	}
	if text := allText(r.botReplies("C1", root)); strings.Contains(text, "shared") {
		t.Fatalf("the thread echoes its own shares: %s", text)
	}
}

// In a DM a file alone is a message; a file object Slack sends with its
// id alone (check_file_info) is read with files.info first.
func TestAFileInADM(t *testing.T) {
	dir := t.TempDir()
	r := newTunedRig(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}), nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Got it."}})
	const dm = "D0ALICE1"
	r.fake.AddChannel(slacktest.Channel{ID: dm, User: alice.ID})
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: dm, User: alice.ID,
		Files: []slacktest.UserFile{{Name: "rain.csv", Mimetype: "text/csv", Data: rain, CheckFileInfo: true}}}))
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies(dm, "")), "Got it.") })
	if got := sessionstest.Uploaded(t, dir, r.sessionOf(dm)); got["rain.csv"] != string(rain) {
		t.Fatalf("the workspace holds %v", got)
	}
	if r.fake.Calls("files.info") != 1 {
		t.Fatalf("files.info called %d times", r.fake.Calls("files.info"))
	}
	if !r.gw.LLM.Asked("[The person sent 1 file") {
		t.Fatalf("the model was told %q", r.lastUserText())
	}
}

// Each file that cannot come is refused to its sender alone, privately,
// in a sentence that says why; nothing is sent to the model and the
// workspace keeps nothing of the message. Files announced too large, or
// from a viewer, are not even downloaded. The acknowledgement never waits
// for a download, and a stalled one holds back only its own thread.
func TestFilesRefused(t *testing.T) {
	dir := t.TempDir()
	r := newTunedRig(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{FileBytes: 100}),
		func(c *slack.Config) { c.DownloadTimeout = 300 * time.Millisecond })
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hello there."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "hi"})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("the thread", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Hello there.") })
	id := r.sessionOf("C1:" + root)
	asked := len(r.gw.LLM.Requests())

	for _, tc := range []struct {
		name string
		file slacktest.UserFile
		want string
		got  bool // downloaded
	}{
		{"too large", slacktest.UserFile{Name: "big.csv", Data: []byte(strings.Repeat("x,", 100))}, "big.csv is 200 B; a file may be at most 100 B", false},
		{"bigger than announced", slacktest.UserFile{Name: "liar.csv", Data: []byte(strings.Repeat("y,", 40)), Size: 10}, "liar.csv was bigger than announced", true},
		{"kept outside Slack", slacktest.UserFile{Name: "plan.gdoc", External: true}, "plan.gdoc is a link to a file kept outside Slack (gdrive)", false},
		{"hidden by the plan", slacktest.UserFile{Name: "old.csv", Mode: "hidden_by_limit"}, "a file is hidden by this workspace's Slack plan", false},
		{"a program", slacktest.UserFile{Name: "run.exe", Data: []byte("MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff")}, "run.exe is a binary file of no known type", true},
		{"stalled", slacktest.UserFile{Name: "slow.csv", Data: []byte(strings.Repeat("z,", 40)), Stall: true}, "the download of slow.csv from Slack stalled (nothing came for 300ms); send it again", true},
	} {
		before := len(r.fake.Downloads())
		env := r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: tc.name,
			Files: []slacktest.UserFile{tc.file}}))
		if ack, _ := r.fake.WaitForAck(context.Background(), env.EnvelopeID); ack.Latency > time.Second {
			t.Errorf("%s: acknowledged after %s", tc.name, ack.Latency)
		}
		r.eventually(tc.name+": the sender told", func() bool { return r.ephemeralFor("C1", alice.ID, "Not sent: "+tc.want) }, func() string { return fmt.Sprint(r.fake.Ephemerals("C1")) })
		if got := len(r.fake.Downloads()) > before; got != tc.got {
			t.Errorf("%s: downloaded %v, want %v", tc.name, got, tc.got)
		}
	}
	// The thread goes on: its next message is answered.
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Still here."}})
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "still there?"}))
	r.eventually("the thread answered after the refusals", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Still here.") })
	if n := len(r.gw.LLM.Requests()); n != asked+1 {
		t.Fatalf("the model was asked %d times for refused files", n-asked-1)
	}
	if r.gw.LLM.Asked("big.csv") || r.gw.LLM.Asked("stalled") {
		t.Fatal("a refused message reached the model")
	}
	if got := sessionstest.Uploaded(t, dir, id); len(got) != 0 {
		t.Fatalf("refused files left in the workspace: %v", got)
	}
	for _, e := range r.fake.Ephemerals("C1") {
		if e.User != alice.ID {
			t.Fatalf("a refusal shown to %s", e.User)
		}
	}
	if text := allText(r.botReplies("C1", root)); strings.Contains(text, "Not sent") {
		t.Fatalf("a refusal posted in the open: %s", text)
	}
}

// An app installed without files:read is refused the file (Slack answers
// its sign-in page, even with the token): the sender is told to ask for
// the permission; the operator's log says how.
func TestFilesWithoutTheScope(t *testing.T) {
	dir := t.TempDir()
	log := &syncBuffer{}
	r := newTunedRigWith(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}), nil, []slacktest.Option{slacktest.WithoutFilesRead()}, log)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "look",
		Files: []slacktest.UserFile{{Name: "rain.csv", Data: rain}}})
	r.send(ev)
	r.eventually("the sender told", func() bool {
		return r.ephemeralFor("C1", alice.ID, "Not sent: Slack would not let me download rain.csv: I lack the permission to read files (files:read)")
	})
	if d := r.fake.Downloads(); len(d) != 1 || d[0].Token != r.fake.BotToken() || d[0].Status != 302 {
		t.Fatalf("downloads %+v", d)
	}
	if !strings.Contains(log.String(), "reinstall the app") {
		t.Fatalf("the log does not say what to do:\n%s", log)
	}
	if len(r.gw.LLM.Requests()) != 0 {
		t.Fatal("the model was asked")
	}
}

// A viewer's files are refused like their messages, before any download;
// a disk that is full refuses the files with the gateway's sentence, and
// leaves nothing of them behind.
func TestFilesOfAViewerAndOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	full := &fullDisk{}
	r := newTunedRig(t, func(c *sessions.Config) {
		sessionstest.WithUploads(t, dir, sessions.UploadLimits{})(c)
		full.Uploads = c.Uploads
		c.Uploads = full
	}, nil)
	w := r.webConversation()
	code := w.Share("viewer")
	r.joinDM(code)
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: bobDM, User: bob.ID, Text: "mine",
		Files: []slacktest.UserFile{{Name: "rain.csv", Data: rain}}}))
	r.eventually("Bob told", func() bool {
		return r.ephemeralFor(bobDM, bob.ID, "Not sent: Bob Stone is a viewer in this session and may not send files.")
	})
	if n := len(r.fake.Downloads()); n != 0 {
		t.Fatalf("a viewer's file was downloaded %d times", n)
	}

	full.full.Store(true)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "look",
		Files: []slacktest.UserFile{{Name: "rain.csv", Data: rain}}})
	r.send(ev)
	r.eventually("Alice told", func() bool {
		return r.ephemeralFor("C1", alice.ID, "Not sent: "+sessions.ErrNotStored.Error())
	})
	if got := sessionstest.Uploaded(t, dir, r.sessionOf("C1:"+ev["ts"].(string))); len(got) != 0 {
		t.Fatalf("a file left behind on a full disk: %v", got)
	}
}

// fullDisk is a store of files whose disk fills up on demand.
type fullDisk struct {
	sessions.Uploads
	full atomic.Bool
}

func (f *fullDisk) Save(ctx context.Context, sessionID, name string, r io.Reader, limit int64) (string, int64, error) {
	if f.full.Load() {
		_, _ = io.Copy(io.Discard, r)
		return "", 0, fmt.Errorf("sandbox: upload %s: write: %w", name, syscall.ENOSPC)
	}
	return f.Uploads.Save(ctx, sessionID, name, r, limit)
}

// A file shared in another place of the conversation shows in Slack as a
// line saying who shared what, with where they are: alone, or under what
// they wrote.
func TestSharesFromElsewhere(t *testing.T) {
	dir := t.TempDir()
	r := newTunedRig(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}), nil)
	w := r.webConversation()
	r.joinDM(w.Share("member"))
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"A chart."}}, openaitest.Reply{Text: []string{"Rain."}})
	for _, text := range []string{"", "this one too"} {
		w.SayWithFile(text, "rain.csv", rain)
	}
	r.eventually("both shares in Bob's DM", func() bool {
		text := allText(r.botReplies(bobDM, ""))
		return strings.Contains(text, "Alice · Web shared rain.csv (19 B)") && strings.Contains(text, "Alice · Web: this one too\nAlice shared rain.csv (19 B)")
	}, func() string { return allText(r.botReplies(bobDM, "")) })
	for _, m := range r.botReplies(bobDM, "") {
		if strings.Contains(m.Text, "Alice · Web shared") && !strings.Contains(string(m.Blocks), ":paperclip: Alice · Web shared rain.csv (19 B)") {
			t.Fatalf("the share's blocks: %s", m.Blocks)
		}
	}
}
