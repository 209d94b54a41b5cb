package sessions_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// follower records what the manager tells it.
type follower chan switchboard.Binding

func (f follower) Follow(b switchboard.Binding) { f <- b }

func (f follower) next(t *testing.T) switchboard.Binding {
	t.Helper()
	select {
	case b := <-f:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("the follower was not told")
		return switchboard.Binding{}
	}
}

func (f follower) none(t *testing.T) {
	t.Helper()
	select {
	case b := <-f:
		t.Fatalf("the follower was told again: %+v", b)
	default:
	}
}

// A session bound to a Slack thread is rendered there whoever writes: the
// channel's follower is told when the thread is bound and whenever the
// session loads, follows without keeping it loaded, gets the notices meant
// for its channel's people, and catches up on start from how far it got.
// The session unloads on synctest's clock.
func TestBoundSessionIsFollowed(t *testing.T) {
	synctest.Test(t, testBoundSessionIsFollowed)
}

func testBoundSessionIsFollowed(t *testing.T) {
	h := newBubbleHarness(t, func(c *sessions.Config) { c.IdleTimeout = 10 * time.Minute })
	f := make(follower, 16)
	h.m.SetFollower("slack", f)
	ctx := context.Background()

	web := h.newSession(alice)
	h.model.Push(openaitest.Reply{Text: []string{"hi from the model"}})
	web.say("first") // stored, so it can be bound
	web.idle()
	b, err := h.m.Bind(ctx, "slack", "T1/C1/1.1", web.id)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.next(t); got.SessionID != web.id || got.Address != "T1/C1/1.1" || got.RenderedSeq != b.RenderedSeq || b.RenderedSeq == 0 {
		t.Fatalf("told %+v after binding %+v: want the binding, from the session's end", got, b)
	}

	// The follower attaches; what the web user writes reaches it.
	sub, err := h.m.Attach(ctx, sessions.AttachOptions{SessionID: b.SessionID, Follow: "slack", AfterSeq: b.RenderedSeq})
	if err != nil {
		t.Fatal(err)
	}
	fc := &client{t: t, h: h, sub: sub, id: b.SessionID}
	h.model.Push(openaitest.Reply{Text: []string{"second answer"}})
	web.say("second")
	if got := fc.reply(); got.Content != "second answer" {
		t.Fatalf("the follower saw %q", got.Content)
	}
	if sub.Ready.Role != "" {
		t.Fatalf("a follower got a role: %q", sub.Ready.Role)
	}
	members, err := h.db.Members(ctx, b.SessionID)
	if err != nil || len(members) != 1 {
		t.Fatalf("members = %v, %v: the follower must not become one", members, err)
	}

	// A Slack person's notice (a command's answer) goes to the follower,
	// marked for them; a web person's does not.
	web.send(switchboard.Input{Kind: switchboard.InputText, Author: bob, Text: "/nosuchcommand"})
	if e := fc.errorEvent(); e.For != bob.Key() {
		t.Fatalf("notice for %q, want %q", e.For, bob.Key())
	}

	// The follower does not keep the session loaded: once the web user
	// leaves, it unloads after the idle timeout and the follower's stream
	// ends then.
	web.sub.Close()
	synctest.Wait()
	time.Sleep(h.cfg.IdleTimeout - time.Nanosecond)
	if _, open := fc.pending(); !open || h.m.Live() != 1 {
		t.Fatalf("a moment before the idle timeout was over: the follower's stream open %v, %d sessions loaded; want open, 1", open, h.m.Live())
	}
	time.Sleep(time.Nanosecond)
	if _, open := fc.pending(); open || h.m.Live() != 0 {
		t.Fatalf("once the idle timeout was over: the follower's stream open %v, %d sessions loaded; the follower kept the session loaded", open, h.m.Live())
	}
	f.none(t) // its own attach did not tell it again

	// Loading it again (a message from the web) tells the follower.
	h.model.Push(openaitest.Reply{Text: []string{"third answer"}})
	web2 := h.attach(sessions.AttachOptions{SessionID: b.SessionID, Author: alice})
	if got := f.next(t); got.SessionID != b.SessionID {
		t.Fatalf("told %+v on load", got)
	}
	web2.say("third")
	web2.idle()

	// How far it rendered is kept; a restart catches up what it missed.
	if err := h.m.Rendered(ctx, b, b.RenderedSeq+1); err != nil {
		t.Fatal(err)
	}
	web2.sub.Close()
	h.restart()
	f2 := make(follower, 16)
	h.m.SetFollower("slack", f2)
	if err := h.m.CatchUp(ctx, "slack"); err != nil {
		t.Fatal(err)
	}
	if got := f2.next(t); got.RenderedSeq != b.RenderedSeq+1 {
		t.Fatalf("caught up from %d, want %d", got.RenderedSeq, b.RenderedSeq+1)
	}
}

// A command from a chat app can be what loads a bound session: its answer
// for that one person is sent before the channel's follower, told of the
// load, has attached; it is kept a moment and handed to the follower. The
// session unloads on synctest's clock.
func TestAnAnswerBeforeTheFollowerAttachesIsKept(t *testing.T) {
	synctest.Test(t, testAnAnswerBeforeTheFollowerAttachesIsKept)
}

func testAnAnswerBeforeTheFollowerAttachesIsKept(t *testing.T) {
	h := newBubbleHarness(t, func(c *sessions.Config) { c.IdleTimeout = 10 * time.Minute })
	f := make(follower, 16)
	h.m.SetFollower("slack", f)
	ctx := context.Background()
	web := h.newSession(alice)
	web.say("/help") // stored
	if _, err := h.m.Bind(ctx, "slack", "T1:D1", web.id); err != nil {
		t.Fatal(err)
	}
	f.next(t)
	web.sub.Close()
	h.idleOut(t)
	r, err := h.m.Submit(ctx, web.id, switchboard.Input{Kind: switchboard.InputText, Author: bob, Text: "/who", Place: "slack:T1:D1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	b := f.next(t) // told of the load; attaches only now
	sub, err := h.m.Attach(ctx, sessions.AttachOptions{SessionID: b.SessionID, Follow: "slack", AfterSeq: b.RenderedSeq})
	if err != nil {
		t.Fatal(err)
	}
	fc := &client{t: t, h: h, sub: sub, id: b.SessionID}
	if e := fc.errorEvent(); e.For != bob.Key() || !strings.Contains(e.Message, "in this conversation") {
		t.Fatalf("the follower got %+v; want Bob's /who answer", e)
	}
}
