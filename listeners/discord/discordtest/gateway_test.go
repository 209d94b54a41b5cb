package discordtest_test

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
)

func TestReadyAfterIdentify(t *testing.T) {
	srv := newServer(t)
	s, ev := openSession(t, srv, defaultIntents)

	r := next(t, ev.ready, "READY")
	if r.Version != 10 || r.SessionID == "" || r.User.ID != srv.BotUserID() || !r.User.Bot || r.User.Username != discordtest.DefaultBotUsername {
		t.Errorf("READY = %+v user %+v", r, r.User)
	}
	if r.Application == nil || r.Application.ID != srv.ApplicationID() {
		t.Errorf("READY application = %+v", r.Application)
	}
	// discordgo's state keeps READY's guild objects and overwrites them when
	// GUILD_CREATE arrives; read them under the state's lock.
	s.State.RLock()
	if len(r.Guilds) != 1 || r.Guilds[0].ID != discordtest.DefaultGuildID {
		t.Errorf("READY guilds = %+v, want the default guild", r.Guilds)
	}
	s.State.RUnlock()
	if d := srv.Dispatches("READY"); len(d) != 1 || !strings.Contains(string(d[0].Data), `"guilds":[{"id":"`+discordtest.DefaultGuildID+`","unavailable":true}]`) {
		t.Errorf("READY dispatch = %s, want the guild unavailable", d[0].Data)
	}
	// GUILD_CREATE follows with the channels, which discordgo's state keeps.
	g := next(t, ev.guilds, "GUILD_CREATE")
	// discordgo's state shares the event's guild; read it under the lock.
	s.State.RLock()
	if g.ID != discordtest.DefaultGuildID || g.Name != discordtest.DefaultGuildName || len(g.Channels) == 0 {
		t.Errorf("GUILD_CREATE = %+v", g.Guild)
	}
	s.State.RUnlock()
	if ch, err := s.State.Channel(discordtest.DefaultChannelID); err != nil || ch.Name != discordtest.DefaultChannelName {
		t.Errorf("state channel = %+v, %v", ch, err)
	}

	ids := srv.Identifies()
	if len(ids) != 1 {
		t.Fatalf("identifies = %+v", ids)
	}
	id := ids[0]
	if id.Intents != int64(defaultIntents) || id.SessionID != r.SessionID || id.CloseCode != 0 || id.Token != "Bot "+srv.Token() {
		t.Errorf("identify = %+v", id)
	}
	// discordgo asks for payload compression by default; READY then comes
	// zlib-compressed in a binary frame, which it decoded above.
	if !id.Compress {
		t.Errorf("identify compress = false, want discordgo's default true")
	}
	conns := srv.GatewayConnections()
	if len(conns) != 1 || conns[0].Version != "10" || conns[0].Encoding != "json" || conns[0].Compress != "" || conns[0].Path != "/gateway" {
		t.Errorf("connections = %+v", conns)
	}
	if n := srv.Calls(discordtest.RouteGetGateway); n != 1 {
		t.Errorf("GET /gateway calls = %d", n)
	}
	d := srv.Dispatches("READY")
	if len(d) != 1 || d[0].Seq != 1 {
		t.Errorf("READY dispatch = %+v, want s=1", d)
	}
	if err := srv.WaitForReady(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestHeartbeatsAreAcked(t *testing.T) {
	srv := newServer(t, discordtest.WithHeartbeatInterval(100*time.Millisecond))
	s, ev := openSession(t, srv, defaultIntents)
	next(t, ev.ready, "READY")
	if err := srv.WaitFor(waitCtx(t), func() bool { return len(srv.Heartbeats()) >= 4 }); err != nil {
		t.Fatal(err)
	}
	for _, hb := range srv.Heartbeats() {
		if !hb.Acked || hb.Conn != 1 {
			t.Errorf("heartbeat = %+v", hb)
		}
		// discordgo sends the last sequence number it saw.
		if hb.Seq == nil || *hb.Seq < 1 {
			t.Errorf("heartbeat seq = %v, want ≥1 after READY", hb.Seq)
		}
	}
	s.RLock()
	ack := s.LastHeartbeatAck
	s.RUnlock()
	if time.Since(ack) > time.Second {
		t.Errorf("discordgo's LastHeartbeatAck = %v, not recent", ack)
	}
	if srv.Connections() != 1 {
		t.Errorf("connections = %d, want no reconnect while ACKs flow", srv.Connections())
	}

	// A server request for a heartbeat is answered right away.
	before := len(srv.Heartbeats())
	srv.RequestHeartbeat()
	if err := srv.WaitFor(waitCtx(t), func() bool { return len(srv.Heartbeats()) > before }); err != nil {
		t.Fatal(err)
	}
}

func TestMissingHeartbeatAcksMakeDiscordgoReconnect(t *testing.T) {
	srv := newServer(t, discordtest.WithHeartbeatInterval(40*time.Millisecond))
	_, ev := openSession(t, srv, defaultIntents)
	next(t, ev.ready, "READY")
	srv.SetHeartbeatAcks(false)
	// After five intervals without an ACK discordgo closes the connection
	// with 1000, which ends the session on Discord, so its RESUME is refused
	// with op 9 and it identifies again.
	if err := srv.WaitForIdentifies(waitCtx(t), 2); err != nil {
		t.Fatal(err)
	}
	srv.SetHeartbeatAcks(true)
	conns := srv.GatewayConnections()
	if conns[0].ClientCloseCode != websocket.CloseNormalClosure {
		t.Errorf("first connection closed by client with %d, want 1000", conns[0].ClientCloseCode)
	}
	res := srv.Resumes()
	if len(res) != 1 || res[0].Accepted {
		t.Errorf("resumes = %+v, want one refused", res)
	}
	next(t, ev.ready, "second READY")
}

func TestMessageCreateReachesHandler(t *testing.T) {
	srv := newServer(t)
	_, ev := openSession(t, srv, defaultIntents)
	next(t, ev.ready, "READY")

	// A guild message mentioning the bot.
	posted, err := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "hello there", MentionBot: true})
	if err != nil {
		t.Fatal(err)
	}
	m := nextUserMessage(t, ev, srv.BotUserID())
	if m.ID != posted.ID || m.ChannelID != discordtest.DefaultChannelID || m.GuildID != discordtest.DefaultGuildID {
		t.Errorf("message = %+v", m.Message)
	}
	if m.Content != srv.Mention()+" hello there" || m.Author.ID != alice || m.Author.GlobalName != "Alice Liddell" {
		t.Errorf("content %q author %+v", m.Content, m.Author)
	}
	if len(m.Mentions) != 1 || m.Mentions[0].ID != srv.BotUserID() {
		t.Errorf("mentions = %+v", m.Mentions)
	}
	if m.Member == nil || m.Member.Nick != "Al" || len(m.Member.Roles) != 1 {
		t.Errorf("member = %+v", m.Member)
	}
	if m.Timestamp.IsZero() || discordtest.SnowflakeTime(m.ID).IsZero() {
		t.Errorf("timestamp = %v", m.Timestamp)
	}

	// A DM carries no guild_id and no member.
	dm := srv.DM(bob)
	if _, err := srv.PostUserMessage(discordtest.UserMessage{ChannelID: dm.ID, AuthorID: bob, Content: "psst"}); err != nil {
		t.Fatal(err)
	}
	m = nextUserMessage(t, ev, srv.BotUserID())
	if m.GuildID != "" || m.Member != nil || m.ChannelID != dm.ID || m.Content != "psst" {
		t.Errorf("DM message = %+v", m.Message)
	}

	// A message in a thread names the thread as its channel.
	th, err := srv.StartUserThread(discordtest.DefaultChannelID, posted.ID, alice, "chat")
	if err != nil {
		t.Fatal(err)
	}
	tc := next(t, ev.threads, "THREAD_CREATE")
	if tc.ID != posted.ID || tc.ParentID != discordtest.DefaultChannelID || !tc.NewlyCreated {
		t.Errorf("THREAD_CREATE = %+v", tc.Channel)
	}
	if _, err := srv.PostUserMessage(discordtest.UserMessage{ChannelID: th.ID, AuthorID: alice, Content: "in thread"}); err != nil {
		t.Fatal(err)
	}
	m = nextUserMessage(t, ev, srv.BotUserID())
	if m.ChannelID != th.ID || m.GuildID != discordtest.DefaultGuildID {
		t.Errorf("thread message = %+v", m.Message)
	}

	// Sequence numbers increase across dispatches.
	var last int64
	for _, d := range srv.Dispatches("") {
		if d.Seq <= last {
			t.Errorf("dispatch %s seq %d after %d", d.Type, d.Seq, last)
		}
		last = d.Seq
	}
}

