package stdin

// The terminal in shared sessions, driven end to end: the listener reads a
// pipe and writes to a screen, against the real session manager on SQLite
// and a scripted model on loopback (sessionstest). The other people are
// authors of other channels that attach and write through the same
// manager, as their listeners do.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// deadline only turns a hang into a failure; nothing is timed.
const deadline = 20 * time.Second

var (
	tester = switchboard.Author{Channel: Channel, ID: "tester", Name: "tester"}
	carol  = switchboard.Author{Channel: "slack", ID: "U0CAROL", Name: "Carol"}
	dan    = switchboard.Author{Channel: "web", ID: "dan", Name: "Dan"}
)

// model answers like one that follows the words it gets: "time" asks for
// current_time (an ask tool), a tool's result is answered "Done: …", and
// anything else "You said: …".
func model(r openaitest.Request) openaitest.Reply {
	last := r.Messages[len(r.Messages)-1]
	text := openaitest.Text(last.Content)
	switch {
	case last.Role == "tool":
		return openaitest.Reply{Text: []string{"Done: ", text}}
	case strings.Contains(text, "time"):
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: fmt.Sprintf("call_%d", len(r.Messages)), Name: "current_time", Args: `{"timezone":"UTC"}`}}}
	}
	return openaitest.Reply{Text: []string{"You said: ", text}}
}

func newGateway(t *testing.T) *sessionstest.Gateway {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gw := sessionstest.New(t, "../../guides", log)
	gw.LLM.Respond(model)
	return gw
}

