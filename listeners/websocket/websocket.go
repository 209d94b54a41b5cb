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
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/internal/queue"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/sessions"
)

// Channel is the Author.Channel of web users.
const Channel = "web"

// Sessions is what the listener needs of the session manager.
type Sessions interface {
	Attach(ctx context.Context, opts sessions.AttachOptions) (*sessions.Subscription, error)
	Submit(ctx context.Context, sessionID string, in switchboard.Input) (*sessions.Receipt, error)
	// Join redeems an invite code: hello.invite.
	Join(ctx context.Context, code string, author switchboard.Author) (string, collaboration.Role, error)
	// Upload saves a file a client sends (files.go) in the session's
	// workspace.
	Upload(ctx context.Context, sessionID string, in switchboard.Input, files []sessions.Incoming) ([]switchboard.File, error)
	Discard(ctx context.Context, sessionID string, files []switchboard.File)
}

// Config tunes the listener; zero values take the defaults noted.
type Config struct {
	// AllowedOrigins are pages on other origins that may connect
	// ("https://shop.example"). The gateway's own origin and loopback are
	// always allowed, and so is a request without Origin (not a browser).
	AllowedOrigins []string
	// PublicURL is the gateway's public origin (http.public_url), if any:
	// pages there are its own. Images from it may be shown inline.
	PublicURL string
	// Addr is the address the gateway listens on (http.addr). Pages on
	// loopback origins (http://localhost:3000) may connect only when it
	// is a loopback address; when empty, the connection's local address
	// decides.
	Addr string
	// ImageHosts may serve images shown inline in rendered Markdown and
	// cards ("images.example.com", "*.cdn.example", "host:port"); other
	// images become links.
	ImageHosts []string
	Auth       Auth
	ReadLimit  int64 // largest client frame in bytes (64 KiB)
	SendBuffer int   // frames queued per connection (256)
	// MaxConnsPerIP bounds the connections open from one client address
	// (100; -1: no bound); NewSessionsPerIP, the sessions one address may
	// start a minute (30; -1: no bound, and none on the invite codes it
	// tries either, 10 a minute otherwise).
	MaxConnsPerIP    int
	NewSessionsPerIP int
	// SendBufferBytes bounds the same queue by bytes (1 MiB): while this
	// much waits, nothing more is queued.
	SendBufferBytes int
	SendTimeout     time.Duration // a full queue this long: too slow (5s)
	WriteTimeout    time.Duration // one frame's write (10s)
	PingInterval    time.Duration // keepalive (30s); a peer silent for two is gone
	HelloTimeout    time.Duration // time to send hello after connecting (10s)
	// Files a client sends (files.go): a file that makes no progress for
	// FileIdleTimeout (1m) is cut short; at most MaxPendingFiles (10)
	// files, of MaxPendingFileBytes together (50 MiB: the session's
	// default for one message), may be saved on a connection and not yet
	// sent with a message. The session's upload limits still apply.
	FileIdleTimeout     time.Duration
	MaxPendingFiles     int
	MaxPendingFileBytes int64
	Metrics             *metrics.Metrics
	Now                 func() time.Time
}

