package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// TODO(issue 27): once branch storetest lands, plug the conformance suite
// in here:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Store { return open(t) })
//	}
//
// The tests below cover the store's paths until then.

// Replicas starting at once apply each migration once.
func TestMigrationsAreAppliedOnceByReplicasStartingTogether(t *testing.T) {
	dsn := pg.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			db, err := Open(context.Background(), dsn)
			if err == nil {
				err = db.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	db := openOn(t, dsn)
	if n := count(t, db, `SELECT count(*) FROM schema_migrations`); n != 2 {
		t.Errorf("schema_migrations has %d rows, want 2", n)
	}
}

func TestEventsFromManySessionsLandInOrder(t *testing.T) {
	ctx := context.Background()
	db := open(t, WithQueueSize(64), WithBatchSize(32))
	const sessions, perSession = 8, 200
	var wg sync.WaitGroup
	var r recorder
	for s := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("s%d", s)
			for seq := int64(1); seq <= perSession; seq++ {
				if err := db.AppendEvents(ctx, r.published, ev(id, seq, switchboard.EventDelta, fmt.Sprintf(`{"n":%d}`, seq))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	flush(t, db)
	for s := range sessions {
		id := fmt.Sprintf("s%d", s)
		evs, err := db.EventsAfter(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != perSession {
			t.Fatalf("%s: %d events, want %d", id, len(evs), perSession)
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) || string(e.Data) != fmt.Sprintf(`{"n":%d}`, i+1) || e.Type != switchboard.EventDelta ||
				e.Agent != "assistant" || !e.Time.Equal(t0.Add(time.Duration(i+1)*time.Millisecond)) {
				t.Fatalf("%s event %d = %+v", id, i, e)
			}
		}
		if last, err := db.LastSeq(ctx, id); err != nil || last != perSession {
			t.Errorf("LastSeq(%s) = %d, %v", id, last, err)
		}
	}
	if n := len(r.seqs(true)); n != sessions*perSession || len(r.seqs(false)) != 0 {
		t.Errorf("published %d stored, %d refused", n, len(r.seqs(false)))
	}
	page, err := db.EventsAfter(ctx, "s0", 10, 5)
	if err != nil || len(page) != 5 || page[0].Seq != 11 {
		t.Errorf("EventsAfter(10, 5) = %v, %v", page, err)
	}
}

// A session's events are stored without a hole; another session's events
// in the same batch are stored all the same.
func TestGapIsRefusedAndOtherSessionsAreStored(t *testing.T) {
	ctx := context.Background()
	hold, entered, release := holdCommit()
	db := open(t, hold)
	t.Cleanup(release)
	if err := db.AppendEvents(ctx, nil, ev("first", 1, switchboard.EventState, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	var a, b recorder
	for seq := int64(1); seq <= 3; seq++ {
		if err := db.AppendEvents(ctx, a.published, ev("a", seq, switchboard.EventDelta, `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AppendEvents(ctx, b.published, ev("b", 2, switchboard.EventDelta, `{}`), ev("b", 3, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	var c recorder // after b in the same batch: stored although b failed
	if err := db.AppendEvents(ctx, c.published, ev("c", 1, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	release()
	if err := db.Flush(ctx); !errors.Is(err, ErrGap) {
		t.Errorf("Flush after a gap = %v, want ErrGap", err)
	}
	if got := fmt.Sprint(a.seqs(true)); got != "[1 2 3]" {
		t.Errorf("a stored %v", got)
	}
	if got := fmt.Sprint(c.seqs(true)); got != "[1]" {
		t.Errorf("c stored %v", got)
	}
	if got := fmt.Sprint(b.seqs(false)); got != "[2 3]" || len(b.seqs(true)) != 0 {
		t.Errorf("b refused %v, stored %v", got, b.seqs(true))
	}
	for _, p := range b.calls() {
		if !errors.Is(p.err, ErrGap) {
			t.Errorf("b refused with %v, want ErrGap", p.err)
		}
	}
	appendAndFlush := func(evs ...switchboard.Event) error {
		t.Helper()
		if err := db.AppendEvents(ctx, b.published, evs...); err != nil {
			t.Fatal(err)
		}
		return db.Flush(ctx)
	}
	if err := appendAndFlush(ev("b", 4, switchboard.EventDelta, `{}`)); !errors.Is(err, ErrGap) {
		t.Errorf("b/4 with nothing stored: %v, want ErrGap", err)
	}
	if err := appendAndFlush(ev("b", 1, switchboard.EventDelta, `{}`), ev("b", 2, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatalf("b/1-2: %v", err)
	}
	if err := appendAndFlush(ev("b", 4, switchboard.EventDelta, `{}`)); !errors.Is(err, ErrGap) {
		t.Errorf("b/4 after b/2: %v, want ErrGap", err)
	}
	if err := appendAndFlush(ev("b", 3, switchboard.EventDelta, `{}`)); err != nil {
		t.Errorf("b/3 after b/2: %v", err)
	}
	if last, _ := db.LastSeq(ctx, "b"); last != 3 {
		t.Errorf("LastSeq(b) = %d, want 3", last)
	}
}

// A seq is stored once: a second event with it is refused, and the first
// stays.
func TestRepeatedSeqIsRefused(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	if err := db.AppendEvents(ctx, nil, ev("s", 1, switchboard.EventDelta, `{"v":1}`), ev("s", 2, switchboard.EventDelta, `{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	for _, evs := range [][]switchboard.Event{
		{ev("s", 1, switchboard.EventError, `{"v":"again"}`)},
		{ev("s", 2, switchboard.EventError, `{"v":"again"}`)},
		{ev("s", 3, switchboard.EventDelta, `{"v":3}`), ev("s", 3, switchboard.EventDelta, `{"v":"again"}`)},
	} {
		if err := db.AppendEvents(ctx, nil, evs...); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(ctx); err == nil {
			t.Errorf("%v stored twice: Flush = nil", evs)
		}
	}
	if got := stored(t, db, "s"); len(got) != 2 || got[1] != `{"v":1}` || got[2] != `{"v":2}` {
		t.Errorf("stored %v", got)
	}
}

// published is told once the events are committed, in seq order.
func TestPublishedInSeqOrderAfterCommit(t *testing.T) {
	ctx := context.Background()
	db := open(t, WithBatchSize(16))
	const n = 300
	var (
		mu       sync.Mutex
		order    []int64
		problems []string
		done     = make(chan struct{})
	)
	cb := func(evs []switchboard.Event, err error) {
		var problem string
		if err != nil {
			problem = fmt.Sprintf("refused: %v", err)
		} else if got, qerr := db.EventsAfter(ctx, "s", evs[0].Seq-1, len(evs)); qerr != nil || len(got) != len(evs) {
			problem = fmt.Sprintf("published %d-%d, a reader sees %d (%v)", evs[0].Seq, evs[len(evs)-1].Seq, len(got), qerr)
		}
		mu.Lock()
		defer mu.Unlock()
		if problem != "" {
			problems = append(problems, problem)
		}
		for _, e := range evs {
			order = append(order, e.Seq)
		}
		if len(order) == n {
			close(done)
		}
	}
	for seq := int64(1); seq <= n; seq++ {
		if err := db.AppendEvents(ctx, cb, ev("s", seq, switchboard.EventDelta, `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, db)
	<-done
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	for i, seq := range order {
		if seq != int64(i+1) {
			t.Fatalf("published out of order at %d: %v", i, order[max(0, i-3):i+1])
		}
	}
}

// The queue is bounded: a full queue makes AppendEvents wait, until ctx
// ends.
func TestAppendEventsBlocksWhenQueueIsFull(t *testing.T) {
	hold, entered, release := holdCommit()
	db := open(t, hold, WithQueueSize(2))
	t.Cleanup(release)
	ctx := context.Background()
	if err := db.AppendEvents(ctx, nil, ev("s", 1, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	for seq := int64(2); seq <= 3; seq++ {
		if err := db.AppendEvents(ctx, nil, ev("s", seq, switchboard.EventDelta, `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := db.AppendEvents(short, nil, ev("s", 4, switchboard.EventDelta, `{}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AppendEvents on a full queue = %v, want the deadline", err)
	}
	release()
	flush(t, db)
	if last, _ := db.LastSeq(ctx, "s"); last != 3 {
		t.Errorf("LastSeq = %d, want 3", last)
	}
}

// Close commits what is queued; calls after it are refused.
func TestCloseCommitsQueuedEventsAndRefusesLaterCalls(t *testing.T) {
	ctx := context.Background()
	dsn := pg.NewDatabase(t)
	db, err := Open(ctx, dsn, WithLinger(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 10; seq++ {
		if err := db.AppendEvents(ctx, nil, ev("s", seq, switchboard.EventDelta, `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendEvents(ctx, nil, ev("s", 11, switchboard.EventDelta, `{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("AppendEvents after Close = %v", err)
	}
	if _, err := db.WriteTurn(ctx, "s", switchboard.TurnWrite{}); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteTurn after Close = %v", err)
	}
	if err := db.Flush(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close = %v", err)
	}
	again := openOn(t, dsn)
	if last, _ := again.LastSeq(ctx, "s"); last != 10 {
		t.Errorf("after Close, LastSeq = %d, want 10", last)
	}
}

func user(s string) switchboard.Message {
	return switchboard.Message{Role: switchboard.RoleUser, Content: s}
}

// A turn's write is stored whole or not at all; a duplicate writes
// nothing; events queued after it are stored after it.
func TestWriteTurn(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	newSession(t, db, "s", "")
	var pub recorder
	dup, err := db.WriteTurn(ctx, "s", switchboard.TurnWrite{
		ClientID: "c1", Messages: []switchboard.Message{user("hello"), {Role: switchboard.RoleAssistant, Content: "hi"}},
		Events: []switchboard.Event{ev("s", 1, switchboard.EventMessage, `{"role":"user"}`)}, Published: pub.published,
		Turn: []byte("open"), Usage: switchboard.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7},
		Allowed: []string{"calc"},
	})
	if err != nil || dup {
		t.Fatalf("WriteTurn = %v, %v", dup, err)
	}
	if got := fmt.Sprint(pub.seqs(true)); got != "[1]" {
		t.Errorf("published %v", got)
	}
	if p, err := db.LoadPending(ctx, "s"); err != nil || string(p) != "open" {
		t.Errorf("pending %q, %v", p, err)
	}
	s, _ := db.Session(ctx, "s")
	if s.Usage.TotalTokens != 7 || fmt.Sprint(s.AllowedTools) != "[calc]" {
		t.Errorf("session %+v", s)
	}
	// The same client id again: nothing is written, not even its events.
	dup, err = db.WriteTurn(ctx, "s", switchboard.TurnWrite{ClientID: "c1", Messages: []switchboard.Message{user("again")},
		Events: []switchboard.Event{ev("s", 2, switchboard.EventMessage, `{}`)}, Published: pub.published})
	if err != nil || !dup {
		t.Fatalf("duplicate WriteTurn = %v, %v", dup, err)
	}
	if n, _ := db.MessageCount(ctx, "s"); n != 2 {
		t.Errorf("%d messages after a duplicate, want 2", n)
	}
	if last, _ := db.LastSeq(ctx, "s"); last != 1 || len(pub.calls()) != 1 {
		t.Errorf("a duplicate stored or published its events: last %d, %d publications", last, len(pub.calls()))
	}
	// A gap in the events undoes the whole write.
	_, err = db.WriteTurn(ctx, "s", switchboard.TurnWrite{ClientID: "c2", Messages: []switchboard.Message{user("gap")},
		Events: []switchboard.Event{ev("s", 3, switchboard.EventMessage, `{}`)}, EndTurn: true})
	if !errors.Is(err, ErrGap) {
		t.Fatalf("WriteTurn past a gap = %v, want ErrGap", err)
	}
	if _, err := db.WriteTurn(ctx, "s", switchboard.TurnWrite{EventsThrough: 5}); !errors.Is(err, ErrGap) {
		t.Errorf("EventsThrough past the last event = %v, want ErrGap", err)
	}
	if seen, _ := db.SeenInput(ctx, "s", "c2"); seen {
		t.Error("the client id of a refused write was kept")
	}
	if n, _ := db.MessageCount(ctx, "s"); n != 2 {
		t.Errorf("%d messages after a refused write, want 2", n)
	}
	// Forget takes a client id back.
	if _, err := db.WriteTurn(ctx, "s", switchboard.TurnWrite{ClientID: "c1", Forget: true}); err != nil {
		t.Fatal(err)
	}
	if seen, _ := db.SeenInput(ctx, "s", "c1"); seen {
		t.Error("c1 still seen after Forget")
	}
	if seen, _ := db.SeenInput(ctx, "s", "c1"); !seen {
		t.Error("c1 not seen after SeenInput recorded it")
	}
	// The end of the turn, and usage for a missing session.
	if err := db.AppendMessages(ctx, "s", []switchboard.Message{{Role: switchboard.RoleAssistant, Content: "bye"}}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LoadPending(ctx, "s"); !errors.Is(err, ErrNotFound) {
		t.Errorf("pending after EndTurn: %v", err)
	}
	if _, err := db.WriteTurn(ctx, "nope", switchboard.TurnWrite{Usage: switchboard.Usage{TotalTokens: 1}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("usage for a missing session = %v, want ErrNotFound", err)
	}
	w, err := db.Window(ctx, "s", 10)
	if err != nil || len(w) != 3 || w[0].Content != "hello" || w[2].Content != "bye" {
		t.Errorf("window %+v, %v", w, err)
	}
}

// Events queued before a turn's write are stored before it, and those
// queued after it after it, in one batch.
func TestEventsQueuedAroundAWriteTurnKeepTheirOrder(t *testing.T) {
	ctx := context.Background()
	hold, entered, release := holdCommit()
	db := open(t, hold)
	t.Cleanup(release)
	newSession(t, db, "s", "")
	if err := db.AppendEvents(ctx, nil, ev("x", 1, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	if err := db.AppendEvents(ctx, nil, ev("s", 1, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := db.WriteTurn(ctx, "s", switchboard.TurnWrite{Events: []switchboard.Event{ev("s", 2, switchboard.EventMessage, `{}`)}})
		errc <- err
	}()
	for len(db.queue) < 2 {
		time.Sleep(time.Millisecond)
	}
	if err := db.AppendEvents(ctx, nil, ev("s", 3, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	if got := stored(t, db, "s"); len(got) != 3 {
		t.Errorf("stored %v, want 1-3", got)
	}
}

func TestSummaryAndContext(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	newSession(t, db, "s", "")
	for i := range 5 {
		if err := db.AppendMessages(ctx, "s", []switchboard.Message{user(fmt.Sprint(i))}, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.WriteTurn(ctx, "s", switchboard.TurnWrite{Messages: []switchboard.Message{user("5")},
		Summary: &switchboard.Summary{Text: "0 to 3", Keep: 2}}); err != nil {
		t.Fatal(err)
	}
	sum, msgs, err := db.Context(ctx, "s", 10)
	if err != nil || sum != "0 to 3" || len(msgs) != 2 || msgs[0].Content != "4" || msgs[1].Content != "5" {
		t.Errorf("Context = %q, %+v, %v", sum, msgs, err)
	}
}

func TestAcceptInputInboxAndUnfinished(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	newSession(t, db, "s", "")
	newSession(t, db, "idle", "")
	id1, dup, err := db.AcceptInput(ctx, "s", "k1", switchboard.Input{Text: "one"})
	if err != nil || dup || id1 == 0 {
		t.Fatalf("AcceptInput = %d, %v, %v", id1, dup, err)
	}
	id2, _, err := db.AcceptInput(ctx, "s", "", switchboard.Input{Text: "two"})
	if err != nil || id2 <= id1 {
		t.Fatalf("second AcceptInput = %d, %v", id2, err)
	}
	if id, dup, err := db.AcceptInput(ctx, "s", "k1", switchboard.Input{Text: "one again"}); err != nil || !dup || id != 0 {
		t.Fatalf("duplicate AcceptInput = %d, %v, %v", id, dup, err)
	}
	in, err := db.Inbox(ctx, "s")
	if err != nil || len(in) != 2 || in[0].ID != id1 || in[0].Input.Text != "one" || in[1].Input.Text != "two" {
		t.Fatalf("Inbox = %+v, %v", in, err)
	}
	if u, err := db.Unfinished(ctx); err != nil || fmt.Sprint(u) != "[s]" {
		t.Errorf("Unfinished = %v, %v", u, err)
	}
	if _, err := db.WriteTurn(ctx, "s", switchboard.TurnWrite{InboxID: id1, Messages: []switchboard.Message{user("one")}}); err != nil {
		t.Fatal(err)
	}
	if in, _ := db.Inbox(ctx, "s"); len(in) != 1 || in[0].ID != id2 {
		t.Errorf("Inbox after taking one up = %+v", in)
	}
	exp, err := db.Expired(ctx, time.Now().Add(time.Hour), 10)
	if err != nil || fmt.Sprint(exp) != "[idle]" {
		t.Errorf("Expired = %v, %v (a session with inbox is not)", exp, err)
	}
}

func TestSessionsAndMembers(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	want := newSession(t, db, "old", "stdin")
	got, err := db.SessionByKey(ctx, "stdin")
	if err != nil || got.ID != "old" || !got.CreatedAt.Equal(want.CreatedAt) || got.Guide != "assistant" {
		t.Fatalf("SessionByKey = %+v, %v", got, err)
	}
	if err := db.CreateSession(ctx, switchboard.Session{ID: "new", Key: "stdin"}); !errors.Is(err, ErrExists) {
		t.Errorf("a second session with the key: %v, want ErrExists", err)
	}
	if err := db.CreateSession(ctx, switchboard.Session{ID: "old"}); !errors.Is(err, ErrExists) {
		t.Errorf("a second session with the id: %v, want ErrExists", err)
	}
	if err := db.ClearSessionKey(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	newSession(t, db, "new", "stdin")
	if err := db.SetSessionGuide(ctx, "nope", "g"); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetSessionGuide of nothing: %v", err)
	}
	if _, err := db.Session(ctx, "nope"); !errors.Is(err, ErrNotFound) || !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("Session(nope) = %v", err)
	}
	seen := time.UnixMilli(1_700_000_000_000).UTC()
	for _, m := range []switchboard.Member{{Key: "web:b", Role: "member", Name: "B"}, {Key: "web:a", Role: "owner", Name: "A", LastSeen: seen, Pinned: true}} {
		if err := db.SetMember(ctx, "new", m); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SeenMembers(ctx, "new", map[string]time.Time{"web:a": seen.Add(-time.Hour), "web:b": seen}); err != nil {
		t.Fatal(err)
	}
	ms, err := db.Members(ctx, "new")
	if err != nil || len(ms) != 2 || ms[0].Key != "web:a" || !ms[0].Pinned || !ms[0].LastSeen.Equal(seen) || !ms[1].LastSeen.Equal(seen) {
		t.Errorf("Members = %+v, %v", ms, err)
	}
	if role, err := db.Member(ctx, "new", "web:a"); err != nil || role != "owner" {
		t.Errorf("Member = %q, %v", role, err)
	}
	if err := db.RemoveMember(ctx, "new", "web:a"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Member(ctx, "new", "web:a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("removed member: %v", err)
	}
	if ids, err := db.MemberSessions(ctx, "web:b"); err != nil || fmt.Sprint(ids) != "[new]" {
		t.Errorf("MemberSessions = %v, %v", ids, err)
	}
}

func TestBindings(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	newSession(t, db, "s1", "")
	newSession(t, db, "s2", "")
	b := switchboard.Binding{Channel: "slack", Address: "C1/t1", SessionID: "s1", RenderedSeq: 0, CreatedAt: t0, ByInvite: true}
	if err := db.Bind(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRendered(ctx, "slack", "C1/t1", "s1", 5); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRendered(ctx, "slack", "C1/t1", "s1", 3); err != nil {
		t.Fatal(err)
	}
	if err := db.SetBindingState(ctx, "slack", "C1/t1", "s1", "streaming"); err != nil {
		t.Fatal(err)
	}
	if err := db.Bind(ctx, b); err != nil { // again, same session: kept
		t.Fatal(err)
	}
	got, err := db.Binding(ctx, "slack", "C1/t1")
	if err != nil || got.RenderedSeq != 5 || got.State != "streaming" || !got.ByInvite || !got.CreatedAt.Equal(t0) {
		t.Fatalf("Binding = %+v, %v", got, err)
	}
	if err := db.AppendEvents(ctx, nil, ev("s2", 1, switchboard.EventDelta, `{}`), ev("s2", 2, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	b.SessionID, b.RenderedSeq, b.ByInvite = "s2", 1, false
	if err := db.Bind(ctx, b); err != nil { // another session: bound anew
		t.Fatal(err)
	}
	behind, err := db.BindingsBehind(ctx, "slack")
	if err != nil || len(behind) != 1 || behind[0].SessionID != "s2" || behind[0].RenderedSeq != 1 || behind[0].State != "" || behind[0].ByInvite {
		t.Fatalf("BindingsBehind = %+v, %v", behind, err)
	}
	if bs, err := db.SessionBindings(ctx, "s2"); err != nil || len(bs) != 1 {
		t.Errorf("SessionBindings = %+v, %v", bs, err)
	}
	if err := db.Unbind(ctx, "slack", "C1/t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Binding(ctx, "slack", "C1/t1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Binding after Unbind: %v", err)
	}
}

func TestInvites(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	newSession(t, db, "s", "")
	inv := switchboard.Invite{CodeHash: "h", SessionID: "s", Role: "member", UsesLeft: 1, ExpiresAt: t0.Add(time.Hour), CreatedBy: "web:a", CreatedAt: t0}
	if err := db.CreateInvite(ctx, inv); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Invite(ctx, "h"); err != nil || got != inv {
		t.Errorf("Invite = %+v, %v", got, err)
	}
	if _, err := db.RedeemInvite(ctx, "h", t0.Add(2*time.Hour)); !errors.Is(err, switchboard.ErrInviteExpired) {
		t.Errorf("expired: %v", err)
	}
	if got, err := db.RedeemInvite(ctx, "h", t0); err != nil || got.UsesLeft != 0 {
		t.Errorf("redeem = %+v, %v", got, err)
	}
	if _, err := db.RedeemInvite(ctx, "h", t0); !errors.Is(err, switchboard.ErrInviteUsedUp) {
		t.Errorf("used up: %v", err)
	}
	if _, err := db.RedeemInvite(ctx, "x", t0); !errors.Is(err, switchboard.ErrInviteUnknown) {
		t.Errorf("unknown: %v", err)
	}
	inv.CodeHash, inv.UsesLeft = "h2", 3
	if err := db.CreateInvite(ctx, inv); err != nil {
		t.Fatal(err)
	}
	if n, err := db.RevokeInvites(ctx, "s", t0); err != nil || n != 1 {
		t.Errorf("RevokeInvites = %d, %v", n, err)
	}
	if _, err := db.RedeemInvite(ctx, "h2", t0); !errors.Is(err, switchboard.ErrInviteRevoked) {
		t.Errorf("revoked: %v", err)
	}
}

func TestMemories(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	for i := range switchboard.MaxMemories {
		if err := db.AddMemory(ctx, switchboard.Memory{ID: fmt.Sprintf("m%03d", i), Owner: "web:a", Text: "t", CreatedAt: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AddMemory(ctx, switchboard.Memory{ID: "over", Owner: "web:a"}); !errors.Is(err, switchboard.ErrMemoriesFull) {
		t.Errorf("one past the bound: %v", err)
	}
	mems, err := db.Memories(ctx, "web:a", 2)
	if err != nil || len(mems) != 2 || mems[0].ID != fmt.Sprintf("m%03d", switchboard.MaxMemories-1) {
		t.Errorf("Memories = %+v, %v", mems, err)
	}
	if err := db.ForgetMemory(ctx, "web:b", mems[0].ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("forgetting another's memory: %v", err)
	}
	if err := db.ForgetMemory(ctx, "web:a", mems[0].ID); err != nil {
		t.Fatal(err)
	}
	if mems, _ := db.Memories(ctx, "web:a", 1000); len(mems) != switchboard.MaxMemories-1 {
		t.Errorf("%d memories after forgetting one", len(mems))
	}
}

// Search finds a conversation's messages by their words for its members
// only; a person's query syntax is text; a deleted conversation is found
// no more.
func TestSearch(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	for _, s := range []struct{ id, member string }{{"alices", "web:alice"}, {"bobs", "slack:U2"}, {"shared", "web:alice"}, {"shared", "slack:U2"}} {
		if _, err := db.Session(ctx, s.id); err != nil {
			newSession(t, db, s.id, "")
		}
		if err := db.SetMember(ctx, s.id, switchboard.Member{Key: s.member, Role: "member"}); err != nil {
			t.Fatal(err)
		}
	}
	say := func(session, text string) {
		t.Helper()
		if err := db.AppendMessages(ctx, session, []switchboard.Message{user(text)}, false); err != nil {
			t.Fatal(err)
		}
	}
	say("alices", "The locker code is 4711, remember it.")
	say("bobs", "My locker code is 1234.")
	say("shared", "The team locker is on floor 3.")
	if err := db.AppendMessages(ctx, "alices", []switchboard.Message{{Role: switchboard.RoleTool, ToolName: "calculator", Content: "locker 9999"}}, false); err != nil {
		t.Fatal(err)
	}
	texts := func(reader, q string) []string {
		t.Helper()
		hits, err := db.Search(ctx, reader, q, 10)
		if err != nil {
			t.Fatalf("Search(%q, %q): %v", reader, q, err)
		}
		var out []string
		for _, h := range hits {
			out = append(out, h.SessionID+": "+h.Message.Content)
			if h.At.IsZero() {
				t.Errorf("a hit without its time: %+v", h)
			}
		}
		return out
	}
	if got := texts("web:alice", "what was my locker code?"); len(got) != 2 || got[0] != "alices: The locker code is 4711, remember it." {
		t.Fatalf("Alice's search: %q", got)
	}
	if got := texts("slack:U2", "4711"); len(got) != 0 {
		t.Fatalf("Bob found Alice's code: %q", got)
	}
	if got := texts("slack:U2", "floor"); len(got) != 1 {
		t.Fatalf("Bob's search of the shared conversation: %q", got)
	}
	for _, q := range []string{`locker" OR "`, `NEAR(locker code)`, `locker*`, `"unterminated`, `-locker`, `locker:code`, `a & b | !c <-> d`, `'\`, "\x00"} {
		if _, err := db.Search(ctx, "web:alice", q, 10); err != nil {
			t.Errorf("query %q: %v", q, err)
		}
	}
	say("alices", "We met at the Café Zürich. Привет!")
	for _, q := range []string{"cafe zurich", "CAFÉ", "Zürich", "ПРИВЕТ"} {
		if got := texts("web:alice", q); len(got) != 1 || got[0] != "alices: We met at the Café Zürich. Привет!" {
			t.Errorf("%q found %q", q, got)
		}
	}
	if got := texts("web:alice", "  ?!  "); len(got) != 0 {
		t.Fatalf("an empty query found %q", got)
	}
	if got := texts("web:alice", "9999"); len(got) != 0 {
		t.Fatalf("a tool result was indexed: %q", got)
	}
	say("alices", "a NUL \x00 in the text")
	if got := texts("web:alice", "nul"); len(got) != 1 {
		t.Errorf("a message with a NUL: %q", got)
	}
	hits, err := db.SearchHits(ctx, "web:alice", "4711", 10)
	if err != nil || len(hits) != 1 || hits[0].ID == 0 {
		t.Fatalf("SearchHits = %+v, %v", hits, err)
	}
	if got, err := db.Hits(ctx, "web:alice", []int64{hits[0].ID}); err != nil || len(got) != 1 {
		t.Errorf("Hits = %+v, %v", got, err)
	}
	if got, err := db.Hits(ctx, "slack:U2", []int64{hits[0].ID}); err != nil || len(got) != 0 {
		t.Errorf("Hits of another's message = %+v, %v", got, err)
	}
	if err := db.DeleteSessions(ctx, []string{"alices"}); err != nil {
		t.Fatal(err)
	}
	if got := texts("web:alice", "4711"); len(got) != 0 {
		t.Fatalf("a deleted conversation was found: %q", got)
	}
}

// A word in more than commonWord messages tells nothing and is left out.
func TestSearchLeavesOutCommonWords(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	newSession(t, db, "s", "")
	if err := db.SetMember(ctx, "s", switchboard.Member{Key: "web:a", Role: "member"}); err != nil {
		t.Fatal(err)
	}
	sql(t, db, `INSERT INTO messages (session_id, role, data) SELECT 's', 'user', '{"role":"user","content":"the common word"}' FROM generate_series(1, $1)`, commonWord+1)
	if err := db.AppendMessages(ctx, "s", []switchboard.Message{user("the rare word")}, false); err != nil {
		t.Fatal(err)
	}
	hits, err := db.Search(ctx, "web:a", "the rare", 10)
	if err != nil || len(hits) != 1 || hits[0].Message.Content != "the rare word" {
		t.Errorf("Search = %d hits, %v", len(hits), err)
	}
	if hits, err := db.Search(ctx, "web:a", "the", 10); err != nil || len(hits) != 0 {
		t.Errorf("a common word alone found %d, %v", len(hits), err)
	}
}

func TestVectorsAndFootprint(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	newSession(t, db, "s", "")
	if err := db.AppendMessages(ctx, "s", []switchboard.Message{user("one"), {Role: switchboard.RoleTool, Content: "tool"}, user("two"), user("")}, false); err != nil {
		t.Fatal(err)
	}
	un, err := db.Unembedded(ctx, "m/3", 0, 10)
	if err != nil || len(un) != 2 || un[0].Text != "one" || un[1].Text != "two" || un[0].SessionID != "s" {
		t.Fatalf("Unembedded = %+v, %v", un, err)
	}
	if n, err := db.CountUnembedded(ctx, "m/3", 0); err != nil || n != 2 {
		t.Errorf("CountUnembedded = %d, %v", n, err)
	}
	if err := db.SaveVectors(ctx, "m/3", []Vector{{MessageID: un[0].ID, Values: []float32{1, 0, 0}}, {MessageID: un[1].ID}, {MessageID: 999999, Values: []float32{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := db.CountUnembedded(ctx, "m/3", 0); n != 0 {
		t.Errorf("%d unembedded after saving", n)
	}
	ids, flat, err := db.SessionVectors(ctx, "m/3", "s", 3)
	if err != nil || fmt.Sprint(ids) != fmt.Sprint([]int64{un[0].ID}) || fmt.Sprint(flat) != "[1 0 0]" {
		t.Errorf("SessionVectors = %v %v, %v", ids, flat, err)
	}
	if n, _ := db.CountUnembedded(ctx, "m/4", 0); n != 2 {
		t.Errorf("another space: %d unembedded, want 2", n)
	}
	if err := db.AddMemory(ctx, switchboard.Memory{ID: "m", Owner: "web:a"}); err != nil {
		t.Fatal(err)
	}
	f, err := db.Footprint(ctx)
	if err != nil || f.Memories != 1 || f.IndexedMessages != 2 || f.IndexBytes <= 0 {
		t.Errorf("Footprint = %+v, %v", f, err)
	}
}

func TestEventReads(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	evs := []switchboard.Event{
		ev("s", 1, switchboard.EventMessage, `{"role":"user","content":"hi"}`),
		ev("s", 2, switchboard.EventMessage, `{"role":"system","content":"x"}`),
		ev("s", 3, switchboard.EventUI, `{"id":"u1","title":"T"}`),
		ev("s", 4, switchboard.EventMessage, `{"role":"assistant","content":"hello"}`),
		ev("s", 5, switchboard.EventType("confirmation_request"), `{"confirmation_id":"c1","tool":"rm"}`),
		ev("s", 6, switchboard.EventType("confirmation_resolved"), `{"confirmation_id":"c1","approved":true}`),
		ev("s", 7, switchboard.EventUI, `not json`),
	}
	if err := db.AppendEvents(ctx, nil, evs...); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	recent, err := db.RecentMessages(ctx, "s", 5, 7)
	if err != nil || len(recent) != 2 || recent[0].Seq != 1 || recent[1].Seq != 4 {
		t.Errorf("RecentMessages = %+v, %v", recent, err)
	}
	if ui, err := db.FindUI(ctx, "s", "u1"); err != nil || ui.ID != "u1" {
		t.Errorf("FindUI = %+v, %v", ui, err)
	}
	if _, err := db.FindUI(ctx, "s", "u2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("FindUI of nothing = %v", err)
	}
	ds, err := db.Decisions(ctx, "s", 10)
	if err != nil || len(ds) != 1 || ds[0].Seq != 6 || ds[0].Request.ConfirmationID != "c1" || !ds[0].Time.Equal(evs[5].Time) {
		t.Errorf("Decisions = %+v, %v", ds, err)
	}
}
