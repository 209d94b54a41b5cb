package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// sortedCopy is s sorted, s left as it is.
func sortedCopy(s []string) []string {
	s = append([]string(nil), s...)
	slices.Sort(s)
	return s
}

// textInput is a text from web:u1 with the given client id.
func textInput(clientID, text string) switchboard.Input {
	return switchboard.Input{Kind: switchboard.InputText, ClientID: clientID, Author: switchboard.Author{Channel: "web", ID: "u1"}, Text: text}
}

// seenIDs are those of ids that the session has recorded as seen. Asking
// SeenInput records an id, so one that was not seen is forgotten again (a
// WriteTurn with Forget): the store is left as it was. A session that does
// not exist has seen none, whether its store refuses the question or
// answers it.
func seenIDs(t testing.TB, db Store, session string, ids ...string) []string {
	t.Helper()
	ctx := context.Background()
	_, err := db.Session(ctx, session)
	exists := err == nil
	if !exists && !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatal(err)
	}
	var seen []string
	for _, id := range ids {
		was, err := db.SeenInput(ctx, session, id)
		switch {
		case err != nil && exists:
			t.Fatal(err)
		case err != nil:
		case was:
			seen = append(seen, id)
		default:
			if _, err := db.WriteTurn(ctx, session, switchboard.TurnWrite{ClientID: id, Forget: true}); err != nil && exists {
				t.Fatal(err)
			}
		}
	}
	return seen
}

// snapshot is everything a TurnWrite can change in a session (of the
// client ids, those the tests use).
type snapshot struct {
	messages []string
	events   []string
	seen     []string
	pending  string
	usage    switchboard.Usage
	inbox    []int64
}

func (s snapshot) String() string {
	return fmt.Sprintf("messages %v, events %v, seen %v, pending %q, usage %+v, inbox %v",
		s.messages, s.events, s.seen, s.pending, s.usage, s.inbox)
}

func snap(t testing.TB, db Store, session string) snapshot {
	t.Helper()
	ctx := context.Background()
	var s snapshot
	msgs, err := db.Window(ctx, session, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		s.messages = append(s.messages, describe(m))
	}
	evs, err := db.EventsAfter(ctx, session, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		s.events = append(s.events, fmt.Sprintf("%d:%s", e.Seq, e.Data))
	}
	s.seen = seenIDs(t, db, session, "c0", "c1", "c2", "c3")
	if p, err := db.LoadPending(ctx, session); err == nil {
		s.pending = string(p)
	} else if !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatal(err)
	}
	if sess, err := db.Session(ctx, session); err == nil {
		s.usage = sess.Usage
	} else if !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatal(err)
	}
	inbox, err := db.Inbox(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range inbox {
		s.inbox = append(s.inbox, a.ID)
	}
	return s
}