func (c Config) withDefaults() Config {
	if c.ReadLimit <= 0 {
		c.ReadLimit = 64 << 10
	}
	if c.SendBuffer <= 0 {
		c.SendBuffer = 256
	}
	if c.SendBufferBytes <= 0 {
		c.SendBufferBytes = 1 << 20
	}
	if c.MaxConnsPerIP == 0 {
		c.MaxConnsPerIP = 100
	}
	if c.NewSessionsPerIP == 0 {
		c.NewSessionsPerIP = 30
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
	if c.FileIdleTimeout <= 0 {
		c.FileIdleTimeout = time.Minute
	}
	if c.MaxPendingFiles <= 0 {
		c.MaxPendingFiles = sessions.DefaultUploadFiles
	}
	if c.MaxPendingFileBytes <= 0 {
		c.MaxPendingFileBytes = sessions.DefaultUploadMessageBytes
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
	frames   *frameCache     // encoded Markdown-bearing events, shared by connections
	allowed  map[string]bool // normalised allowed origins
	public   string          // normalised PublicURL origin, or ""
	perIP    *perIP

	// warned are the origins refused so far (bounded): a page retrying
	// is logged once at WARN, not once a retry.
	warnedMu sync.Mutex
	warned   map[string]bool
}

// New returns the /ws handler. When ctx ends every connection is closed
// with 1001, so clients reconnect to the next gateway.
func New(ctx context.Context, cfg Config, s Sessions, log *slog.Logger) *Handler {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{ctx: ctx, cfg: cfg, sessions: s, log: log.With("listener", "websocket"), md: newMarkdown(newImagePolicy(cfg.PublicURL, cfg.ImageHosts)), frames: newFrameCache(512, 16<<20), allowed: map[string]bool{},
		perIP: newPerIP(cfg.MaxConnsPerIP, cfg.NewSessionsPerIP), warned: map[string]bool{}}
	for _, o := range cfg.AllowedOrigins {
		if n, ok := normalOrigin(o); ok {
			h.allowed[n] = true
		}
	}
	if n, ok := normalOrigin(cfg.PublicURL); ok {
		h.public = n
	}
	h.upgrader = gws.Upgrader{
		// Every connection holds its read buffer while it waits for a
		// frame. Clients' frames are small; a larger one (a file chunk)
		// is read past the buffer, straight into the frame's bytes.
		ReadBufferSize:  512,
		WriteBufferSize: 4096,
		// Write buffers go back to the pool between messages, so an idle
		// connection holds none.
		WriteBufferPool:  &sync.Pool{},
		HandshakeTimeout: 10 * time.Second,
		CheckOrigin:      func(*http.Request) bool { return true }, // checked before Upgrade, with a better answer
	}
	return h
}

// refusedOrigin logs a refused origin: at WARN, with the fix, the first
// time (a widget retries; the widget stops once it knows), then at debug.
func (h *Handler) refusedOrigin(origin, remote string) {
	h.cfg.Metrics.Refused("origin")
	h.warnedMu.Lock()
	first := !h.warned[origin]
	if first {
		if len(h.warned) >= 1000 {
			clear(h.warned) // bounded: forgetting only warns again
		}
		h.warned[origin] = true
	}
	h.warnedMu.Unlock()
	if first {
		h.log.Warn("origin refused: a page on it tried /ws; add it to listeners.websocket.allowed_origins if it may (logged once per origin)",
			"origin", origin, "remote", remote)
		return
	}
	h.log.Debug("origin refused again", "origin", origin, "remote", remote)
}

// ServeHTTP checks the origin and runs the connection.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && !h.originAllowed(r, origin) {
		h.refusedOrigin(origin, r.RemoteAddr)
		http.Error(w, fmt.Sprintf("origin %s may not open this WebSocket: add it to listeners.websocket.allowed_origins", origin), http.StatusForbidden)
		return
	}
	ip := remoteIP(r)
	done, ok := h.perIP.connect(ip)
	if !ok {
		h.log.Warn("connection refused: too many from one address", "remote", ip, "max", h.cfg.MaxConnsPerIP)
		h.cfg.Metrics.Refused("conns_per_ip")
		http.Error(w, "too many connections from your address", http.StatusTooManyRequests)
		return
	}
	ws, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		done()
		return // Upgrade has answered the client
	}
	ctx, stop := context.WithCancelCause(h.ctx)
	c := &conn{
		h: h, ws: ws, ip: ip, log: h.log.With("remote", r.RemoteAddr), ctx: ctx, stop: stop,
		files:      uploads{files: map[string]*upload{}},
		bearer:     strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "),
		send:       queue.New[[]byte](),
		room:       make(chan struct{}, 1),
		closing:    make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	// The connection runs on a goroutine of its own and ServeHTTP
	// returns: net/http's goroutine for the request, its deep stack and
	// its 4 KiB read and write buffers (gorilla has its own) are not kept
	// for as long as the connection lives.
	go func() {
		defer done()
		c.serve()
	}()
}