// screen is the terminal's output, which a test waits on.
type screen struct {
	mu      sync.Mutex
	buf     strings.Builder
	changed chan struct{}
	mark    int // where the last expect matched
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	close(s.changed)
	s.changed = make(chan struct{})
	return len(p), nil
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// term is one run of the listener.
type term struct {
	t      *testing.T
	in     *io.PipeWriter
	out    *screen
	done   chan error
	cancel context.CancelFunc
}

// startTerm runs a terminal (interactive: with the banner and the recap,
// as a person's) on mgr.
func startTerm(t *testing.T, mgr Sessions) *term {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	tm := &term{t: t, in: pw, out: &screen{changed: make(chan struct{})}, done: make(chan error, 1), cancel: cancel}
	l := &Listener{In: pr, Out: tm.out, Interactive: true, Author: tester, Guide: "assistant", Sessions: mgr,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	go func() { tm.done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		pw.Close()
		<-tm.done
	})
	return tm
}

func (tm *term) send(lines ...string) {
	tm.t.Helper()
	if _, err := io.WriteString(tm.in, strings.Join(lines, "\n")+"\n"); err != nil {
		tm.t.Fatal(err)
	}
}

// expect waits for want after what the last expect matched.
func (tm *term) expect(want string) {
	tm.t.Helper()
	timeout := time.After(deadline)
	for {
		tm.out.mu.Lock()
		text, changed := tm.out.buf.String(), tm.out.changed
		if i := strings.Index(text[tm.out.mark:], want); i >= 0 {
			tm.out.mark += i + len(want)
			tm.out.mu.Unlock()
			return
		}
		tm.out.mu.Unlock()
		select {
		case <-changed:
		case err := <-tm.done:
			tm.done <- err
			tm.t.Fatalf("the terminal ended (%v) without printing %q:\n%s", err, want, tm.out.String())
		case <-timeout:
			tm.t.Fatalf("no %q within %s:\n%s", want, deadline, tm.out.String())
		}
	}
}

// quit leaves with /quit and waits for Run to return.
func (tm *term) quit() {
	tm.t.Helper()
	tm.send("/quit")
	select {
	case err := <-tm.done:
		tm.done <- err // for the cleanup
		if err != nil {
			tm.t.Fatalf("Run: %v", err)
		}
	case <-time.After(deadline):
		tm.t.Fatalf("/quit did not end the terminal:\n%s", tm.out.String())
	}
}

// person is someone in another channel, attached to a session through
// the manager as their listener would be.
type person struct {
	t      *testing.T
	mgr    *sessions.Manager
	author switchboard.Author
	sub    *sessions.Subscription

	mu      sync.Mutex
	events  []switchboard.Event
	read    int // events before it were looked at by await
	changed chan struct{}
	ended   chan struct{}
}

// attach opens (or creates, by key) a session for a.
func attach(t *testing.T, mgr *sessions.Manager, a switchboard.Author, opts sessions.AttachOptions) *person {
	t.Helper()
	opts.Author, opts.AfterSeq = a, -1
	sub, err := mgr.Attach(context.Background(), opts)
	if err != nil {
		t.Fatalf("attach %s: %v", a.Name, err)
	}
	p := &person{t: t, mgr: mgr, author: a, sub: sub, changed: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(p.ended)
		for ev := range sub.Events() {
			p.mu.Lock()
			p.events = append(p.events, ev)
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	t.Cleanup(p.leave)
	return p
}

// leave closes the person's place (a tab closed).
func (p *person) leave() {
	p.sub.Close()
	<-p.ended
}

func (p *person) session() string { return p.sub.Ready.Session }

// say submits a line as the person and waits until the session is done
// with it.
func (p *person) say(text string) {
	p.t.Helper()
	p.submit(switchboard.Input{Kind: switchboard.InputText, Text: text})
}

func (p *person) submit(in switchboard.Input) {
	p.t.Helper()
	in.Author = p.author
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	r, err := p.mgr.Submit(ctx, p.session(), in)
	if err != nil {
		p.t.Fatalf("%s: submit %+v: %v", p.author.Name, in, err)
	}
	if _, err := r.Wait(ctx); err != nil {
		p.t.Fatalf("%s: wait for %+v: %v", p.author.Name, in, err)
	}
}

// await waits for an event that f accepts, after the one the last await
// returned, and returns its payload.
func (p *person) await(what string, f func(switchboard.Event, any) bool) any {
	p.t.Helper()
	timeout := time.After(deadline)
	for {
		p.mu.Lock()
		evs, changed, from := p.events[p.read:], p.changed, p.read
		p.mu.Unlock()
		for i, ev := range evs {
			payload, err := ev.Payload()
			if err == nil && f(ev, payload) {
				p.mu.Lock()
				p.read = from + i + 1
				p.mu.Unlock()
				return payload
			}
		}
		select {
		case <-changed:
		case <-timeout:
			p.t.Fatalf("%s never got %s", p.author.Name, what)
		}
	}
}

var inviteRE = regexp.MustCompile(`Invite code ([a-z2-7]{26})`)

// share answers the person's /share with its code.
func (p *person) share(args string) string {
	p.t.Helper()
	p.say("/share " + args)
	var code string
	p.await("an invite code", func(_ switchboard.Event, payload any) bool {
		if d, ok := payload.(*switchboard.ErrorData); ok && d.Code == sessions.NoticeInfo {
			if m := inviteRE.FindStringSubmatch(d.Message); m != nil {
				code = m[1]
				return true
			}
		}
		return false
	})
	return code
}

// carolsThread is Carol's Slack conversation, with one exchange in it.
func carolsThread(t *testing.T, gw *sessionstest.Gateway) *person {
	t.Helper()
	c := attach(t, gw.Manager, carol, sessions.AttachOptions{Key: "slack:T1:C1:1700000000.000100"})
	c.say("hello from slack")
	return c
}

func binding(t *testing.T, gw *sessionstest.Gateway) (string, bool) {
	t.Helper()
	b, err := gw.Manager.Binding(context.Background(), Channel, Address)
	if errors.Is(err, switchboard.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.SessionID, true
}

// /join CODE: the terminal shows the shared conversation from a short
// recap, labels the others' messages with their channel, writes into it
// (marked with the terminal's place), tells who comes and goes, and does
// not ask a member the approval questions it may not answer.
func TestJoinShowsTheSharedConversation(t *testing.T) {
	gw := newGateway(t)
	c := carolsThread(t, gw)
	code := c.share("member")

	tm := startTerm(t, gw.Manager)
	tm.expect("Type /help for commands")
	tm.send("my own question")
	tm.expect("You said: my own question")
	tm.send("/join " + code)
	tm.expect("Joined Carol's shared conversation as member. /leave returns to your own.\n")
	tm.expect("── earlier in this conversation ──\n")
	tm.expect("Carol · Slack: hello from slack\n")
	tm.expect("You said: ")
	if sid, ok := binding(t, gw); !ok || sid != c.session() {
		t.Fatalf("the terminal's place is bound to %q (%v), want Carol's session %s", sid, ok, c.session())
	}
	if strings.Contains(tm.out.String(), "Carol (Slack) is here") {
		t.Errorf("the roster as joined was told as news:\n%s", tm.out.String())
	}

	// Carol writes: the terminal shows it labelled, with the answer.
	c.say("second from slack")
	tm.expect("Carol · Slack: second from slack\n")
	tm.expect("You said: ")

	// The terminal writes into Carol's session, from its place.
	tm.send("hello from the terminal")
	got := c.await("the terminal's message", func(_ switchboard.Event, payload any) bool {
		d, ok := payload.(*switchboard.MessageData)
		return ok && d.Role == switchboard.RoleUser && d.Content == "hello from the terminal"
	}).(*switchboard.MessageData)
	if got.Channel != Channel || got.AuthorID != tester.ID || got.Place != Place {
		t.Errorf("the terminal's message: channel %q author %q place %q", got.Channel, got.AuthorID, got.Place)
	}
	tm.expect("You said: ")
	if strings.Contains(tm.out.String(), "tester · Terminal") {
		t.Errorf("the terminal's own message was shown back to it:\n%s", tm.out.String())
	}

	// Dan opens the conversation in a browser (he joins, and is here: one
	// piece of news), closes it, and comes back.
	d := attach(t, gw.Manager, dan, sessions.AttachOptions{SessionID: c.session()})
	tm.expect("  Dan (Web) joined\n")
	d.leave()
	tm.expect("  Dan left\n")
	d = attach(t, gw.Manager, dan, sessions.AttachOptions{SessionID: c.session()})
	tm.expect("  Dan (Web) is here\n")
	if n := strings.Count(tm.out.String(), "Dan (Web)"); n != 2 {
		t.Errorf("Dan's arrivals were told %d times, want 2:\n%s", n, tm.out.String())
	}
	d.leave()

	// A tool call waits for an approver: a member is told, not asked, and
	// what it types next is a message (which the session holds back
	// until the call is answered), not an answer.
	c.say("what time is it?")
	tm.expect(`current_time {"timezone":"UTC"} waits for approval by the owner or an approver`)
	tm.send("y")
	tm.expect("! A tool call is waiting for approval")
	if out := tm.out.String(); strings.Contains(out, "Approve? [y/N") || strings.Contains(out, "may not approve") {
		t.Errorf("a member was asked to approve, or its line taken as an answer:\n%s", out)
	}
	tm.quit()
}

// A code that does not work says why and changes nothing; /join alone
// says how it is used.
func TestJoinRefused(t *testing.T) {
	gw := newGateway(t)
	c := carolsThread(t, gw)
	code := c.share("member")
	c.say("/unshare")

	tm := startTerm(t, gw.Manager)
	tm.expect("Type /help for commands")
	tm.send("/join")
	tm.expect("Usage: /join CODE")
	tm.send("/join aaaaaaaaaaaaaaaaaaaaaaaaaa")
	tm.expect("! Not joined: that invite code is not known.\n")
	tm.send("/join " + code)
	tm.expect("! Not joined: that invite code was withdrawn.\n")
	tm.send("where am I?")
	tm.expect("You said: where am I?")
	if sid, ok := binding(t, gw); ok {
		t.Fatalf("a refused code bound the terminal to %s", sid)
	}
	if strings.Contains(tm.out.String(), "hello from slack") {
		t.Fatalf("a refused code showed the conversation:\n%s", tm.out.String())
	}
	tm.quit()
}

// The joined conversation is the one the terminal shows after a restart
// of the gateway; /leave then brings it back to its own, with a recap,
// and the lines typed after /leave go there.
func TestRestartKeepsTheJoinedSessionAndLeaveReturns(t *testing.T) {
	gw := newGateway(t)
	c := carolsThread(t, gw)
	code := c.share("member")
	carols := c.session()

	tm := startTerm(t, gw.Manager)
	tm.send("my own question")
	tm.expect("You said: my own question")
	tm.send("/join " + code)
	tm.expect("Joined Carol's shared conversation as member.")
	tm.quit()
	c.leave()

	gw.Restart()
	tm = startTerm(t, gw.Manager)
	tm.expect("Switchboard · session " + carols)
	tm.expect("This terminal shows Carol's shared conversation; you are a member there. /leave returns to your own.\n")
	tm.expect("Carol · Slack: hello from slack\n")
	tm.send("back after the restart")
	tm.expect("You said: ")

	// /leave and a line typed right after it, before the switch.
	tm.send("/leave", "after leaving")
	tm.expect("tester took this conversation out of a Terminal place")
	tm.expect("Back in your own conversation.\n")
	tm.expect("── earlier in this conversation ──\n")
	tm.expect("> my own question\n")
	tm.expect("You said: after leaving")
	if sid, ok := binding(t, gw); ok {
		t.Fatalf("the terminal is still bound to %s after /leave", sid)
	}
	tm.quit()

	// Each line went to the conversation it was typed in.
	msgs := map[string]string{}
	for _, sid := range []string{carols, ownSession(t, gw)} {
		evs, err := gw.DB.EventsAfter(context.Background(), sid, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if p, err := ev.Payload(); err == nil {
				if d, ok := p.(*switchboard.MessageData); ok && d.Role == switchboard.RoleUser {
					msgs[d.Content] = sid
				}
			}
		}
	}
	for text, want := range map[string]string{"back after the restart": carols, "after leaving": ownSession(t, gw)} {
		if msgs[text] != want {
			t.Errorf("%q went to %q, want %q", text, msgs[text], want)
		}
	}
}

func ownSession(t *testing.T, gw *sessionstest.Gateway) string {
	t.Helper()
	rec, err := gw.DB.SessionByKey(context.Background(), Key)
	if err != nil {
		t.Fatal(err)
	}
	return rec.ID
}

// goneBinding is the manager with the terminal's place bound to a session
// that is no more (one the store lost): a binding is deleted with its
// session, so this is the case of a store that disagrees with itself.
type goneBinding struct {
	*sessions.Manager
	mu       sync.Mutex
	unbound  bool
	attached []string
}

func (g *goneBinding) Binding(ctx context.Context, channel, address string) (switchboard.Binding, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unbound {
		return switchboard.Binding{}, switchboard.ErrNotFound
	}
	return switchboard.Binding{Channel: channel, Address: address, SessionID: "s_gone"}, nil
}

func (g *goneBinding) Unbind(ctx context.Context, channel, address string) error {
	g.mu.Lock()
	g.unbound = true
	g.mu.Unlock()
	return g.Manager.Unbind(ctx, channel, address)
}

// A terminal bound to a session that is gone says so, unbinds and shows
// its own.
func TestBoundSessionGoneFallsBackToOwn(t *testing.T) {
	gw := newGateway(t)
	mgr := &goneBinding{Manager: gw.Manager}
	tm := startTerm(t, mgr)
	tm.expect("Type /help for commands")
	tm.expect("The shared conversation this terminal showed is gone; back in your own.\n")
	tm.send("hello")
	tm.expect("You said: hello")
	mgr.mu.Lock()
	unbound := mgr.unbound
	mgr.mu.Unlock()
	if !unbound {
		t.Error("the gone session's binding was kept")
	}
	tm.quit()
}

// An approver in the terminal answers typed; a question answered
// elsewhere is taken back with who answered and from where, and a "y"
// typed for it is not sent as a message.
func TestApprovalsInASharedSession(t *testing.T) {
	gw := newGateway(t)
	c := carolsThread(t, gw)
	code := c.share("approver")

	tm := startTerm(t, gw.Manager)
	tm.expect("Type /help for commands")
	tm.send("/join " + code)
	tm.expect("Joined Carol's shared conversation as approver.")

	// Answered in the terminal.
	tm.send("what time is it?")
	tm.expect(`Run current_time {"timezone":"UTC"}? Approve? [y/N/a=always] `)
	tm.send("y")
	tm.expect("approved by tester\n")
	res := c.await("the terminal's answer", func(_ switchboard.Event, payload any) bool {
		_, ok := payload.(*switchboard.ConfirmationResolvedData)
		return ok
	}).(*switchboard.ConfirmationResolvedData)
	if !res.Approved || res.By != "tester" || res.Channel != Channel {
		t.Errorf("the terminal's answer as resolved: %+v", res)
	}
	tm.expect("Done: ")

	// Answered by Carol on Slack while the terminal asks.
	c.say("and the time now?")
	req := c.await("the second request", func(_ switchboard.Event, payload any) bool {
		_, ok := payload.(*switchboard.ConfirmationRequestData)
		return ok
	}).(*switchboard.ConfirmationRequestData)
	tm.expect(`Run current_time {"timezone":"UTC"}? Approve? [y/N/a=always] `)
	c.submit(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	tm.expect("current_time approved by Carol · Slack; no answer needed here\n")
	tm.expect("Done: ")
	tm.send("y")
	tm.expect(`Not sent: current_time approved by Carol · Slack. Type "y" again to send it as a message.`)
	tm.send("one more")
	tm.expect("You said: ")
	tm.quit()
	for _, r := range gw.LLM.Requests() {
		for _, m := range r.Messages {
			if m.Role == "user" && strings.HasSuffix(openaitest.Text(m.Content), "y") {
				t.Fatalf("the stale answer reached the model: %q", openaitest.Text(m.Content))
			}
		}
	}
}

// A viewer sees the conversation; what it writes is refused with the
// reason, and it may still ask who is here.
func TestViewerMayNotWrite(t *testing.T) {
	gw := newGateway(t)
	c := carolsThread(t, gw)
	code := c.share("viewer")

	tm := startTerm(t, gw.Manager)
	tm.expect("Type /help for commands")
	tm.send("/join "+code, "may I?", "/who")
	tm.expect("Joined Carol's shared conversation as viewer.")
	tm.expect("tester is a viewer in this session and may not write")
	tm.expect("2 people in this conversation:")
	tm.expect("tester · Terminal · viewer · here now")
	if strings.Contains(tm.out.String(), "! 2 people") {
		t.Errorf("an answer to /who is shown as an error:\n%s", tm.out.String())
	}
	tm.quit()
}

// /reset in a joined conversation (an approver may) goes on in the new
// one, which the terminal's place is then bound to.
func TestResetInAJoinedSessionStaysBound(t *testing.T) {
	gw := newGateway(t)
	c := carolsThread(t, gw)
	code := c.share("approver")

	tm := startTerm(t, gw.Manager)
	tm.expect("Type /help for commands")
	tm.send("/join " + code)
	tm.expect("Joined Carol's shared conversation as approver.")
	tm.send("/reset", "in the new one")
	tm.expect("tester started a new conversation: ")
	tm.expect("You said: in the new one")
	sid, ok := binding(t, gw)
	if !ok || sid == c.session() {
		t.Fatalf("after /reset the terminal is bound to %q (%v); want the new conversation", sid, ok)
	}
	tm.quit()
}

// A conversation shown in as many places as it may be: the terminal is
// told so, shows nothing of it, and the code keeps its use.
func TestJoinWhenShownInTooManyPlaces(t *testing.T) {
	gw := sessionstest.NewTuned(t, "../../guides", slog.New(slog.NewTextHandler(io.Discard, nil)), func(c *sessions.Config) { c.MaxBindings = 1 })
	gw.LLM.Respond(model)
	c := carolsThread(t, gw)
	code := c.share("member uses 1")
	if _, err := gw.Manager.Bind(context.Background(), "slack", "T1:C9:1.1", c.session()); err != nil {
		t.Fatal(err)
	}
	tm := startTerm(t, gw.Manager)
	tm.expect("Type /help for commands")
	tm.send("/join " + code)
	tm.expect("! Not joined, and the code is not used: this conversation is already shown in as many places as it may be")
	if sid, ok := binding(t, gw); ok {
		t.Fatalf("the terminal was bound to %s", sid)
	}
	if err := gw.Manager.Unbind(context.Background(), "slack", "T1:C9:1.1"); err != nil {
		t.Fatal(err)
	}
	tm.send("/join " + code)
	tm.expect("Joined Carol's shared conversation as member.")
	tm.quit()
}