// A TurnWrite is stored whole or not at all, whichever part fails and
// wherever it fails: before anything is written (a message that cannot be
// encoded), on the first write (an unknown session) or on the last (usage).
func testWriteTurnIsAtomic(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	inboxID, _, err := acceptInput(ctx, db, "s1", textInput("c0", "queued"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{
		Messages: []switchboard.Message{user("u1")},
		Events:   []switchboard.Event{Event("s1", 1, switchboard.EventMessage, `{"n":1}`), Event("s1", 2, switchboard.EventState, `{"n":2}`)},
		Turn:     []byte(`{"v":1}`),
		Usage:    switchboard.Usage{TotalTokens: 1},
	}); err != nil {
		t.Fatal(err)
	}
	before := snap(t, db, "s1")
	if len(before.messages) != 1 || len(before.events) != 2 || before.pending != `{"v":1}` || len(before.inbox) != 1 {
		t.Fatalf("setup: %v", before)
	}

	bad := assistant("", "c1")
	bad.ToolCalls[0].Args = json.RawMessage(`{not json`)
	full := func(session string) switchboard.TurnWrite {
		first := int64(3) // after s1's two; a session without events starts at 1
		if session != "s1" {
			first = 1
		}
		return switchboard.TurnWrite{
			InboxID:  inboxID,
			ClientID: "c1",
			Messages: []switchboard.Message{user("u2"), assistant("a2")},
			Events:   []switchboard.Event{Event(session, first, switchboard.EventMessage, `{"n":3}`), Event(session, first+1, switchboard.EventMessage, `{"n":4}`)},
			Turn:     []byte(`{"v":2}`),
			Usage:    switchboard.Usage{PromptTokens: 5, CompletionTokens: 5, TotalTokens: 10},
		}
	}
	cases := []struct {
		name    string
		session string
		w       func() switchboard.TurnWrite
		want    error
	}{
		{"unencodable message", "s1", func() switchboard.TurnWrite {
			w := full("s1")
			w.Messages = append(w.Messages, bad)
			return w
		}, nil},
		{"events with a gap", "s1", func() switchboard.TurnWrite {
			w := full("s1")
			w.Events = w.Events[1:] // 4 after 2
			return w
		}, switchboard.ErrGap},
		{"a repeated seq", "s1", func() switchboard.TurnWrite {
			w := full("s1")
			w.Events = []switchboard.Event{Event("s1", 2, switchboard.EventError, `{"n":"again"}`)}
			return w
		}, nil},
		{"an event of another session", "s1", func() switchboard.TurnWrite {
			w := full("s1")
			w.Events = append(w.Events, Event("s2", 5, switchboard.EventMessage, `{}`))
			return w
		}, nil},
		{"unknown session", "ghost", func() switchboard.TurnWrite { return full("ghost") }, nil},
		{"unknown session, usage the only failing part", "ghost", func() switchboard.TurnWrite {
			w := full("ghost")
			w.ClientID, w.Messages, w.Turn, w.InboxID = "", nil, nil, 0
			return w
		}, switchboard.ErrNotFound},
		{"unknown session, end of turn", "ghost", func() switchboard.TurnWrite {
			w := full("ghost")
			w.Turn, w.EndTurn = nil, true
			return w
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r Recorder
			w := c.w()
			w.Published = r.Published
			dup, err := db.WriteTurn(ctx, c.session, w)
			if err == nil || dup {
				t.Fatalf("WriteTurn = %v, %v; want an error", dup, err)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("WriteTurn = %v, want %v", err, c.want)
			}
			if after := snap(t, db, "s1"); after.String() != before.String() {
				t.Errorf("s1 changed by a failed write:\nbefore %v\nafter  %v", before, after)
			}
			if ghost := snap(t, db, "ghost"); ghost.String() != (snapshot{}).String() {
				t.Errorf("a failed write stored for ghost: %v", ghost)
			}
			for _, p := range r.Calls() {
				if p.Err == nil {
					t.Errorf("Published told events %v were stored", p.Events)
				}
			}
		})
	}

	// After all that, the same write goes through whole.
	var r Recorder
	w := full("s1")
	w.Published = r.Published
	if dup, err := db.WriteTurn(ctx, "s1", w); err != nil || dup {
		t.Fatalf("WriteTurn = %v, %v", dup, err)
	}
	after := snap(t, db, "s1")
	want := snapshot{
		messages: []string{"u1", "u2", "a2"},
		events:   []string{`1:{"n":1}`, `2:{"n":2}`, `3:{"n":3}`, `4:{"n":4}`},
		seen:     []string{"c0", "c1"},
		pending:  `{"v":2}`,
		usage:    switchboard.Usage{PromptTokens: 5, CompletionTokens: 5, TotalTokens: 11},
	}
	if after.String() != want.String() {
		t.Errorf("after the write:\n got %v\nwant %v", after, want)
	}
	if fmt.Sprint(r.Seqs(true)) != "[3 4]" || len(r.Seqs(false)) != 0 {
		t.Errorf("published %+v, want 3 and 4 stored", r.Calls())
	}
}

// A client id the session has seen makes the write a duplicate: nothing
// of it is stored, and nothing is published.
func testWriteTurnDuplicateWritesNothing(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	if dup, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{
		ClientID: "c1",
		Messages: []switchboard.Message{user("hi")},
		Events:   []switchboard.Event{Event("s1", 1, switchboard.EventMessage, `{}`)},
		Turn:     []byte(`{"v":1}`),
	}); err != nil || dup {
		t.Fatalf("first WriteTurn = %v, %v", dup, err)
	}
	before := snap(t, db, "s1")
	inboxID, _, err := acceptInput(ctx, db, "s1", textInput("c2", "x"))
	if err != nil {
		t.Fatal(err)
	}
	before.seen = append(before.seen, "c2")
	before.inbox = []int64{inboxID}

	var r Recorder
	dup, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{
		InboxID:   inboxID,
		ClientID:  "c1",
		Messages:  []switchboard.Message{user("hi")},
		Events:    []switchboard.Event{Event("s1", 2, switchboard.EventMessage, `{}`)},
		Published: r.Published,
		Turn:      []byte(`{"v":2}`),
		Usage:     switchboard.Usage{TotalTokens: 9},
	})
	if err != nil || !dup {
		t.Fatalf("WriteTurn with a seen client id = %v, %v; want a duplicate", dup, err)
	}
	if after := snap(t, db, "s1"); after.String() != before.String() {
		t.Errorf("a duplicate changed the session:\nbefore %v\nafter  %v", before, after)
	}
	if len(r.Seqs(true)) != 0 {
		t.Errorf("a duplicate's events were published as stored: %+v", r.Calls())
	}
	// The same id with EndTurn is a duplicate too: the turn stays open.
	if dup, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{ClientID: "c1", EndTurn: true}); err != nil || !dup {
		t.Fatalf("WriteTurn(c1, EndTurn) = %v, %v; want a duplicate", dup, err)
	}
	if p, err := db.LoadPending(ctx, "s1"); err != nil || string(p) != `{"v":1}` {
		t.Errorf("open turn after a duplicate EndTurn = %q, %v", p, err)
	}
}

