package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server's messages are bounded before the SDK reads them: the SDK
// buffers a whole message (a Streamable HTTP body, an event, a stdio line)
// before it decodes it, so one answer could take the gateway's memory. The
// bound (ServerConfig.MaxResponseMB) is per message: a JSON body, one event
// of an event stream, one message of a stdio server; the default fits a
// picture of maxImageBytes in base64 with room for text. One message over
// it costs the gateway about twice the bound in allocations.
const (
	defaultMaxResponseMB = 8
	maxMaxResponseMB     = 64
)

const (
	// frameReadSize is the buffer a stream is read through; a longer line
	// comes in pieces.
	frameReadSize = 16 << 10
	// keepFrame is the largest frame buffer a long-lived stream keeps for
	// the next frame; a larger one is dropped once handed on.
	keepFrame = 64 << 10
)

// codeTooLarge is the JSON-RPC error code of the answer the gateway puts
// in place of a server's answer over the bound (in the range JSON-RPC
// leaves to implementations).
const codeTooLarge = -32099

// tooLargeError is a server's message over the bound, in bytes.
type tooLargeError struct{ limit int }

func (e tooLargeError) Error() string {
	return fmt.Sprintf("the MCP server's message was larger than %s, the gateway's limit (max_response_mb)", size(e.limit))
}

// answeredTooLarge reports whether err is the gateway's answer to a call
// whose answer was over limit (see limitTransport).
func answeredTooLarge(err error, limit int) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr) && werr.Code == codeTooLarge && werr.Message == tooLargeError{limit}.Error()
}

// tooLargeAnswer is a JSON-RPC error answering call id in place of the
// server's answer over limit.
func tooLargeAnswer(id json.RawMessage, limit int) []byte {
	type wireError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{codeTooLarge, tooLargeError{limit}.Error()}})
	return b
}

// grow makes room in b for n more bytes, doubling its capacity but never
// past limit (unless n needs more), so that reaching m bytes costs less
// than 3m of allocations; append grows a large slice by a quarter, which
// costs 5m.
func grow(b []byte, n, limit int) []byte {
	need := len(b) + n
	if need <= cap(b) {
		return b
	}
	c := min(max(2*cap(b), need, 4096), max(limit, need))
	nb := make([]byte, len(b), c)
	copy(nb, b)
	return nb
}

