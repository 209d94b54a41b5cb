package slacktest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Socket Mode envelope types.
const (
	EnvelopeEventsAPI     = "events_api"
	EnvelopeInteractive   = "interactive"
	EnvelopeSlashCommands = "slash_commands"
)

// ErrNoConnection is returned when an envelope is sent while no Socket Mode
// client is connected (or not on the connection it names).
var ErrNoConnection = errors.New("slacktest: no Socket Mode connection")

// MaxConnections is how many Socket Mode connections Slack keeps open for
// one app at a time: several processes of an app may each hold some, and
// Slack sends each envelope over one of them. A connection beyond them is
// told {"type":"disconnect","reason":"too_many_websockets"} and closed.
const MaxConnections = 10

// Envelope is one Socket Mode message Slack sends that the app must ack.
type Envelope struct {
	EnvelopeID             string
	Type                   string // EnvelopeEventsAPI, EnvelopeInteractive or EnvelopeSlashCommands
	Payload                json.RawMessage
	AcceptsResponsePayload bool
	RetryAttempt           int
	RetryReason            string
	SentAt                 time.Time // real time, with a monotonic reading
	// Conn is the connection (1-based, in accept order) it went out on.
	// Set when sending, it picks that connection; zero takes the next
	// open one in turn, as Slack spreads envelopes over an app's
	// connections (Slack picks one; a turn keeps tests repeatable).
	Conn int
}

// Ack is one acknowledgement a Socket Mode client sent.
type Ack struct {
	EnvelopeID string
	Payload    json.RawMessage // nil when the ack carried none
	Envelope   Envelope        // the envelope acknowledged, when Known
	Known      bool            // the envelope ID is one the server sent
	AckedAt    time.Time
	Latency    time.Duration // AckedAt − Envelope.SentAt, when Known
}

type socketState struct {
	mu        sync.Mutex
	tickets   map[string]bool // issued by apps.connections.open, not yet used
	conns     map[int]*smConn // open connections by number
	total     int
	last      int // the connection the last envelope went out on
	refused   int // connections refused beyond MaxConnections
	opening   int // accepted, hello not sent yet: they count as open
	envelopes map[string]Envelope
	sent      []Envelope
	acks      []Ack
	changed   chan struct{} // closed and replaced on every change, to wake waiters
	closing   bool          // Close has begun: start no goroutines
}

func (st *socketState) init() {
	st.tickets = map[string]bool{}
	st.conns = map[int]*smConn{}
	st.envelopes = map[string]Envelope{}
	st.changed = make(chan struct{})
}

// notifyLocked wakes everything waiting for a state change.
func (st *socketState) notifyLocked() {
	close(st.changed)
	st.changed = make(chan struct{})
}

type smConn struct {
	n       int
	ws      *websocket.Conn
	writeMu sync.Mutex
	closed  chan struct{}
	once    sync.Once
}

func (c *smConn) close() {
	c.once.Do(func() {
		close(c.closed)
		_ = c.ws.Close() // drops the TCP connection without a close frame
	})
}

func (c *smConn) write(v any) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteJSON(v)
}

func (s *Server) appsConnectionsOpen(url.Values) apiResult {
	ticket := randomHex(16)
	s.sm.mu.Lock()
	s.sm.tickets[ticket] = true
	s.sm.mu.Unlock()
	u := "ws" + strings.TrimPrefix(s.http.URL, "http") + "/link/?ticket=" + ticket + "&app_id=" + s.cfg.appID
	return okResult(map[string]any{"url": u})
}

