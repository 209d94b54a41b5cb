package websocket_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"
	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

func TestHelloInputStreamsReply(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	g.llm.Push(openaitest.Reply{Text: []string{"Hel", "lo **there**"}})

	c, ready := g.hello(map[string]any{"guide": "assistant", "user": map[string]string{"id": "u1", "name": "Ann"}})
	if !strings.HasPrefix(ready.Session, "s_") || ready.Guide != "assistant" || ready.Role != "owner" || ready.LastSeq != 0 {
		t.Fatalf("ready = %+v, want a new session owned by the caller", ready)
	}
	if ready.User == nil || ready.User.ID != "u1" || ready.User.Name != "Ann" {
		t.Fatalf("ready.user = %+v, want u1/Ann", ready.User)
	}
	c.send(map[string]any{"type": "input", "id": "c1", "text": "hi"})
	evs := c.untilIdle()
	contiguous(t, seqs(evs), 1)

	var deltas strings.Builder
	var user, final map[string]any
	for _, ev := range evs {
		if ev.Session != ready.Session || ev.Agent != "assistant" {
			t.Fatalf("event envelope %+v: want session %s, agent assistant", ev.Event, ready.Session)
		}
		switch ev.Type {
		case switchboard.EventDelta:
			deltas.WriteString(data[switchboard.DeltaData](t, ev).Content)
		case switchboard.EventMessage:
			m := data[map[string]any](t, ev)
			if m["role"] == "user" {
				user = m
			} else {
				final = m
			}
		}
	}
	if user == nil || user["content"] != "hi" || user["author_id"] != "u1" || user["channel"] != "web" || user["author"] != "Ann" {
		t.Fatalf("user message = %v", user)
	}
	if deltas.String() != "Hello **there**" {
		t.Fatalf("deltas = %q", deltas.String())
	}
	if final == nil || final["content"] != "Hello **there**" || final["format"] != "markdown" || final["model"] != "gpt-test" {
		t.Fatalf("final message = %v", final)
	}
	if html, _ := final["html"].(string); html != "<p>Hello <strong>there</strong></p>\n" {
		t.Fatalf("final message html = %q, want rendered Markdown", html)
	}
}

func TestMarkdownFromTheModelIsInert(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	g.llm.Push(openaitest.Reply{Text: []string{"<script>alert(1)</script><img src=x onerror=\"alert(2)\">\n\n" +
		`Inline <img src=x onerror="alert(4)"> and [x](javascript:alert(3)) **ok**`}})
	c, _ := g.hello(map[string]any{})
	c.send(map[string]any{"type": "input", "id": "c1", "text": "hi"})
	evs := c.untilAssistant()
	html := data[map[string]any](t, evs[len(evs)-1])["html"].(string)
	for _, bad := range []string{"<script", "<img", "javascript:", "href"} {
		if strings.Contains(strings.ToLower(html), bad) {
			t.Fatalf("html %q contains %s", html, bad)
		}
	}
	// The markup is shown as the text it is, and the Markdown still works.
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "Inline &lt;img src=x", "<strong>ok</strong>"} {
		if !strings.Contains(html, want) {
			t.Fatalf("html %q lacks %s", html, want)
		}
	}
}

func TestConfirmApproves(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	g.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
		openaitest.Reply{Text: []string{"It is late."}},
	)
	c, _ := g.hello(map[string]any{"user": map[string]string{"id": "u1", "name": "Ann"}})
	c.send(map[string]any{"type": "input", "id": "c1", "text": "time?"})
	evs := c.until(func(ev wireEvent) bool { return ev.Type == switchboard.EventConfirmationRequest })
	req := data[switchboard.ConfirmationRequestData](t, evs[len(evs)-1])
	if req.ToolName != "current_time" || req.ConfirmationID == "" || req.ExpiresAt.IsZero() {
		t.Fatalf("confirmation request = %+v", req)
	}
	c.send(map[string]any{"type": "confirm", "confirmation_id": req.ConfirmationID, "approved": true})
	evs = c.untilAssistant()
	var resolved, response bool
	for _, ev := range evs {
		switch ev.Type {
		case switchboard.EventConfirmationResolved:
			r := data[switchboard.ConfirmationResolvedData](t, ev)
			resolved = r.Approved && r.By == "Ann" && r.ConfirmationID == req.ConfirmationID
		case switchboard.EventToolResponse:
			r := data[switchboard.ToolResponseData](t, ev)
			response = r.Name == "current_time" && !r.IsError
		}
	}
	if !resolved || !response {
		t.Fatalf("after approving: resolved=%v tool response=%v in %v", resolved, response, evs)
	}
}

