package websocket

// Files a person sends with a message (docs/websocket.md, "Sending
// files"). A client announces a file (a file frame: id, name, size), then
// sends its bytes in order in file_chunk frames; the gateway saves it in
// the conversation's workspace and answers file_saved, and the client's
// next input names the saved files by id.
//
// Each file is saved by Manager.Upload on a goroutine of its own, fed
// through an io.Pipe by the read loop: a chunk is taken from the socket
// only once the one before it is on its way to the disk, so a client
// cannot send faster than its file is saved (the pipe is the
// backpressure), and nothing is held in memory but the chunk. One file
// arrives at a time on a connection: the next may be announced once the
// last bytes of the one before are in, which keeps a connection's
// uploads in order and its staging files to one. Other connections'
// files, of the same conversation too, arrive beside it (the workspace
// is locked only to copy a whole file in).
//
// What is left behind: a file refused before its bytes are in has the
// rest of its chunks dropped quietly; one cut short (the connection
// closed, no data for FileIdleTimeout) is removed by Upload, as is any
// partial file. A file saved and never sent with a message is removed
// (Manager.Discard) when the connection closes or moves.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
)

// EventFileSaved answers a file a client sent: it is saved in the
// conversation's workspace. Like ready it has seq 0 and is not stored.
const EventFileSaved switchboard.EventType = "file_saved"

// ErrCodeFileRefused: a file the gateway's rules do not take (too large,
// of a type not taken, the workspace full, files not kept at all), or one
// cut short; the message says which file and why.
const ErrCodeFileRefused = "file_refused"

// FileSavedData is EventFileSaved's data: the client's id for the file,
// and the file as the message that brings it will show it.
type FileSavedData struct {
	ID   string           `json:"id"`
	File switchboard.File `json:"file"`
}

// fileErrorData is an error about one of the client's files: FileID is
// the id its file frame gave it.
type fileErrorData struct {
	switchboard.ErrorData
	FileID string `json:"file_id"`
}

// Why an upload was cut short by the listener (its context's cause).
var (
	errConnGone = errors.New("the connection closed")
	errMoved    = errors.New("the connection moved to another conversation")
	errIdle     = errors.New("no data came in time")
	errTooLarge = errors.New("more bytes than announced")
)

// upload is one file of a connection: arriving, being saved, saved and
// waiting for the message that sends it, or refused.
type upload struct {
	id, name string
	size     int64 // announced
	session  string
	started  time.Time
	pw       *io.PipeWriter // the read loop's
	idle     *time.Timer
	cancel   context.CancelCauseFunc
	done     chan struct{} // closed once Upload has returned

	// Guarded by uploads.mu.
	got    int64 // bytes received
	failed bool  // refused or cut short: the rest of its chunks are dropped
	file   switchboard.File
	err    error // Upload's, once done
}

// arriving: bytes are still to come. Called with uploads.mu held.
func (u *upload) arriving() bool { return !u.failed && u.got < u.size }

// uploads are a connection's files, by the client's ids.
type uploads struct {
	mu    sync.Mutex
	files map[string]*upload
	wg    sync.WaitGroup // the Upload goroutines
}

// shownName is a client's file name for a message: its last path
// element, without control characters, cut short.
func shownName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 && i < len(name)-1 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, name)
	if r := []rune(name); len(r) > 60 {
		name = string(r[:60]) + "…"
	}
	return name
}

// fileError sends an error about the file id to the client.
func (c *conn) fileError(id, code, msg string) {
	c.mu.Lock()
	sid, guide := c.sessionID, c.guide
	c.mu.Unlock()
	c.enqueue(connEvent(sid, guide, switchboard.EventError, fileErrorData{ErrorData: switchboard.ErrorData{Code: code, Message: msg}, FileID: id}))
}