// handleSocket accepts a Socket Mode WebSocket on a URL from
// apps.connections.open. Tickets are single use, as Slack's are, so a client
// must call apps.connections.open again to reconnect.
func (s *Server) handleSocket(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	s.sm.mu.Lock()
	valid := s.sm.tickets[ticket]
	delete(s.sm.tickets, ticket)
	s.sm.mu.Unlock()
	if !valid {
		http.Error(w, "invalid or used ticket", http.StatusUnauthorized)
		return
	}
	select {
	case <-s.done:
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	default:
	}
	upgrader := websocket.Upgrader{
		// slack-go sends Origin: https://api.slack.com, which is not this host.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &smConn{ws: ws, closed: make(chan struct{})}
	s.sm.mu.Lock()
	if s.sm.closing {
		s.sm.mu.Unlock()
		c.close()
		return
	}
	s.sm.total++
	c.n = s.sm.total
	active := len(s.sm.conns) + s.sm.opening + 1
	if active > MaxConnections {
		s.sm.refused++
		s.sm.notifyLocked()
		s.sm.mu.Unlock()
		// As Slack does: no hello, the reason, and the connection closed.
		_ = c.write(map[string]any{
			"type":       "disconnect",
			"reason":     "too_many_websockets",
			"debug_info": map[string]any{"host": "applink-fake-" + s.cfg.appID},
		})
		c.close()
		return
	}
	s.sm.opening++
	s.sm.mu.Unlock()

	hello := map[string]any{
		"type":            "hello",
		"num_connections": active,
		"debug_info": map[string]any{
			"host":                        "applink-fake-" + s.cfg.appID,
			"build_number":                1,
			"approximate_connection_time": 18060,
		},
		"connection_info": map[string]any{"app_id": s.cfg.appID},
	}
	// The connection becomes usable for envelopes only after hello, which
	// must be the first message the client reads.
	helloErr := c.write(hello)
	s.sm.mu.Lock()
	s.sm.opening--
	s.sm.conns[c.n] = c
	s.sm.notifyLocked()
	s.sm.mu.Unlock()
	if helloErr != nil {
		s.dropConn(c)
		return
	}
	s.goTracked(func() { s.readAcks(c) })
	s.goTracked(func() { s.ping(c) })
}

// goTracked runs f on a goroutine Close waits for, unless Close has begun.
func (s *Server) goTracked(f func()) {
	s.sm.mu.Lock()
	defer s.sm.mu.Unlock()
	if s.sm.closing {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// ping sends WebSocket pings, which slack-go requires to consider the
// connection alive: one right away, then every ping interval.
func (s *Server) ping(c *smConn) {
	t := time.NewTicker(s.cfg.pingInterval)
	defer t.Stop()
	for {
		if err := c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(5*time.Second)); err != nil {
			return
		}
		select {
		case <-t.C:
		case <-c.closed:
			return
		case <-s.done:
			return
		}
	}
}

// readAcks records every message the client sends; in Socket Mode those are
// acks {"envelope_id":…,"payload":…}.
func (s *Server) readAcks(c *smConn) {
	defer s.dropConn(c)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		now := time.Now()
		var msg struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(data, &msg) != nil || msg.EnvelopeID == "" {
			continue
		}
		ack := Ack{EnvelopeID: msg.EnvelopeID, AckedAt: now}
		if len(msg.Payload) > 0 && string(msg.Payload) != "null" {
			ack.Payload = msg.Payload
		}
		s.sm.mu.Lock()
		if env, ok := s.sm.envelopes[msg.EnvelopeID]; ok {
			ack.Envelope, ack.Known, ack.Latency = env, true, now.Sub(env.SentAt)
		}
		s.sm.acks = append(s.sm.acks, ack)
		s.sm.notifyLocked()
		s.sm.mu.Unlock()
	}
}

func (s *Server) dropConn(c *smConn) {
	c.close()
	s.sm.mu.Lock()
	if _, ok := s.sm.conns[c.n]; ok {
		delete(s.sm.conns, c.n)
		s.sm.notifyLocked()
	}
	s.sm.mu.Unlock()
}

func (s *Server) closeSockets() {
	s.sm.mu.Lock()
	if isClosed(s.done) {
		s.sm.closing = true
	}
	conns := make([]*smConn, 0, len(s.sm.conns))
	for _, c := range s.sm.conns {
		conns = append(conns, c)
	}
	s.sm.mu.Unlock()
	for _, c := range conns {
		s.dropConn(c)
	}
}

// Connections is how many Socket Mode connections the server has accepted,
// reconnections included.
func (s *Server) Connections() int {
	s.sm.mu.Lock()
	defer s.sm.mu.Unlock()
	return s.sm.total
}

// RefusedConnections is how many Socket Mode connections were refused
// because MaxConnections were open.
func (s *Server) RefusedConnections() int {
	s.sm.mu.Lock()
	defer s.sm.mu.Unlock()
	return s.sm.refused
}

// ActiveConnections is how many Socket Mode connections are open now.
func (s *Server) ActiveConnections() int {
	s.sm.mu.Lock()
	defer s.sm.mu.Unlock()
	// Those being greeted are open too (their hello may already have
	// been read), as the eleventh connection's refusal counts them.
	return len(s.sm.conns) + s.sm.opening
}

// WaitForConnections blocks until the server has accepted at least n
// connections in total and one is open, or ctx ends.
func (s *Server) WaitForConnections(ctx context.Context, n int) error {
	return s.waitFor(ctx, func() bool { return s.sm.total >= n && len(s.sm.conns) > 0 })
}

// waitFor blocks until cond (called with sm.mu held) holds or ctx ends.
func (s *Server) waitFor(ctx context.Context, cond func() bool) error {
	for {
		s.sm.mu.Lock()
		ok, ch := cond(), s.sm.changed
		s.sm.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errors.New("slacktest: server closed")
		}
	}
}