// confirm with scope "session" approves the tool for the rest of the
// session: the answer says so, and the next call is not asked about.
func TestConfirmForTheSession(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	g.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
		openaitest.Reply{Text: []string{"It is late."}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_2", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
		openaitest.Reply{Text: []string{"Still late."}},
	)
	c, _ := g.hello(map[string]any{"user": map[string]string{"id": "u1", "name": "Ann"}})
	c.send(map[string]any{"type": "input", "id": "c1", "text": "time?"})
	evs := c.until(func(ev wireEvent) bool { return ev.Type == switchboard.EventConfirmationRequest })
	req := data[switchboard.ConfirmationRequestData](t, evs[len(evs)-1])
	c.send(map[string]any{"type": "confirm", "confirmation_id": req.ConfirmationID, "approved": true, "scope": "session"})
	evs = c.until(func(ev wireEvent) bool { return ev.Type == switchboard.EventConfirmationResolved })
	if r := data[switchboard.ConfirmationResolvedData](t, evs[len(evs)-1]); !r.Approved || r.Scope != "session" {
		t.Fatalf("resolved = %+v, want approved for the session", r)
	}
	c.untilAssistant()
	c.send(map[string]any{"type": "input", "id": "c2", "text": "and now?"})
	for _, ev := range c.untilAssistant() {
		if ev.Type == switchboard.EventConfirmationRequest {
			t.Fatalf("asked again for a tool allowed for the session: %v", ev)
		}
	}
}

// Someone who gives an id but no name is shown by a friendly name derived
// from the id, the same on every connection, never the raw id.
func TestGuestsGetAFriendlyName(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	_, first := g.hello(map[string]any{"user": map[string]string{"id": "web-1a6d6e81-5943-4f1c"}})
	_, again := g.hello(map[string]any{"user": map[string]string{"id": "web-1a6d6e81-5943-4f1c"}})
	_, other := g.hello(map[string]any{"user": map[string]string{"id": "web-77aa0000-0000-0000"}})
	name := first.User.Name
	if !strings.HasPrefix(name, "Guest ") || strings.Contains(name, "web-") {
		t.Fatalf("a nameless user is called %q", name)
	}
	if again.User.Name != name || other.User.Name == name {
		t.Fatalf("names: %q, again %q, another user %q", name, again.User.Name, other.User.Name)
	}
}

func TestActionReachesSession(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	g.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "present", Args: `{"title":"Pick","text":"A **colour** <img src=x onerror=alert(1)>","buttons":[{"label":"Red","value":"red"},{"label":"Blue","value":"blue"}]}`}}},
		openaitest.Reply{Text: []string{"Pick one."}},
		openaitest.Reply{Text: []string{"Blue it is."}},
	)
	c, _ := g.hello(map[string]any{})
	c.send(map[string]any{"type": "input", "id": "c1", "text": "choose"})
	evs := c.untilIdle()
	var ui *switchboard.UI
	var textHTML string
	for _, ev := range evs {
		if ev.Type == switchboard.EventUI {
			u := data[switchboard.UI](t, ev)
			ui = &u
			textHTML = data[struct {
				TextHTML string `json:"text_html"`
			}](t, ev).TextHTML
		}
	}
	if ui == nil || len(ui.Buttons) != 2 {
		t.Fatalf("no card with two buttons in %v", evs)
	}
	if !strings.Contains(textHTML, "<strong>colour</strong>") || strings.Contains(textHTML, "<img") {
		t.Fatalf("card text_html = %q, want the Markdown rendered and the raw tag inert", textHTML)
	}
	c.send(map[string]any{"type": "action", "action_id": ui.Buttons[1].ActionID, "value": ui.Buttons[1].Value})
	evs = c.untilAssistant()
	if got := data[switchboard.MessageData](t, evs[0]); got.Role != switchboard.RoleUser || !strings.Contains(got.Content, `Clicked "Blue"`) {
		t.Fatalf("first event after the click = %s %s, want the click as the user's message", evs[0].Type, evs[0].Data)
	}
	reqs := g.llm.Requests()
	last := reqs[len(reqs)-1].Messages
	if !strings.Contains(openaitest.Text(last[len(last)-1].Content), `Clicked "Blue"`) {
		t.Fatalf("the model was not told about the click: %s", last[len(last)-1].Content)
	}
}

