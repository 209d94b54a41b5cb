package stdin

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// uploadGateway is newGateway keeping people's files in workspaces under
// the returned folder, within lim.
func uploadGateway(t *testing.T, lim sessions.UploadLimits) (*sessionstest.Gateway, string) {
	t.Helper()
	dir := t.TempDir()
	gw := sessionstest.NewTuned(t, "../../guides", slog.New(slog.NewTextHandler(io.Discard, nil)), sessionstest.WithUploads(t, dir, lim))
	gw.LLM.Respond(model)
	return gw, dir
}

// files writes name → content into a new folder of the test's.
func files(t *testing.T, content map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range content {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var rain = []byte("city,rain\nLyon,12\nBrest,31\n")

func pngBytes(t *testing.T) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// On a pipe: /attach stages files (a quoted path with spaces too, and
// one with the message on the same line), the message carries them into
// the shared conversation's workspace, the terminal says where they were
// saved, and the others in the conversation see the share.
func TestAttachOnAPipe(t *testing.T) {
	gw, ws := uploadGateway(t, sessions.UploadLimits{})
	dan := attach(t, gw.Manager, dan, sessions.AttachOptions{Guide: "assistant"})
	dan.say("hello from the web")
	code := dan.share("member")
	local := files(t, map[string][]byte{"rain.csv": rain, "my notes.md": []byte("# Notes\nBrest is in Brittany.\n")})

	lines := []string{
		"/join " + code,
		"/attach",
		"/attach " + filepath.Join(local, "rain.csv"),
		"/attach",
		`/attach "` + filepath.Join(local, "my notes.md") + `" Which city is wetter?`,
		"/attach",
	}
	var out bytes.Buffer
	l := &Listener{In: strings.NewReader(strings.Join(lines, "\n") + "\n"), Out: &out, Author: tester, Guide: "assistant", Sessions: gw.Manager,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := l.Run(ctx); err != nil {
		t.Fatal(err)
	}
	screen := out.String()
	for _, want := range []string{
		"No files attached. /attach PATH attaches a file of this machine to your next message.\n",
		"Attached rain.csv (27 B): it goes with your next message. /attach lists the files, /detach drops them.\n",
		"Attached for your next message (/detach drops them):\n  rain.csv (27 B) " + filepath.Join(local, "rain.csv") + "\n",
		"  [file] rain.csv (27 B) saved as /workspace/uploads/rain.csv\n  [file] my notes.md (30 B) saved as /workspace/uploads/my notes.md\n",
		"You said: [tester]: Which city is wetter?",
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, screen)
		}
	}
	if !strings.HasSuffix(screen, "No files attached. /attach PATH attaches a file of this machine to your next message.\n") {
		t.Errorf("after the message the files are still attached:\n%s", screen)
	}
	if got, err := os.ReadFile(filepath.Join(ws, dan.session(), "uploads", "rain.csv")); err != nil || !bytes.Equal(got, rain) {
		t.Fatalf("the workspace holds %q (%v)", got, err)
	}
	msg := dan.await("the terminal's files", func(_ switchboard.Event, p any) bool {
		d, ok := p.(*switchboard.MessageData)
		return ok && d.Role == switchboard.RoleUser && d.AuthorID == tester.ID
	}).(*switchboard.MessageData)
	if msg.Content != "Which city is wetter?" || msg.Channel != Channel || len(msg.Files) != 2 ||
		msg.Files[0].Path != "uploads/rain.csv" || msg.Files[0].Type != "text/csv" || msg.Files[1].Path != "uploads/my notes.md" {
		t.Fatalf("Dan sees %+v", msg)
	}
}

// Someone else's files are shown under their message, with where they
// were saved; a name is printed without its control characters.
func TestOthersFilesAreShown(t *testing.T) {
	gw, _ := uploadGateway(t, sessions.UploadLimits{})
	d := attach(t, gw.Manager, dan, sessions.AttachOptions{Guide: "assistant"})
	d.say("hello")
	code := d.share("member")
	tm := startTerm(t, gw.Manager)
	tm.send("/join " + code)
	tm.expect("Joined ")
	tm.expect("You said: hello\n")

	ctx := context.Background()
	pic := pngBytes(t)
	saved, err := gw.Manager.Upload(ctx, d.session(), switchboard.Input{Author: dan}, []sessions.Incoming{
		{Name: "chart\x1b[2J.png", Size: int64(len(pic)), Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(pic)), nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	d.submit(switchboard.Input{Kind: switchboard.InputText, Text: "look at this", Files: saved})
	tm.expect("Dan · Web: look at this\n  [file] chart_[2J.png (" + switchboard.ByteSize(int64(len(pic))) + ") saved as /workspace/uploads/chart_[2J.png\n")
	d.submit(switchboard.Input{Kind: switchboard.InputText, Files: mustUpload(t, gw, d, "data.csv", rain)})
	tm.expect("Dan · Web:\n  [file] data.csv (27 B) saved as /workspace/uploads/data.csv\n")
	if strings.Contains(tm.out.String(), "\x1b[2J") {
		t.Fatalf("a file's name moved the screen:\n%q", tm.out.String())
	}
}

func mustUpload(t *testing.T, gw *sessionstest.Gateway, p *person, name string, b []byte) []switchboard.File {
	t.Helper()
	saved, err := gw.Manager.Upload(context.Background(), p.session(), switchboard.Input{Author: p.author}, []sessions.Incoming{
		{Name: name, Size: int64(len(b)), Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	return saved
}

// What cannot be attached or sent is said, and changes nothing else: the
// files stay attached until /detach, and the terminal goes on.
func TestAttachRefusals(t *testing.T) {
	gw, ws := uploadGateway(t, sessions.UploadLimits{FileBytes: 1000})
	local := files(t, map[string][]byte{"big.txt": bytes.Repeat([]byte("b"), 2048), "rain.csv": rain})
	tm := startTerm(t, gw.Manager)
	tm.expect("Type /help for commands")
	for _, tc := range []struct{ line, want string }{
		{"/attach " + filepath.Join(local, "nope.txt"), "! No file " + filepath.Join(local, "nope.txt") + " here.\n"},
		{"/attach " + local, "! " + local + " is a folder: attach its files one by one.\n"},
		{`/attach "` + local + `/big.txt`, "! the path's closing \" is missing\n"},
		{"/detach", "No files were attached.\n"},
		{"/attach " + filepath.Join(local, "big.txt"), "Attached big.txt (2.0 KiB)"},
		{"what is in it?", "! Not sent: big.txt is 2.0 KiB; a file may be at most 1000 B. /detach drops the files.\n"},
		{"/help", "/attach PATH [message]"},
		{"/detach", "Detached big.txt.\n"},
		{"what is in it?", "You said: what is in it?"},
	} {
		tm.send(tc.line)
		tm.expect(tc.want)
	}
	own := ownSession(t, gw)
	if ents, _ := os.ReadDir(filepath.Join(ws, own, "uploads")); len(ents) != 0 {
		t.Fatalf("a refused file left %d entries in the workspace", len(ents))
	}

	// A viewer's files are refused like their messages.
	d := attach(t, gw.Manager, dan, sessions.AttachOptions{Guide: "assistant"})
	d.say("hello")
	code := d.share("viewer")
	tm.send("/join " + code)
	tm.expect("Joined ")
	tm.send("/attach " + filepath.Join(local, "rain.csv") + " look")
	tm.expect("! Not sent: tester is a viewer in this session and may not send files. /detach drops the files.\n")
	if ents, _ := os.ReadDir(filepath.Join(ws, d.session(), "uploads")); len(ents) != 0 {
		t.Fatalf("a viewer's file is in the workspace")
	}
}
