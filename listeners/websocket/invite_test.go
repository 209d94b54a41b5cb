package websocket_test

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

var inviteCodeRE = regexp.MustCompile(`Invite code ([a-z2-7]{26})`)

// share sends "/share args" and returns the code of the private answer.
func share(c *client, args string) string {
	c.t.Helper()
	c.send(map[string]any{"type": "input", "id": "share-" + args + fmt.Sprint(time.Now().UnixNano()), "text": strings.TrimSpace("/share " + args)})
	for {
		ev := c.next()
		if ev.Type != switchboard.EventError {
			continue
		}
		e := data[switchboard.ErrorData](c.t, ev)
		if e.Code != sessions.NoticeInfo {
			c.t.Fatalf("/share %s: %+v", args, e)
		}
		m := inviteCodeRE.FindStringSubmatch(e.Message)
		if m == nil {
			c.t.Fatalf("/share %s answered %q, with no code", args, e.Message)
		}
		return m[1]
	}
}

// refusal reads the one event a refused hello gets.
func refusal(c *client) switchboard.ErrorData {
	c.t.Helper()
	ev := c.next()
	if ev.Type != switchboard.EventError {
		c.t.Fatalf("got %s %s, want an error", ev.Type, ev.Data)
	}
	return data[switchboard.ErrorData](c.t, ev)
}

// detached proves a connection is attached to nothing: an input is
// refused for want of a hello.
func detached(c *client) {
	c.t.Helper()
	c.send(map[string]any{"type": "input", "id": "x", "text": "anyone there?"})
	if e := refusal(c); e.Code != switchboard.ErrCodeBadFrame || !strings.Contains(e.Message, "send hello first") {
		c.t.Fatalf("an input after a refused invite: %+v, want bad_frame asking for hello", e)
	}
}

// ann starts a conversation with one exchange and returns her connection,
// its ready and the events of the exchange.
func ann(t *testing.T, g *gateway) (*client, switchboard.ReadyData, []wireEvent) {
	t.Helper()
	g.llm.Push(openaitest.Reply{Text: []string{"Hello ", "Ann."}})
	c, ready := g.hello(map[string]any{"user": map[string]string{"id": "ann", "name": "Ann"}})
	c.send(map[string]any{"type": "input", "id": "a1", "text": "hi, I am Ann"})
	return c, ready, c.untilIdle()
}

// Bob opens the link: he is in Ann's conversation with the code's role,
// sees everything said so far, and both see who is there.
func TestJoinByInviteReplaysTheConversation(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	a, ready, said := ann(t, g)
	code := share(a, "viewer")

	c, bob := g.hello(map[string]any{"invite": code, "user": map[string]string{"id": "bob", "name": "Bob"}})
	if bob.Session != ready.Session || bob.Role != "viewer" || bob.Guide != ready.Guide {
		t.Fatalf("bob ready = %+v, want a viewer of %s", bob, ready.Session)
	}
	if len(bob.Members) != 2 || bob.Members[0].Name != "Ann" || bob.Members[0].Role != "owner" || !bob.Members[0].Here ||
		bob.Members[1].Name != "Bob" || bob.Members[1].Role != "viewer" || bob.Members[1].Channel != "web" || !bob.Members[1].Here {
		t.Fatalf("ready.members = %+v, want Ann (owner, here) and Bob (viewer, here)", bob.Members)
	}
	// The whole conversation so far, from seq 1, then live.
	last := said[len(said)-1].Seq
	replayed := c.until(func(ev wireEvent) bool { return ev.Seq == last })
	contiguous(t, seqs(replayed), 1)
	var texts []string
	for _, ev := range replayed {
		if ev.Type == switchboard.EventMessage {
			texts = append(texts, data[switchboard.MessageData](t, ev).Content)
		}
	}
	if strings.Join(texts, "|") != "hi, I am Ann|Hello Ann." {
		t.Fatalf("bob was shown %q, want the conversation so far", texts)
	}
	// Ann is told Bob is there.
	members := a.until(func(ev wireEvent) bool { return ev.Type == switchboard.EventMembers })
	if ms := data[switchboard.MembersData](t, members[len(members)-1]).Members; len(ms) != 2 || ms[1].Name != "Bob" {
		t.Fatalf("ann's members event: %+v", ms)
	}
	// A viewer reads; he may not write.
	c.send(map[string]any{"type": "input", "id": "b1", "text": "hello all"})
	for {
		ev := c.next()
		if ev.Type != switchboard.EventError {
			continue
		}
		if e := data[switchboard.ErrorData](t, ev); e.Code != switchboard.ErrCodeForbidden || !strings.Contains(e.Message, "viewer") {
			t.Fatalf("a viewer's input: %+v, want forbidden", e)
		}
		break
	}

	// An approver's code makes Carol an approver; resume_after is kept.
	code = share(a, "approver")
	c2, carol := g.hello(map[string]any{"invite": code, "resume_after": last, "user": map[string]string{"id": "carol", "name": "Carol"}})
	if carol.Session != ready.Session || carol.Role != "approver" || len(carol.Members) != 3 {
		t.Fatalf("carol ready = %+v, want an approver of %s among 3", carol, ready.Session)
	}
	// Carol reads on from there: what is said next, nothing before it.
	g.llm.Push(openaitest.Reply{Text: []string{"Welcome, Carol."}})
	a.send(map[string]any{"type": "input", "id": "a2", "text": "Carol is here"})
	for _, ev := range c2.untilAssistant() {
		if ev.Seq > 0 && ev.Seq <= last {
			t.Fatalf("resume_after %d replayed seq %d", last, ev.Seq)
		}
	}
}