func TestCancelStopsTheTurn(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	gate := make(chan struct{})
	defer close(gate)
	g.llm.Push(openaitest.Reply{Text: []string{"slow", " answer"}, Gate: gate})
	c, _ := g.hello(map[string]any{})
	c.send(map[string]any{"type": "input", "id": "c1", "text": "go"})
	c.until(func(ev wireEvent) bool { return ev.Type == switchboard.EventDelta })
	c.send(map[string]any{"type": "cancel"})
	evs := c.untilIdle()
	var cancelled bool
	for _, ev := range evs {
		if ev.Type == switchboard.EventError && data[switchboard.ErrorData](t, ev).Code == switchboard.ErrCodeCancelled {
			cancelled = true
		}
		if ev.Type == switchboard.EventMessage && data[switchboard.MessageData](t, ev).Role == switchboard.RoleAssistant {
			t.Fatalf("a cancelled turn still produced an answer: %s", ev.Data)
		}
	}
	if !cancelled {
		t.Fatalf("no cancelled error in %v", evs)
	}
}

func TestBadFramesGetErrorsAndConnectionStaysUsable(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	c := g.dial(nil)

	expectError := func(frame, wantCode, wantText string) {
		t.Helper()
		c.sendRaw(frame)
		ev := c.next()
		e := data[switchboard.ErrorData](t, ev)
		if ev.Type != switchboard.EventError || ev.Seq != 0 || e.Code != wantCode || !strings.Contains(e.Message, wantText) {
			t.Fatalf("%s: got %s seq %d %+v, want %s error mentioning %q", frame, ev.Type, ev.Seq, e, wantCode, wantText)
		}
	}
	expectError(`{"type":"input","id":"x","text":"hi"}`, "bad_frame", "send hello first")
	expectError(`{"type":`, "bad_frame", "not valid JSON")
	expectError(`{"type":"hello","resume_after":"yesterday"}`, "bad_frame", "resume_after")
	expectError(`{"type":"dance"}`, "bad_frame", `unknown type "dance"`)
	expectError(`[1,2]`, "bad_frame", "")
	expectError(`{"type":"hello","session":"s_nope"}`, "not_found", "there is no session s_nope here")
	expectError(`{"type":"hello","guide":"nope"}`, "not_found", `there is no guide "nope" here`)

	c.send(map[string]any{"type": "hello"})
	if ev := c.next(); ev.Type != switchboard.EventReady {
		t.Fatalf("hello after errors: got %s", ev.Type)
	}
	expectError(`{"type":"input","id":"x","text":"  "}`, "bad_frame", "text is empty")
	expectError(`{"type":"confirm","confirmation_id":"k"}`, "bad_frame", "approved")
	expectError(`{"type":"confirm","confirmation_id":"k","approved":true,"scope":"forever"}`, "bad_frame", "scope")
	expectError(`{"type":"confirm","confirmation_id":"k","approved":false,"scope":"session"}`, "bad_frame", "scope")
	expectError(`{"type":"action"}`, "bad_frame", "action_id")
	expectError(`{"type":"hello"}`, "bad_frame", "already attached")

	if err := c.ws.WriteMessage(gws.BinaryMessage, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if ev := c.next(); ev.Type != switchboard.EventError || !strings.Contains(string(ev.Data), "binary") {
		t.Fatalf("binary frame: got %s %s", ev.Type, ev.Data)
	}

	g.llm.Push(openaitest.Reply{Text: []string{"still here"}})
	c.send(map[string]any{"type": "input", "id": "c1", "text": "hi"})
	evs := c.untilAssistant()
	if got := data[switchboard.MessageData](t, evs[len(evs)-1]).Content; got != "still here" {
		t.Fatalf("after bad frames the reply was %q", got)
	}
}

func TestOversizeFrameClosesWith1009(t *testing.T) {
	g := newGateway(t, websocket.Config{ReadLimit: 4096})
	c, ready := g.hello(map[string]any{})
	c.send(map[string]any{"type": "input", "id": "big", "text": strings.Repeat("x", 5000)})
	ce := c.closeCode()
	if ce.Code != gws.CloseMessageTooBig || !strings.Contains(ce.Text, "4096") {
		t.Fatalf("close = %d %q, want 1009 naming the limit", ce.Code, ce.Text)
	}
	// Nothing of it reached the session.
	evs, err := g.db.EventsAfter(t.Context(), ready.Session, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Fatalf("an oversize frame produced events: %v", evs)
	}
}

func TestOrigins(t *testing.T) {
	g := newGateway(t, websocket.Config{AllowedOrigins: []string{"https://shop.example"}})
	host := strings.TrimPrefix(g.srv.URL, "http://")
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"", true},                      // a program
		{"http://" + host, true},        // the gateway's own page
		{"http://localhost:3000", true}, // a developer's page on this machine
		{"https://shop.example", true},
		{"https://SHOP.example", true},
		{"https://evil.example", false},
		{"https://shop.example.evil.example", false},
		{"null", false},
	} {
		h := http.Header{}
		if tc.origin != "" {
			h.Set("Origin", tc.origin)
		}
		_, err := g.tryDial(h)
		if tc.ok && err != nil {
			t.Errorf("origin %q refused: %v", tc.origin, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "403")) {
			t.Errorf("origin %q: err = %v, want HTTP 403", tc.origin, err)
		}
	}
}