// readAtMost reads r to its end, or fails with tooLargeError once it
// carries more than limit bytes, without reading (much) more.
func readAtMost(r io.Reader, limit int) ([]byte, error) {
	b := make([]byte, 0, min(limit, 4096))
	for {
		if len(b) == cap(b) {
			if len(b) == limit {
				// Full: one more byte, or the end, tells.
				var one [1]byte
				for {
					n, err := r.Read(one[:])
					if n > 0 {
						return nil, tooLargeError{limit}
					}
					if err == io.EOF {
						return b, nil
					}
					if err != nil {
						return nil, err
					}
				}
			}
			b = grow(b, 1, limit)
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// bytesThen reads b, then fails with err.
type bytesThen struct {
	b   []byte
	err error
}

func (r *bytesThen) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, r.err
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// framer hands on a stream a frame at a time: a message of a stdio server,
// an event of an SSE stream. Each frame is read whole before any of it is
// handed on, so one longer than max never reaches the reader behind (the
// SDK's, which would buffer all of it): tooLong says what it becomes. It
// holds one frame at a time, at most max bytes; a Read blocks until the
// next frame is complete (the SDK waits for that anyway).
type framer struct {
	r   *bufio.Reader
	max int
	// event: frames are SSE events, ended by a blank line. Else they are
	// messages of newline-delimited JSON: a line, unless the line break is
	// inside an object or array (a server that breaks its lines must not
	// get a message past the bound in pieces).
	event bool
	// tooLong is called once a frame is over max, none of it handed on.
	// It returns what to hand on in its place (the framer's from then on)
	// and how the stream goes on: with a nil end, the rest of the frame
	// is read and dropped, and the next frame follows; else the stream
	// ends with end after repl (io.EOF for a clean end).
	tooLong func() (repl []byte, end error)

	buf []byte // the frame being handed on
	off int
	err error // Read's error once buf is handed on

	// Where a JSON message is: how deep in objects and arrays, and
	// whether in a string, just after its backslash.
	depth            int
	inString, escape bool
}

func newFramer(r io.Reader, max int, event bool, tooLong func() ([]byte, error)) *framer {
	return &framer{r: bufio.NewReaderSize(r, frameReadSize), max: max, event: event, tooLong: tooLong}
}

func (f *framer) Read(p []byte) (int, error) {
	for f.off == len(f.buf) {
		if f.err != nil {
			return 0, f.err
		}
		f.next()
	}
	n := copy(p, f.buf[f.off:])
	f.off += n
	return n, nil
}

// next reads the next frame into buf, or its replacement, setting err at
// the stream's end.
func (f *framer) next() {
	if cap(f.buf) > keepFrame {
		f.buf = nil
	}
	f.buf, f.off = f.buf[:0], 0
	dropping := false
	blank := true // the line so far is empty but for \r
	for {
		piece, err := f.r.ReadSlice('\n')
		switch {
		case dropping:
		case len(f.buf)+len(piece) > f.max:
			repl, end := f.tooLong()
			f.buf = repl
			if end != nil {
				f.err = end
				return
			}
			dropping = true
		default:
			f.buf = append(grow(f.buf, len(piece), f.max), piece...)
		}
		if f.event {
			if len(bytes.TrimRight(piece, "\r\n")) > 0 {
				blank = false
			}
		} else {
			f.scan(piece)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			// What came before the end is the last frame, as the SDK reads
			// it.
			f.err = err
			return
		case err != nil:
			f.buf, f.err = nil, err
			return
		}
		// A whole line.
		switch {
		case f.event && !blank:
			blank = true
		case !f.event && f.depth > 0:
		default:
			f.inString, f.escape = false, false // a string cannot span lines
			return
		}
	}
}

// scan follows a JSON message through p.
func (f *framer) scan(p []byte) {
	for _, c := range p {
		switch {
		case f.escape:
			f.escape = false
		case f.inString:
			switch c {
			case '\\':
				f.escape = true
			case '"':
				f.inString = false
			}
		case c == '"':
			f.inString = true
		case c == '{' || c == '[':
			f.depth++
		case (c == '}' || c == ']') && f.depth > 0:
			f.depth--
		}
	}
}

// limitTransport bounds what a Streamable HTTP server's answers make the
// SDK buffer: an application/json body, and each event of an event stream
// (not the stream, which may stay open for the session), at most max
// bytes; any other body, which the SDK reads only for an error, is cut at
// max. A call's answer over the bound becomes the gateway's JSON-RPC error
// for that call (codeTooLarge), read from the cut body, so the session
// goes on; an event over the bound on the server's own stream (a GET) is
// dropped.
type limitTransport struct {
	base   http.RoundTripper
	max    int
	log    *slog.Logger
	server string
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	body := resp.Body
	switch mt := mediaType(resp.Header.Get("Content-Type")); {
	case ok && mt == "text/event-stream":
		f := newFramer(body, t.max, true, func() ([]byte, error) {
			if req.Method == http.MethodGet {
				t.log.Warn("mcp: server message too large; dropped", "server", t.server, "limit", size(t.max))
				return nil, nil
			}
			_ = body.Close()
			answer, err := t.answer(req)
			if answer != nil {
				answer = append(append([]byte("event: message\ndata: "), answer...), "\n\n"...)
			}
			return answer, err
		})
		resp.Body = readCloser{f, body}
	case ok && mt == "application/json":
		if resp.ContentLength >= 0 && resp.ContentLength <= int64(t.max) {
			return resp, nil // net/http reads no more than that
		}
		resp.Body = readCloser{&jsonBody{t: t, req: req, body: body, over: resp.ContentLength > int64(t.max)}, body}
	default:
		resp.Body = readCloser{io.LimitReader(body, int64(t.max)), body}
	}
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

// answer is what the SDK reads in place of an answer over the bound to
// req: the gateway's error for the call it posted, then the body's end; or
// for a request that is not a call (the SDK reads no answer to those),
// tooLargeError.
func (t *limitTransport) answer(req *http.Request) ([]byte, error) {
	id := callID(req)
	if id == nil {
		return nil, tooLargeError{t.max}
	}
	return tooLargeAnswer(id, t.max), io.EOF
}

// callID is the id of the JSON-RPC call req posts, or nil if it posts none.
func callID(req *http.Request) json.RawMessage {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.NewDecoder(body).Decode(&m) != nil || m.Method == "" || len(m.ID) == 0 || string(m.ID) == "null" {
		return nil
	}
	return m.ID
}

// jsonBody reads an application/json body whole, on the first Read, and
// hands it on if it is within the bound, or the gateway's answer in its
// place.
type jsonBody struct {
	t    *limitTransport
	req  *http.Request
	body io.ReadCloser
	over bool // its Content-Length says so already
	r    io.Reader
}

func (b *jsonBody) Read(p []byte) (int, error) {
	if b.r == nil {
		var data []byte
		err := error(tooLargeError{b.t.max})
		if !b.over {
			data, err = readAtMost(b.body, b.t.max)
		}
		switch {
		case errors.As(err, new(tooLargeError)):
			_ = b.body.Close()
			answer, end := b.t.answer(b.req)
			b.r = &bytesThen{answer, end}
		case err != nil:
			b.r = &bytesThen{nil, err}
		default:
			b.r = bytes.NewReader(data)
		}
	}
	return b.r.Read(p)
}

type readCloser struct {
	io.Reader
	io.Closer
}

func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// stdioTransport runs a stdio server as the SDK's CommandTransport does
// (stopped by closing its stdin, then SIGTERM and SIGKILL a grace apart),
// but reads its stdout through a framer: a message over max ends the
// connection with tooLargeError before the SDK has buffered it, and the
// server is restarted.
type stdioTransport struct {
	cmd   *exec.Cmd
	grace time.Duration
	max   int
}

func (t *stdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	lines := newFramer(stdout, t.max, false, func() ([]byte, error) {
		// The server is likely blocked writing the rest: closing the pipe
		// fails its write, so it need not wait out the grace to end.
		_ = stdout.Close()
		return nil, tooLargeError{t.max}
	})
	return (&sdk.IOTransport{
		// Like the SDK's, the connection is closed through stdin, so that
		// the server may still write as it goes.
		Reader: io.NopCloser(lines),
		Writer: &childStdin{cmd: t.cmd, stdin: stdin, grace: t.grace},
		// The SDK's bound, counting a little more than the framer's
		// (blank lines too), is only a backstop well past it.
		MaxLineLength: 2 * t.max,
	}).Connect(ctx)
}

// childStdin is a stdio server's stdin. Close closes it and waits for the
// server to exit, sending SIGTERM and then SIGKILL a grace apart if it
// does not; the exit status is then in the Cmd.
type childStdin struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	grace time.Duration
}

func (c *childStdin) Write(p []byte) (int, error) { return c.stdin.Write(p) }

func (c *childStdin) Close() error {
	if err := c.stdin.Close(); err != nil {
		return fmt.Errorf("closing stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	wait := func() (error, bool) {
		t := time.NewTimer(c.grace)
		defer t.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	// Where there is no SIGTERM (Windows), straight to the kill. A process
	// that ended meanwhile has been reaped by Wait: its status is on the
	// way, and must be received before the Cmd is read.
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err == nil {
		if err, ok := wait(); ok {
			return err
		}
	} else if errors.Is(err, os.ErrProcessDone) {
		return <-exited
	}
	if err := c.cmd.Process.Kill(); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return <-exited
		}
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the process does not exit")
}