func TestMessageContentIntent(t *testing.T) {
	srv := newServer(t)
	// Without MESSAGE_CONTENT, guild messages that do not mention the bot
	// arrive with empty content.
	_, ev := openSession(t, srv, discordgo.IntentsGuildMessages|discordgo.IntentsDirectMessages)
	if _, err := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "not for you"}); err != nil {
		t.Fatal(err)
	}
	if m := nextUserMessage(t, ev, srv.BotUserID()); m.Content != "" {
		t.Errorf("content = %q, want it hidden without the intent", m.Content)
	}
	if _, err := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "for you", MentionBot: true}); err != nil {
		t.Fatal(err)
	}
	if m := nextUserMessage(t, ev, srv.BotUserID()); !strings.HasSuffix(m.Content, "for you") {
		t.Errorf("content = %q, want it visible when the bot is mentioned", m.Content)
	}
	dm := srv.DM(alice)
	if _, err := srv.PostUserMessage(discordtest.UserMessage{ChannelID: dm.ID, AuthorID: alice, Content: "direct"}); err != nil {
		t.Fatal(err)
	}
	if m := nextUserMessage(t, ev, srv.BotUserID()); m.Content != "direct" {
		t.Errorf("DM content = %q, want it visible", m.Content)
	}
}

func TestOwnMessagesAreEchoed(t *testing.T) {
	srv := newServer(t)
	s, ev := openSession(t, srv, defaultIntents)
	next(t, ev.ready, "READY")
	sent, err := s.ChannelMessageSend(discordtest.DefaultChannelID, "from the bot")
	if err != nil {
		t.Fatal(err)
	}
	m := next(t, ev.messages, "echo of the bot's message")
	if m.ID != sent.ID || m.Author.ID != srv.BotUserID() || !m.Author.Bot {
		t.Errorf("echo = %+v", m.Message)
	}
	if _, err := s.ChannelMessageEdit(discordtest.DefaultChannelID, sent.ID, "edited"); err != nil {
		t.Fatal(err)
	}
	u := next(t, ev.updates, "MESSAGE_UPDATE")
	if u.ID != sent.ID || u.Content != "edited" || u.EditedTimestamp == nil {
		t.Errorf("update = %+v", u.Message)
	}
}