const secret = "0123456789abcdef0123456789abcdef"

func sign(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWTAuth(t *testing.T) {
	g := newGateway(t, websocket.Config{Auth: websocket.Auth{Mode: websocket.AuthJWT, JWTSecret: []byte(secret)}})
	exp := time.Now().Add(time.Hour).Unix()

	refused := func(name string, hello map[string]any, wantCode, wantText string) {
		t.Helper()
		c := g.dial(nil)
		hello["type"] = "hello"
		c.send(hello)
		ev := c.next()
		e := data[switchboard.ErrorData](t, ev)
		if ev.Type != switchboard.EventError || e.Code != wantCode || !strings.Contains(e.Message, wantText) {
			t.Fatalf("%s: got %s %+v, want %s mentioning %q", name, ev.Type, e, wantCode, wantText)
		}
		if ce := c.closeCode(); ce.Code != gws.ClosePolicyViolation {
			t.Fatalf("%s: close %d, want 1008", name, ce.Code)
		}
	}
	refused("missing", map[string]any{}, "unauthorized", "needs a signed user token")
	refused("garbage", map[string]any{"token": "not.a.jwt"}, "unauthorized", "invalid token")
	refused("wrong key", map[string]any{"token": func() string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "u", "exp": exp}).SignedString([]byte("another-secret-another-secret-xx"))
		return s
	}()}, "unauthorized", "invalid token")
	refused("expired", map[string]any{"token": sign(t, jwt.MapClaims{"sub": "u", "exp": time.Now().Add(-time.Hour).Unix()})}, "unauthorized", "expired")
	refused("no exp", map[string]any{"token": sign(t, jwt.MapClaims{"sub": "u"})}, "unauthorized", "invalid token")
	refused("alg none", map[string]any{"token": func() string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "u", "exp": exp}).SignedString(jwt.UnsafeAllowNoneSignatureType)
		return s
	}()}, "unauthorized", "invalid token")

	// A valid token: the claimed user in hello is ignored for the token's.
	ann, ready := g.hello(map[string]any{"token": sign(t, jwt.MapClaims{"sub": "ann", "name": "Ann", "exp": exp}), "user": map[string]string{"id": "root"}})
	if ready.User.ID != "ann" || ready.Role != "owner" {
		t.Fatalf("ready = %+v, want ann as owner", ready)
	}
	_ = ann

	// Bob may not open Ann's session by knowing its id...
	refused("not a member", map[string]any{"session": ready.Session, "token": sign(t, jwt.MapClaims{"sub": "bob", "exp": exp})}, "forbidden", ready.Session)
	// ...nor with a token for another session...
	refused("other session", map[string]any{"session": ready.Session, "token": sign(t, jwt.MapClaims{"sub": "bob", "session": "s_other", "exp": exp})}, "forbidden", "s_other")
	// ...but a token the site minted for that session lets him in, with its role.
	_, bob := g.hello(map[string]any{"token": sign(t, jwt.MapClaims{"sub": "bob", "name": "Bob", "role": "viewer", "session": ready.Session, "exp": exp})})
	if bob.Session != ready.Session || bob.Role != "viewer" {
		t.Fatalf("bob ready = %+v, want viewer of %s", bob, ready.Session)
	}
	// Once a member, his own token without a session claim will do.
	_, again := g.hello(map[string]any{"session": ready.Session, "token": sign(t, jwt.MapClaims{"sub": "bob", "exp": exp})})
	if again.Role != "viewer" {
		t.Fatalf("bob again = %+v", again)
	}
}

