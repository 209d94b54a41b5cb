package places_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// chat is a chat app with nothing of a platform: its places' Rooms write
// down what they were asked to show.
type chat struct {
	t     *testing.T
	gw    *sessionstest.Gateway
	layer *places.Layer
	ctx   context.Context

	mu    sync.Mutex
	rooms []*room
	gate  error // what Gate answers
}

type room struct {
	c        *chat
	b        switchboard.Binding
	shown    []switchboard.Event // what Show was given, in order
	told     []string            // what Tell was given: "user: message"
	attached int
	finished int
}

func (r *room) Attached(_ context.Context, b switchboard.Binding, _, _ int64) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.b = b
	r.attached++
}

func (r *room) Show(_ context.Context, ev switchboard.Event, _ any) bool {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.shown = append(r.shown, ev)
	return true
}

func (r *room) Tick(context.Context) {}

func (r *room) Tell(_ context.Context, user string, d *switchboard.ErrorData) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.told = append(r.told, user+": "+d.Message)
}

func (r *room) Finish(context.Context) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.finished++
}

func newChat(t *testing.T) *chat {
	t.Helper()
	return newTunedChat(t, nil, nil)
}

// newTunedChat is newChat with the session manager's configuration and
// the layer's changed by manager and layer.
func newTunedChat(t *testing.T, manager func(*sessions.Config), layer func(*places.Config)) *chat {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &chat{t: t, gw: sessionstest.NewTuned(t, "../guides", log, manager)}
	cfg := places.Config{
		Channel: "test", Sessions: c.gw.Manager, Log: log, Interval: 10 * time.Millisecond,
		NewRoom: func(b switchboard.Binding) (places.Room, error) {
			if strings.HasPrefix(b.Address, "bad") {
				return nil, errors.New("not a place")
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			r := &room{c: c, b: b}
			c.rooms = append(c.rooms, r)
			return r, nil
		},
		Gate: func(_ context.Context, _ switchboard.Binding, in *switchboard.Input) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			in.Grant = "" // the chat app vouches for no one here
			return c.gate
		},
		Words: places.Words{Strong: func(s string) string { return "*" + s + "*" }, JoinHint: "Join in a new thread."},
	}
	if layer != nil {
		layer(&cfg)
	}
	c.layer = places.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	c.ctx = ctx
	c.layer.Start(ctx)
	c.layer.Resume()
	t.Cleanup(func() {
		cancel()
		c.layer.Wait()
	})
	return c
}

var (
	alice = switchboard.Author{Channel: "test", ID: "U1", Name: "Alice"}
	bob   = switchboard.Author{Channel: "test", ID: "U2", Name: "Bob"}
)

// eventually waits for cond, failing the test after 10 s with what was
// wanted.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// roomsOf are the Rooms made for a place, oldest first.
func (c *chat) roomsOf(address string) []*room {
	c.mu.Lock()
	defer c.mu.Unlock()
	var rs []*room
	for _, r := range c.rooms {
		if r.b.Address == address {
			rs = append(rs, r)
		}
	}
	return rs
}

// said reports whether a place's Rooms were shown a message by role
// containing text.
func (c *chat) said(address string, role switchboard.MessageRole, text string) bool {
	for _, r := range c.roomsOf(address) {
		c.mu.Lock()
		evs := slices.Clone(r.shown)
		c.mu.Unlock()
		for _, ev := range evs {
			if p, err := ev.Payload(); err == nil {
				if m, ok := p.(*switchboard.MessageData); ok && m.Role == role && strings.Contains(m.Content, text) {
					return true
				}
			}
		}
	}
	return false
}

