package websocket_test

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// A command is a command whatever its case: /RESET moves the connection to
// the new session as /reset does.
func TestResetInAnyCaseFollowsTheNewSession(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	c, ready := g.hello(map[string]any{"user": map[string]string{"id": "u1"}})
	c.send(map[string]any{"type": "input", "id": "r1", "text": "/RESET"})
	evs := c.until(func(ev wireEvent) bool { return ev.Type == switchboard.EventReady })
	next := data[switchboard.ReadyData](t, evs[len(evs)-1])
	if next.Session == ready.Session || !strings.HasPrefix(next.Session, "s_") {
		t.Fatalf("after /RESET ready is for %q, want a new session (was %s)", next.Session, ready.Session)
	}
}

// A resume_after past the session's end is clamped by the session; the
// client is told so instead of silently waiting for seqs that will be
// reused.
func TestResumeAfterPastTheEndIsReported(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	g.llm.Push(openaitest.Reply{Text: []string{"one"}})
	c, ready := g.hello(map[string]any{"user": map[string]string{"id": "u1"}})
	c.send(map[string]any{"type": "input", "id": "m1", "text": "hi"})
	evs := c.untilIdle()
	last := evs[len(evs)-1].Seq

	back, r := g.hello(map[string]any{"session": ready.Session, "resume_after": 999, "user": map[string]string{"id": "u1"}})
	if r.LastSeq != last {
		t.Fatalf("ready.last_seq = %d, want %d", r.LastSeq, last)
	}
	ev := back.next()
	if ev.Type != switchboard.EventError {
		t.Fatalf("after ready got %s %s, want an error about resume_after", ev.Type, ev.Data)
	}
	e := data[switchboard.ErrorData](t, ev)
	want := "resume_after 999 is past the last event " + strconvI(last) + " of this session; resuming from " + strconvI(last)
	if e.Code != switchboard.ErrCodeBadFrame || e.Message != want {
		t.Fatalf("error = %+v, want bad_frame %q", e, want)
	}
	// And it is attached: new events arrive.
	g.llm.Push(openaitest.Reply{Text: []string{"two"}})
	back.send(map[string]any{"type": "input", "id": "m2", "text": "again"})
	contiguous(t, seqs(back.untilIdle()), last+1)

	// Within range: no error, the replay comes first.
	c3, _ := g.hello(map[string]any{"session": ready.Session, "resume_after": last - 1, "user": map[string]string{"id": "u1"}})
	if ev := c3.next(); ev.Type == switchboard.EventError || ev.Seq != last {
		t.Fatalf("resume within range: first event %s seq %d, want the replay of %d", ev.Type, ev.Seq, last)
	}
}

// Connections that /reset and then close leave nothing behind: once the
// idle timeout has passed since the last of them closed, the sessions they
// opened are unloaded like those of connections that never reset. The
// clock is synctest's.
func TestResetThenCloseLeavesNoSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 10 * time.Minute
		g := newBubbleGateway(t, websocket.Config{}, func(c *sessions.Config) { c.IdleTimeout = idle })
		const n = 20
		for i := range n {
			c, _ := g.hello(map[string]any{"user": map[string]string{"id": "u" + strconvI(int64(i))}})
			c.send(map[string]any{"type": "input", "id": "r", "text": "/reset"})
			if i%2 == 0 {
				// Half wait to be moved, half close at once, racing the move.
				c.until(func(ev wireEvent) bool { return ev.Type == switchboard.EventReady })
			}
			c.ws.Close()
		}
		synctest.Wait()
		opened := g.metric("switchboard_sessions_live")
		if opened < n {
			t.Fatalf("switchboard_sessions_live %v after %d connections opened sessions, want at least %d", opened, n, n)
		}
		time.Sleep(idle - time.Nanosecond)
		synctest.Wait()
		if live := g.metric("switchboard_sessions_live"); live != opened {
			t.Fatalf("switchboard_sessions_live %v a moment before the idle timeout was over, want all %v still loaded", live, opened)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if live := g.metric("switchboard_sessions_live"); live != 0 {
			t.Fatalf("switchboard_sessions_live %v once the idle timeout was over, want 0", live)
		}
	})
}

// A message is rendered once, however many clients see it and however
// often it is replayed; a pathological one comes out as bounded plain text.
func TestMarkdownIsRenderedOncePerEvent(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	src := strings.Repeat("[a](", 8000)
	g.llm.Push(openaitest.Reply{Text: []string{src}})
	c, ready := g.hello(map[string]any{"user": map[string]string{"id": "u1"}})
	var watchers []*client
	for range 3 {
		w, _ := g.hello(map[string]any{"session": ready.Session, "user": map[string]string{"id": "u1"}})
		watchers = append(watchers, w)
	}
	before := websocket.Renders(g.h)
	c.send(map[string]any{"type": "input", "id": "m1", "text": "links please"})
	for _, cl := range append(watchers, c) {
		evs := cl.untilAssistant()
		html, _ := data[map[string]any](t, evs[len(evs)-1])["html"].(string)
		if len(html) > 2*len(src) || strings.Contains(html, "<a") {
			t.Fatalf("html of %d bytes (%.80q), want the text escaped and bounded", len(html), html)
		}
	}
	for range 3 { // reloads replay the whole session
		r, _ := g.hello(map[string]any{"session": ready.Session, "resume_after": 0, "user": map[string]string{"id": "u1"}})
		r.untilAssistant()
	}
	// The user's message is plain text; the assistant's is rendered once.
	if n := websocket.Renders(g.h) - before; n != 1 {
		t.Fatalf("the reply was rendered %d times for 7 deliveries, want once", n)
	}
}