func TestViewerMayNotWrite(t *testing.T) {
	g := newGateway(t, websocket.Config{Auth: websocket.Auth{Mode: websocket.AuthToken, Tokens: []websocket.StaticToken{
		{Token: "tok-ann", UserID: "ann", Name: "Ann"},
		{Token: "tok-eve", UserID: "eve", Name: "Eve", Role: "viewer"},
	}}})
	_, ready := g.hello(map[string]any{"token": "tok-ann"})
	eve := g.dial(http.Header{"Authorization": {"Bearer tok-eve"}})
	eve.send(map[string]any{"type": "hello", "session": ready.Session})
	if ev := eve.next(); ev.Type != switchboard.EventReady || data[switchboard.ReadyData](t, ev).Role != "viewer" {
		t.Fatalf("eve: %s %s", ev.Type, ev.Data)
	}
	eve.send(map[string]any{"type": "input", "id": "e1", "text": "hi"})
	ev := eve.next()
	if e := data[switchboard.ErrorData](t, ev); ev.Type != switchboard.EventError || e.Code != "forbidden" {
		t.Fatalf("viewer input: got %s %s, want a forbidden error", ev.Type, ev.Data)
	}
	c := g.dial(nil)
	c.send(map[string]any{"type": "hello", "token": "tok-nobody"})
	if ev := c.next(); ev.Type != switchboard.EventError || data[switchboard.ErrorData](t, ev).Code != "unauthorized" {
		t.Fatalf("unknown token: %s %s", ev.Type, ev.Data)
	}
}

// resume_after replays exactly what a client missed, then the live stream;
// at the live edge, or without it, nothing is replayed. In a synctest
// bubble, so that "nothing" is known, not waited for.
func TestResume(t *testing.T) {
	synctest.Test(t, testResume)
}

func testResume(t *testing.T) {
	g := newBubbleGateway(t, websocket.Config{}, nil)
	g.model.Push(openaitest.Reply{Text: []string{"one"}}, openaitest.Reply{Text: []string{"two"}}, openaitest.Reply{Text: []string{"three"}})
	a, ready := g.hello(map[string]any{})
	a.send(map[string]any{"type": "input", "id": "a1", "text": "first"})
	first := a.untilIdle()
	seen := first[len(first)-1].Seq
	a.ws.Close() // the connection drops

	// While a is away, the session goes on (another client of it).
	b, _ := g.hello(map[string]any{"session": ready.Session})
	b.send(map[string]any{"type": "input", "id": "b1", "text": "second"})
	missed := b.untilIdle()

	// With a gap: resume_after replays exactly what was missed, then live.
	a2, r2 := g.hello(map[string]any{"session": ready.Session, "resume_after": seen})
	if r2.LastSeq != missed[len(missed)-1].Seq {
		t.Fatalf("ready.last_seq = %d, want %d", r2.LastSeq, missed[len(missed)-1].Seq)
	}
	replayed := a2.untilIdle()
	contiguous(t, seqs(replayed), seen+1)
	if len(replayed) != len(missed) {
		t.Fatalf("replayed %d events, missed %d", len(replayed), len(missed))
	}
	b.send(map[string]any{"type": "input", "id": "b2", "text": "third"})
	live := a2.untilIdle()
	contiguous(t, seqs(live), replayed[len(replayed)-1].Seq+1)

	// Without a gap: nothing replayed, the next event is live.
	last := live[len(live)-1].Seq
	a3, _ := g.hello(map[string]any{"session": ready.Session, "resume_after": last})
	if ev, silent := a3.silent(); !silent {
		t.Fatalf("resume at the live edge replayed %s seq %d", ev.Type, ev.Seq)
	}
	// And without resume_after, only live events.
	a4, _ := g.hello(map[string]any{"session": ready.Session})
	if ev, silent := a4.silent(); !silent {
		t.Fatalf("attach without resume_after replayed %s seq %d", ev.Type, ev.Seq)
	}
	// resume_after 0: the whole history.
	a5, _ := g.hello(map[string]any{"session": ready.Session, "resume_after": 0})
	all := a5.until(func(ev wireEvent) bool { return ev.Seq == last })
	contiguous(t, seqs(all), 1)
}