// Each code that cannot be used gets one clear error; the connection
// stays attached to nothing, and usable for another hello.
func TestRefusedInvitesAttachNothing(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	g := newGatewayWith(t, websocket.Config{}, func(c *sessions.Config) { c.Now = clock })
	a, ready, _ := ann(t, g)
	withdrawn := share(a, "")
	a.send(map[string]any{"type": "input", "id": "u1", "text": "/unshare"})
	a.until(func(ev wireEvent) bool {
		return ev.Type == switchboard.EventError && strings.Contains(data[switchboard.ErrorData](t, ev).Message, "withdrawn")
	})
	once := share(a, "uses 1")
	soon := share(a, "expires 1m")
	good := share(a, "")
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	g.hello(map[string]any{"invite": once, "user": map[string]string{"id": "bob"}})

	c := g.dial(nil)
	for _, tc := range []struct {
		name, code, wantCode, wantText string
	}{
		{"unknown", "aaaaaaaaaaaaaaaaaaaaaaaaaa", "not_found", "not known"},
		{"expired", soon, "forbidden", "expired"},
		{"used up", once, "forbidden", "used as many times"},
		{"withdrawn", withdrawn, "forbidden", "withdrawn"},
	} {
		c.send(map[string]any{"type": "hello", "invite": tc.code, "user": map[string]string{"id": "carol"}})
		if e := refusal(c); e.Code != tc.wantCode || !strings.Contains(e.Message, tc.wantText) || !strings.Contains(e.Message, "ask whoever shared it") {
			t.Errorf("%s code: %+v, want %s saying %q", tc.name, e, tc.wantCode, tc.wantText)
		}
		detached(c)
	}
	// Refusals made nobody a member.
	if ms, err := g.db.Members(t.Context(), ready.Session); err != nil || len(ms) != 2 {
		t.Fatalf("members %+v (%v), want ann and bob", ms, err)
	}
	// Upper case and spaces, as a person may paste it, and on the same
	// connection: the refusals left it usable.
	c.send(map[string]any{"type": "hello", "invite": "  " + strings.ToUpper(good) + " ", "user": map[string]string{"id": "carol"}})
	if ev := c.next(); ev.Type != switchboard.EventReady || data[switchboard.ReadyData](t, ev).Session != ready.Session {
		t.Fatalf("a good code after refusals: %s %s", ev.Type, ev.Data)
	}
}

// Trying codes is bounded per address, whoever the tries claim to be.
func TestInviteTriesPerAddressAreBounded(t *testing.T) {
	g := newGatewayWith(t, websocket.Config{}, nil)
	a, ready, _ := ann(t, g)
	good := share(a, "")
	c := g.dial(nil)
	for i := range 10 {
		c.send(map[string]any{"type": "hello", "invite": fmt.Sprintf("%026d", i), "user": map[string]string{"id": fmt.Sprint("guesser-", i)}})
		if e := refusal(c); e.Code != switchboard.ErrCodeNotFound {
			t.Fatalf("try %d: %+v, want not_found", i+1, e)
		}
	}
	c.send(map[string]any{"type": "hello", "invite": good, "user": map[string]string{"id": "guesser-10"}})
	if e := refusal(c); e.Code != switchboard.ErrCodeBusy || !strings.Contains(e.Message, "wait a minute") {
		t.Fatalf("an 11th try in a minute: %+v, want busy", e)
	}
	detached(c)
	if n := g.metric(`switchboard_limit_refusals_total{limit="invites_per_ip"}`); n != 1 {
		t.Fatalf("refusals counted: %v, want 1", n)
	}
	// Attaching by id is no invite and is not bounded by this.
	if _, r := g.hello(map[string]any{"session": ready.Session, "user": map[string]string{"id": "ann"}}); r.Role != "owner" {
		t.Fatalf("ann again: %+v", r)
	}

	// Behind a proxy every client has its address: with the per-address
	// bounds off, only each person's own bound (Manager.Join) is left.
	g = newGatewayWith(t, websocket.Config{NewSessionsPerIP: -1}, nil)
	c = g.dial(nil)
	for i := range 12 {
		c.send(map[string]any{"type": "hello", "invite": fmt.Sprintf("%026d", i), "user": map[string]string{"id": fmt.Sprint("visitor-", i)}})
		if e := refusal(c); e.Code != switchboard.ErrCodeNotFound {
			t.Fatalf("behind a proxy, try %d: %+v, want not_found", i+1, e)
		}
	}
}