// announce starts receiving the file f announces.
func (c *conn) announce(f clientFrame, sessionID string, author switchboard.Author) {
	cfg := c.h.cfg
	name := shownName(f.Name)
	refuse := func(code, msg string) {
		c.files.mu.Unlock()
		c.fileError(f.ID, code, msg)
	}
	c.files.mu.Lock()
	var pending int
	var bytes int64
	for id, u := range c.files.files {
		switch {
		case u.failed || u.err != nil:
			// Refused, and told so: a client that announces another file
			// has given up on its chunks.
			delete(c.files.files, id)
		case u.arriving():
			refuse(switchboard.ErrCodeBadFrame, fmt.Sprintf("file: %s is still arriving (%d of %d bytes); send one file at a time", quote(u.id), u.got, u.size))
			return
		case id == f.ID:
			refuse(switchboard.ErrCodeBadFrame, fmt.Sprintf("file: the id %s is taken by another file on this connection; give each file its own", quote(f.ID)))
			return
		default:
			pending++
			bytes += u.size
		}
	}
	switch {
	case pending >= cfg.MaxPendingFiles:
		refuse(ErrCodeFileRefused, fmt.Sprintf("%s was not taken: %d files already wait for a message on this connection; send a message with them first", name, pending))
		return
	case bytes+*f.Size > cfg.MaxPendingFileBytes:
		refuse(ErrCodeFileRefused, fmt.Sprintf("%s was not taken: it is %s, and with the files waiting for a message on this connection that makes more than the %s they may be; send a message with them first",
			name, switchboard.ByteSize(*f.Size), switchboard.ByteSize(cfg.MaxPendingFileBytes)))
		return
	}
	ctx, cancel := context.WithCancelCause(c.ctx)
	pr, pw := io.Pipe()
	u := &upload{id: f.ID, name: f.Name, size: *f.Size, session: sessionID, started: cfg.Now(), pw: pw, cancel: cancel, done: make(chan struct{})}
	// Cut short, for whatever cause: Upload's reads fail (it removes what
	// it wrote), and a write the read loop is blocked in returns.
	context.AfterFunc(ctx, func() { pw.CloseWithError(context.Cause(ctx)) })
	// No progress for this long, whether the client sends nothing or the
	// workspace takes nothing, cuts the file short.
	u.idle = time.AfterFunc(cfg.FileIdleTimeout, func() { cancel(errIdle) })
	c.files.files[f.ID] = u
	c.files.wg.Add(1)
	c.files.mu.Unlock()

	go func() {
		defer c.files.wg.Done()
		defer cancel(nil)
		saved, err := c.h.sessions.Upload(ctx, sessionID, switchboard.Input{Author: author}, []sessions.Incoming{{
			Name: f.Name, Size: *f.Size,
			Open: func(context.Context) (io.ReadCloser, error) { return pr, nil },
		}})
		u.idle.Stop()
		// Upload has stopped reading: a write the read loop is blocked in
		// returns, and the rest of the chunks are dropped.
		_ = pr.CloseWithError(errUploadOver)
		if err == nil && len(saved) != 1 {
			err = fmt.Errorf("websocket: Upload saved %d files of 1", len(saved))
		}
		if ctx.Err() != nil {
			// Cut short by the listener (saved or not: the connection is
			// gone, or the client is told the file was not saved).
			err = context.Cause(ctx)
		}
		c.files.mu.Lock()
		// Saved just as the connection dropped it: no message can bring
		// it now.
		orphan := err == nil && c.files.files[u.id] != u
		if orphan {
			err = errConnGone
		}
		if u.err = err; err == nil {
			u.file = saved[0]
		} else {
			u.failed = true
			if u.got >= u.size && c.files.files[u.id] == u {
				delete(c.files.files, u.id)
			}
		}
		c.files.mu.Unlock()
		if orphan {
			c.h.sessions.Discard(context.WithoutCancel(ctx), sessionID, saved)
		}
		close(u.done)
		c.uploaded(u, err)
	}()
}

// errUploadOver ends the pipe once Upload returned.
var errUploadOver = errors.New("the upload is over")

// uploaded tells the client what became of its file.
func (c *conn) uploaded(u *upload, err error) {
	name := shownName(u.name)
	named := func(reason string) string {
		if strings.Contains(reason, name) {
			return reason
		}
		return name + " was not saved: " + reason
	}
	switch {
	case err == nil:
		c.log.Debug("file saved", "session", u.session, "path", u.file.Path, "bytes", u.file.Size, "took", c.h.cfg.Now().Sub(u.started))
		c.mu.Lock()
		sid, guide := c.sessionID, c.guide
		c.mu.Unlock()
		c.enqueue(connEvent(sid, guide, EventFileSaved, FileSavedData{ID: u.id, File: u.file}))
	case errors.Is(err, errConnGone), errors.Is(err, errMoved):
		// Nobody to tell; Upload left nothing behind.
	case c.h.ctx.Err() != nil:
		c.fileError(u.id, switchboard.ErrCodeRestarting, name+" was not saved: the gateway is shutting down; send it again once reconnected")
	case errors.Is(err, errIdle):
		c.fileError(u.id, ErrCodeFileRefused, fmt.Sprintf("%s was not saved: nothing of it moved for %s; send it again", name, c.h.cfg.FileIdleTimeout))
	case errors.Is(err, errTooLarge):
		c.fileError(u.id, switchboard.ErrCodeBadFrame, fmt.Sprintf("file_chunk: %s brought more than the %d bytes announced, and was not saved", name, u.size))
	case errors.Is(err, sessions.ErrForbidden):
		c.fileError(u.id, switchboard.ErrCodeForbidden, named(sessions.Reason(err, "you may not send files in this session")))
	case isFileRefusal(err):
		c.fileError(u.id, ErrCodeFileRefused, named(sessions.Reason(err, "the gateway does not take it")))
	case errors.Is(err, sessions.ErrNotStored):
		c.fileError(u.id, switchboard.ErrCodeStorage, name+" was not saved: the gateway cannot store files now (its disk is full or failing), and kept nothing of it; try again later")
	case errors.Is(err, sessions.ErrDraining):
		c.fileError(u.id, switchboard.ErrCodeRestarting, name+" was not saved: "+sessions.ErrDraining.Error())
	case errors.Is(err, sessions.ErrClosed):
		c.close(gws.CloseGoingAway, "gateway shutting down", reasonShutdown, true)
	default:
		c.log.Error("file not saved", "session", u.session, "bytes", u.size, "err", err)
		c.fileError(u.id, switchboard.ErrCodeInternal, name+" could not be saved; send it again")
	}
}