func TestTwoClientsSeeTheSameStream(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	g.llm.Push(openaitest.Reply{Text: []string{"a", "b", "c", "d"}}, openaitest.Reply{Text: []string{"e", "f"}})
	a, ready := g.hello(map[string]any{"user": map[string]string{"id": "ann", "name": "Ann"}})
	b, joined := g.hello(map[string]any{"session": ready.Session, "user": map[string]string{"id": "bob", "name": "Bob"}})
	if joined.Role != "member" {
		t.Fatalf("bob joined as %q, want member", joined.Role)
	}
	a.send(map[string]any{"type": "input", "id": "a1", "text": "from ann"})
	b.send(map[string]any{"type": "input", "id": "b1", "text": "from bob"})

	read := func(c *client) []string {
		var out []string
		idle := 0
		for idle < 2 {
			ev := c.next()
			if ev.Seq == 0 {
				continue // the present (who is here), not the stream
			}
			out = append(out, string(ev.Type)+" "+string(ev.Data)+" "+strconvI(ev.Seq))
			if ev.Type == switchboard.EventState && data[switchboard.StateData](t, ev).State == switchboard.StateIdle {
				idle++
			}
		}
		return out
	}
	var wg sync.WaitGroup
	var ga, gb []string
	wg.Add(2)
	go func() { defer wg.Done(); ga = read(a) }()
	go func() { defer wg.Done(); gb = read(b) }()
	wg.Wait()
	if strings.Join(ga, "\n") != strings.Join(gb, "\n") {
		t.Fatalf("the two clients saw different streams:\nann:\n%s\nbob:\n%s", strings.Join(ga, "\n"), strings.Join(gb, "\n"))
	}
}

func strconvI(i int64) string { b, _ := json.Marshal(i); return string(b) }

func TestRepeatedInputIDIsIgnored(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	g.llm.Push(openaitest.Reply{Text: []string{"once"}}, openaitest.Reply{Text: []string{"twice?"}})
	// Ids are per user: a client that reconnects says who it is again.
	me := map[string]any{"id": "ada"}
	c, ready := g.hello(map[string]any{"user": me})
	c.send(map[string]any{"type": "input", "id": "same", "text": "hello"})
	c.untilIdle()
	// A client that lost its connection sends again after reconnecting.
	c2, _ := g.hello(map[string]any{"session": ready.Session, "user": me})
	c2.send(map[string]any{"type": "input", "id": "same", "text": "hello"})
	c2.send(map[string]any{"type": "input", "id": "other", "text": "next"})
	evs := c2.untilIdle()
	users := 0
	for _, ev := range evs {
		if ev.Type == switchboard.EventMessage && data[switchboard.MessageData](t, ev).Role == switchboard.RoleUser {
			users++
			if got := data[switchboard.MessageData](t, ev).Content; got != "next" {
				t.Fatalf("the repeated input was taken again: %q", got)
			}
		}
	}
	if users != 1 || len(g.llm.Requests()) != 2 {
		t.Fatalf("user messages after the repeat = %d, model calls = %d; want 1 and 2", users, len(g.llm.Requests()))
	}
}