func TestReconnectResumesAndReplaysMissedDispatches(t *testing.T) {
	srv := newServer(t)
	_, ev := openSession(t, srv, defaultIntents)
	ready := next(t, ev.ready, "READY")

	// Hold the client between connections so the messages below are
	// certainly missed by the old connection and replayed on RESUME.
	release := srv.HoldConnections()
	srv.Reconnect()
	var want []string
	for _, text := range []string{"one", "two", "three"} {
		m, err := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: text, MentionBot: true})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, m.ID)
	}
	release()

	if err := srv.WaitForResumes(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	// The replayed messages below prove the resume; discordgo's RESUMED
	// handler is not waited for: on some runs its old heartbeat goroutine
	// still churns the connection as the dispatch arrives.
	got := map[string]bool{}
	for range want {
		got[nextUserMessage(t, ev, srv.BotUserID()).ID] = true
	}
	for _, id := range want {
		if !got[id] {
			t.Errorf("message %s not received after resume", id)
		}
	}
	r := srv.Resumes()[0]
	if !r.Accepted || r.SessionID != ready.SessionID || r.Replayed != 3 || r.Seq < 1 {
		t.Errorf("resume = %+v, want the READY session with 3 dispatches replayed", r)
	}
	// discordgo reconnects to the URL it cached from GET /gateway and
	// ignores READY's resume_gateway_url.
	if r.ViaResumeURL {
		t.Errorf("resume came through resume_gateway_url; discordgo was not expected to use it")
	}
	if n := len(srv.Identifies()); n != 1 {
		t.Errorf("identifies = %d, want the session resumed, not re-identified", n)
	}
	conns := srv.GatewayConnections()
	if len(conns) != 2 || conns[0].ClientCloseCode != websocket.CloseServiceRestart {
		t.Errorf("connections = %+v, want the first closed by discordgo with 1012", conns)
	}
	for _, d := range srv.Dispatches("MESSAGE_CREATE") {
		if d.Replays != 1 || d.Conn != 2 {
			t.Errorf("dispatch %d: replays %d conn %d, want replayed once on connection 2", d.Seq, d.Replays, d.Conn)
		}
	}

	// The resumed session keeps counting: a live message after RESUMED.
	m, err := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "after", MentionBot: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := nextUserMessage(t, ev, srv.BotUserID()); got.ID != m.ID {
		t.Errorf("after resume got %s, want %s", got.ID, m.ID)
	}
}

