package sessions_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// incoming is a file as a listener hands it over; opened counts its
// downloads.
func incoming(name string, data []byte, announced int64, opened *atomic.Int32) sessions.Incoming {
	return sessions.Incoming{Name: name, Size: announced, Open: func(context.Context) (io.ReadCloser, error) {
		if opened != nil {
			opened.Add(1)
		}
		return io.NopCloser(bytes.NewReader(data)), nil
	}}
}

func tinyPNG(t *testing.T) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A person's files land in the workspace, the message that brings them
// shows them to everyone, and the model reads which arrived, with a text
// file's content.
func TestFilesArriveInTheWorkspaceAndTheModelIsTold(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}))
	c := h.newSession(alice)
	in := switchboard.Input{Author: alice}
	csv := []byte("city,rain\nLyon,12\nBrest,31\n")
	files, err := h.m.Upload(context.Background(), c.id, in, []sessions.Incoming{
		incoming("../../reports/rain.csv", csv, int64(len(csv)), nil),
		incoming("chart.png", tinyPNG(t), -1, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Path != "uploads/rain.csv" || files[0].Type != "text/csv" || files[0].Name != "rain.csv" ||
		files[1].Path != "uploads/chart.png" || files[1].Type != "image/png" {
		t.Fatalf("saved %+v", files)
	}
	if got, err := os.ReadFile(filepath.Join(dir, c.id, "uploads", "rain.csv")); err != nil || !bytes.Equal(got, csv) {
		t.Fatalf("the workspace holds %q (%v)", got, err)
	}
	h.llm.Push(openaitest.Reply{Text: []string{"Brest is wetter."}})
	c.send(switchboard.Input{Kind: switchboard.InputText, Text: "Which city is wetter?", Files: files})
	msg := c.until(switchboard.EventMessage, func(p any) bool { return p.(*switchboard.MessageData).Role == switchboard.RoleUser }).(*switchboard.MessageData)
	if len(msg.Files) != 2 || msg.Files[0].Name != "rain.csv" || msg.Content != "Which city is wetter?" {
		t.Fatalf("the message event shows %+v", msg)
	}
	if got := c.reply().Content; got != "Brest is wetter." {
		t.Fatalf("answered %q", got)
	}
	req := lastRequest(t, h.llm)
	text := openaitest.Text(req.Messages[len(req.Messages)-1].Content)
	for _, want := range []string{"Which city is wetter?", "rain.csv (text/csv, 27 B) at /workspace/uploads/rain.csv", "Brest,31", "chart.png (image/png"} {
		if !strings.Contains(text, want) {
			t.Errorf("the model's message lacks %q:\n%s", want, text)
		}
	}
	// The picture goes with the message as image input.
	pics := openaitest.Images(req.Messages[len(req.Messages)-1].Content)
	if len(pics) != 1 || !strings.HasPrefix(pics[0], "data:image/png;base64,") {
		t.Fatalf("the model was shown %d pictures: %.80q", len(pics), pics)
	}
	// A model without vision reads of the picture in the text alone.
	h.cfg.Providers["main"].NoVision = true
	h.llm.Push(openaitest.Reply{Text: []string{"Noted."}})
	c.say("and now?")
	c.reply()
	last := lastRequest(t, h.llm)
	for _, m := range last.Messages {
		if len(openaitest.Images(m.Content)) > 0 {
			t.Fatal("a provider with vision: false was shown a picture")
		}
	}
	if !strings.Contains(openaitest.Text(last.Messages[len(last.Messages)-3].Content), "chart.png (image/png") {
		t.Errorf("without vision the model does not read of the picture")
	}
	h.cfg.Providers["main"].NoVision = false
	// The stored message is what Alice wrote, with its files.
	w := c.window()
	if first := w[0]; first.Content != "Which city is wetter?" || len(first.Files) != 2 {
		t.Fatalf("stored %+v", first)
	}
}

// What a person may not send is refused before a byte is downloaded, with
// a sentence for them, and a refused message leaves no file behind.
func TestUploadsAreRefusedClearly(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{FileBytes: 1000, MessageBytes: 1500, Files: 3}))
	ann := h.newSession(alice)
	b := h.join(ann, bob)
	ann.say("/role Bob viewer")
	b.say("/who")
	ctx := context.Background()
	var opened atomic.Int32
	small := bytes.Repeat([]byte("x"), 100)
	for _, tc := range []struct {
		name  string
		who   switchboard.Author
		files []sessions.Incoming
		kind  error
		says  string
	}{
		{"a viewer", bob, []sessions.Incoming{incoming("a.txt", small, 100, &opened)}, sessions.ErrForbidden, "Bob is a viewer in this session and may not send files"},
		{"announced too large", alice, []sessions.Incoming{incoming("big.txt", small, 5000, &opened)}, sessions.ErrFileTooLarge, "big.txt is 4.9 KiB; a file may be at most 1000 B"},
		{"too much together", alice, []sessions.Incoming{incoming("a.txt", small, 900, &opened), incoming("b.txt", small, 900, &opened)}, sessions.ErrFileTooLarge, "a message's files may be at most 1.5 KiB"},
		{"too many", alice, []sessions.Incoming{incoming("a", small, 1, &opened), incoming("b", small, 1, &opened), incoming("c", small, 1, &opened), incoming("d", small, 1, &opened)}, sessions.ErrFileTooLarge, "at most 3 files, not 4"},
	} {
		_, err := h.m.Upload(ctx, ann.id, switchboard.Input{Author: tc.who}, tc.files)
		if !errors.Is(err, tc.kind) || !strings.Contains(sessions.Reason(err, ""), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.kind, tc.says)
		}
	}
	if n := opened.Load(); n != 0 {
		t.Fatalf("%d downloads started for uploads refused before they could", n)
	}
	// Refused as they arrive: a program disguised by its name, a file
	// bigger than announced, one bigger than allowed; the files of the
	// message saved before them are removed.
	elf := append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 200)...)
	for _, tc := range []struct {
		name string
		last sessions.Incoming
		says string
	}{
		{"a binary", incoming("report.pdf", elf, int64(len(elf)), nil), "report.pdf is a binary file of no known type, which this assistant does not take"},
		{"bigger than announced", incoming("notes.txt", bytes.Repeat([]byte("y"), 500), 200, nil), "notes.txt was bigger than announced"},
		{"bigger than allowed", incoming("notes.txt", bytes.Repeat([]byte("y"), 1200), -1, nil), "notes.txt is larger than 1000 B"},
	} {
		_, err := h.m.Upload(ctx, ann.id, switchboard.Input{Author: alice}, []sessions.Incoming{incoming("first.txt", small, 100, nil), tc.last})
		if !strings.Contains(sessions.Reason(err, ""), tc.says) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.says)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(dir, ann.id, "uploads"))
	if len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("refused uploads left %v in the workspace", names)
	}
	// Files saved one by one (as a WebSocket client sends them) are
	// bounded by message when the message comes.
	var saved []switchboard.File
	for _, name := range []string{"a.txt", "b.txt"} {
		f, err := h.m.Upload(ctx, ann.id, switchboard.Input{Author: alice}, []sessions.Incoming{incoming(name, bytes.Repeat([]byte("z"), 900), 900, nil)})
		if err != nil {
			t.Fatal(err)
		}
		saved = append(saved, f...)
	}
	_, err := h.m.Submit(ctx, ann.id, switchboard.Input{Kind: switchboard.InputText, Author: alice, Text: "both", Files: saved})
	if !errors.Is(err, sessions.ErrFileTooLarge) || !strings.Contains(sessions.Reason(err, ""), "at most 1.5 KiB") {
		t.Errorf("a message with 1.8 KiB of files: %v", err)
	}
	forged := []switchboard.File{{Name: "passwd", Path: "uploads/../../etc/passwd", Type: "text/plain", Size: 10}}
	if _, err := h.m.Submit(ctx, ann.id, switchboard.Input{Kind: switchboard.InputText, Author: alice, Text: "x", Files: forged}); !errors.Is(err, sessions.ErrFileType) {
		t.Errorf("a file no upload saved: %v", err)
	}
	// The session goes on.
	h.llm.Push(openaitest.Reply{Text: []string{"Still here."}})
	ann.say("hello?")
	if got := ann.reply().Content; got != "Still here." {
		t.Fatalf("answered %q", got)
	}
}

