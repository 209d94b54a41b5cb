package discordtest

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Gateway opcodes.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opPresenceUpdate = 3
	opVoiceState     = 4
	opResume         = 6
	opReconnect      = 7
	opRequestMembers = 8
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatAck   = 11
)

// Gateway intents the fake filters dispatches by.
const (
	intentGuilds                 = 1 << 0
	intentGuildMessages          = 1 << 9
	intentGuildMessageReactions  = 1 << 10
	intentDirectMessages         = 1 << 12
	intentDirectMessageReactions = 1 << 13
	intentMessageContent         = 1 << 15
	privilegedIntents            = 1<<1 | 1<<8 | 1<<15
	validIntents                 = 1<<17 - 1 | 1<<20 | 1<<21 | 1<<24 | 1<<25
)

// Gateway close codes the fake sends.
const (
	CloseUnknownError         = 4000
	CloseUnknownOpcode        = 4001
	CloseDecodeError          = 4002
	CloseNotAuthenticated     = 4003
	CloseAuthenticationFailed = 4004
	CloseAlreadyAuthenticated = 4005
	CloseInvalidSeq           = 4007
	CloseSessionTimedOut      = 4009
	CloseInvalidShard         = 4010
	CloseInvalidIntents       = 4013
	CloseDisallowedIntents    = 4014
)

// ErrNoSession is returned when a dispatch has no gateway session to go to.
var ErrNoSession = errors.New("discordtest: no gateway session")

// Connection describes one gateway WebSocket connection.
type Connection struct {
	N        int    // 1-based, in accept order
	Path     string // "/gateway" or "/resume" (the resume_gateway_url)
	Version  string // the v query parameter
	Encoding string // the encoding query parameter ("json")
	Compress string // the compress query parameter ("" or "zlib-stream")
	// SessionID is the session the connection identified or resumed.
	SessionID string
	OpenedAt  time.Time
	ClosedAt  time.Time // zero while open
	// ServerCloseCode is the close code the server sent (0: none, e.g. a
	// dropped connection); ClientCloseCode the one the client sent.
	ServerCloseCode int
	ClientCloseCode int
}

// Identify is one IDENTIFY (op 2) a client sent.
type Identify struct {
	Conn           int
	Token          string
	Intents        int64
	Compress       bool
	LargeThreshold int
	Shard          []int
	Properties     map[string]any
	// SessionID is the session READY started; "" when the IDENTIFY was
	// refused and the connection closed with CloseCode.
	SessionID string
	CloseCode int
	At        time.Time
}

// Resume is one RESUME (op 6) a client sent.
type Resume struct {
	Conn      int
	SessionID string
	Seq       int64
	// Accepted is true when the session was resumed: the missed dispatches
	// (Replayed of them) were sent again, then RESUMED. A refused resume is
	// answered with op 9 Invalid Session (d false).
	Accepted     bool
	Replayed     int
	ViaResumeURL bool // the connection used resume_gateway_url
	At           time.Time
}

// Heartbeat is one heartbeat (op 1) a client sent.
type Heartbeat struct {
	Conn  int
	Seq   *int64 // the d field: the last sequence number the client saw, nil for null
	Acked bool
	At    time.Time
}

// Dispatch is one dispatch (op 0) the server sent, or queued for a session
// whose connection was down (Conn 0) to be replayed on RESUME.
type Dispatch struct {
	Seq       int64
	Type      string
	Data      json.RawMessage
	SessionID string
	Conn      int // the connection it went out on; 0 when it waited for a resume
	Replays   int // how many times a RESUME sent it again
	// Compressed is true when it went out zlib-compressed in a binary frame
	// (payload compression, which IDENTIFY's compress asks for).
	Compressed bool
	SentAt     time.Time
}

type gatewayState struct {
	conns      map[int]*gwConn
	log        []*Connection
	sessions   map[string]*session
	order      []string // session IDs in creation order
	identifies []Identify
	resumes    []Resume
	heartbeats []Heartbeat
	dispatches []*Dispatch
	closing    bool
	hold       chan struct{}
	noAcks     bool
}