func TestInvalidSessionMakesDiscordgoIdentifyAgain(t *testing.T) {
	srv := newServer(t)
	_, ev := openSession(t, srv, defaultIntents)
	first := next(t, ev.ready, "READY")

	srv.InvalidateSession(false)
	second := next(t, ev.ready, "second READY")
	if second.SessionID == first.SessionID {
		t.Errorf("new READY kept session %s", first.SessionID)
	}
	ids := srv.Identifies()
	if len(ids) != 2 || ids[1].SessionID != second.SessionID || ids[1].Conn != 1 {
		t.Errorf("identifies = %+v, want a second IDENTIFY on the same connection", ids)
	}
	// The new session's dispatches start at 1 again and reach the handler.
	if d := srv.Dispatches("READY"); d[1].Seq != 1 {
		t.Errorf("second READY seq = %d", d[1].Seq)
	}
	m, err := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "still here?", MentionBot: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := nextUserMessage(t, ev, srv.BotUserID()); got.ID != m.ID {
		t.Errorf("got %s, want %s", got.ID, m.ID)
	}
	// Only the live session got it.
	if d := srv.Dispatches("MESSAGE_CREATE"); len(d) != 1 || d[0].SessionID != second.SessionID {
		t.Errorf("MESSAGE_CREATE dispatches = %+v", d)
	}
}

func TestRedispatchSendsTheSameMessageAgain(t *testing.T) {
	srv := newServer(t)
	_, ev := openSession(t, srv, defaultIntents)
	posted, err := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "twice", MentionBot: true})
	if err != nil {
		t.Fatal(err)
	}
	first := nextUserMessage(t, ev, srv.BotUserID())
	if err := srv.Redispatch(posted.ChannelID, posted.ID); err != nil {
		t.Fatal(err)
	}
	second := nextUserMessage(t, ev, srv.BotUserID())
	if first.ID != second.ID || second.Content != first.Content {
		t.Errorf("redispatched %+v, first %+v", second.Message, first.Message)
	}
	d := srv.Dispatches("MESSAGE_CREATE")
	if len(d) != 2 || d[1].Seq <= d[0].Seq {
		t.Errorf("dispatches = %+v", d)
	}
}

