package websocket_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// sendFile announces a file and sends its bytes in chunks of at most
// chunk bytes.
func (c *client) sendFile(id, name string, b []byte, chunk int) {
	c.t.Helper()
	c.send(map[string]any{"type": "file", "id": id, "name": name, "size": len(b)})
	c.sendChunks(id, b, chunk)
}

func (c *client) sendChunks(id string, b []byte, chunk int) {
	c.t.Helper()
	for len(b) > 0 {
		n := min(chunk, len(b))
		c.send(map[string]any{"type": "file_chunk", "id": id, "data": base64.StdEncoding.EncodeToString(b[:n])})
		b = b[n:]
	}
}

// fileEvent reads until the answer about file id: file_saved, or an
// error naming it.
func (c *client) fileEvent(id string) (websocket.FileSavedData, *fileError) {
	c.t.Helper()
	for {
		ev := c.next()
		switch ev.Type {
		case websocket.EventFileSaved:
			d := data[websocket.FileSavedData](c.t, ev)
			if ev.Seq != 0 {
				c.t.Fatalf("file_saved with seq %d, want 0", ev.Seq)
			}
			if d.ID == id {
				return d, nil
			}
		case switchboard.EventError:
			e := data[fileError](c.t, ev)
			if e.FileID == id {
				return websocket.FileSavedData{}, &e
			}
			if e.Code != sessions.NoticeInfo {
				c.t.Fatalf("waiting for file %s: an error about something else: %+v", id, e)
			}
		}
	}
}

type fileError struct {
	switchboard.ErrorData
	FileID string `json:"file_id"`
}

// saved reads file id's file_saved, failing on an error.
func (c *client) saved(id string) switchboard.File {
	c.t.Helper()
	d, e := c.fileEvent(id)
	if e != nil {
		c.t.Fatalf("file %s not saved: %+v", id, *e)
	}
	return d.File
}

// refused reads the error about file id, failing on file_saved.
func (c *client) refused(id string) fileError {
	c.t.Helper()
	d, e := c.fileEvent(id)
	if e == nil {
		c.t.Fatalf("file %s saved as %+v, want it refused", id, d.File)
	}
	return *e
}

// nextError reads until the next error (the end of a turn may come
// before it).
func (c *client) nextError() fileError {
	c.t.Helper()
	for {
		if ev := c.next(); ev.Type == switchboard.EventError {
			return data[fileError](c.t, ev)
		}
	}
}