func (g *gatewayState) init() {
	g.conns = map[int]*gwConn{}
	g.sessions = map[string]*session{}
}

type session struct {
	id       string
	intents  int64
	compress bool
	shard    []int
	seq      int64
	log      []*logged
	conn     *gwConn
	invalid  bool
}

type logged struct {
	seq      int64
	frame    []byte
	marker   bool // RESUMED: not replayed
	dispatch *Dispatch
}

type gwConn struct {
	killOnce sync.Once
	n        int
	info     *Connection
	ws       *websocket.Conn
	out      chan outFrame
	closed   chan struct{}
	sess     *session
	prev     *session // the session op 9 detached, ended if the connection identifies anew
	draining bool     // op 7 sent: no more dispatches
	ready    bool     // READY or RESUMED sent
	zlibStr  bool     // transport compression zlib-stream
}

type outFrame struct {
	data      []byte
	compress  bool // payload compression: a zlib stream of its own, as a binary frame
	closeCode int  // >0: send a close frame with this code, then close
	closeText string
	drop      bool // close the TCP connection without a close frame
}

// send queues a frame; a client too slow to drain its queue is dropped,
// as Discord drops slow consumers.
func (c *gwConn) send(f outFrame) {
	select {
	case <-c.closed:
	case c.out <- f:
	default:
		c.kill()
	}
}

func (c *gwConn) kill() {
	// Once: the reader, the writer and the test may all kill a connection
	// at the same moment.
	c.killOnce.Do(func() {
		close(c.closed)
		_ = c.ws.Close()
	})
}

// handleGateway accepts a gateway WebSocket: ?v=…&encoding=json with an
// optional compress=zlib-stream. ETF and zstd are not supported.
func (s *Server) handleGateway(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	hold := s.gw.hold
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-s.done:
		case <-r.Context().Done():
			return
		}
	}
	if isClosed(s.done) {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	q := r.URL.Query()
	enc, compress := q.Get("encoding"), q.Get("compress")
	if enc != "" && enc != "json" {
		http.Error(w, "discordtest supports encoding=json only", http.StatusBadRequest)
		return
	}
	if compress != "" && compress != "zlib-stream" {
		http.Error(w, "discordtest supports compress=zlib-stream only", http.StatusBadRequest)
		return
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	path := "/" + strings.Trim(r.URL.Path, "/")
	if enc == "" {
		enc = "json"
	}
	c := &gwConn{ws: ws, out: make(chan outFrame, 4096), closed: make(chan struct{}), zlibStr: compress == "zlib-stream"}
	s.mu.Lock()
	if s.gw.closing {
		s.mu.Unlock()
		_ = ws.Close()
		return
	}
	c.n = len(s.gw.log) + 1
	c.info = &Connection{N: c.n, Path: path, Version: q.Get("v"), Encoding: enc, Compress: compress, OpenedAt: time.Now()}
	s.gw.log = append(s.gw.log, c.info)
	s.gw.conns[c.n] = c
	c.send(outFrame{data: s.frame(opHello, map[string]any{
		"heartbeat_interval": s.cfg.heartbeat.Milliseconds(),
		"_trace":             []string{`["gateway-prd-fake",{"micros":0.0}]`},
	})})
	s.wg.Add(2)
	s.notifyLocked()
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.writeLoop(c)
	}()
	go func() {
		defer s.wg.Done()
		s.readLoop(c)
	}()
}

// frame renders a non-dispatch payload.
func (s *Server) frame(op int, d any) []byte {
	b, _ := json.Marshal(map[string]any{"op": op, "d": d, "s": nil, "t": nil})
	return b
}