// originAllowed: same origin as the gateway (its Host, which the
// gateway's HostGuard vouches for when there is no authentication, or its
// public URL), configured, or loopback on a gateway that is itself on
// loopback.
func (h *Handler) originAllowed(r *http.Request, origin string) bool {
	n, ok := normalOrigin(origin)
	if !ok {
		return false
	}
	u, _ := url.Parse(n)
	if strings.EqualFold(u.Host, r.Host) || h.allowed[n] || (h.public != "" && n == h.public) {
		return true
	}
	return isLoopbackName(u.Hostname()) && h.onLoopback(r)
}

// onLoopback reports whether the gateway listens on loopback only.
func (h *Handler) onLoopback(r *http.Request) bool {
	if h.cfg.Addr != "" {
		host, _, err := net.SplitHostPort(h.cfg.Addr)
		return err == nil && isLoopbackName(host)
	}
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	host, _, err := net.SplitHostPort(a.String())
	return err == nil && isLoopbackName(host)
}

func isLoopbackName(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
	ip     string // the client's address, for the per-address limits
	log    *slog.Logger
	bearer string // Authorization header, if the client sent one
	// ctx ends with the connection (stop), or the gateway: the files it
	// is receiving are cut short.
	ctx   context.Context
	stop  context.CancelCauseFunc
	files uploads

	send       *queue.Queue[[]byte] // grows with what waits: an idle connection holds no buffer
	queued     atomic.Int64         // bytes in send
	room       chan struct{}        // the writer took a frame: there may be room
	closing    chan struct{}
	closeOnce  sync.Once
	closeCode  int
	closeText  string
	closeWhy   string        // metrics reason
	closeDrain bool          // send what is queued before the close frame
	writerDone chan struct{} // closed once finish has ended the writes
	// The writes (kick, writeQueued, finish): writeMu is held while frames
	// are written; writing is set while a writer runs; writeFailed (under
	// writeMu) once a write failed; pinger sends the pings.
	writeMu     sync.Mutex
	writing     atomic.Bool
	writeFailed bool
	pinger      *time.Timer

	// mu guards the attachment, which a /reset moves to a new session
	// from its own goroutine.
	mu        sync.Mutex
	author    switchboard.Author
	sessionID string
	guide     string
	sub       *sessions.Subscription
	subStop   chan struct{} // closed when we end sub on purpose
	fwdDone   chan struct{}
	ended     bool // serve has detached for good: attach closes what it is given
}

func (c *conn) serve() {
	c.pinger = time.AfterFunc(c.h.cfg.PingInterval, c.ping)
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

	if why := c.readLoop(); why != "" {
		c.close(gws.CloseNormalClosure, "", why, false)
	}
	<-c.writerDone
	_ = c.ws.Close()
	c.mu.Lock()
	c.ended = true // a /reset still under way must not attach now
	c.mu.Unlock()
	// Files still arriving are cut short, and Upload removes what it
	// wrote of them, before the connection counts as closed.
	c.stop(errConnGone)
	c.dropFiles(errConnGone)
	c.files.wg.Wait()
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
		go c.finish()
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
		c.handleApart(data)
		if c.attached() != "" {
			keepalive()
		}
	}
}