// Forget removes a client id, so an input the session refused can be sent
// again; the rest of the write is stored with it.
func testWriteTurnForget(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	if seen, err := db.SeenInput(ctx, "s1", "c1"); err != nil || seen {
		t.Fatal(seen, err)
	}
	if _, err := db.SeenInput(ctx, "s1", "c2"); err != nil {
		t.Fatal(err)
	}
	var r Recorder
	dup, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{
		ClientID: "c1", Forget: true,
		Events:    []switchboard.Event{Event("s1", 1, switchboard.EventError, `{"code":"busy"}`)},
		Published: r.Published,
	})
	if err != nil || dup {
		t.Fatalf("WriteTurn(Forget) = %v, %v", dup, err)
	}
	if got := fmt.Sprint(seenIDs(t, db, "s1", "c1", "c2", "never")); got != "[c2]" {
		t.Errorf("seen ids after Forget = %s, want [c2]", got)
	}
	if fmt.Sprint(r.Seqs(true)) != "[1]" {
		t.Errorf("published %+v, want event 1 stored", r.Calls())
	}
	// Forgetting an id never seen is not an error.
	if dup, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{ClientID: "never", Forget: true}); err != nil || dup {
		t.Errorf("Forget of an unseen id = %v, %v", dup, err)
	}
	// The input goes through when sent again.
	if dup, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{ClientID: "c1", Messages: []switchboard.Message{user("hi")}}); err != nil || dup {
		t.Fatalf("WriteTurn(c1) after Forget = %v, %v; want it stored", dup, err)
	}
	if n, err := db.MessageCount(ctx, "s1"); err != nil || n != 1 {
		t.Errorf("MessageCount = %d, %v; want 1", n, err)
	}
	if got := fmt.Sprint(seenIDs(t, db, "s1", "c1", "c2", "never")); got != "[c1 c2]" {
		t.Errorf("seen ids = %s, want [c1 c2]", got)
	}
}