// Without a store for files, an upload is refused with the reason.
func TestUploadsWithoutAStore(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)
	_, err := h.m.Upload(context.Background(), c.id, switchboard.Input{Author: alice}, []sessions.Incoming{incoming("a.txt", []byte("x"), 1, nil)})
	if !errors.Is(err, sessions.ErrNoUploads) || sessions.Reason(err, "") == "" {
		t.Fatalf("%v", err)
	}
}

// A guide whose model takes no pictures (vision: false) is told of them
// in words, on a provider that has vision.
func TestAGuideWithoutVisionReadsOfPictures(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}))
	c := h.attach(sessions.AttachOptions{Author: alice, Guide: "textonly"})
	files, err := h.m.Upload(context.Background(), c.id, switchboard.Input{Author: alice}, []sessions.Incoming{incoming("chart.png", tinyPNG(t), -1, nil)})
	if err != nil {
		t.Fatal(err)
	}
	h.llm.Push(openaitest.Reply{Text: []string{"A chart, I am told."}})
	c.send(switchboard.Input{Kind: switchboard.InputText, Text: "what is it?", Files: files})
	c.reply()
	req := lastRequest(t, h.llm)
	user := req.Messages[len(req.Messages)-1]
	if pics := openaitest.Images(user.Content); len(pics) != 0 {
		t.Fatalf("a guide with vision: false was shown %d pictures", len(pics))
	}
	if !strings.Contains(openaitest.Text(user.Content), "chart.png (image/png") {
		t.Fatalf("the model was not told of the picture: %s", openaitest.Text(user.Content))
	}
}

// A message its session refuses while a tool call waits for approval is
// not taken, and neither are its files: they leave the workspace.
func TestFilesOfARefusedMessageGo(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}))
	h.llm.Push(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "t1", Name: "current_time", Args: `{"timezone":"UTC"}`}}})
	c := h.newSession(alice)
	c.say("what time is it?")
	c.confirmation()
	files, err := h.m.Upload(context.Background(), c.id, switchboard.Input{Author: alice}, []sessions.Incoming{incoming("rain.csv", []byte("city,rain\n"), -1, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if got := sessionstest.Uploaded(t, dir, c.id); len(got) != 1 {
		t.Fatalf("the workspace holds %v", got)
	}
	c.send(switchboard.Input{Kind: switchboard.InputText, Text: "and this file?", Files: files})
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeBusy {
		t.Fatalf("a message while a tool call waits: %+v", e)
	}
	if got := sessionstest.Uploaded(t, dir, c.id); len(got) != 0 {
		t.Fatalf("the refused message's files stayed: %v", got)
	}
}
