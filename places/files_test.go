package places_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// file is a person's file as a chat app hands it over; opened counts its
// downloads.
func file(name string, data []byte, opened *atomic.Int32) places.Incoming {
	return places.Incoming{Name: name, Size: int64(len(data)), Open: func(context.Context) (io.ReadCloser, error) {
		opened.Add(1)
		return io.NopCloser(bytes.NewReader(data)), nil
	}}
}

// files are the files the message events a place was shown carry.
func (c *chat) files(address string) []switchboard.File {
	var out []switchboard.File
	for _, r := range c.roomsOf(address) {
		c.mu.Lock()
		evs := slices.Clone(r.shown)
		c.mu.Unlock()
		for _, ev := range evs {
			if p, err := ev.Payload(); err == nil {
				if m, ok := p.(*switchboard.MessageData); ok {
					out = append(out, m.Files...)
				}
			}
		}
	}
	return out
}

// A message's files pass the chat app's Gate and the session's decision,
// land in the conversation's workspace, and the message shows them to
// every place of the conversation; the same message delivered again is
// downloaded once. What may not come is refused before a byte is
// downloaded: a command with files, a viewer's files, what the Gate
// refuses.
func TestSubmitFiles(t *testing.T) {
	dir := t.TempDir()
	c := newTunedChat(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}), nil)
	b, err := c.layer.SessionAt(c.ctx, "p1", alice, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.gw.Manager.Bind(c.ctx, "test", "p2", b.SessionID); err != nil {
		t.Fatal(err)
	}
	var opened atomic.Int32
	csv := []byte("city,rain\nBrest,31\n")
	in := switchboard.Input{Author: alice, ClientID: "m1"}
	for range 2 { // delivered twice
		if err := c.layer.SubmitFiles(c.ctx, b, in, []places.Incoming{file("rain.csv", csv, &opened)}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the share shown in the other place", func() bool {
		f := c.files("p2")
		return len(f) == 1 && f[0].Name == "rain.csv" && f[0].Size == int64(len(csv))
	})
	if n := opened.Load(); n != 1 {
		t.Fatalf("downloaded %d times", n)
	}
	if got, err := os.ReadFile(filepath.Join(dir, b.SessionID, "uploads", "rain.csv")); err != nil || !bytes.Equal(got, csv) {
		t.Fatalf("the workspace holds %q (%v)", got, err)
	}

	err = c.layer.SubmitFiles(c.ctx, b, switchboard.Input{Author: alice, Text: "/usage"}, []places.Incoming{file("a.csv", csv, &opened)})
	if !errors.Is(err, sessions.ErrFileType) || !strings.Contains(places.Refused(err), "not with a command (/usage)") {
		t.Fatalf("files with a command: %v (%q)", err, places.Refused(err))
	}

	code := share(t, c, "p1", "viewer")
	if _, ok := c.layer.Join(c.ctx, where("p3", true, "DM"), bob, code, &joinLine{}, func(string) {}, false); !ok {
		t.Fatal("Bob did not join")
	}
	err = c.layer.SubmitFiles(c.ctx, switchboard.Binding{Channel: "test", Address: "p3", SessionID: b.SessionID},
		switchboard.Input{Author: bob, Text: "look"}, []places.Incoming{file("b.csv", csv, &opened)})
	if !errors.Is(err, sessions.ErrForbidden) || !strings.Contains(places.Refused(err), "viewer") {
		t.Fatalf("a viewer's files: %v (%q)", err, places.Refused(err))
	}

	c.mu.Lock()
	c.gate = places.NotAllowed("this channel is not one I answer in")
	c.mu.Unlock()
	if err := c.layer.SubmitFiles(c.ctx, b, switchboard.Input{Author: alice}, []places.Incoming{file("c.csv", csv, &opened)}); !errors.Is(err, sessions.ErrForbidden) {
		t.Fatalf("the Gate's refusal: %v", err)
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("%d downloads: a refused message's files were downloaded", n)
	}
}