// handleApart handles a frame on a goroutine of its own and waits for it,
// so frames are still taken one at a time and in order. The reader lives
// as long as the connection, and a goroutine's stack keeps the size its
// deepest call grew it to until a garbage collection shrinks it: handled
// here, a hello (which loads or creates the session) would leave every
// idle connection's reader with a stack of 8-16 KiB where reading needs
// a few (issue 26, docs/performance.md "Idle connections").
func (c *conn) handleApart(data []byte) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.handle(data)
	}()
	<-done
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
	case frameFile:
		c.announce(f, sessionID, in.Author)
		return
	case frameFileChunk:
		c.chunk(f)
		return
	case frameInput:
		files, ok := c.takeFiles(f, sessionID)
		if !ok {
			return
		}
		in.Kind, in.ClientID, in.Text, in.Files = switchboard.InputText, f.ID, f.Text, files
	case frameConfirm:
		in.Kind, in.ConfirmationID, in.Approved, in.Scope = switchboard.InputConfirm, f.ConfirmationID, *f.Approved, f.Scope
	case frameAction:
		in.Kind, in.ActionID, in.Value = switchboard.InputAction, f.ActionID, actionValue(f.Value)
	case frameCancel:
		in.Kind = switchboard.InputCancel
	}
	receipt, err := c.h.sessions.Submit(c.h.ctx, sessionID, in)
	switch {
	case errors.Is(err, sessions.ErrBusy):
		c.errorEvent(switchboard.ErrCodeBusy, sessions.ErrBusy.Error())
	case errors.Is(err, sessions.ErrForbidden):
		c.errorEvent(switchboard.ErrCodeForbidden, sessions.Reason(err, "you may not do that in this session"))
	case errors.Is(err, sessions.ErrDraining):
		// The connection stays: the turn under way still streams to it.
		c.errorEvent(switchboard.ErrCodeRestarting, sessions.ErrDraining.Error())
	case errors.Is(err, sessions.ErrClosed):
		c.close(gws.CloseGoingAway, "gateway shutting down", reasonShutdown, true)
	case errors.Is(err, sessions.ErrNotStored):
		c.errorEvent(switchboard.ErrCodeStorage, sessions.ErrNotStored.Error())
	case isFileRefusal(err):
		// The message's files together are more than a message may bring.
		c.errorEvent(ErrCodeFileRefused, sessions.Reason(err, "the gateway does not take these files")+"; the message was not sent")
	case err != nil:
		c.log.Error("submit failed", "session", sessionID, "err", err)
		c.errorEvent(switchboard.ErrCodeInternal, "the gateway could not take that input; try again")
	case in.Kind == switchboard.InputText && isReset(in.Text):
		go c.followReset(sessionID, receipt)
	}
	if err == nil {
		c.sent(f.Files)
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
	if id.name == "" && (h.cfg.Auth.Mode == AuthNone || h.cfg.Auth.Mode == "") {
		// An anonymous visitor's id is a browser's random key: no name
		// for people. An authenticated id is the site's, and says who.
		id.name = guestName(id.userID)
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
			if f.Invite != "" {
				// Refused before the code is spent (the store cannot say
				// which session a code names without spending it): the
				// token opens its session without one, and nothing else.
				c.refuse(fmt.Sprintf("this token is for session %s only; it redeems no invite code (connect without one)", id.session))
				return
			}
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
	if f.Invite != "" {
		sid, ok := c.join(f.Invite, opts.Author)
		if !ok {
			return
		}
		// The code's role stands (Join granted it); the guide is the
		// session's; and the newcomer reads the conversation so far.
		opts.SessionID, opts.Role, opts.Guide = sid, "", ""
		if f.ResumeAfter == nil {
			opts.AfterSeq = 0
		}
	}
	if opts.SessionID == "" && !h.perIP.mayStartSession(c.ip) {
		h.cfg.Metrics.Refused("new_sessions_per_ip")
		c.errorEvent(switchboard.ErrCodeBusy, "too many new conversations from your address in a short time; wait a minute")
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	opts.Deliver, opts.Ended = c.deliver(), c.onEnded(stop, done)
	sub, err := h.sessions.Attach(h.ctx, opts)
	switch {
	case errors.Is(err, sessions.ErrFull):
		c.errorEvent(switchboard.ErrCodeBusy, sessions.ErrFull.Error())
		return
	case errors.Is(err, sessions.ErrTooFast):
		c.errorEvent(switchboard.ErrCodeBusy, sessions.ErrTooFast.Error())
		return
	case errors.Is(err, sessions.ErrForbidden):
		c.refuse("you may not open session " + opts.SessionID)
		return
	case errors.Is(err, switchboard.ErrNotFound):
		msg := "there is no session " + opts.SessionID + " here: it may have expired, or the link is mistyped"
		if opts.SessionID == "" {
			msg = fmt.Sprintf("there is no guide %q here; leave guide out for the default", opts.Guide)
		}
		c.errorEvent(switchboard.ErrCodeNotFound, msg)
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
	if !c.attach(sub, stop, done) {
		return
	}
	if f.ResumeAfter != nil && *f.ResumeAfter > sub.Ready.LastSeq {
		// The session resumes from its end; say so, or the client would
		// wait for seqs it believes it has.
		last := sub.Ready.LastSeq
		c.errorEvent(switchboard.ErrCodeBadFrame, fmt.Sprintf("resume_after %d is past the last event %d of this session; resuming from %d", *f.ResumeAfter, last, last))
	}
	c.log.Debug("websocket attached", "session", sub.Ready.Session, "user", opts.Author.Key(), "role", sub.Ready.Role)
}

// join redeems an invite code for author and returns the session it
// names. A refusal is one error event, and the connection stays ready for
// another hello: not_found for a code nobody made, forbidden for one that
// expired, was used up or withdrawn, busy for too many tries.
func (c *conn) join(code string, author switchboard.Author) (string, bool) {
	h := c.h
	if !h.perIP.mayTryInvite(c.ip) {
		h.cfg.Metrics.Refused("invites_per_ip")
		c.errorEvent(switchboard.ErrCodeBusy, "too many invite codes tried from your address in a short time; wait a minute")
		return "", false
	}
	sid, role, err := h.sessions.Join(h.ctx, code, author)
	const askAgain = "; ask whoever shared it for a new one"
	switch {
	case errors.Is(err, switchboard.ErrInviteUnknown):
		c.errorEvent(switchboard.ErrCodeNotFound, switchboard.ErrInviteUnknown.Error()+": check the link"+askAgain)
	case errors.Is(err, switchboard.ErrInviteExpired):
		c.errorEvent(switchboard.ErrCodeForbidden, switchboard.ErrInviteExpired.Error()+askAgain)
	case errors.Is(err, switchboard.ErrInviteUsedUp):
		c.errorEvent(switchboard.ErrCodeForbidden, switchboard.ErrInviteUsedUp.Error()+askAgain)
	case errors.Is(err, switchboard.ErrInviteRevoked):
		c.errorEvent(switchboard.ErrCodeForbidden, switchboard.ErrInviteRevoked.Error()+askAgain)
	case errors.Is(err, sessions.ErrTooManyJoins):
		c.errorEvent(switchboard.ErrCodeBusy, sessions.ErrTooManyJoins.Error())
	case errors.Is(err, sessions.ErrFull):
		c.errorEvent(switchboard.ErrCodeBusy, sessions.ErrFull.Error())
	case errors.Is(err, sessions.ErrClosed):
		c.close(gws.CloseGoingAway, "gateway shutting down", reasonShutdown, true)
	case err != nil:
		c.log.Error("join by invite failed", "user", author.Key(), "err", err)
		c.errorEvent(switchboard.ErrCodeInternal, "the gateway could not redeem the invite; try again")
	default:
		c.log.Info("joined by invite", "session", sid, "user", author.Key(), "role", role)
		return sid, true
	}
	return "", false
}

func (c *conn) refuse(msg string) {
	c.errorEvent(switchboard.ErrCodeForbidden, msg)
	c.close(gws.ClosePolicyViolation, msg, reasonAuth, true)
}

// attach sends ready and starts sub's events, which it delivers into the
// send queue itself (deliver): stop is closed when the connection ends
// it, done once it has ended (onEnded). On a connection that has ended it
// closes sub instead and reports false: nobody would ever close it, and
// it would keep its session loaded.
func (c *conn) attach(sub *sessions.Subscription, stop, done chan struct{}) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		close(stop)
		sub.Close()
		return false
	}
	c.sub, c.sessionID, c.guide = sub, sub.Ready.Session, sub.Ready.Guide
	c.subStop, c.fwdDone = stop, done
	c.enqueue(connEvent(sub.Ready.Session, sub.Ready.Guide, switchboard.EventReady, sub.Ready))
	sub.Start()
	return true
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

// deliver puts a subscription's events in the send queue, on the
// subscription's goroutine (AttachOptions.Deliver): no goroutine of the
// connection's moves them. It reports false once the connection is
// closing, which ends the subscription then rather than when serve gets
// to it, so the session is not held.
func (c *conn) deliver() func(switchboard.Event) bool {
	return func(ev switchboard.Event) bool {
		b, err := c.h.encodeEvent(ev)
		if err != nil {
			c.log.Error("event not encodable", "seq", ev.Seq, "err", err)
			return true
		}
		return c.enqueue(b)
	}
}

// onEnded is told that a subscription ended: done is closed, and unless
// the connection ended it (stop), the session closed, and so does the
// connection, for the client to reconnect.
func (c *conn) onEnded(stop <-chan struct{}, done chan<- struct{}) func() {
	return func() {
		defer close(done)
		select {
		case <-stop: // we ended it
		default:
			c.close(gws.CloseGoingAway, "session closed; reconnect with resume_after", reasonSession, true)
		}
	}
}

// followReset moves the connection to the session a /reset started.
func (c *conn) followReset(from string, r *sessions.Receipt) {
	ctx, cancel := context.WithCancel(c.h.ctx)
	defer cancel()
	go func() {
		select {
		case <-c.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	if _, err := r.Wait(ctx); err != nil || r.NewSession == "" {
		return
	}
	if c.attached() != from {
		return
	}
	c.mu.Lock()
	author := c.author
	c.mu.Unlock()
	stop, done := make(chan struct{}), make(chan struct{})
	sub, err := c.h.sessions.Attach(ctx, sessions.AttachOptions{SessionID: r.NewSession, Author: author, AfterSeq: 0,
		Deliver: c.deliver(), Ended: c.onEnded(stop, done)})
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error("attach after reset failed", "session", r.NewSession, "err", err)
			c.errorEvent(switchboard.ErrCodeInternal, "could not open the new session; reconnect")
		}
		return
	}
	c.detach()
	c.dropFiles(errMoved)     // saved in the conversation it leaves
	c.attach(sub, stop, done) // closes sub if the connection ended meanwhile
}

// enqueue queues a frame. A queue that stays full, by frames
// (SendBuffer) or by bytes (SendBufferBytes), for SendTimeout means the
// client is not keeping up: it is disconnected rather than waited for.
// Only the forwarder and the reader enqueue; the writer takes.
func (c *conn) enqueue(b []byte) bool {
	n := int64(len(b))
	limit := int64(c.h.cfg.SendBufferBytes)
	put := func() bool {
		// Room while under the limit: a big frame may take the queue
		// past it (by one frame), and then nothing more goes in.
		if c.queued.Load() >= limit {
			return false
		}
		if !c.send.Push(b, c.h.cfg.SendBuffer) {
			return false
		}
		c.queued.Add(n)
		c.kick()
		return true
	}
	select {
	case <-c.closing:
		return false
	default:
	}
	if put() {
		return true
	}
	t := time.NewTimer(c.h.cfg.SendTimeout)
	defer t.Stop()
	for {
		select {
		case <-c.closing:
			return false
		case <-c.room:
			if put() {
				return true
			}
		case <-t.C:
			// Counted and logged now, not when the socket ends: a writer
			// blocked on a client that reads nothing ends only when it
			// reads or the write times out.
			c.h.cfg.Metrics.Refused("send_buffer")
			c.log.Info("websocket client too slow: disconnecting (it resumes with resume_after)",
				"session", c.attached(), "queued_events", c.send.Len(), "queued_bytes", c.queued.Load())
			c.close(gws.CloseTryAgainLater, fmt.Sprintf("too slow: %d events (%d bytes) waited %s; reconnect with resume_after",
				c.send.Len(), c.queued.Load(), c.h.cfg.SendTimeout), reasonTooSlow, false)
			return false
		}
	}
}

// took accounts for a frame the writer took off the queue.
func (c *conn) took(b []byte) {
	c.queued.Add(-int64(len(b)))
	select {
	case c.room <- struct{}{}:
	default:
	}
}

func (c *conn) errorEvent(code, msg string) {
	c.mu.Lock()
	sid, guide := c.sessionID, c.guide
	c.mu.Unlock()
	c.enqueue(connEvent(sid, guide, switchboard.EventError, switchboard.ErrorData{Code: code, Message: msg}))
}

// The socket's writes. No goroutine of the connection waits to write: a
// frame pushed on the queue starts a writer if none runs (kick), which
// writes what is queued and ends; pings are written from a timer
// (gorilla allows WriteControl beside the one writer); and close starts
// the one goroutine that writes what must go before the close frame, the
// close frame, and ends the writes (finish, which closes writerDone).
// writeMu is held by whoever writes frames, so they go one at a time and
// in the queue's order.

// kick starts a writer for what is queued, unless one runs.
func (c *conn) kick() {
	if c.writing.CompareAndSwap(false, true) {
		go c.writeQueued()
	}
}

// writeQueued writes the queue until it is empty, then ends; a frame
// queued as it ends starts it again. Once the connection is closing it
// leaves the rest to finish.
func (c *conn) writeQueued() {
	for {
		c.writeMu.Lock()
		c.writeAll(false)
		c.writeMu.Unlock()
		c.writing.Store(false)
		if c.send.Len() == 0 || c.isClosing() || !c.writing.CompareAndSwap(false, true) {
			return
		}
	}
}

// writeAll writes queued frames, the caller holding writeMu, until none is
// left, a write fails, or (unless closing is set) the connection closes.
func (c *conn) writeAll(closing bool) {
	for !c.writeFailed && (closing || !c.isClosing()) {
		b, ok := c.send.Pop()
		if !ok {
			return
		}
		c.took(b)
		_ = c.ws.SetWriteDeadline(time.Now().Add(c.h.cfg.WriteTimeout))
		if err := c.ws.WriteMessage(gws.TextMessage, b); err != nil {
			c.writeFailed = true
			c.close(gws.CloseAbnormalClosure, "", reasonWrite, false)
			_ = c.ws.Close() // wakes the reader
		}
	}
}

func (c *conn) isClosing() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// ping keeps the connection alive (the peer answers with a pong, which
// extends the read deadline), every PingInterval until it closes.
func (c *conn) ping() {
	if c.isClosing() {
		return
	}
	if err := c.ws.WriteControl(gws.PingMessage, nil, time.Now().Add(c.h.cfg.WriteTimeout)); err != nil {
		c.close(gws.CloseAbnormalClosure, "", reasonWrite, false)
		_ = c.ws.Close()
		return
	}
	c.pinger.Reset(c.h.cfg.PingInterval)
}

// finish ends the writes once the connection closes: what is queued, if
// the close asked for it (drain), then the close frame, then a moment
// for the peer's answer before the reader's deadline ends it.
func (c *conn) finish() {
	defer close(c.writerDone)
	c.pinger.Stop()
	c.writeMu.Lock() // after the frame a writer is writing
	defer c.writeMu.Unlock()
	if c.closeDrain {
		c.writeAll(true)
	}
	if c.closeCode != gws.CloseAbnormalClosure && !c.writeFailed {
		_ = c.ws.WriteControl(gws.CloseMessage, gws.FormatCloseMessage(c.closeCode, c.closeText), time.Now().Add(c.h.cfg.WriteTimeout))
	}
	_ = c.ws.SetReadDeadline(time.Now().Add(time.Second))
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}

// isReset reports whether text is the /reset command, parsed as the
// session parses commands (sessions.parseCommand): "/name args", the name
// in any case.
func isReset(text string) bool {
	text = strings.TrimSpace(text)
	if len(text) < 2 || text[0] != '/' {
		return false
	}
	name, _, _ := strings.Cut(text[1:], " ")
	return strings.EqualFold(name, "reset")
}

// guestName is what others see of someone who gave no name ("Approved by
// Guest 4821", not a raw client id): derived from the id, so the same
// browser keeps its name across reconnects.
func guestName(userID string) string {
	h := fnv.New32a()
	h.Write([]byte(userID))
	return fmt.Sprintf("Guest %04d", h.Sum32()%10000)
}