// uploadsIn lists what a session's uploads/ folder holds, partial files
// too.
func uploadsIn(t *testing.T, dir, session string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, session, "uploads"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func tinyPNG(t *testing.T) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A file sent over /ws lands in the workspace, the message that brings it
// shows it to everyone in the shared conversation, and the model is told.
func TestFileLandsInTheWorkspaceAndEveryoneSeesIt(t *testing.T) {
	dir := t.TempDir()
	g := newGatewayWith(t, websocket.Config{}, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}))
	a, ready, _ := ann(t, g)
	code := share(a, "member")
	b, _ := g.hello(map[string]any{"invite": code, "user": map[string]string{"id": "bob", "name": "Bob"}})
	b.untilIdle()

	csv := []byte("city,rain\nLyon,12\nBrest,31\n")
	a.sendFile("f1", "rain.csv", csv, 10) // three chunks
	f := a.saved("f1")
	if f.Name != "rain.csv" || f.Path != "uploads/rain.csv" || f.Type != "text/csv" || f.Size != int64(len(csv)) {
		t.Fatalf("saved %+v", f)
	}
	if got, err := os.ReadFile(filepath.Join(dir, ready.Session, "uploads", "rain.csv")); err != nil || !bytes.Equal(got, csv) {
		t.Fatalf("the workspace holds %q (%v)", got, err)
	}
	// A picture, its input sent at once after its last chunk (pipelined):
	// the gateway waits for it to be saved.
	pic := tinyPNG(t)
	g.llm.Push(openaitest.Reply{Text: []string{"Brest is wetter."}})
	a.sendFile("f2", "chart.png", pic, 1<<15)
	a.send(map[string]any{"type": "input", "id": "m1", "text": "Which city is wetter?", "files": []string{"f1", "f2"}})
	for _, c := range []*client{a, b} {
		var msg *switchboard.MessageData
		for _, ev := range c.untilAssistant() {
			if ev.Type == switchboard.EventMessage {
				if d := data[switchboard.MessageData](t, ev); d.Role == switchboard.RoleUser {
					msg = &d
				}
			}
		}
		if msg == nil || msg.Content != "Which city is wetter?" || msg.AuthorID != "ann" || len(msg.Files) != 2 ||
			msg.Files[0] != f || msg.Files[1].Path != "uploads/chart.png" || msg.Files[1].Type != "image/png" {
			t.Fatalf("the message as shown: %+v", msg)
		}
	}
	reqs := g.llm.Requests()
	last := reqs[len(reqs)-1].Messages
	if text := openaitest.Text(last[len(last)-1].Content); !strings.Contains(text, "rain.csv (text/csv, 27 B) at /workspace/uploads/rain.csv") || !strings.Contains(text, "Brest,31") {
		t.Fatalf("the model was told %q", text)
	}
	// Sent: the ids are the conversation's now, not the connection's.
	a.send(map[string]any{"type": "input", "id": "m2", "text": "again", "files": []string{"f1"}})
	if e := a.nextError(); e.Code != switchboard.ErrCodeBadFrame || !strings.Contains(e.Message, `no file "f1" was saved on this connection`) {
		t.Fatalf("an id already sent: %+v", e)
	}
	// Files alone, without text, are a message too.
	g.llm.Push(openaitest.Reply{Text: []string{"A picture."}})
	a.sendFile("f3", "chart.png", pic, 1<<15)
	a.saved("f3")
	a.send(map[string]any{"type": "input", "id": "m3", "files": []string{"f3"}})
	ev := a.until(func(ev wireEvent) bool { return ev.Type == switchboard.EventMessage })
	if d := data[switchboard.MessageData](t, lastOf(ev)); d.Role != switchboard.RoleUser || d.Content != "" || len(d.Files) != 1 || d.Files[0].Path != "uploads/chart-2.png" {
		t.Fatalf("files alone: %s", lastOf(ev).Data)
	}
	a.untilAssistant()
}