func (s *Server) writeLoop(c *gwConn) {
	var zbuf bytes.Buffer
	var zw *zlib.Writer
	if c.zlibStr {
		zw = zlib.NewWriter(&zbuf)
	}
	defer s.connGone(c)
	for {
		var f outFrame
		select {
		case f = <-c.out:
		case <-c.closed:
			return
		}
		_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
		switch {
		case f.drop:
			return
		case f.closeCode > 0:
			_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(f.closeCode, f.closeText), time.Now().Add(time.Second))
			s.mu.Lock()
			c.info.ServerCloseCode = f.closeCode
			s.mu.Unlock()
			return
		case zw != nil:
			zbuf.Reset()
			_, _ = zw.Write(f.data)
			_ = zw.Flush() // Z_SYNC_FLUSH: ends with 00 00 ff ff
			if c.ws.WriteMessage(websocket.BinaryMessage, zbuf.Bytes()) != nil {
				return
			}
		case f.compress:
			var b bytes.Buffer
			w := zlib.NewWriter(&b)
			_, _ = w.Write(f.data)
			_ = w.Close()
			if c.ws.WriteMessage(websocket.BinaryMessage, b.Bytes()) != nil {
				return
			}
		default:
			if c.ws.WriteMessage(websocket.TextMessage, f.data) != nil {
				return
			}
		}
	}
}

// connGone forgets a closed connection; its session stays resumable.
func (s *Server) connGone(c *gwConn) {
	c.kill()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.gw.conns[c.n]; !ok {
		return
	}
	delete(s.gw.conns, c.n)
	c.info.ClosedAt = time.Now()
	if c.sess != nil && c.sess.conn == c {
		c.sess.conn = nil
	}
	s.notifyLocked()
}

type clientPayload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
}

func (s *Server) readLoop(c *gwConn) {
	defer s.connGone(c)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				s.mu.Lock()
				c.info.ClientCloseCode = ce.Code
				// Closing with 1000 or 1001 ends the session; other codes
				// (and dropped connections) leave it resumable.
				if (ce.Code == websocket.CloseNormalClosure || ce.Code == websocket.CloseGoingAway) && c.sess != nil {
					c.sess.invalid = true
				}
				s.mu.Unlock()
			}
			return
		}
		if len(data) > 4096 {
			s.closeConn(c, CloseDecodeError, "Decode error.")
			continue
		}
		var p clientPayload
		if json.Unmarshal(data, &p) != nil {
			s.closeConn(c, CloseDecodeError, "Decode error.")
			continue
		}
		s.mu.Lock()
		switch p.Op {
		case opHeartbeat:
			hb := Heartbeat{Conn: c.n, At: time.Now(), Acked: !s.gw.noAcks}
			var seq int64
			if json.Unmarshal(p.D, &seq) == nil && string(p.D) != "null" {
				hb.Seq = &seq
			}
			s.gw.heartbeats = append(s.gw.heartbeats, hb)
			if hb.Acked {
				c.send(outFrame{data: []byte(`{"op":11,"d":null,"s":null,"t":null}`)})
			}
		case opIdentify:
			s.identifyLocked(c, p.D)
		case opResume:
			s.resumeLocked(c, p.D)
		case opPresenceUpdate, opVoiceState, opRequestMembers:
			if c.sess == nil {
				s.closeConnLocked(c, CloseNotAuthenticated, "Not authenticated.")
			}
		default:
			s.closeConnLocked(c, CloseUnknownOpcode, "Unknown opcode.")
		}
		s.notifyLocked()
		s.mu.Unlock()
	}
}

func (s *Server) closeConn(c *gwConn, code int, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeConnLocked(c, code, text)
}

// closeConnLocked sends a close frame and closes the connection. Codes
// that end the session (authentication, intents, shard, seq, timeout)
// invalidate it.
func (s *Server) closeConnLocked(c *gwConn, code int, text string) {
	switch code {
	case CloseAuthenticationFailed, CloseInvalidSeq, CloseSessionTimedOut, CloseInvalidShard, 4011, 4012, CloseInvalidIntents, CloseDisallowedIntents:
		if c.sess != nil {
			c.sess.invalid = true
		}
	}
	c.send(outFrame{closeCode: code, closeText: text})
}