// A turn is open (LoadPending has it) from the write that sets Turn until the
// one with EndTurn; the writes between update it.
func testWriteTurnOpensUpdatesAndEndsTheTurn(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	NewSession(t, db, "s2", "")
	pending := func(session string) string {
		t.Helper()
		p, err := db.LoadPending(ctx, session)
		if errors.Is(err, switchboard.ErrNotFound) {
			return "<none>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(p)
	}
	unfinished := func() string {
		t.Helper()
		ids, err := db.Unfinished(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(sortedCopy(ids))
	}
	steps := []struct {
		w       switchboard.TurnWrite
		pending string
	}{
		{switchboard.TurnWrite{Messages: []switchboard.Message{user("hi")}, Turn: []byte(`{"step":0}`)}, `{"step":0}`},
		{switchboard.TurnWrite{Messages: []switchboard.Message{assistant("", "c1"), result("c1")}, Turn: []byte(`{"step":1}`)}, `{"step":1}`},
		// Neither Turn nor EndTurn: the open turn is left as it is.
		{switchboard.TurnWrite{Usage: switchboard.Usage{TotalTokens: 3}}, `{"step":1}`},
		{switchboard.TurnWrite{Messages: []switchboard.Message{assistant("done")}, EndTurn: true}, "<none>"},
		// Ending a turn that is not open is not an error.
		{switchboard.TurnWrite{EndTurn: true}, "<none>"},
		{switchboard.TurnWrite{Turn: []byte{}}, ""},
	}
	for i, s := range steps {
		if _, err := db.WriteTurn(ctx, "s1", s.w); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := pending("s1"); got != s.pending {
			t.Errorf("step %d: open turn %q, want %q", i, got, s.pending)
		}
		want := "[]"
		if s.pending != "<none>" {
			want = "[s1]"
		}
		if got := unfinished(); got != want {
			t.Errorf("step %d: Unfinished = %s, want %s", i, got, want)
		}
		if got := pending("s2"); got != "<none>" {
			t.Errorf("step %d: s2 has open turn %q", i, got)
		}
	}
	if n, err := db.MessageCount(ctx, "s1"); err != nil || n != 4 {
		t.Errorf("MessageCount = %d, %v; want 4", n, err)
	}
}

// Published is told about a write's events once the whole write is
// committed (a reader sees its message too), before WriteTurn returns.
func testWriteTurnPublishesAfterCommit(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	type seen struct {
		seqs     []int64
		err      error
		events   int
		messages int64
		usage    int
	}
	var calls []seen
	w := switchboard.TurnWrite{
		Messages: []switchboard.Message{user("hi")},
		Events:   []switchboard.Event{Event("s1", 1, switchboard.EventMessage, `{}`), Event("s1", 2, switchboard.EventState, `{}`)},
		Usage:    switchboard.Usage{TotalTokens: 4},
		Published: func(evs []switchboard.Event, err error) {
			s := seen{err: err}
			for _, e := range evs {
				s.seqs = append(s.seqs, e.Seq)
			}
			got, qerr := db.EventsAfter(ctx, "s1", 0, 0)
			n, cerr := db.MessageCount(ctx, "s1")
			sess, serr := db.Session(ctx, "s1")
			if qerr != nil || cerr != nil || serr != nil {
				t.Errorf("reading inside Published: %v %v %v", qerr, cerr, serr)
			}
			s.events, s.messages, s.usage = len(got), n, sess.Usage.TotalTokens
			calls = append(calls, s)
		},
	}
	if dup, err := db.WriteTurn(ctx, "s1", w); err != nil || dup {
		t.Fatalf("WriteTurn = %v, %v", dup, err)
	}
	// Read without a lock: Published must have run before WriteTurn returned.
	if len(calls) != 1 {
		t.Fatalf("Published called %d times by the time WriteTurn returned, want once", len(calls))
	}
	c := calls[0]
	if c.err != nil || fmt.Sprint(c.seqs) != "[1 2]" || c.events != 2 || c.messages != 1 || c.usage != 4 {
		t.Errorf("Published got %+v; want events [1 2], nil error, and a reader seeing 2 events, 1 message and 4 tokens", c)
	}
}

// A WriteTurn's Published hears only of events it stored: a write that
// fails, whichever part failed, returns its error to the caller and tells
// Published nothing.
func testWriteTurnPublishesOnlyWhatItStored(t *testing.T, db Store) {
	ctx := context.Background()
	var early, late Recorder
	// Fails on its message: ghost is not a session.
	if _, err := db.WriteTurn(ctx, "ghost", switchboard.TurnWrite{
		Messages:  []switchboard.Message{user("hi")},
		Events:    []switchboard.Event{Event("ghost", 1, switchboard.EventMessage, `{}`)},
		Published: early.Published,
	}); err == nil {
		t.Fatal("WriteTurn for an unknown session succeeded")
	}
	// Fails on its usage, after the events.
	if _, err := db.WriteTurn(ctx, "ghost", switchboard.TurnWrite{
		Events:    []switchboard.Event{Event("ghost", 1, switchboard.EventMessage, `{}`)},
		Usage:     switchboard.Usage{TotalTokens: 1},
		Published: late.Published,
	}); err == nil {
		t.Fatal("WriteTurn for an unknown session succeeded")
	}
	if n, m := len(early.Calls()), len(late.Calls()); n != 0 || m != 0 {
		t.Errorf("Published told %d times of a write failing before its events, %d times of one failing after them; want 0",
			n, m)
	}
}

// A turn's write that says which events must be stored before it is
// refused, whole, while one of them is missing: a turn's progress is never
// stored past a hole in what its listeners were shown.
func testWriteTurnWaitsForTheEventsBeforeIt(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s", "")
	if err := db.AppendEvents(ctx, nil, Event("s", 1, switchboard.EventMessage, `{}`), Event("s", 2, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	end := switchboard.TurnWrite{Messages: []switchboard.Message{user("answer")}, EndTurn: true, EventsThrough: 3}
	if _, err := db.WriteTurn(ctx, "s", end); !errors.Is(err, switchboard.ErrGap) {
		t.Fatalf("WriteTurn through an unstored event = %v, want ErrGap", err)
	}
	if n, err := db.MessageCount(ctx, "s"); err != nil || n != 0 {
		t.Fatalf("a refused write stored %d messages (%v)", n, err)
	}
	if err := db.AppendEvents(ctx, nil, Event("s", 3, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	if _, err := db.WriteTurn(ctx, "s", end); err != nil {
		t.Fatalf("WriteTurn once event 3 is stored: %v", err)
	}
	if n, err := db.MessageCount(ctx, "s"); err != nil || n != 1 {
		t.Fatalf("%d messages stored (%v), want 1", n, err)
	}
}