// smallBuffers is a listener whose connections have the smallest socket
// send buffer the kernel allows, so a client that does not read blocks the
// server's writes after a few frames whatever the machine's defaults.
type smallBuffers struct {
	net.Listener
	accepted chan *net.TCPConn
}

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(1)
		l.accepted <- tc
	}
	return c, err
}

// A client that stops reading is dropped with 1013 "too slow" once its
// queue has been full for SendTimeout, the session carries on without it,
// and it resumes where it was cut. The slowness is driven, not raced: the
// client reads nothing until the turn is over, the server's send buffer is
// the kernel's smallest and the client's receive buffer fixed (so the
// server's writer blocks after a few frames on any machine), it reads once the gateway counted the drop, and the write
// timeout outlasts all that (so the blocked writer sends the close frame
// once the client reads, however loaded the machine).
func TestSlowClientIsDroppedAndResumes(t *testing.T) {
	g := newGatewayWith(t, websocket.Config{SendBuffer: 4, SendTimeout: 200 * time.Millisecond, WriteTimeout: 5 * time.Minute, PingInterval: 5 * time.Minute}, nil)
	slowSrv := httptest.NewUnstartedServer(g.srv.Config.Handler)
	accepted := make(chan *net.TCPConn, 1)
	slowSrv.Listener = smallBuffers{slowSrv.Listener, accepted}
	slowSrv.Start()
	t.Cleanup(slowSrv.Close)

	chunk := strings.Repeat("z", 32<<10)
	text := make([]string, 64) // 2 MiB: far more than the buffers hold
	for i := range text {
		text[i] = chunk
	}
	g.llm.Push(openaitest.Reply{Text: text})
	// The session's owner watches through the session manager itself; the
	// send buffer of 4 is per WebSocket connection.
	owner := switchboard.Author{Channel: "test", ID: "owner"}
	sub, err := g.mgr.Attach(t.Context(), sessions.AttachOptions{Author: owner, AfterSeq: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ready := sub.Ready

	dialer := gws.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			// Fixed, so it does not grow, and well above the
			// loopback MSS, so the window reopens when it reads.
			_ = tc.SetReadBuffer(256 << 10)
		}
		return c, err
	}}
	slowWS, _, err := dialer.Dial("ws"+strings.TrimPrefix(slowSrv.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	slow := &client{t: t, ws: slowWS}
	t.Cleanup(func() { slowWS.Close() })
	slow.send(map[string]any{"type": "hello", "session": ready.Session, "resume_after": 0})
	if ev := slow.next(); ev.Type != switchboard.EventReady {
		t.Fatalf("slow hello: %s", ev.Type)
	}

	if _, err := g.mgr.Submit(t.Context(), ready.Session, switchboard.Input{Kind: switchboard.InputText, Author: owner, Text: "write a lot"}); err != nil {
		t.Fatal(err)
	}
	// The session is not held back: it runs the turn to the end.
	var all []switchboard.Event
	for ev := range sub.Events() {
		all = append(all, ev)
		if ev.Type == switchboard.EventState && strings.Contains(string(ev.Data), `"idle"`) {
			break
		}
	}

	// The gateway gives up on the slow one while it still reads nothing
	// (its writer is blocked, so the close frame waits behind the queued
	// frames); only then does it read, and the server's buffer is made
	// normal again: a tiny one would crawl on delayed ACKs.
	eventually(t, "the slow client is dropped", func() bool {
		return g.metric(`switchboard_limit_refusals_total{limit="send_buffer"}`) == 1
	})
	_ = (<-accepted).SetWriteBuffer(4 << 20)
	var got []wireEvent
	var ce *gws.CloseError
	for ce == nil {
		ev, err := slow.read(time.Minute)
		if err != nil {
			var ok bool
			if ce, ok = err.(*gws.CloseError); !ok {
				t.Fatalf("slow client after %d events: %v, want a close frame", len(got), err)
			}
			break
		}
		got = append(got, ev)
	}
	if ce.Code != gws.CloseTryAgainLater || !strings.Contains(ce.Text, "too slow") {
		t.Fatalf("slow client closed with %d %q, want 1013 too slow", ce.Code, ce.Text)
	}
	if len(got) >= len(all) {
		t.Fatalf("the slow client got all %d events; the test did not make it slow", len(got))
	}
	t.Logf("the slow client got %d of %d events before 1013", len(got), len(all))
	contiguous(t, seqs(got), 1)

	// It resumes where it was cut and gets the rest, no gap, no double.
	var after int64
	if s := seqs(got); len(s) > 0 {
		after = s[len(s)-1]
	}
	back, _ := g.hello(map[string]any{"session": ready.Session, "resume_after": after})
	rest := back.untilIdle()
	contiguous(t, seqs(rest), after+1)
	if rest[len(rest)-1].Seq != all[len(all)-1].Seq {
		t.Fatalf("resumed up to %d, the session is at %d", rest[len(rest)-1].Seq, all[len(all)-1].Seq)
	}
}

// A connection that says no hello is closed with 1008 once HelloTimeout
// has passed, not a moment before. The clock is synctest's.
func TestNoHelloCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const helloTimeout = 10 * time.Second
		g := newBubbleGateway(t, websocket.Config{HelloTimeout: helloTimeout}, nil)
		c := g.dial(nil)
		closed := make(chan error, 1)
		go func() {
			_, err := c.read(time.Hour) // the client's own deadline is not what ends it
			closed <- err
		}()
		time.Sleep(helloTimeout - time.Nanosecond)
		synctest.Wait()
		select {
		case err := <-closed:
			t.Fatalf("the connection ended (%v) a moment before the hello timeout was over", err)
		default:
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		select {
		case err := <-closed:
			ce, ok := err.(*gws.CloseError)
			if !ok || ce.Code != gws.ClosePolicyViolation || !strings.Contains(ce.Text, "no hello") {
				t.Fatalf("the connection ended with %v, want a close frame 1008 no hello", err)
			}
		default:
			t.Fatal("the connection is still open once the hello timeout is over")
		}
	})
}

