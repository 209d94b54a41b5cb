package places

// Files from people: what every chat app does the same way with the files
// a person attaches to a message — their download, bounded in time and
// off the place's worker, the decision whether they may come (the chat
// app's Gate, then the session's Upload), and the line that shows a share
// in the conversation's other places.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
)

// Incoming is a file a person sent with a message, not downloaded yet:
// its name, the size the platform announced (-1: unknown) and how to
// start its download, which the session calls only once the file may
// come (sessions.Incoming).
type Incoming = sessions.Incoming

// ErrNotDownloaded: a person's file could not be had from the platform (it
// refused the bot, the file is gone or kept elsewhere, the download
// stalled). The refusal's reason says which, for the sender.
var ErrNotDownloaded = errors.New("a file could not be downloaded")

// NotDownloaded is the refusal of a file the platform did not give:
// reason is one sentence for the sender, without its final period.
func NotDownloaded(format string, args ...any) error {
	return &sessions.Refusal{Kind: ErrNotDownloaded, Reason: fmt.Sprintf(format, args...)}
}

// SubmitFiles gives b's session a person's message with the files they
// attached (in.Text may be empty): the chat app's Gate, then the session's
// Upload, which decides whether they may write here and whether the files
// may come before it downloads any into the conversation's workspace, then
// the message with the files saved. It downloads, so it runs off the
// place's worker (Aside). A message delivered again (the same
// in.ClientID) is taken once. The error is the writer's to be told
// (Refused); a message whose text is a command is refused before a byte
// is downloaded.
func (l *Layer) SubmitFiles(ctx context.Context, b switchboard.Binding, in switchboard.Input, files []Incoming) error {
	if cmd, ok := command(in.Text); ok {
		return &sessions.Refusal{Kind: sessions.ErrFileType, Reason: "files go with a message, not with a command (/" + cmd + "); send them again without it"}
	}
	in.Kind = switchboard.InputText
	if err := l.admit(ctx, b, &in); err != nil {
		return err
	}
	if !l.firstUpload(b.SessionID, in.ClientID) {
		l.log.Info(l.cfg.Channel+": a message with files seen before, ignored", "place", b.Address, "client_id", in.ClientID)
		return nil
	}
	saved, err := l.cfg.Sessions.Upload(ctx, b.SessionID, in, files)
	if err != nil {
		l.forgetUpload(b.SessionID, in.ClientID) // not taken: it may come again
		return err
	}
	in.Files = saved
	if _, err = l.cfg.Sessions.Submit(ctx, b.SessionID, in); err != nil {
		// Not taken (busy, draining, not stored): its files go, and the
		// message may come again whole.
		l.cfg.Sessions.Discard(context.WithoutCancel(ctx), b.SessionID, saved)
		l.forgetUpload(b.SessionID, in.ClientID)
	}
	return err
}

// command is the name of the session command text is ("/usage"), as the
// session reads one.
func command(text string) (string, bool) {
	text = strings.TrimSpace(text)
	if len(text) < 2 || text[0] != '/' || !('a' <= text[1] && text[1] <= 'z' || 'A' <= text[1] && text[1] <= 'Z') {
		return "", false
	}
	name, _, _ := strings.Cut(text[1:], " ")
	return name, true
}

// firstUpload reports whether a message with files is new, and remembers
// it for an hour (bounded): a platform delivering it again (Slack's
// retries, a Gateway replay) would download its files again.
func (l *Layer) firstUpload(sessionID, clientID string) bool {
	if clientID == "" {
		return true
	}
	key := sessionID + "/" + clientID
	l.uploadedMu.Lock()
	defer l.uploadedMu.Unlock()
	now := time.Now()
	if at, ok := l.uploaded[key]; ok && now.Sub(at) < time.Hour {
		return false
	}
	if len(l.uploaded) >= 10_000 {
		clear(l.uploaded) // forgetting costs a download, and the session's own de-duplication holds
	}
	l.uploaded[key] = now
	return true
}

func (l *Layer) forgetUpload(sessionID, clientID string) {
	l.uploadedMu.Lock()
	defer l.uploadedMu.Unlock()
	delete(l.uploaded, sessionID+"/"+clientID)
}