// A place's events are shown once each, in order, and how far it was
// shown is recorded with its binding at the turn's end.
func TestFollowShowsEachEventOnceInOrderAndRecordsIt(t *testing.T) {
	c := newChat(t)
	c.gw.LLM.Push(openaitest.Reply{Text: []string{"Hello ", "there"}}, openaitest.Reply{Text: []string{"Again"}})
	b, err := c.layer.SessionAt(c.ctx, "p1", alice, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.layer.SubmitText(c.ctx, b, switchboard.Input{Author: alice, Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the answer shown", func() bool { return c.said("p1", switchboard.RoleAssistant, "Hello there") })
	if err := c.layer.SubmitText(c.ctx, b, switchboard.Input{Author: alice, Text: "once more"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second answer shown", func() bool { return c.said("p1", switchboard.RoleAssistant, "Again") })

	var last int64
	eventually(t, "progress recorded", func() bool {
		stored, err := c.layer.Binding(c.ctx, "p1")
		last = stored.RenderedSeq
		return err == nil && last > 0 && c.said("p1", switchboard.RoleAssistant, "Again") && shownThrough(c, "p1") == last
	})
	seen := map[int64]bool{}
	prev := int64(0)
	for _, r := range c.roomsOf("p1") {
		for _, ev := range r.shown {
			if ev.Seq <= 0 {
				continue
			}
			if seen[ev.Seq] || ev.Seq < prev {
				t.Fatalf("event %d shown twice or out of order (after %d)", ev.Seq, prev)
			}
			seen[ev.Seq], prev = true, ev.Seq
		}
	}
	if len(c.roomsOf("p1")) != 1 {
		t.Fatalf("one place, one session: %d Rooms", len(c.roomsOf("p1")))
	}
}

// shownThrough is the last stored event a place's Rooms were shown.
func shownThrough(c *chat, address string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var last int64
	for _, r := range c.rooms {
		if r.b.Address == address {
			for _, ev := range r.shown {
				last = max(last, ev.Seq)
			}
		}
	}
	return last
}

// /reset binds the place to the new conversation, which a new Room shows;
// /leave ends the place's following once the session's line about it is
// shown.
func TestResetAndLeave(t *testing.T) {
	c := newChat(t)
	c.gw.LLM.Push(openaitest.Reply{Text: []string{"first"}}, openaitest.Reply{Text: []string{"second"}})
	b, err := c.layer.SessionAt(c.ctx, "p1", alice, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.layer.SubmitText(c.ctx, b, switchboard.Input{Author: alice, Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first answer", func() bool { return c.said("p1", switchboard.RoleAssistant, "first") })
	if err := c.layer.SubmitText(c.ctx, b, switchboard.Input{Author: alice, Text: "/reset"}); err != nil {
		t.Fatal(err)
	}
	nb, err := c.layer.Binding(c.ctx, "p1")
	if err != nil || nb.SessionID == b.SessionID {
		t.Fatalf("after /reset the place shows %q (was %q): %v", nb.SessionID, b.SessionID, err)
	}
	if err := c.layer.SubmitText(c.ctx, nb, switchboard.Input{Author: alice, Text: "hello again"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new conversation shown by a Room of its own", func() bool {
		rs := c.roomsOf("p1")
		return len(rs) == 2 && rs[1].b.SessionID == nb.SessionID && c.said("p1", switchboard.RoleAssistant, "second")
	})

	if err := c.layer.SubmitText(c.ctx, nb, switchboard.Input{Author: alice, Text: "/leave"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.layer.Binding(c.ctx, "p1"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("after /leave the place is still bound: %v", err)
	}
	eventually(t, "the place's following ended", func() bool {
		rs := c.roomsOf("p1")
		c.mu.Lock()
		defer c.mu.Unlock()
		return rs[1].finished > 0
	})
}

// The chat app's Gate has the first say on every input: what it refuses
// never reaches the session, and the writer is told why in a sentence.
func TestGateRefusesBeforeTheSession(t *testing.T) {
	c := newChat(t)
	b, err := c.layer.SessionAt(c.ctx, "p1", alice, true)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.gate = places.NotAllowed("this channel is not one I answer in")
	c.mu.Unlock()
	err = c.layer.SubmitText(c.ctx, b, switchboard.Input{Author: alice, Text: "hi"})
	if !errors.Is(err, sessions.ErrForbidden) {
		t.Fatalf("refused input: %v", err)
	}
	if got, want := places.Refused(err), "Not sent: this channel is not one I answer in."; got != want {
		t.Fatalf("told %q, want %q", got, want)
	}
	if n := len(c.gw.LLM.Requests()); n != 0 {
		t.Fatalf("the model was asked %d times", n)
	}
	if c.said("p1", switchboard.RoleUser, "hi") {
		t.Fatal("a refused message reached the session")
	}
}

// Run keeps each place's order, whatever else is queued; before Start it
// drops the work, after the layer stopped it returns.
func TestRunKeepsEachPlacesOrder(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gw := sessionstest.New(t, "../guides", log)
	l := places.New(places.Config{Channel: "test", Sessions: gw.Manager, Log: log, Workers: 4, Depth: 2,
		NewRoom: func(switchboard.Binding) (places.Room, error) { return nil, errors.New("none") }})
	l.Run("early", func() { t.Error("work queued before Start ran") })
	ctx, cancel := context.WithCancel(context.Background())
	l.Start(ctx)
	var mu sync.Mutex
	got := map[string][]int{}
	var wg sync.WaitGroup
	for _, place := range []string{"a", "b", "c", "d", "e"} {
		wg.Go(func() {
			for i := range 200 {
				l.Run(place, func() {
					mu.Lock()
					got[place] = append(got[place], i)
					mu.Unlock()
				})
			}
		})
	}
	wg.Wait()
	done := make(chan struct{})
	l.Run("a", func() { close(done) })
	<-done
	eventually(t, "every place's work done", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range []string{"a", "b", "c", "d", "e"} {
			if len(got[p]) != 200 {
				return false
			}
		}
		return true
	})
	for p, seq := range got {
		if !slices.IsSorted(seq) {
			t.Fatalf("place %s's work ran out of order: %v", p, seq)
		}
	}
	cancel()
	l.Wait()
	l.Run("a", func() {}) // stopped: returns, nothing runs it
}

// Audience: who in a place is shown an error event.
func TestAudience(t *testing.T) {
	c := newChat(t)
	b := switchboard.Binding{Channel: "test", Address: "p1", SessionID: "s1"}
	if _, err := c.layer.Submit(c.ctx, switchboard.Binding{Channel: "test", Address: "p2", SessionID: "s1"},
		switchboard.Input{Kind: switchboard.InputText, Author: bob, Text: "hi"}); err == nil {
		t.Fatal("an input for a session that does not exist was taken")
	} // Bob asked in p2 (noted even though the session refused)
	for _, tc := range []struct {
		name string
		seq  int64
		d    switchboard.ErrorData
		user string
		show bool
	}{
		{"everyone's", 3, switchboard.ErrorData{Message: "the model failed"}, "", true},
		{"stored, though for one", 4, switchboard.ErrorData{For: "test:U1"}, "", true},
		{"a redelivery", 0, switchboard.ErrorData{Code: switchboard.ErrCodeDuplicate}, "", false},
		{"one person's here", 0, switchboard.ErrorData{For: "test:U1"}, "U1", true},
		{"one person's, asked elsewhere", 0, switchboard.ErrorData{For: "test:U2"}, "", false},
		{"another channel's person", 0, switchboard.ErrorData{For: "web:U1"}, "", false},
	} {
		user, show := c.layer.Audience(b, switchboard.Event{Seq: tc.seq}, &tc.d)
		if user != tc.user || show != tc.show {
			t.Errorf("%s: (%q, %v), want (%q, %v)", tc.name, user, show, tc.user, tc.show)
		}
	}
}

// joinLine is a join's line in a place, written down.
type joinLine struct {
	mu      sync.Mutex
	refuse  error
	text    map[string]string // id → text
	deleted []string
}

func (l *joinLine) Post(_ context.Context, text string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse != nil {
		return "", l.refuse
	}
	if l.text == nil {
		l.text = map[string]string{}
	}
	id := fmt.Sprint("m", len(l.text)+1)
	l.text[id] = text
	return id, nil
}

func (l *joinLine) Edit(_ context.Context, id, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text[id] = text
}

func (l *joinLine) Delete(_ context.Context, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deleted = append(l.deleted, id)
}

func (l *joinLine) CannotPost(err error) string { return "I may not post here (" + err.Error() + ")." }

// share is an invite code to the session bound at address, made by its
// owner with /share.
func share(t *testing.T, c *chat, address string, role string) string {
	t.Helper()
	b, err := c.layer.SessionAt(c.ctx, address, alice, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.layer.SubmitText(c.ctx, b, switchboard.Input{Author: alice, Text: "/share " + role}); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`/join (\S+)`)
	var code string
	eventually(t, "the invite code, told to its owner alone", func() bool {
		for _, r := range c.roomsOf(address) {
			c.mu.Lock()
			told := slices.Clone(r.told)
			c.mu.Unlock()
			for _, line := range told {
				if m := re.FindStringSubmatch(line); m != nil && strings.HasPrefix(line, alice.ID+": ") {
					code = strings.TrimSuffix(m[1], ".")
				}
			}
		}
		return code != ""
	})
	return code
}

func where(address string, direct bool, noun string) places.Where {
	return places.Where{Address: address, Direct: direct, Noun: noun}
}

// A join proves the place by posting its line, which then says who
// joined; what goes wrong is told and spends no code.
func TestJoin(t *testing.T) {
	c := newChat(t)
	code := share(t, c, "p1", "member uses 1")
	b1, _ := c.layer.Binding(c.ctx, "p1")

	var told []string
	tell := func(s string) { told = append(told, s) }

	// A place the bot may not post in: refused with the platform's
	// reason, the code not used.
	cannot := &joinLine{refuse: errors.New("missing access")}
	if _, ok := c.layer.Join(c.ctx, where("p2", false, "thread"), bob, code, cannot, tell, false); ok {
		t.Fatal("joined a place the bot cannot post in")
	}
	if want := "Not joined, and the code is not used: I may not post here (missing access)."; len(told) != 1 || told[0] != want {
		t.Fatalf("told %q, want %q", told, want)
	}

	// Alice's own thread shows her conversation: a code for another one
	// may not take it over, and nothing is posted there.
	other := share(t, c, "p9", "member")
	l1 := &joinLine{}
	if _, ok := c.layer.Join(c.ctx, where("p1", false, "thread"), bob, other, l1, tell, false); ok {
		t.Fatal("a join took over a thread that shows another conversation")
	}
	if len(l1.text) != 0 || !strings.HasSuffix(told[1], "Join in a new thread.") || !strings.HasPrefix(told[1], "Not joined, and the code is not used: ") {
		t.Fatalf("posted %v, told %q", l1.text, told[1])
	}
	if b, _ := c.layer.Binding(c.ctx, "p1"); b.SessionID != b1.SessionID {
		t.Fatal("the thread was rebound")
	}

	// The one use is still there: the join goes through, the line says so.
	l2 := &joinLine{}
	role, ok := c.layer.Join(c.ctx, where("p2", false, "thread"), bob, code, l2, tell, false)
	if !ok || role != "member" {
		t.Fatalf("join: %q, %v (told %q)", role, ok, told)
	}
	if want := "*Bob* joined a shared conversation as a member: this thread shows it from now on, beginning with its last messages."; l2.text["m1"] != want {
		t.Fatalf("line %q, want %q", l2.text["m1"], want)
	}
	if b, err := c.layer.Binding(c.ctx, "p2"); err != nil || b.SessionID != b1.SessionID {
		t.Fatalf("p2 shows %q, want %q: %v", b.SessionID, b1.SessionID, err)
	}

	// Used up now: told in the line where the person asked in the open,
	// else privately with the line taken away.
	l3 := &joinLine{}
	if _, ok := c.layer.Join(c.ctx, where("p3", true, "DM"), bob, code, l3, tell, true); ok {
		t.Fatal("a used-up code joined")
	}
	want := "Not joined: " + switchboard.ErrInviteUsedUp.Error() + "."
	if got := told[len(told)-1]; got != want && l3.text["m1"] != want {
		t.Fatalf("told %q, line %q; want %q", got, l3.text, want)
	}
}

func TestWords(t *testing.T) {
	for in, want := range map[string]string{"approve": "/approve", " Denied. ": "/deny", "always!": "/approve always", "approve it": "approve it"} {
		if got := places.TypedAnswer(in); got != want {
			t.Errorf("TypedAnswer(%q) = %q, want %q", in, got, want)
		}
	}
	if code, ok := places.JoinCode("JOIN abc"); !ok || code != "abc" {
		t.Errorf("JoinCode: %q %v", code, ok)
	}
	if _, ok := places.JoinCode("join us for lunch"); ok {
		t.Error("a sentence read as a join")
	}
	if !places.IsCommand(" /Reset now", "reset") || places.IsCommand("/resets", "reset") {
		t.Error("IsCommand")
	}
	if !places.Private("WHO") || places.Private("usage") {
		t.Error("Private")
	}
	if reason, known := places.JoinRefusal(fmt.Errorf("redeem: %w", switchboard.ErrInviteExpired)); !known || reason != switchboard.ErrInviteExpired.Error() {
		t.Errorf("JoinRefusal: %q %v", reason, known)
	}
	if _, known := places.JoinRefusal(errors.New("disk full")); known {
		t.Error("the gateway's own failure told as a reason")
	}
	if got := places.Refused(sessions.ErrBusy); !strings.Contains(got, "still working") {
		t.Errorf("Refused(busy) = %q", got)
	}
}