func tokenMatches(got, want string) bool {
	got = strings.TrimPrefix(got, "Bot ")
	return got == want
}

func (s *Server) identifyLocked(c *gwConn, raw json.RawMessage) {
	var d struct {
		Token          string          `json:"token"`
		Intents        *int64          `json:"intents"`
		Compress       bool            `json:"compress"`
		LargeThreshold int             `json:"large_threshold"`
		Shard          []int           `json:"shard"`
		Properties     map[string]any  `json:"properties"`
		Presence       json.RawMessage `json:"presence"`
	}
	rec := Identify{Conn: c.n, At: time.Now()}
	if json.Unmarshal(raw, &d) != nil {
		rec.CloseCode = CloseDecodeError
		s.gw.identifies = append(s.gw.identifies, rec)
		s.closeConnLocked(c, CloseDecodeError, "Decode error.")
		return
	}
	rec.Token, rec.Compress, rec.LargeThreshold, rec.Shard, rec.Properties = d.Token, d.Compress, d.LargeThreshold, d.Shard, d.Properties
	if d.Intents != nil {
		rec.Intents = *d.Intents
	}
	code, text := 0, ""
	switch {
	case c.sess != nil:
		code, text = CloseAlreadyAuthenticated, "Already authenticated."
	case !tokenMatches(d.Token, s.cfg.token):
		code, text = CloseAuthenticationFailed, "Authentication failed."
	case d.Intents == nil || *d.Intents&^validIntents != 0:
		code, text = CloseInvalidIntents, "Invalid intent(s)."
	case *d.Intents&privilegedIntents&^s.cfg.allowedPrivileged != 0:
		code, text = CloseDisallowedIntents, "Disallowed intent(s)."
	case d.Shard != nil && (len(d.Shard) != 2 || d.Shard[1] < 1 || d.Shard[0] < 0 || d.Shard[0] >= d.Shard[1]):
		code, text = CloseInvalidShard, "Invalid shard."
	}
	if code != 0 {
		rec.CloseCode = code
		s.gw.identifies = append(s.gw.identifies, rec)
		s.closeConnLocked(c, code, text)
		return
	}
	if c.prev != nil {
		// The client chose a new session over resuming the old one.
		c.prev.invalid = true
		c.prev = nil
	}
	sess := &session{id: randomHex(16), intents: rec.Intents, compress: d.Compress && !c.zlibStr, shard: d.Shard, conn: c}
	s.gw.sessions[sess.id] = sess
	s.gw.order = append(s.gw.order, sess.id)
	c.sess = sess
	c.info.SessionID = sess.id
	rec.SessionID = sess.id
	s.gw.identifies = append(s.gw.identifies, rec)

	user := s.userJSONLocked(s.cfg.botID)
	user["verified"], user["mfa_enabled"], user["email"] = true, false, nil
	guilds := []any{}
	for _, id := range s.guildIDsLocked() {
		if sess.wants(id) {
			guilds = append(guilds, map[string]any{"id": id, "unavailable": true})
		}
	}
	ready := map[string]any{
		"v":                       10,
		"user":                    user,
		"user_settings":           map[string]any{},
		"guilds":                  guilds,
		"session_id":              sess.id,
		"session_type":            "normal",
		"resume_gateway_url":      s.ResumeGatewayURL(),
		"private_channels":        []any{},
		"presences":               []any{},
		"relationships":           []any{},
		"guild_join_requests":     []any{},
		"geo_ordered_rtc_regions": []any{"fake-east"},
		"application":             map[string]any{"id": s.cfg.appID, "flags": s.cfg.appFlags},
		"auth":                    map[string]any{},
		"_trace":                  []string{`["gateway-prd-fake",{"micros":0.0}]`},
	}
	if d.Shard != nil {
		ready["shard"] = d.Shard
	}
	s.sessionDispatchLocked(sess, "READY", ready, false)
	c.ready = true
	if sess.intents&intentGuilds != 0 {
		for _, id := range s.guildIDsLocked() {
			if sess.wants(id) {
				s.sessionDispatchLocked(sess, "GUILD_CREATE", s.guildCreateJSONLocked(s.guilds[id]), false)
			}
		}
	}
}