// Work set aside for a place (a download) holds back the place's later
// work, in order, and no other place's, though they share the worker.
func TestAsideKeepsThePlaceOrder(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gw := sessionstest.New(t, "../guides", log)
	l := places.New(places.Config{Channel: "test", Sessions: gw.Manager, Log: log, Workers: 1, Depth: 4,
		NewRoom: func(switchboard.Binding) (places.Room, error) { return nil, errors.New("none") }})
	ctx, cancel := context.WithCancel(context.Background())
	l.Start(ctx)
	defer l.Wait()
	defer cancel()

	var mu sync.Mutex
	var got []string
	note := func(s string) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	}
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	release, again := make(chan struct{}), make(chan struct{})
	l.Run("a", func() {
		l.Aside("a", func(context.Context) {
			<-release
			note("a: the download")
		})
	})
	for i := range 6 { // more than Depth: Run waits, on a goroutine of its own
		go l.Run("a", func() { note("a: later " + string(rune('0'+i))) })
	}
	l.Run("b", func() { note("b") })
	eventually(t, "b's work, while a's waits", func() bool { return slices.Contains(seen(), "b") })
	if s := seen(); len(s) != 1 {
		t.Fatalf("ran %q while a's download was under way", s)
	}
	close(release)
	eventually(t, "a's work", func() bool { return len(seen()) == 8 })
	s := seen()
	if s[1] != "a: the download" {
		t.Fatalf("order %q", s)
	}

	// Work set aside by work that waited: what follows waits again.
	l.Run("a", func() {
		l.Aside("a", func(context.Context) { <-again; note("a: the second download") })
	})
	l.Run("a", func() { note("a: last") })
	l.Run("b", func() { note("b: again") })
	eventually(t, "b again", func() bool { return slices.Contains(seen(), "b: again") })
	close(again)
	eventually(t, "a's last", func() bool { return slices.Contains(seen(), "a: last") })
	if s := seen(); s[len(s)-1] != "a: last" || s[len(s)-2] != "a: the second download" {
		t.Fatalf("order %q", s)
	}
}

// A download that brings nothing for FileStall, at its start or in its
// middle, or takes longer than FileTime, is given up, a refusal for the
// sender; an answer that is not the file is refused as the chat app's
// Check says.
func TestDownload(t *testing.T) {
	c := newTunedChat(t, nil, func(cfg *places.Config) { cfg.FileStall, cfg.FileTime = 300*time.Millisecond, 1500*time.Millisecond })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/silent": // no answer at all
			<-r.Context().Done()
		case "/stalls": // half the file, then nothing
			w.Header().Set("Content-Length", "1000")
			w.Write(bytes.Repeat([]byte("x"), 500))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/trickles": // a byte every 20 ms, never stalling, for ever
			for {
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-time.After(20 * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
		case "/login":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<!DOCTYPE html><title>Sign in</title>")
		case "/gone":
			http.NotFound(w, r)
		default:
			io.WriteString(w, "city,rain\n")
		}
	}))
	defer srv.Close()
	get := func(path string, check func(*http.Response) error) ([]byte, error) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		body, err := c.layer.Download(c.ctx, places.Fetch{Name: "rain.csv", From: "Chat", Client: srv.Client(), Request: req, Check: check})
		if err != nil {
			return nil, err
		}
		defer body.Close()
		return io.ReadAll(body)
	}
	if data, err := get("/", nil); err != nil || string(data) != "city,rain\n" {
		t.Fatalf("a download: %q, %v", data, err)
	}
	for path, want := range map[string]string{
		"/silent":   "stalled (nothing came for 300ms)",
		"/stalls":   "stalled (nothing came for 300ms)",
		"/trickles": "took longer than 1.5s",
		"/gone":     "would not give me rain.csv (HTTP 404)",
	} {
		_, err := get(path, nil)
		if !errors.Is(err, places.ErrNotDownloaded) || !strings.Contains(places.Refused(err), want) {
			t.Errorf("%s: %v (%q), want %q", path, err, places.Refused(err), want)
		}
	}
	notHTML := func(r *http.Response) error {
		if strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			return places.NotDownloaded("Chat showed me a sign-in page instead of %s", "rain.csv")
		}
		return nil
	}
	if _, err := get("/login", notHTML); !strings.Contains(places.Refused(err), "sign-in page instead of rain.csv") {
		t.Errorf("a sign-in page: %v", err)
	}
}