// Every refusal is one error to the sender, naming the file, and leaves
// nothing in the workspace; the connection goes on.
func TestFilesRefusedClearly(t *testing.T) {
	dir := t.TempDir()
	g := newGatewayWith(t, websocket.Config{MaxPendingFiles: 2}, sessionstest.WithUploads(t, dir, sessions.UploadLimits{FileBytes: 1000, MessageBytes: 1500}))
	a, ready, _ := ann(t, g)
	small := []byte("hello\n")

	// The rules of the session: a size announced too large is refused
	// before a byte is sent, a program by its first bytes.
	a.send(map[string]any{"type": "file", "id": "big", "name": "big.txt", "size": 5000})
	if e := a.refused("big"); e.Code != websocket.ErrCodeFileRefused || !strings.Contains(e.Message, "big.txt is 4.9 KiB; a file may be at most 1000 B") {
		t.Fatalf("announced too large: %+v", e)
	}
	a.sendChunks("big", bytes.Repeat([]byte("x"), 5000), 1<<12) // dropped quietly
	elf := append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 200)...)
	a.sendFile("elf", "report.pdf", elf, 100)
	if e := a.refused("elf"); e.Code != websocket.ErrCodeFileRefused || !strings.Contains(e.Message, "report.pdf is a binary file of no known type") {
		t.Fatalf("a program: %+v", e)
	}

	// A name that tries to climb out, with a NUL and an escape sequence,
	// is saved under a safe name, in uploads/.
	f := func() switchboard.File {
		a.sendFile("evil", "../../etc/pass\x00wd\x1b[31m.txt", small, 100)
		return a.saved("evil")
	}()
	if f.Path != "uploads/pass_wd_[31m.txt" || strings.ContainsAny(f.Name, "\x00\x1b/") {
		t.Fatalf("a hostile name was saved as %+v", f)
	}

	// Frames that do not fit what was announced.
	for _, tc := range []struct {
		frame, want string
	}{
		{`{"type":"file_chunk","id":"nope","data":"aGk="}`, `no file "nope" is arriving`},
		{`{"type":"file","id":"x","name":"a.txt"}`, "size (in bytes) is missing"},
		{`{"type":"file","id":"x","name":"a.txt","size":0}`, "size must be 1 byte or more"},
		{`{"type":"file","id":"x","name":"","size":3}`, "name is missing"},
		{`{"type":"file_chunk","id":"x","data":"not base64!"}`, "not standard base64"},
		{`{"type":"input","id":"m","text":"hi","files":["ghost"]}`, `no file "ghost" was saved on this connection`},
		{`{"type":"input","id":"m","text":"/help","files":["evil"]}`, "files go with a message, not with a command"},
		{`{"type":"input","id":"m","text":"","files":[]}`, "text is empty"},
	} {
		a.sendRaw(tc.frame)
		if e := a.nextError(); e.Code != switchboard.ErrCodeBadFrame || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s: %+v, want bad_frame saying %q", tc.frame, e, tc.want)
		}
	}
	// One file at a time; an input naming one not all in is refused.
	a.send(map[string]any{"type": "file", "id": "half", "name": "half.txt", "size": 10})
	a.sendChunks("half", []byte("12345"), 5)
	a.send(map[string]any{"type": "file", "id": "other", "name": "other.txt", "size": 3})
	if e := a.refused("other"); e.Code != switchboard.ErrCodeBadFrame || !strings.Contains(e.Message, `"half" is still arriving (5 of 10 bytes)`) {
		t.Fatalf("a second file while one arrives: %+v", e)
	}
	a.send(map[string]any{"type": "input", "id": "m", "text": "hi", "files": []string{"half"}})
	if e := a.nextError(); !strings.Contains(e.Message, `"half" has not all arrived (5 of 10 bytes)`) {
		t.Fatalf("an input with a file half in: %+v", e)
	}
	// More bytes than announced: refused, nothing kept.
	a.sendChunks("half", []byte("678901234"), 9)
	if e := a.refused("half"); e.Code != switchboard.ErrCodeBadFrame || !strings.Contains(e.Message, "more than the 10 bytes announced") {
		t.Fatalf("more than announced: %+v", e)
	}
	// The connection holds at most two saved files for a message (evil
	// and one more).
	a.sendFile("ok", "ok.txt", small, 100)
	a.saved("ok")
	a.send(map[string]any{"type": "file", "id": "third", "name": "third.txt", "size": 3})
	if e := a.refused("third"); e.Code != websocket.ErrCodeFileRefused || !strings.Contains(e.Message, "2 files already wait for a message") {
		t.Fatalf("a third file waiting: %+v", e)
	}
	// The id of a refused file may be used again.
	g.llm.Push(openaitest.Reply{Text: []string{"Got them."}})
	a.send(map[string]any{"type": "input", "id": "m1", "text": "both", "files": []string{"evil", "ok"}})
	a.untilAssistant()
	a.sendFile("big", "big.txt", small, 100)
	a.saved("big")

	if got := uploadsIn(t, dir, ready.Session); strings.Join(got, ",") != "big.txt,ok.txt,pass_wd_[31m.txt" {
		t.Fatalf("the workspace holds %q, want the saved files and nothing of the refused ones", got)
	}
}