func (s *Server) guildIDsLocked() []string {
	ids := make([]string, 0, len(s.guilds))
	for id := range s.guilds {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, compareIDs)
	return ids
}

// wants reports whether the session's shard receives events of guildID
// (guildID "": DMs and other guild-less events, which go to shard 0).
func (sess *session) wants(guildID string) bool {
	if len(sess.shard) != 2 {
		return true
	}
	if guildID == "" {
		return sess.shard[0] == 0
	}
	id, _ := strconv.ParseUint(guildID, 10, 64)
	return int(id>>22%uint64(sess.shard[1])) == sess.shard[0]
}

func (s *Server) resumeLocked(c *gwConn, raw json.RawMessage) {
	var d struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int64  `json:"seq"`
	}
	if json.Unmarshal(raw, &d) != nil {
		s.closeConnLocked(c, CloseDecodeError, "Decode error.")
		return
	}
	rec := Resume{Conn: c.n, SessionID: d.SessionID, Seq: d.Seq, ViaResumeURL: c.info.Path == "/resume", At: time.Now()}
	switch {
	case c.sess != nil:
		s.gw.resumes = append(s.gw.resumes, rec)
		s.closeConnLocked(c, CloseAlreadyAuthenticated, "Already authenticated.")
		return
	case !tokenMatches(d.Token, s.cfg.token):
		s.gw.resumes = append(s.gw.resumes, rec)
		s.closeConnLocked(c, CloseAuthenticationFailed, "Authentication failed.")
		return
	}
	sess, ok := s.gw.sessions[d.SessionID]
	if !ok || sess.invalid {
		s.gw.resumes = append(s.gw.resumes, rec)
		c.send(outFrame{data: s.frame(opInvalidSession, false)})
		return
	}
	if d.Seq > sess.seq || d.Seq < 0 {
		s.gw.resumes = append(s.gw.resumes, rec)
		c.sess = sess
		s.closeConnLocked(c, CloseInvalidSeq, "Invalid seq.")
		return
	}
	if old := sess.conn; old != nil && old != c {
		old.sess = nil
		old.send(outFrame{drop: true})
	}
	sess.conn, c.sess, c.prev = c, sess, nil
	c.info.SessionID = sess.id
	for _, l := range sess.log {
		if l.seq > d.Seq && !l.marker {
			c.send(outFrame{data: l.frame, compress: sess.compress && len(l.frame) > s.cfg.compressThreshold})
			l.dispatch.Replays++
			if l.dispatch.Conn == 0 {
				l.dispatch.Conn = c.n
			}
			rec.Replayed++
		}
	}
	s.sessionDispatchLocked(sess, "RESUMED", map[string]any{"_trace": []string{`["gateway-prd-fake",{"micros":0.0}]`}}, true)
	c.ready = true
	rec.Accepted = true
	s.gw.resumes = append(s.gw.resumes, rec)
}

// sessionDispatchLocked gives the next sequence number to a dispatch for
// sess, keeps it for replay and sends it when the session is connected.
// marker dispatches (RESUMED) are never replayed.
func (s *Server) sessionDispatchLocked(sess *session, typ string, data any, marker bool) *Dispatch {
	sess.seq++
	d, _ := json.Marshal(data)
	frame, _ := json.Marshal(map[string]any{"op": opDispatch, "d": json.RawMessage(d), "s": sess.seq, "t": typ})
	compress := sess.compress && (typ == "READY" || len(frame) > s.cfg.compressThreshold)
	rec := &Dispatch{Seq: sess.seq, Type: typ, Data: d, SessionID: sess.id, Compressed: compress, SentAt: time.Now()}
	s.gw.dispatches = append(s.gw.dispatches, rec)
	sess.log = append(sess.log, &logged{seq: sess.seq, frame: frame, marker: marker, dispatch: rec})
	if c := sess.conn; c != nil && !c.draining {
		rec.Conn = c.n
		c.send(outFrame{data: frame, compress: compress})
	}
	s.notifyLocked()
	return rec
}

