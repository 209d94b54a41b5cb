// Package websocket is the /ws listener: protocol v1 of CONTRACT §4 over
// gorilla/websocket, for the web widget and for programs.
//
// Each connection has three goroutines: the reader (frames in, inputs to the
// session), the forwarder (session events to the send queue) and the writer
// (the queue to the socket, pings). The send queue is bounded. Waiting on
// it holds back only this connection's subscription, which the session
// then serves from the store instead of live, so a slow client never slows
// its session or other clients; one that has not taken a frame for
// SendTimeout is disconnected (1013) and resumes with resume_after.
package websocket

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/sessions"
)

// Channel is the Author.Channel of web users.
const Channel = "web"

// Sessions is what the listener needs of the session manager.
type Sessions interface {
	Attach(ctx context.Context, opts sessions.AttachOptions) (*sessions.Subscription, error)
	Submit(ctx context.Context, sessionID string, in switchboard.Input) (*sessions.Receipt, error)
}

// Config tunes the listener; zero values take the defaults noted.
type Config struct {
	// AllowedOrigins are pages on other origins that may connect
	// ("https://shop.example"). The gateway's own origin and loopback are
	// always allowed, and so is a request without Origin (not a browser).
	AllowedOrigins []string
	Auth           Auth
	ReadLimit      int64         // largest client frame in bytes (64 KiB)
	SendBuffer     int           // frames queued per connection (256)
	SendTimeout    time.Duration // a full queue this long: too slow (5s)
	WriteTimeout   time.Duration // one frame's write (10s)
	PingInterval   time.Duration // keepalive (30s); a peer silent for two is gone
	HelloTimeout   time.Duration // time to send hello after connecting (10s)
	Metrics        *metrics.Metrics
	Now            func() time.Time
}