// A client that no longer answers pings is gone two ping intervals and a
// write timeout after it was last heard from, not a moment before: its
// connection ends (reason "timeout"). One that answers stays however long
// it is quiet. The clock is synctest's, the intervals the defaults.
func TestSilentPeerTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ping, write = 30 * time.Second, 10 * time.Second
		g := newBubbleGateway(t, websocket.Config{PingInterval: ping, WriteTimeout: write}, nil)
		type ended struct {
			err error
			at  time.Time
		}
		// readUntilEnd reads (so pings are heard) until the connection ends.
		readUntilEnd := func(c *client) chan ended {
			done := make(chan ended, 1)
			go func() {
				for {
					if _, err := c.read(time.Hour); err != nil {
						done <- ended{err, time.Now()}
						return
					}
				}
			}()
			return done
		}
		answers, _ := g.hello(map[string]any{"user": map[string]string{"id": "ann"}})
		mute, _ := g.hello(map[string]any{"user": map[string]string{"id": "bob"}})
		heard := time.Now() // bob's hello, the last he is heard from
		// Bob's client hears the pings and answers none.
		mute.ws.SetPingHandler(func(string) error { return nil })
		answersEnded, muteEnded := readUntilEnd(answers), readUntilEnd(mute)

		gone := heard.Add(2*ping + write)
		time.Sleep(time.Until(gone) - time.Nanosecond)
		synctest.Wait()
		select {
		case e := <-muteEnded:
			t.Fatalf("the mute connection ended (%v) %s after it was last heard from, before %s", e.err, e.at.Sub(heard), 2*ping+write)
		default:
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		select {
		case e := <-muteEnded:
			if ce, ok := e.err.(*gws.CloseError); !ok || ce.Code != gws.CloseNormalClosure {
				t.Fatalf("the mute connection ended with %v, want a close frame 1000", e.err)
			}
		default:
			t.Fatalf("the mute connection is still open %s after it was last heard from", 2*ping+write)
		}
		if n := g.metric(`switchboard_websocket_closed_total{reason="timeout"}`); n != 1 {
			t.Fatalf("%v connections closed for silence, want 1", n)
		}

		time.Sleep(10 * time.Minute)
		synctest.Wait()
		select {
		case e := <-answersEnded:
			t.Fatalf("the connection that answers pings ended: %v", e.err)
		default:
		}
	})
}