func TestSharedAndRefused(t *testing.T) {
	c := newChat(t)
	files := []switchboard.File{{Name: "rain.csv", Size: 27}, {Name: "chart\n.png", Size: 1536}, {Name: "big.pdf", Size: 3 << 20}}
	if got, want := c.layer.Shared("Alice · Slack", files[:1]), "*Alice · Slack* shared rain.csv (27 B)"; got != want {
		t.Errorf("Shared = %q, want %q", got, want)
	}
	if got, want := c.layer.Shared("Alice", files), "*Alice* shared rain.csv (27 B), chart .png (1.5 KiB) and big.pdf (3.0 MiB)"; got != want {
		t.Errorf("Shared = %q, want %q", got, want)
	}
	for err, want := range map[error]string{
		&sessions.Refusal{Kind: sessions.ErrFileTooLarge, Reason: "rain.csv is 25.0 MiB; a file may be at most 20.0 MiB"}: "Not sent: rain.csv is 25.0 MiB; a file may be at most 20.0 MiB.",
		places.NotDownloaded("Slack would not let me download %s", "rain.csv"):                                            "Not sent: Slack would not let me download rain.csv.",
		sessions.ErrNotStored: "Not sent: " + sessions.ErrNotStored.Error() + ".",
	} {
		if got := places.Refused(err); got != want {
			t.Errorf("Refused(%v) = %q, want %q", err, got, want)
		}
	}
}

// A message its session does not take after its files were saved leaves
// none of them in the workspace, and may come again whole.
func TestAMessageNotTakenTakesItsFilesAway(t *testing.T) {
	dir := t.TempDir()
	busy := false
	c := newTunedChat(t, sessionstest.WithUploads(t, dir, sessions.UploadLimits{}), func(cfg *places.Config) {
		cfg.Sessions = switchable{Sessions: cfg.Sessions, busy: &busy}
	})
	b, err := c.layer.SessionAt(c.ctx, "p1", alice, true)
	if err != nil {
		t.Fatal(err)
	}
	var opened atomic.Int32
	in := switchboard.Input{Author: alice, ClientID: "m1", Text: "the rain"}
	busy = true
	err = c.layer.SubmitFiles(c.ctx, b, in, []places.Incoming{file("rain.csv", []byte("city,rain\n"), &opened)})
	if !errors.Is(err, sessions.ErrBusy) {
		t.Fatalf("a busy session: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, b.SessionID, "uploads")); len(ents) != 0 {
		t.Fatalf("a message not taken left %d files in the workspace", len(ents))
	}
	busy = false
	if err := c.layer.SubmitFiles(c.ctx, b, in, []places.Incoming{file("rain.csv", []byte("city,rain\n"), &opened)}); err != nil {
		t.Fatalf("sent again: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, b.SessionID, "uploads")); len(ents) != 1 || ents[0].Name() != "rain.csv" {
		t.Fatalf("sent again, the workspace holds %v", ents)
	}
}

// switchable is the real sessions, which refuse every message as a full
// queue does while busy is set (the test sets it between calls, never
// during one).
type switchable struct {
	places.Sessions
	busy *bool
}

func (s switchable) Submit(ctx context.Context, id string, in switchboard.Input) (*sessions.Receipt, error) {
	if *s.busy {
		return nil, sessions.ErrBusy
	}
	return s.Sessions.Submit(ctx, id, in)
}