// A client is too slow when its queue holds send_buffer_bytes, however
// few frames that is: 256 frames of 64 KiB is not a bound.
func TestSlowClientIsBoundedByBytes(t *testing.T) {
	g := newGateway(t, websocket.Config{SendBuffer: 100000, SendBufferBytes: 256 << 10, SendTimeout: 200 * time.Millisecond})
	chunk := strings.Repeat("z", 32<<10)
	text := make([]string, 400) // ~13 MB: more than the socket buffers hold
	for i := range text {
		text[i] = chunk
	}
	g.llm.Push(openaitest.Reply{Text: text})
	owner := switchboard.Author{Channel: "test", ID: "owner"}
	sub, err := g.mgr.Attach(t.Context(), sessions.AttachOptions{Author: owner, AfterSeq: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	slow, _ := g.hello(map[string]any{"session": sub.Ready.Session, "resume_after": 0})
	if _, err := g.mgr.Submit(t.Context(), sub.Ready.Session, switchboard.Input{Kind: switchboard.InputText, Author: owner, Text: "write a lot"}); err != nil {
		t.Fatal(err)
	}
	for ev := range sub.Events() {
		if ev.Type == switchboard.EventState && strings.Contains(string(ev.Data), `"idle"`) {
			break
		}
	}
	// The turn is over and the client has read nothing: it must have been
	// cut off, not handed 13 MB through an unbounded queue.
	ce := slow.closeCode()
	if ce.Code != gws.CloseTryAgainLater || !strings.Contains(ce.Text, "too slow") {
		t.Fatalf("closed with %d %q, want 1013 too slow", ce.Code, ce.Text)
	}
}

// Pages on loopback origins may connect only to a gateway that is itself
// on loopback; the public URL's origin is the gateway's own.
func TestLoopbackOriginsOnlyOnALoopbackGateway(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		origin string
		ok     bool
	}{
		{"", "http://localhost:3000", true}, // judged from the connection: loopback
		{"127.0.0.1:8080", "http://localhost:3000", true},
		{"127.0.0.1:8080", "http://[::1]:3000", true},
		{"0.0.0.0:8080", "http://localhost:3000", false},
		{"0.0.0.0:8080", "http://127.0.0.1:5173", false},
		{"0.0.0.0:8080", "https://chat.example.com", true}, // the public URL
		{"0.0.0.0:8080", "https://chat.example.com.evil.example", false},
	} {
		g := newGateway(t, websocket.Config{Addr: tc.addr, PublicURL: "https://chat.example.com"})
		_, err := g.tryDial(http.Header{"Origin": {tc.origin}})
		if tc.ok && err != nil {
			t.Errorf("gateway on %q: origin %s refused: %v", tc.addr, tc.origin, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "403")) {
			t.Errorf("gateway on %q: origin %s: err = %v, want HTTP 403", tc.addr, tc.origin, err)
		}
	}
}

// The owner's /role sticks over a token's role: Bob's token says approver,
// the owner makes him a viewer, and his reconnect with the same token
// leaves him a viewer who may not write.
func TestOwnersRoleBeatsTheTokensRole(t *testing.T) {
	g := newGateway(t, websocket.Config{Auth: websocket.Auth{Mode: websocket.AuthToken, Tokens: []websocket.StaticToken{
		{Token: "tok-ann", UserID: "ann", Name: "Ann"},
		{Token: "tok-bob", UserID: "bob", Name: "Bob", Role: "approver"},
	}}})
	ann, ready := g.hello(map[string]any{"token": "tok-ann"})
	_, bobReady := g.hello(map[string]any{"token": "tok-bob", "session": ready.Session})
	if bobReady.Role != "approver" {
		t.Fatalf("bob's role with his token: %q", bobReady.Role)
	}
	ann.send(map[string]any{"type": "input", "id": "a1", "text": "/role Bob viewer"})
	ann.until(func(ev wireEvent) bool {
		return ev.Type == switchboard.EventMessage && strings.Contains(string(ev.Data), "Ann made Bob a viewer.")
	})

	bob, again := g.hello(map[string]any{"token": "tok-bob", "session": ready.Session})
	if again.Role != "viewer" {
		t.Fatalf("bob after a reconnect: %q, want the viewer the owner made him", again.Role)
	}
	bob.send(map[string]any{"type": "input", "id": "b1", "text": "hi"})
	ev := bob.next()
	if e := data[switchboard.ErrorData](t, ev); ev.Type != switchboard.EventError || e.Code != "forbidden" {
		t.Fatalf("a demoted approver's input: %s %s, want a forbidden error", ev.Type, ev.Data)
	}
}

// A page whose origin is refused, retrying, is logged once at WARN with
// the fix, not once a retry; another origin gets its own WARN.
func TestRefusedOriginIsLoggedOnce(t *testing.T) {
	var logs syncLog
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sg := sessionstest.New(t, "../../guides", log)
	g := serveGateway(t, websocket.Config{}, sg.Manager, sg.LLM, sg.DB, log)
	for _, origin := range []string{"https://evil.example", "https://evil.example", "https://evil.example", "https://other.example"} {
		if _, err := g.tryDial(http.Header{"Origin": {origin}}); err == nil {
			t.Fatalf("origin %s was let in", origin)
		}
	}
	if n := strings.Count(logs.String(), "origin=https://evil.example"); n != 1 {
		t.Fatalf("the refused origin was logged %d times at WARN, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "allowed_origins") || !strings.Contains(logs.String(), "origin=https://other.example") {
		t.Fatalf("log:\n%s", logs.String())
	}
}

// syncLog is a log sink the test reads while handlers write.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