// dispatchLocked sends an event to every live session whose intents and
// shard cover it. intent 0 means the event needs none (INTERACTION_CREATE).
// build renders the data per session (message content depends on the
// session's intents) and may skip a session by returning false.
func (s *Server) dispatchLocked(typ, guildID string, intent int64, build func(*session) (any, bool)) []*Dispatch {
	var out []*Dispatch
	for _, id := range s.gw.order {
		sess := s.gw.sessions[id]
		if sess.invalid || (intent != 0 && sess.intents&intent == 0) || !sess.wants(guildID) {
			continue
		}
		data, ok := build(sess)
		if !ok {
			continue
		}
		out = append(out, s.sessionDispatchLocked(sess, typ, data, false))
	}
	return out
}

func messageIntent(guildID string) int64 {
	if guildID == "" {
		return intentDirectMessages
	}
	return intentGuildMessages
}

// dispatchMessageLocked sends MESSAGE_CREATE or MESSAGE_UPDATE for m. A
// session without the MESSAGE_CONTENT intent gets empty content, embeds,
// attachments and components, except for the bot's own messages, DMs and
// messages that mention the bot, as Discord documents.
func (s *Server) dispatchMessageLocked(typ string, m *Message) []*Dispatch {
	if ch, ok := s.channels[m.ChannelID]; ok && s.botMayLocked(ch, 0) != nil {
		return nil // the bot cannot see the channel
	}
	mentioned := slices.Contains(m.Mentions, s.cfg.botID)
	return s.dispatchLocked(typ, m.GuildID, messageIntent(m.GuildID), func(sess *session) (any, bool) {
		visible := sess.intents&intentMessageContent != 0 || m.AuthorID == s.cfg.botID || m.GuildID == "" || mentioned
		return s.messageJSONLocked(m, true, visible), true
	})
}

// --- control ---

func (s *Server) openConnsLocked() []*gwConn {
	out := make([]*gwConn, 0, len(s.gw.conns))
	for _, c := range s.gw.conns {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *gwConn) int { return a.n - b.n })
	return out
}

// Reconnect sends op 7 Reconnect on every open connection, as Discord does
// before moving a session. From then on dispatches for those sessions are
// held for replay; the client is expected to close the connection,
// reconnect and RESUME, getting the held dispatches before RESUMED. A
// connection the client keeps open is closed after the reconnect grace
// (WithReconnectGrace).
func (s *Server) Reconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.openConnsLocked() {
		c.send(outFrame{data: s.frame(opReconnect, nil)})
		c.draining = true
		if c.sess != nil && c.sess.conn == c {
			c.sess.conn = nil
		}
		c := c
		if s.gw.closing {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTimer(s.cfg.reconnectGrace)
			defer t.Stop()
			select {
			case <-t.C:
				c.send(outFrame{closeCode: CloseUnknownError, closeText: "Reconnect grace expired."})
			case <-c.closed:
			case <-s.done:
			}
		}()
	}
	s.notifyLocked()
}

// InvalidateSession sends op 9 Invalid Session with d resumable on every
// connection with a session. With resumable false the sessions end and a
// RESUME of them is refused; either way the connection stays open and
// waits for the client's IDENTIFY (or, if resumable, RESUME).
func (s *Server) InvalidateSession(resumable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.openConnsLocked() {
		if c.sess == nil {
			continue
		}
		c.send(outFrame{data: s.frame(opInvalidSession, resumable)})
		if !resumable {
			c.sess.invalid = true
		} else {
			c.prev = c.sess
		}
		if c.sess.conn == c {
			c.sess.conn = nil
		}
		c.sess, c.ready = nil, false
	}
	s.notifyLocked()
}

// DropConnections cuts every gateway connection without a close frame, as
// a network failure would. Sessions stay resumable.
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.openConnsLocked() {
		c.kill()
	}
}