func (c Config) withDefaults() Config {
	if c.ReadLimit <= 0 {
		c.ReadLimit = 64 << 10
	}
	if c.SendBuffer <= 0 {
		c.SendBuffer = 256
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = 5 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.PingInterval <= 0 {
		c.PingInterval = 30 * time.Second
	}
	if c.HelloTimeout <= 0 {
		c.HelloTimeout = 10 * time.Second
	}
	if c.Auth.Mode == "" {
		c.Auth.Mode = AuthNone
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Handler serves /ws.
type Handler struct {
	ctx      context.Context
	cfg      Config
	sessions Sessions
	log      *slog.Logger
	upgrader gws.Upgrader
	md       *markdown
	allowed  map[string]bool // normalised allowed origins
}

// New returns the /ws handler. When ctx ends every connection is closed
// with 1001, so clients reconnect to the next gateway.
func New(ctx context.Context, cfg Config, s Sessions, log *slog.Logger) *Handler {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{ctx: ctx, cfg: cfg, sessions: s, log: log.With("listener", "websocket"), md: newMarkdown(), allowed: map[string]bool{}}
	for _, o := range cfg.AllowedOrigins {
		if n, ok := normalOrigin(o); ok {
			h.allowed[n] = true
		}
	}
	h.upgrader = gws.Upgrader{
		ReadBufferSize:  2048,
		WriteBufferSize: 4096,
		// Write buffers go back to the pool between messages, so an idle
		// connection holds none.
		WriteBufferPool:  &sync.Pool{},
		HandshakeTimeout: 10 * time.Second,
		CheckOrigin:      func(*http.Request) bool { return true }, // checked before Upgrade, with a better answer
	}
	return h
}

// ServeHTTP checks the origin and runs the connection.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && !h.originAllowed(origin, r.Host) {
		h.log.Warn("origin refused", "origin", origin, "remote", r.RemoteAddr)
		http.Error(w, fmt.Sprintf("origin %s may not open this WebSocket: add it to listeners.websocket.allowed_origins", origin), http.StatusForbidden)
		return
	}
	ws, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has answered the client
	}
	c := &conn{
		h: h, ws: ws, log: h.log.With("remote", r.RemoteAddr),
		bearer:     strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "),
		send:       make(chan []byte, h.cfg.SendBuffer),
		closing:    make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	c.serve()
}

// originAllowed: same origin as the gateway, loopback, or configured.
func (h *Handler) originAllowed(origin, host string) bool {
	n, ok := normalOrigin(origin)
	if !ok {
		return false
	}
	u, _ := url.Parse(n)
	if strings.EqualFold(u.Host, host) || h.allowed[n] {
		return true
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// normalOrigin lowercases scheme://host[:port].
func normalOrigin(o string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), true
}

// Close reasons, also the metrics labels.
const (
	reasonClient   = "client"    // the client closed or went away
	reasonTooBig   = "too_big"   // a frame over the read limit
	reasonTooSlow  = "too_slow"  // the send queue filled up
	reasonAuth     = "auth"      // bad token, or a session the user may not see
	reasonNoHello  = "no_hello"  // no hello in time
	reasonTimeout  = "timeout"   // no pong
	reasonShutdown = "shutdown"  // the gateway is stopping
	reasonSession  = "session"   // the session's stream ended
	reasonWrite    = "write"     // a write failed or timed out
	reasonInternal = "internal"  // a bug or store failure
	reasonNone     = "connected" // placeholder until one is known
)

// conn is one client connection.
type conn struct {
	h      *Handler
	ws     *gws.Conn
	log    *slog.Logger
	bearer string // Authorization header, if the client sent one

	send       chan []byte
	closing    chan struct{}
	closeOnce  sync.Once
	closeCode  int
	closeText  string
	closeWhy   string // metrics reason
	closeDrain bool   // send what is queued before the close frame
	writerDone chan struct{}

	// mu guards the attachment, which a /reset moves to a new session
	// from its own goroutine.
	mu        sync.Mutex
	author    switchboard.Author
	sessionID string
	guide     string
	sub       *sessions.Subscription
	subStop   chan struct{} // closed when we end sub on purpose
	fwdDone   chan struct{}
}

func (c *conn) serve() {
	counted := c.h.cfg.Metrics.Connected()
	stopShutdown := context.AfterFunc(c.h.ctx, func() {
		// The gateway drained its sessions before stopping listeners: let
		// the forwarder hand over the last events it has, then close.
		c.mu.Lock()
		fwd := c.fwdDone
		c.mu.Unlock()
		if fwd != nil {
			select {
			case <-fwd:
			case <-time.After(c.h.cfg.WriteTimeout):
			}
		}
		c.close(gws.CloseGoingAway, "gateway shutting down", reasonShutdown, true)
	})
	defer stopShutdown()

	go c.writeLoop()
	if why := c.readLoop(); why != "" {
		c.close(gws.CloseNormalClosure, "", why, false)
	}
	<-c.writerDone
	_ = c.ws.Close()
	c.detach()
	counted(c.closeWhy)
	c.log.Debug("websocket closed", "reason", c.closeWhy, "session", c.sessionID)
}

// close starts closing with a close frame of code and text; the first
// call wins.
func (c *conn) close(code int, text, why string, drain bool) {
	c.closeOnce.Do(func() {
		if len(text) > 120 { // a close frame's reason has room for 123 bytes
			text = text[:120]
		}
		c.closeCode, c.closeText, c.closeWhy, c.closeDrain = code, text, why, drain
		close(c.closing)
	})
}

// readLoop reads frames until the connection ends; it returns the close
// reason when the read side is what ended it.
func (c *conn) readLoop() string {
	cfg := c.h.cfg
	_ = c.ws.SetReadDeadline(cfg.Now().Add(cfg.HelloTimeout))
	keepalive := func() { _ = c.ws.SetReadDeadline(time.Now().Add(2*cfg.PingInterval + cfg.WriteTimeout)) }
	c.ws.SetPongHandler(func(string) error {
		if c.attached() != "" {
			keepalive()
		}
		return nil
	})
	for {
		typ, r, err := c.ws.NextReader()
		if err != nil {
			select {
			case <-c.closing:
				return "" // we are closing; this is the peer's answer or the deadline
			default:
			}
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout() && c.attached() == "":
				c.close(gws.ClosePolicyViolation, fmt.Sprintf("no hello within %s", cfg.HelloTimeout), reasonNoHello, false)
				return ""
			case errors.As(err, &ne) && ne.Timeout():
				return reasonTimeout
			}
			return reasonClient
		}
		data, err := io.ReadAll(io.LimitReader(r, cfg.ReadLimit+1))
		if err != nil {
			return reasonClient
		}
		if int64(len(data)) > cfg.ReadLimit {
			c.h.cfg.Metrics.Frame("too_big")
			c.close(gws.CloseMessageTooBig, fmt.Sprintf("frame larger than the %d-byte limit", cfg.ReadLimit), reasonTooBig, true)
			return ""
		}
		if typ != gws.TextMessage {
			c.h.cfg.Metrics.Frame("invalid")
			c.errorEvent(switchboard.ErrCodeBadFrame, "binary frames are not supported: send JSON text frames")
			continue
		}
		c.handle(data)
		if c.attached() != "" {
			keepalive()
		}
	}
}

// handle acts on one text frame.
func (c *conn) handle(data []byte) {
	f, err := decodeFrame(data)
	if err != nil {
		c.h.cfg.Metrics.Frame("invalid")
		c.errorEvent(switchboard.ErrCodeBadFrame, err.Error())
		return
	}
	c.h.cfg.Metrics.Frame(f.Type)
	sessionID := c.attached()
	if f.Type == frameHello {
		if sessionID != "" {
			c.errorEvent(switchboard.ErrCodeBadFrame, "hello: already attached to "+sessionID+"; open a new connection for another session")
			return
		}
		c.hello(f)
		return
	}
	if sessionID == "" {
		c.errorEvent(switchboard.ErrCodeBadFrame, f.Type+": send hello first")
		return
	}
	c.mu.Lock()
	in := switchboard.Input{Author: c.author}
	c.mu.Unlock()
	switch f.Type {
	case frameInput:
		in.Kind, in.ClientID, in.Text = switchboard.InputText, f.ID, f.Text
	case frameConfirm:
		in.Kind, in.ConfirmationID, in.Approved = switchboard.InputConfirm, f.ConfirmationID, *f.Approved
	case frameAction:
		in.Kind, in.ActionID, in.Value = switchboard.InputAction, f.ActionID, actionValue(f.Value)
	case frameCancel:
		in.Kind = switchboard.InputCancel
	}
	receipt, err := c.h.sessions.Submit(c.h.ctx, sessionID, in)
	switch {
	case errors.Is(err, sessions.ErrBusy):
		c.errorEvent(switchboard.ErrCodeBusy, err.Error())
	case errors.Is(err, sessions.ErrForbidden):
		c.errorEvent(switchboard.ErrCodeForbidden, err.Error())
	case errors.Is(err, sessions.ErrDraining):
		// The connection stays: the turn under way still streams to it.
		c.errorEvent(switchboard.ErrCodeRestarting, err.Error())
	case errors.Is(err, sessions.ErrClosed):
		c.close(gws.CloseGoingAway, "gateway shutting down", reasonShutdown, true)
	case err != nil:
		c.log.Error("submit failed", "session", sessionID, "err", err)
		c.errorEvent(switchboard.ErrCodeInternal, "the gateway could not take that input; try again")
	case in.Kind == switchboard.InputText && isReset(in.Text):
		go c.followReset(sessionID, receipt)
	}
}

// hello authenticates and attaches.
func (c *conn) hello(f clientFrame) {
	h := c.h
	token := f.Token
	if token == "" {
		token = c.bearer
	}
	var claimedID, claimedName string
	if f.User != nil {
		claimedID, claimedName = f.User.ID, f.User.Name
	}
	id, err := h.cfg.Auth.authenticate(token, claimedID, claimedName, h.cfg.Now())
	if err != nil {
		c.log.Info("websocket auth refused", "err", err)
		c.errorEvent("unauthorized", err.Error())
		c.close(gws.ClosePolicyViolation, err.Error(), reasonAuth, true)
		return
	}
	if id.userID == "" {
		id.userID = "guest-" + randomID()
	}
	opts := sessions.AttachOptions{
		SessionID: f.Session, Guide: f.Guide, AfterSeq: -1,
		Author: switchboard.Author{Channel: Channel, ID: id.userID, Name: id.name},
	}
	if f.ResumeAfter != nil {
		opts.AfterSeq = *f.ResumeAfter
	}
	switch h.cfg.Auth.Mode {
	case AuthToken:
		opts.Role = id.role // operators' tokens: their role wherever they go
	case AuthJWT:
		// A token opens sessions its user belongs to, new ones, and the
		// one it names, where it grants its role.
		opts.MembersOnly = true
		if id.session != "" {
			if opts.SessionID != "" && opts.SessionID != id.session {
				c.refuse(fmt.Sprintf("this token is for session %s only", id.session))
				return
			}
			opts.SessionID = id.session
			opts.Role = id.role
			if opts.Role == "" {
				opts.Role = collaboration.Member
			}
		}
	}
	sub, err := h.sessions.Attach(h.ctx, opts)
	switch {
	case errors.Is(err, sessions.ErrForbidden):
		c.refuse("you may not open session " + opts.SessionID)
		return
	case errors.Is(err, switchboard.ErrNotFound):
		c.errorEvent(switchboard.ErrCodeNotFound, strings.TrimPrefix(err.Error(), "sessions: "))
		return
	case errors.Is(err, sessions.ErrClosed):
		c.close(gws.CloseGoingAway, "gateway shutting down", reasonShutdown, true)
		return
	case err != nil:
		c.log.Error("attach failed", "session", opts.SessionID, "err", err)
		c.errorEvent(switchboard.ErrCodeInternal, "the gateway could not open the session; try again")
		return
	}
	c.mu.Lock()
	c.author = opts.Author
	c.mu.Unlock()
	c.attach(sub)
	c.log.Debug("websocket attached", "session", sub.Ready.Session, "user", opts.Author.Key(), "role", sub.Ready.Role)
}

func (c *conn) refuse(msg string) {
	c.errorEvent(switchboard.ErrCodeForbidden, msg)
	c.close(gws.ClosePolicyViolation, msg, reasonAuth, true)
}

// attach sends ready and starts forwarding sub's events.
func (c *conn) attach(sub *sessions.Subscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sub, c.sessionID, c.guide = sub, sub.Ready.Session, sub.Ready.Guide
	c.subStop, c.fwdDone = make(chan struct{}), make(chan struct{})
	c.enqueue(connEvent(sub.Ready.Session, sub.Ready.Guide, switchboard.EventReady, sub.Ready))
	go c.forward(sub, c.subStop, c.fwdDone)
}

// detach ends the current subscription and waits for its forwarder.
func (c *conn) detach() {
	c.mu.Lock()
	sub, stop, done := c.sub, c.subStop, c.fwdDone
	c.sub = nil
	c.mu.Unlock()
	if sub == nil {
		return
	}
	close(stop)
	sub.Close()
	<-done
}

func (c *conn) attached() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// forward moves events from the subscription to the send queue.
func (c *conn) forward(sub *sessions.Subscription, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for ev := range sub.Events() {
		b, err := c.h.encodeEvent(ev)
		if err != nil {
			c.log.Error("event not encodable", "seq", ev.Seq, "err", err)
			continue
		}
		if !c.enqueue(b) {
			return
		}
	}
	select {
	case <-stop: // we ended it
	default:
		c.close(gws.CloseGoingAway, "session closed; reconnect with resume_after", reasonSession, true)
	}
}

// followReset moves the connection to the session a /reset started.
func (c *conn) followReset(from string, r *sessions.Receipt) {
	if _, err := r.Wait(c.h.ctx); err != nil || r.NewSession == "" {
		return
	}
	if c.attached() != from {
		return
	}
	c.mu.Lock()
	author := c.author
	c.mu.Unlock()
	sub, err := c.h.sessions.Attach(c.h.ctx, sessions.AttachOptions{SessionID: r.NewSession, Author: author, AfterSeq: 0})
	if err != nil {
		c.log.Error("attach after reset failed", "session", r.NewSession, "err", err)
		c.errorEvent(switchboard.ErrCodeInternal, "could not open the new session; reconnect")
		return
	}
	c.detach()
	c.attach(sub)
}

// enqueue queues a frame. A queue that stays full for SendTimeout means
// the client is not keeping up: it is disconnected rather than waited for.
func (c *conn) enqueue(b []byte) bool {
	select {
	case <-c.closing:
		return false
	case c.send <- b:
		return true
	default:
	}
	t := time.NewTimer(c.h.cfg.SendTimeout)
	defer t.Stop()
	select {
	case <-c.closing:
		return false
	case c.send <- b:
		return true
	case <-t.C:
		c.close(gws.CloseTryAgainLater, fmt.Sprintf("too slow: %d events waited %s; reconnect with resume_after", cap(c.send), c.h.cfg.SendTimeout), reasonTooSlow, false)
		return false
	}
}

func (c *conn) errorEvent(code, msg string) {
	c.mu.Lock()
	sid, guide := c.sessionID, c.guide
	c.mu.Unlock()
	c.enqueue(connEvent(sid, guide, switchboard.EventError, switchboard.ErrorData{Code: code, Message: msg}))
}

// writeLoop owns the socket's writes: queued frames, pings, and finally
// the close frame.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	cfg := c.h.cfg
	ping := time.NewTicker(cfg.PingInterval)
	defer ping.Stop()
	write := func(b []byte) bool {
		_ = c.ws.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
		if err := c.ws.WriteMessage(gws.TextMessage, b); err != nil {
			c.close(gws.CloseAbnormalClosure, "", reasonWrite, false)
			_ = c.ws.Close() // wakes the reader
			return false
		}
		return true
	}
	for {
		select {
		case b := <-c.send:
			if !write(b) {
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(gws.PingMessage, nil, time.Now().Add(cfg.WriteTimeout)); err != nil {
				c.close(gws.CloseAbnormalClosure, "", reasonWrite, false)
				_ = c.ws.Close()
				return
			}
		case <-c.closing:
			if c.closeDrain {
				for drained := false; !drained; {
					select {
					case b := <-c.send:
						if !write(b) {
							return
						}
					default:
						drained = true
					}
				}
			}
			if c.closeCode != gws.CloseAbnormalClosure {
				_ = c.ws.WriteControl(gws.CloseMessage, gws.FormatCloseMessage(c.closeCode, c.closeText), time.Now().Add(cfg.WriteTimeout))
			}
			// Give the peer a moment to answer the close, then the
			// reader's deadline ends it.
			_ = c.ws.SetReadDeadline(time.Now().Add(time.Second))
			return
		}
	}
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}

// isReset reports whether text is the /reset command.
func isReset(text string) bool {
	f := strings.Fields(text)
	return len(f) > 0 && f[0] == "/reset"
}