// A Fetch is one person's file to download over HTTP, as a chat app's
// Incoming.Open asks for it.
type Fetch struct {
	// Name is the file's name and From the platform ("Slack"), for the
	// sender's sentences.
	Name, From string
	Client     *http.Client
	Request    *http.Request
	// Check says whether an answer is the file: nil, or a refusal
	// (NotDownloaded) saying why not. Nil takes a 200 alone.
	Check func(*http.Response) error
}

// Download starts a file's download and returns its body. It is bounded
// twice: one that brings nothing for Config.FileStall (the answer's
// headers included) is given up, and so is one that takes longer than
// Config.FileTime; either is a refusal (ErrNotDownloaded) for the
// sender, from Download or from a read of the body. Other failures are
// logged with their cause and refused in a sentence.
func (l *Layer) Download(ctx context.Context, f Fetch) (io.ReadCloser, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.FileTime)
	d := &download{l: l, f: f, ctx: ctx, cancel: cancel}
	d.timer = time.AfterFunc(l.cfg.FileStall, func() {
		d.stalled.Store(true)
		cancel()
	})
	resp, err := f.Client.Do(f.Request.WithContext(ctx))
	if err != nil {
		d.close()
		return nil, d.why(err)
	}
	check := f.Check
	if check == nil {
		check = func(r *http.Response) error {
			if r.StatusCode != http.StatusOK {
				return NotDownloaded("%s would not give me %s (HTTP %d)", f.From, f.Name, r.StatusCode)
			}
			return nil
		}
	}
	if err := check(resp); err != nil {
		resp.Body.Close()
		d.close()
		l.log.Info(l.cfg.Channel+": a person's file not downloaded", "file", f.Name, "status", resp.StatusCode,
			"content_type", resp.Header.Get("Content-Type"), "err", err)
		return nil, err
	}
	d.body = resp.Body
	return d, nil
}

// download is a file's body, its reads watched for a stall.
type download struct {
	l       *Layer
	f       Fetch
	ctx     context.Context
	cancel  context.CancelFunc
	timer   *time.Timer
	stalled atomic.Bool
	body    io.ReadCloser
}

func (d *download) Read(p []byte) (int, error) {
	n, err := d.body.Read(p)
	if n > 0 && !d.stalled.Load() {
		d.timer.Reset(d.l.cfg.FileStall)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = d.why(err)
	}
	return n, err
}

func (d *download) Close() error {
	err := d.body.Close()
	d.close()
	return err
}

func (d *download) close() {
	d.timer.Stop()
	d.cancel()
}

// why is what a failed download is for the sender: a stall or a download
// that took too long is theirs to know; the layer stopping is not.
func (d *download) why(err error) error {
	switch {
	case d.stalled.Load():
		return NotDownloaded("the download of %s from %s stalled (nothing came for %s); send it again", d.f.Name, d.f.From, d.l.cfg.FileStall)
	case errors.Is(d.ctx.Err(), context.DeadlineExceeded):
		return NotDownloaded("the download of %s from %s took longer than %s, and was given up", d.f.Name, d.f.From, d.l.cfg.FileTime)
	case d.ctx.Err() != nil:
		return err // the layer is stopping
	}
	d.l.log.Warn(d.l.cfg.Channel+": a person's file could not be downloaded", "file", d.f.Name, "err", err)
	return NotDownloaded("the download of %s from %s failed; send it again", d.f.Name, d.f.From)
}

// Shared is how a place shows that who shared files, in the chat app's
// words: "Alice · Slack shared rain.csv (27 B) and chart.png (1.2 KiB)".
// who is plain text (Byline's, or a name).
func (l *Layer) Shared(who string, files []switchboard.File) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = l.cfg.Words.Escape(OneLine(f.Name)) + " (" + switchboard.ByteSize(f.Size) + ")"
	}
	list := strings.Join(names, ", ")
	if n := len(names); n > 1 {
		list = strings.Join(names[:n-1], ", ") + " and " + names[n-1]
	}
	return l.cfg.Words.Strong(who) + " shared " + list
}