// CloseConnections sends a close frame with code (e.g. CloseUnknownError,
// resumable, or CloseAuthenticationFailed, which ends the session) on every
// gateway connection and closes it.
func (s *Server) CloseConnections(code int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.openConnsLocked() {
		s.closeConnLocked(c, code, reason)
	}
}

// RequestHeartbeat sends op 1 Heartbeat on every connection; clients must
// answer with a heartbeat right away.
func (s *Server) RequestHeartbeat() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.openConnsLocked() {
		c.send(outFrame{data: s.frame(opHeartbeat, nil)})
	}
}

// SetHeartbeatAcks turns heartbeat ACKs (op 11) on or off, to make a
// connection look zombied: discordgo reconnects after five heartbeat
// intervals without an ACK.
func (s *Server) SetHeartbeatAcks(enabled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gw.noAcks = !enabled
}

// HoldConnections makes new gateway handshakes wait until release is
// called, so a test can act while a client is between connections (say,
// dispatch events it must get through a RESUME replay).
func (s *Server) HoldConnections() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.gw.hold = ch
	var done bool
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !done {
			done = true
			close(ch)
			if s.gw.hold == ch {
				s.gw.hold = nil
			}
		}
	}
}

func (s *Server) closeGateway() {
	// Handshakes waiting in HoldConnections give up on s.done; the hold
	// channel itself belongs to its release function.
	s.mu.Lock()
	s.gw.closing = true
	conns := s.openConnsLocked()
	s.mu.Unlock()
	for _, c := range conns {
		c.kill()
	}
}

// --- accessors ---

// Connections is how many gateway connections the server has accepted,
// reconnections included.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.gw.log)
}

// ActiveConnections is how many gateway connections are open now.
func (s *Server) ActiveConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.gw.conns)
}

// GatewayConnections describes every gateway connection accepted, in order.
func (s *Server) GatewayConnections() []Connection {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Connection, len(s.gw.log))
	for i, c := range s.gw.log {
		out[i] = *c
	}
	return out
}

// Identifies returns every IDENTIFY received, in order.
func (s *Server) Identifies() []Identify {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.gw.identifies)
	for i := range out {
		out[i].Shard = slices.Clone(out[i].Shard)
	}
	return out
}

// Resumes returns every RESUME received, in order.
func (s *Server) Resumes() []Resume {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.gw.resumes)
}

// Heartbeats returns every heartbeat received, in order.
func (s *Server) Heartbeats() []Heartbeat {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.gw.heartbeats)
}

// Dispatches returns the dispatches of type typ ("" for all) in order,
// across sessions.
func (s *Server) Dispatches(typ string) []Dispatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Dispatch
	for _, d := range s.gw.dispatches {
		if typ == "" || d.Type == typ {
			c := *d
			c.Data = cloneRaw(d.Data)
			out = append(out, c)
		}
	}
	return out
}

// WaitForReady blocks until a session is attached to an open connection
// that has been sent READY or RESUMED, or ctx ends.
func (s *Server) WaitForReady(ctx context.Context) error {
	return s.WaitFor(ctx, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.gw.conns {
			if c.ready && c.sess != nil && c.sess.conn == c && !c.sess.invalid {
				return true
			}
		}
		return false
	})
}

// WaitForIdentifies blocks until at least n IDENTIFYs arrived.
func (s *Server) WaitForIdentifies(ctx context.Context, n int) error {
	return s.WaitFor(ctx, func() bool { return len(s.Identifies()) >= n })
}

// WaitForResumes blocks until at least n RESUMEs arrived.
func (s *Server) WaitForResumes(ctx context.Context, n int) error {
	return s.WaitFor(ctx, func() bool { return len(s.Resumes()) >= n })
}

// WaitForConnections blocks until at least n connections were accepted.
func (s *Server) WaitForConnections(ctx context.Context, n int) error {
	return s.WaitFor(ctx, func() bool { return s.Connections() >= n })
}