func TestIdentifyRefusals(t *testing.T) {
	t.Run("bad token", func(t *testing.T) {
		srv := newServer(t)
		s, err := discordgo.New("Bot not-the-token")
		if err != nil {
			t.Fatal(err)
		}
		s.Client = srv.Client()
		s.ShouldReconnectOnError = false
		if err := s.Open(); err == nil {
			_ = s.Close()
			t.Fatal("Open succeeded with a bad token")
		}
		ids := srv.Identifies()
		if len(ids) != 1 || ids[0].CloseCode != discordtest.CloseAuthenticationFailed {
			t.Errorf("identifies = %+v, want closed with 4004", ids)
		}
	})
	t.Run("disallowed intent", func(t *testing.T) {
		srv := newServer(t, discordtest.WithPrivilegedIntents(0))
		s := restSession(t, srv)
		s.ShouldReconnectOnError = false
		s.Identify.Intents = defaultIntents // includes MESSAGE_CONTENT
		err := s.Open()
		if err == nil {
			_ = s.Close()
			t.Fatal("Open succeeded with a disallowed intent")
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != discordtest.CloseDisallowedIntents {
			t.Errorf("err = %v, want close 4014", err)
		}
	})
}

// rawGateway dials the fake's gateway with gorilla directly, to check the
// wire format discordgo hides.
func rawGateway(t *testing.T, srv *discordtest.Server, query string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(srv.GatewayURL()+"?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	_ = ws.SetReadDeadline(time.Now().Add(deadline))
	return ws
}

type wirePayload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

func TestGatewayWireFormat(t *testing.T) {
	srv := newServer(t, discordtest.WithHeartbeatInterval(45*time.Second))
	ws := rawGateway(t, srv, "v=10&encoding=json")
	var hello wirePayload
	if err := ws.ReadJSON(&hello); err != nil {
		t.Fatal(err)
	}
	if hello.Op != 10 || hello.S != nil || hello.T != nil || !strings.Contains(string(hello.D), `"heartbeat_interval":45000`) {
		t.Errorf("HELLO = %+v %s", hello, hello.D)
	}
	// A heartbeat with d null is answered with op 11.
	if err := ws.WriteJSON(map[string]any{"op": 1, "d": nil}); err != nil {
		t.Fatal(err)
	}
	var ack wirePayload
	if err := ws.ReadJSON(&ack); err != nil || ack.Op != 11 {
		t.Fatalf("ack = %+v, %v", ack, err)
	}
	// IDENTIFY without compression: READY is a text frame with s 1.
	if err := ws.WriteJSON(map[string]any{"op": 2, "d": map[string]any{
		"token": srv.Token(), "intents": 513, "properties": map[string]any{"os": "linux", "browser": "raw", "device": "raw"},
	}}); err != nil {
		t.Fatal(err)
	}
	mt, data, err := ws.ReadMessage()
	if err != nil || mt != websocket.TextMessage {
		t.Fatalf("READY frame type %d, %v", mt, err)
	}
	var ready wirePayload
	_ = json.Unmarshal(data, &ready)
	var rd struct {
		SessionID        string `json:"session_id"`
		ResumeGatewayURL string `json:"resume_gateway_url"`
	}
	_ = json.Unmarshal(ready.D, &rd)
	if ready.Op != 0 || *ready.T != "READY" || *ready.S != 1 || rd.SessionID == "" || rd.ResumeGatewayURL != srv.ResumeGatewayURL() {
		t.Errorf("READY = %s", data)
	}
	// An unknown opcode closes the connection with 4001.
	_ = ws.WriteJSON(map[string]any{"op": 99, "d": nil})
	for {
		if _, _, err = ws.ReadMessage(); err != nil {
			break
		}
	}
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != discordtest.CloseUnknownOpcode {
		t.Errorf("close = %v, want 4001", err)
	}
}

func TestZlibStreamTransportCompression(t *testing.T) {
	srv := newServer(t)
	ws := rawGateway(t, srv, "v=10&encoding=json&compress=zlib-stream")
	// One zlib context for the whole connection; every message ends with
	// the Z_SYNC_FLUSH suffix.
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	go func() {
		for {
			mt, data, err := ws.ReadMessage()
			if err != nil {
				_ = pw.CloseWithError(err)
				return
			}
			if mt != websocket.BinaryMessage || !bytes.HasSuffix(data, []byte{0, 0, 0xff, 0xff}) {
				_ = pw.CloseWithError(errors.New("not a zlib-stream frame"))
				return
			}
			if _, err := pw.Write(data); err != nil {
				return
			}
		}
	}()
	zr, err := zlib.NewReader(pr)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(zr)
	var hello wirePayload
	if err := dec.Decode(&hello); err != nil || hello.Op != 10 {
		t.Fatalf("HELLO = %+v, %v", hello, err)
	}
	if err := ws.WriteJSON(map[string]any{"op": 2, "d": map[string]any{"token": srv.Token(), "intents": 1, "properties": map[string]any{}}}); err != nil {
		t.Fatal(err)
	}
	var ready wirePayload
	if err := dec.Decode(&ready); err != nil || ready.T == nil || *ready.T != "READY" {
		t.Fatalf("READY = %+v, %v", ready, err)
	}
}

func TestPayloadCompression(t *testing.T) {
	srv := newServer(t)
	_, ev := openSession(t, srv, defaultIntents)
	big := strings.Repeat("long answer ", 150)
	posted, err := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: big, MentionBot: true})
	if err != nil {
		t.Fatal(err)
	}
	if m := nextUserMessage(t, ev, srv.BotUserID()); m.ID != posted.ID || !strings.HasSuffix(m.Content, strings.TrimSpace(big)) {
		t.Errorf("got %s %d chars", m.ID, len(m.Content))
	}
	small, _ := srv.PostUserMessage(discordtest.UserMessage{ChannelID: srv.DM(alice).ID, AuthorID: alice, Content: "hi"})
	if m := nextUserMessage(t, ev, srv.BotUserID()); m.ID != small.ID {
		t.Errorf("got %s", m.ID)
	}
	ready, msgs := srv.Dispatches("READY"), srv.Dispatches("MESSAGE_CREATE")
	if !ready[0].Compressed || !msgs[0].Compressed || msgs[1].Compressed {
		t.Errorf("compressed: READY %v, big %v, small %v; want true, true, false", ready[0].Compressed, msgs[0].Compressed, msgs[1].Compressed)
	}
}

func TestResumableInvalidSession(t *testing.T) {
	srv := newServer(t)
	_, ev := openSession(t, srv, defaultIntents)
	first := next(t, ev.ready, "READY")
	// discordgo ignores d and identifies again even when it could resume.
	srv.InvalidateSession(true)
	second := next(t, ev.ready, "second READY")
	if second.SessionID == first.SessionID || len(srv.Resumes()) != 0 {
		t.Errorf("sessions %s → %s, resumes %+v", first.SessionID, second.SessionID, srv.Resumes())
	}
	// The abandoned session gets nothing more.
	if _, err := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "x", MentionBot: true}); err != nil {
		t.Fatal(err)
	}
	nextUserMessage(t, ev, srv.BotUserID())
	for _, d := range srv.Dispatches("MESSAGE_CREATE") {
		if d.SessionID != second.SessionID {
			t.Errorf("dispatch to abandoned session %s", d.SessionID)
		}
	}
}