// SendEnvelope sends env over one of the open connections: the one
// env.Conn names, else the next in turn, as Slack spreads an app's
// envelopes over all its connections (one app's processes each get some).
// An empty EnvelopeID gets a fresh one. It returns the envelope as sent.
func (s *Server) SendEnvelope(env Envelope) (Envelope, error) {
	if env.EnvelopeID == "" {
		env.EnvelopeID = newEnvelopeID()
	}
	s.sm.mu.Lock()
	c := s.sm.conns[env.Conn]
	if env.Conn == 0 {
		c = s.sm.nextLocked()
	}
	if c == nil {
		s.sm.mu.Unlock()
		return env, ErrNoConnection
	}
	s.sm.last = c.n
	env.Conn = c.n
	env.SentAt = time.Now()
	s.sm.envelopes[env.EnvelopeID] = env
	s.sm.sent = append(s.sm.sent, env)
	s.sm.mu.Unlock()

	wire := map[string]any{
		"envelope_id":              env.EnvelopeID,
		"type":                     env.Type,
		"payload":                  env.Payload,
		"accepts_response_payload": env.AcceptsResponsePayload,
		"retry_attempt":            env.RetryAttempt,
		"retry_reason":             env.RetryReason,
	}
	if err := c.write(wire); err != nil {
		return env, err
	}
	return env, nil
}

// nextLocked is the open connection after the last one used, in accept
// order, wrapping around; nil when none is open.
func (st *socketState) nextLocked() *smConn {
	var first, next *smConn
	for n, c := range st.conns {
		if first == nil || n < first.n {
			first = c
		}
		if n > st.last && (next == nil || n < next.n) {
			next = c
		}
	}
	if next == nil {
		return first
	}
	return next
}

// SendEvent wraps an inner Events API event (see MessageEvent,
// AppMentionEvent, AssistantThreadStartedEvent) in an event_callback with a
// fresh event_id and sends it as an events_api envelope. An event that is
// already an event_callback (from EventCallback) is sent as it is.
func (s *Server) SendEvent(event any) (Envelope, error) {
	return s.sendEvent(0, event)
}

// SendEventOn is SendEvent over connection conn (see Envelope.Conn): the
// event lands on the process that holds that connection.
func (s *Server) SendEventOn(conn int, event any) (Envelope, error) {
	if conn <= 0 {
		return Envelope{}, ErrNoConnection
	}
	return s.sendEvent(conn, event)
}