func TestHelloWithSessionAndInviteIsABadFrame(t *testing.T) {
	g := newGateway(t, websocket.Config{})
	a, ready, _ := ann(t, g)
	code := share(a, "")
	c := g.dial(nil)
	c.send(map[string]any{"type": "hello", "session": ready.Session, "invite": code})
	if e := refusal(c); e.Code != switchboard.ErrCodeBadFrame || !strings.Contains(e.Message, "not both") {
		t.Fatalf("hello with session and invite: %+v, want bad_frame", e)
	}
	detached(c)
	// The code was not spent on it: one use, still there.
	c.send(map[string]any{"type": "hello", "invite": code, "user": map[string]string{"id": "bob"}})
	if ev := c.next(); ev.Type != switchboard.EventReady || data[switchboard.ReadyData](t, ev).Session != ready.Session {
		t.Fatalf("the code afterwards: %s %s", ev.Type, ev.Data)
	}
}

// An invite grants a role; it never lets in someone who could not
// connect: with JWT the token is still needed, and a token for one
// session cannot be used to join another (nor spend its code).
func TestInviteWithJWT(t *testing.T) {
	g := newGateway(t, websocket.Config{Auth: websocket.Auth{Mode: websocket.AuthJWT, JWTSecret: []byte(secret)}})
	exp := time.Now().Add(time.Hour).Unix()
	g.llm.Push(openaitest.Reply{Text: []string{"Hi."}})
	a, ready := g.hello(map[string]any{"token": sign(t, jwt.MapClaims{"sub": "ann", "name": "Ann", "exp": exp})})
	a.send(map[string]any{"type": "input", "id": "a1", "text": "hello"})
	said := a.untilIdle()
	code := share(a, "approver uses 1")

	c := g.dial(nil)
	c.send(map[string]any{"type": "hello", "invite": code})
	if e := refusal(c); e.Code != "unauthorized" {
		t.Fatalf("an invite without a token: %+v, want unauthorized", e)
	}
	if ce := c.closeCode(); ce.Code != gws.ClosePolicyViolation {
		t.Fatalf("close %d, want 1008", ce.Code)
	}

	c = g.dial(nil)
	c.send(map[string]any{"type": "hello", "invite": code, "token": sign(t, jwt.MapClaims{"sub": "eve", "session": "s_other", "exp": exp})})
	if e := refusal(c); e.Code != switchboard.ErrCodeForbidden || !strings.Contains(e.Message, "s_other only") {
		t.Fatalf("an invite with a token for another session: %+v, want forbidden", e)
	}
	if ce := c.closeCode(); ce.Code != gws.ClosePolicyViolation {
		t.Fatalf("close %d, want 1008", ce.Code)
	}

	// A signed-in user with the code: in, as the code says, with the
	// history; and the code's one use was still there for him.
	bob, joined := g.hello(map[string]any{"invite": code, "token": sign(t, jwt.MapClaims{"sub": "bob", "name": "Bob", "exp": exp})})
	if joined.Session != ready.Session || joined.Role != "approver" || joined.User.ID != "bob" {
		t.Fatalf("bob ready = %+v, want an approver of %s", joined, ready.Session)
	}
	contiguous(t, seqs(bob.until(func(ev wireEvent) bool { return ev.Seq == said[len(said)-1].Seq })), 1)
	// From now on his own token opens it: he is a member.
	if _, again := g.hello(map[string]any{"session": ready.Session, "token": sign(t, jwt.MapClaims{"sub": "bob", "exp": exp})}); again.Role != "approver" {
		t.Fatalf("bob again = %+v", again)
	}
}