// A viewer's file is refused like any input of theirs, and the rest of
// its chunks are dropped without a word.
func TestAViewersFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	g := newGatewayWith(t, websocket.Config{}, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}))
	a, ready, _ := ann(t, g)
	code := share(a, "viewer")
	b, _ := g.hello(map[string]any{"invite": code, "user": map[string]string{"id": "bob", "name": "Bob"}})
	b.untilIdle()
	b.sendFile("v1", "notes.txt", bytes.Repeat([]byte("n"), 3000), 1000)
	if e := b.refused("v1"); e.Code != switchboard.ErrCodeForbidden || !strings.Contains(e.Message, "notes.txt was not saved: Bob is a viewer in this session and may not send files") {
		t.Fatalf("a viewer's file: %+v", e)
	}
	b.send(map[string]any{"type": "cancel"}) // the next answer is this one's, not the chunks'
	if e := b.nextError(); e.FileID != "" {
		t.Fatalf("a refused file's chunks were answered: %+v", e)
	}
	if got := uploadsIn(t, dir, ready.Session); len(got) != 0 {
		t.Fatalf("the workspace holds %q", got)
	}
}

// A connection that closes mid-file leaves nothing; one that sends
// nothing more is cut short after FileIdleTimeout.
func TestAFileCutShortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	g := newGatewayWith(t, websocket.Config{FileIdleTimeout: 300 * time.Millisecond}, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}))
	a, ready, _ := ann(t, g)
	a.send(map[string]any{"type": "file", "id": "f1", "name": "slow.txt", "size": 1000})
	a.sendChunks("f1", bytes.Repeat([]byte("s"), 600), 600)
	if e := a.refused("f1"); e.Code != websocket.ErrCodeFileRefused || !strings.Contains(e.Message, "slow.txt was not saved: nothing of it moved for 300ms") {
		t.Fatalf("an idle file: %+v", e)
	}
	if got := uploadsIn(t, dir, ready.Session); len(got) != 0 {
		t.Fatalf("an idle file left %q", got)
	}

	g = newGatewayWith(t, websocket.Config{}, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}))
	c, ready2 := g.hello(map[string]any{"user": map[string]string{"id": "cy"}})
	c.send(map[string]any{"type": "file", "id": "f1", "name": "cut.txt", "size": 1 << 16})
	c.sendChunks("f1", bytes.Repeat([]byte("c"), 1<<15), 1<<14)
	staged := func() int { ents, _ := os.ReadDir(filepath.Join(dir, ".incoming")); return len(ents) }
	eventually(t, "the partial file is written", func() bool { return staged() == 1 })
	c.ws.Close()
	eventually(t, "the partial file is removed", func() bool { return staged() == 0 })
	if got := uploadsIn(t, dir, ready2.Session); len(got) != 0 {
		t.Fatalf("a file cut short left %q", got)
	}

	// A file saved and never sent with a message goes with the
	// connection.
	d, ready3 := g.hello(map[string]any{"user": map[string]string{"id": "dee"}})
	d.sendFile("f1", "kept.txt", []byte("never sent"), 100)
	d.saved("f1")
	if got := uploadsIn(t, dir, ready3.Session); len(got) != 1 {
		t.Fatalf("the saved file: %q", got)
	}
	d.ws.Close()
	eventually(t, "the file no message brought is removed", func() bool { return len(uploadsIn(t, dir, ready3.Session)) == 0 })
}

// fullDisk is a store of files whose disk fills up as a file is written.
type fullDisk struct{ removed atomic.Int32 }

func (d *fullDisk) Save(_ context.Context, _, _ string, r io.Reader, _ int64) (string, int64, error) {
	_, _ = io.CopyN(io.Discard, r, 100)
	return "", 0, fmt.Errorf("write: %w", syscall.ENOSPC)
}

func (d *fullDisk) Read(context.Context, string, string, int64) ([]byte, error) {
	return nil, fs.ErrNotExist
}

func (d *fullDisk) Remove(context.Context, string, string) error { d.removed.Add(1); return nil }