func (s *Server) sendEvent(conn int, event any) (Envelope, error) {
	raw, err := json.Marshal(event)
	if err != nil {
		return Envelope{}, err
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &head)
	payload := json.RawMessage(raw)
	if head.Type != "event_callback" {
		if payload, err = s.EventCallback(json.RawMessage(raw)); err != nil {
			return Envelope{}, err
		}
	}
	return s.SendEnvelope(Envelope{Type: EnvelopeEventsAPI, Payload: payload, Conn: conn})
}

// SendInteraction sends an interaction payload (see BlockActions,
// ViewSubmission) as an interactive envelope. view_submission and
// block_suggestion envelopes accept a response payload in the ack.
func (s *Server) SendInteraction(payload any) (Envelope, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return Envelope{}, err
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &head)
	accepts := head.Type == "view_submission" || head.Type == "block_suggestion"
	return s.SendEnvelope(Envelope{Type: EnvelopeInteractive, Payload: raw, AcceptsResponsePayload: accepts})
}

// SendSlashCommand sends a slash command as a slash_commands envelope.
func (s *Server) SendSlashCommand(cmd SlashCommand) (Envelope, error) {
	raw, err := json.Marshal(cmd)
	if err != nil {
		return Envelope{}, err
	}
	return s.SendEnvelope(Envelope{Type: EnvelopeSlashCommands, Payload: raw, AcceptsResponsePayload: true})
}

// Redeliver sends env's payload again the way Slack retries an envelope it
// got no timely ack for: a new envelope_id, retry_attempt one higher and
// retry_reason (default "timeout"); the payload, and so its event_id, is
// unchanged.
func (s *Server) Redeliver(env Envelope, reason string) (Envelope, error) {
	if reason == "" {
		reason = "timeout"
	}
	return s.SendEnvelope(Envelope{
		Type:                   env.Type,
		Payload:                env.Payload,
		AcceptsResponsePayload: env.AcceptsResponsePayload,
		RetryAttempt:           env.RetryAttempt + 1,
		RetryReason:            reason,
	})
}

// Envelopes returns every envelope sent, in order.
func (s *Server) Envelopes() []Envelope {
	s.sm.mu.Lock()
	defer s.sm.mu.Unlock()
	return slices.Clone(s.sm.sent)
}

// Acks returns every ack received, in order.
func (s *Server) Acks() []Ack {
	s.sm.mu.Lock()
	defer s.sm.mu.Unlock()
	return slices.Clone(s.sm.acks)
}

// WaitForAck blocks until the envelope is acked (returning the first ack)
// or ctx ends.
func (s *Server) WaitForAck(ctx context.Context, envelopeID string) (Ack, error) {
	var ack Ack
	err := s.waitFor(ctx, func() bool {
		for _, a := range s.sm.acks {
			if a.EnvelopeID == envelopeID {
				ack = a
				return true
			}
		}
		return false
	})
	return ack, err
}

// Disconnect asks every connected client to reconnect, sending
// {"type":"disconnect","reason":reason} ("refresh_requested", "warning",
// "link_disabled"). Like Slack it closes a connection the client keeps open
// after the disconnect grace period (WithDisconnectGrace).
func (s *Server) Disconnect(reason string) {
	s.sm.mu.Lock()
	conns := make([]*smConn, 0, len(s.sm.conns))
	for _, c := range s.sm.conns {
		conns = append(conns, c)
	}
	s.sm.mu.Unlock()
	msg := map[string]any{
		"type":       "disconnect",
		"reason":     reason,
		"debug_info": map[string]any{"host": "applink-fake-" + s.cfg.appID},
	}
	for _, c := range conns {
		if err := c.write(msg); err != nil {
			s.dropConn(c)
			continue
		}
		s.goTracked(func() {
			t := time.NewTimer(s.cfg.disconnectGrace)
			defer t.Stop()
			select {
			case <-t.C:
				s.dropConn(c)
			case <-c.closed:
			case <-s.done:
			}
		})
	}
}

// DropConnections cuts every open connection without a close frame, as a
// network failure would.
func (s *Server) DropConnections() { s.closeSockets() }

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func newEnvelopeID() string {
	h := randomHex(16)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