// isFileRefusal: the session's rules for files refused it.
func isFileRefusal(err error) bool {
	return errors.Is(err, sessions.ErrFileTooLarge) || errors.Is(err, sessions.ErrFileType) ||
		errors.Is(err, sessions.ErrWorkspaceFull) || errors.Is(err, sessions.ErrNoUploads)
}

// chunk takes the next bytes of a file.
func (c *conn) chunk(f clientFrame) {
	n := int64(len(f.Bytes))
	c.files.mu.Lock()
	u := c.files.files[f.ID]
	switch {
	case u == nil:
		c.files.mu.Unlock()
		c.fileError(f.ID, switchboard.ErrCodeBadFrame, fmt.Sprintf("file_chunk: no file %s is arriving on this connection; announce it with a file frame first", quote(f.ID)))
		return
	case u.failed:
		// Refused or cut short, and told so: the rest is dropped quietly,
		// and the file forgotten once it is all in.
		u.got += n
		if u.got >= u.size {
			delete(c.files.files, u.id)
		}
		c.files.mu.Unlock()
		return
	case u.got >= u.size:
		c.files.mu.Unlock()
		c.fileError(f.ID, switchboard.ErrCodeBadFrame, fmt.Sprintf("file_chunk: all %d bytes of %s have arrived already", u.size, quote(f.ID)))
		return
	case u.got+n > u.size:
		u.failed = true
		c.files.mu.Unlock()
		u.cancel(errTooLarge)
		return
	}
	c.files.mu.Unlock()
	// Returns once Upload has the bytes, or has stopped, or the file was
	// cut short: the backpressure.
	w, err := u.pw.Write(f.Bytes)
	c.files.mu.Lock()
	defer c.files.mu.Unlock()
	u.got += n
	if err != nil || int64(w) < n {
		// Upload stopped: its goroutine tells the client why.
		u.failed = true
		if u.got >= u.size && c.files.files[u.id] == u {
			delete(c.files.files, u.id)
		}
		return
	}
	if u.got == u.size {
		_ = u.pw.Close() // the end of the file
	}
	// A fresh while for the next chunk, or for saving the file, which
	// may wait for the workspace (another file, a python run): an input
	// naming it waits for that, at most this long.
	u.idle.Reset(c.h.cfg.FileIdleTimeout)
}

// takeFiles are the saved files an input names, in its order, once those
// whose bytes are all in are saved. When one cannot go it tells the
// client and reports false.
func (c *conn) takeFiles(f clientFrame, sessionID string) ([]switchboard.File, bool) {
	if len(f.Files) == 0 {
		return nil, true
	}
	files := make([]switchboard.File, 0, len(f.Files))
	for _, id := range f.Files {
		c.files.mu.Lock()
		u := c.files.files[id]
		var why string
		switch {
		case u == nil:
			why = fmt.Sprintf("no file %s was saved on this connection (files are kept per connection: after a reconnect, send them again)", quote(id))
		case u.session != sessionID:
			why = fmt.Sprintf("the file %s was saved in another conversation", quote(id))
		case u.arriving():
			why = fmt.Sprintf("the file %s has not all arrived (%d of %d bytes); send its chunks first", quote(id), u.got, u.size)
		}
		c.files.mu.Unlock()
		if why == "" {
			select {
			case <-u.done: // saved or not
			case <-c.closing:
				return nil, false
			}
			c.files.mu.Lock()
			if u.err != nil {
				why = fmt.Sprintf("the file %s was not saved (an error said why); send the message without it, or the file again", quote(id))
			}
			files = append(files, u.file)
			c.files.mu.Unlock()
		}
		if why != "" {
			c.errorEvent(switchboard.ErrCodeBadFrame, "input: "+why+"; the message was not sent")
			return nil, false
		}
	}
	return files, true
}

// sent forgets the files a message took: they are the conversation's now.
func (c *conn) sent(ids []string) {
	c.files.mu.Lock()
	defer c.files.mu.Unlock()
	for _, id := range ids {
		delete(c.files.files, id)
	}
}

// dropFiles cuts short the files arriving and forgets the others: the
// connection closed, or moved to another conversation (/reset), where
// they cannot go.
func (c *conn) dropFiles(cause error) {
	c.files.mu.Lock()
	var unsent []switchboard.File
	session := ""
	for id, u := range c.files.files {
		u.cancel(cause)
		if u.file.Path != "" {
			unsent, session = append(unsent, u.file), u.session
		}
		delete(c.files.files, id)
	}
	c.files.mu.Unlock()
	// Saved, and no message brought them: they would only fill the
	// workspace.
	if len(unsent) > 0 {
		c.h.sessions.Discard(context.WithoutCancel(c.h.ctx), session, unsent)
	}
}