// A full disk is storage_unavailable, to the sender; the connection and
// the conversation go on.
func TestAFileOnAFullDisk(t *testing.T) {
	disk := &fullDisk{}
	g := newGatewayWith(t, websocket.Config{}, func(c *sessions.Config) { c.Uploads = disk })
	a, _, _ := ann(t, g)
	a.sendFile("f1", "big.csv", bytes.Repeat([]byte("a,b\n"), 1000), 1<<12)
	if e := a.refused("f1"); e.Code != switchboard.ErrCodeStorage || !strings.Contains(e.Message, "big.csv was not saved: the gateway cannot store files now") {
		t.Fatalf("a full disk: %+v", e)
	}
	g.llm.Push(openaitest.Reply{Text: []string{"Still here."}})
	a.send(map[string]any{"type": "input", "id": "m1", "text": "hello?"})
	if got := data[switchboard.MessageData](t, lastOf(a.untilAssistant())).Content; got != "Still here." {
		t.Fatalf("answered %q", got)
	}
}

// Without a store for files, a file is refused with the reason.
func TestFilesWithoutAStore(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	a, _, _ := ann(t, g)
	a.sendFile("f1", "a.txt", []byte("hi"), 100)
	if e := a.refused("f1"); e.Code != websocket.ErrCodeFileRefused || !strings.Contains(e.Message, "this gateway keeps no files for conversations") {
		t.Fatalf("%+v", e)
	}
}

// A file on its way in one conversation delays no other.
func TestAFileDelaysNoOtherConversation(t *testing.T) {
	dir := t.TempDir()
	g := newGatewayWith(t, websocket.Config{}, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}))
	a, _, _ := ann(t, g)
	a.send(map[string]any{"type": "file", "id": "f1", "name": "slow.txt", "size": 1 << 20})
	a.sendChunks("f1", bytes.Repeat([]byte("s"), 1<<14), 1<<14) // and no more for now

	g.llm.Push(openaitest.Reply{Text: []string{"Quick."}})
	c, _ := g.hello(map[string]any{"user": map[string]string{"id": "cy"}})
	c.send(map[string]any{"type": "input", "id": "c1", "text": "hi"})
	if got := data[switchboard.MessageData](t, lastOf(c.untilAssistant())).Content; got != "Quick." {
		t.Fatalf("answered %q", got)
	}
	// Ann's own conversation is not held up by her file either.
	g.llm.Push(openaitest.Reply{Text: []string{"Here too."}})
	a.send(map[string]any{"type": "input", "id": "a2", "text": "and me?"})
	if got := data[switchboard.MessageData](t, lastOf(a.untilAssistant())).Content; got != "Here too." {
		t.Fatalf("answered %q", got)
	}
}

func lastOf(evs []wireEvent) wireEvent { return evs[len(evs)-1] }

// Two people of a conversation send files at once: Bob's, sent whole
// while Ann's is still arriving, is saved without waiting for hers, and
// both are saved.
func TestTwoPeopleSendFilesAtOnce(t *testing.T) {
	dir := t.TempDir()
	g := newGatewayWith(t, websocket.Config{}, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}))
	a, ready, _ := ann(t, g)
	code := share(a, "member")
	b, _ := g.hello(map[string]any{"invite": code, "user": map[string]string{"id": "bob", "name": "Bob"}})
	b.untilIdle()

	annFile := bytes.Repeat([]byte("a"), 3<<15)
	a.send(map[string]any{"type": "file", "id": "a1", "name": "ann.txt", "size": len(annFile)})
	a.sendChunks("a1", annFile[:1<<15], 1<<15)
	staged := func() int { ents, _ := os.ReadDir(filepath.Join(dir, ".incoming")); return len(ents) }
	eventually(t, "Ann's file is being written", func() bool { return staged() == 1 })
	b.sendFile("b1", "bob.txt", []byte("bob's\n"), 100)
	if f := b.saved("b1"); f.Path != "uploads/bob.txt" {
		t.Fatalf("Bob's file: %+v", f)
	}
	if got := uploadsIn(t, dir, ready.Session); len(got) != 1 || got[0] != "bob.txt" {
		t.Fatalf("while Ann's file arrives, the workspace holds %q", got)
	}
	a.sendChunks("a1", annFile[1<<15:], 1<<15)
	if f := a.saved("a1"); f.Path != "uploads/ann.txt" || f.Size != int64(len(annFile)) {
		t.Fatalf("Ann's file: %+v", f)
	}
}
