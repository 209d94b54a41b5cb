package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// The store test suite, which every store passes, on a real PostgreSQL
// server: as a single gateway opens the store, with a small queue and
// small batches (a test's writes spread over many commits, some waiting
// for room), and as a replica that holds the lease of every conversation
// the suite writes into (so every fenced write is checked against its
// lease and passes). Close must report no write error the tests had not
// seen.
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    []Option
		replica bool
	}{
		{"defaults", nil, false},
		{"small batches", []Option{WithQueueSize(64), WithBatchSize(16)}, false},
		{"replica", []Option{WithReplica("r0")}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Store {
				db := open(t, c.opts...)
				if c.replica {
					return leaseEverything{db}
				}
				return db
			})
		})
	}
}

// leaseEverything is a replica's store that takes the lease of a
// conversation, and fences it, before its first fenced write.
type leaseEverything struct{ *DB }

func (l leaseEverything) lease(ctx context.Context, sessionID string) {
	if l.fenceOf(sessionID) != 0 {
		return
	}
	lease, err := l.AcquireLease(ctx, SessionLease(sessionID), time.Hour)
	if err != nil {
		panic(err)
	}
	l.Fence(sessionID, lease.Epoch)
}

func (l leaseEverything) AppendEvents(ctx context.Context, published func([]switchboard.Event, error), evs ...switchboard.Event) error {
	for _, ev := range evs {
		if ev.Session != "" {
			l.lease(ctx, ev.Session)
		}
	}
	return l.DB.AppendEvents(ctx, published, evs...)
}

func (l leaseEverything) WriteTurn(ctx context.Context, sessionID string, w switchboard.TurnWrite) (bool, error) {
	l.lease(ctx, sessionID)
	return l.DB.WriteTurn(ctx, sessionID, w)
}

// DeleteSessions deletes the conversations' leases too: their runners
// stop, and a new conversation with an old id is leased anew.
func (l leaseEverything) DeleteSessions(ctx context.Context, ids []string) error {
	for _, id := range ids {
		l.Unfence(id)
	}
	return l.DB.DeleteSessions(ctx, ids)
}

func (l leaseEverything) AppendMessages(ctx context.Context, sessionID string, msgs []switchboard.Message, clearPending bool) error {
	l.lease(ctx, sessionID)
	return l.DB.AppendMessages(ctx, sessionID, msgs, clearPending)
}

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
	files, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT count(*) FROM schema_migrations`); n != int64(len(files)) {
		t.Errorf("schema_migrations has %d rows, want one a migration (%d)", n, len(files))
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
		if err := db.AppendEvents(ctx, a.Published, ev("a", seq, switchboard.EventDelta, `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AppendEvents(ctx, b.Published, ev("b", 2, switchboard.EventDelta, `{}`), ev("b", 3, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	var c recorder // after b in the same batch: stored although b failed
	if err := db.AppendEvents(ctx, c.Published, ev("c", 1, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	release()
	if err := db.Flush(ctx); !errors.Is(err, ErrGap) {
		t.Errorf("Flush after a gap = %v, want ErrGap", err)
	}
	if got := fmt.Sprint(a.Seqs(true)); got != "[1 2 3]" {
		t.Errorf("a stored %v", got)
	}
	if got := fmt.Sprint(c.Seqs(true)); got != "[1]" {
		t.Errorf("c stored %v", got)
	}
	if got := fmt.Sprint(b.Seqs(false)); got != "[2 3]" || len(b.Seqs(true)) != 0 {
		t.Errorf("b refused %v, stored %v", got, b.Seqs(true))
	}
	for _, p := range b.Calls() {
		if !errors.Is(p.Err, ErrGap) {
			t.Errorf("b refused with %v, want ErrGap", p.Err)
		}
	}
	appendAndFlush := func(evs ...switchboard.Event) error {
		t.Helper()
		if err := db.AppendEvents(ctx, b.Published, evs...); err != nil {
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

// What the conformance suite's search does not try: letters beyond ASCII
// folded in a database created with the C locale (as pgtest's), a NUL in
// a message or a query, tsquery's own operators, and a message far longer
// than a tsvector holds.
func TestSearchFoldsWhatPostgreSQLWouldNot(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	newSession(t, db, "s", "")
	if err := db.SetMember(ctx, "s", switchboard.Member{Key: "web:a", Role: "member"}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("filler ", 20000) + "needle"
	var huge strings.Builder // distinct words, more than a tsvector's 1 MiB
	for i := range 200000 {
		fmt.Fprintf(&huge, "w%d ", i)
	}
	for _, text := range []string{"ПРИВЕТ, Ёжик!", "a NUL \x00 here", "x & y | !z <-> (w)", long, huge.String()} {
		if err := db.AppendMessages(ctx, "s", []switchboard.Message{user(text)}, false); err != nil {
			t.Fatalf("storing %.40q: %v", text, err)
		}
	}
	for q, want := range map[string]int{
		"привет": 1, "ЁЖИК": 1, "nul": 1, "\x00 here": 1, "x & y": 1, "!z": 1, "<->": 0, "'\\": 0,
		"filler": 1, "needle": 0, // past the first 100,000 characters: not indexed
		"w5": 1,
	} {
		hits, err := db.Search(ctx, "web:a", q, 10)
		if err != nil || len(hits) != want {
			t.Errorf("Search(%q) = %d hits, %v; want %d", q, len(hits), err, want)
		}
	}
}

// Replicas adding memories at once cannot pass a person's bound together.
func TestMemoriesBoundHoldsAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	dbs := replicas(t, 2)
	for i := range switchboard.MaxMemories - 1 {
		if err := dbs[0].AddMemory(ctx, switchboard.Memory{ID: fmt.Sprintf("m%d", i), Owner: "web:a"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			errs[i] = dbs[i%2].AddMemory(ctx, switchboard.Memory{ID: fmt.Sprintf("last%d", i), Owner: "web:a"})
		})
	}
	wg.Wait()
	added := 0
	for _, err := range errs {
		switch {
		case err == nil:
			added++
		case !errors.Is(err, switchboard.ErrMemoriesFull):
			t.Error(err)
		}
	}
	if mems, _ := dbs[1].Memories(ctx, "web:a", 1000); added != 1 || len(mems) != switchboard.MaxMemories {
		t.Errorf("%d added at once, %d kept; want 1 and %d", added, len(mems), switchboard.MaxMemories)
	}
}

// Jobs that fail in a batch they share undo only themselves: a turn for a
// missing session, a duplicate input, a turn past a gap; the writes
// around them are stored, in order.
func TestFailedJobsInASharedBatchUndoOnlyThemselves(t *testing.T) {
	ctx := context.Background()
	hold, entered, release := holdCommit()
	db := open(t, hold)
	t.Cleanup(release)
	newSession(t, db, "s", "")
	first := make(chan error, 1)
	go func() { // the held batch
		_, _, err := db.AcceptInput(ctx, "s", "k", switchboard.Input{Text: "first"})
		first <- err
	}()
	<-entered
	type result struct {
		name string
		dup  bool
		err  error
	}
	results := make(chan result, 5)
	turn := func(name, session string, w switchboard.TurnWrite) {
		dup, err := db.WriteTurn(ctx, session, w)
		results <- result{name, dup, err}
	}
	queued := len(db.queue)
	for i, f := range []func(){
		func() { turn("ok before", "s", switchboard.TurnWrite{Messages: []switchboard.Message{user("1")}}) },
		func() {
			turn("missing session", "nope", switchboard.TurnWrite{Messages: []switchboard.Message{user("x")}})
		},
		func() {
			_, dup, err := db.AcceptInput(ctx, "s", "k", switchboard.Input{Text: "again"})
			results <- result{"duplicate input", dup, err}
		},
		func() {
			turn("gap", "s", switchboard.TurnWrite{Messages: []switchboard.Message{user("x")}, Events: []switchboard.Event{ev("s", 5, switchboard.EventMessage, `{}`)}})
		},
		func() {
			turn("ok after", "s", switchboard.TurnWrite{Messages: []switchboard.Message{user("2")}, Events: []switchboard.Event{ev("s", 1, switchboard.EventMessage, `{}`)}})
		},
	} {
		go f()
		for len(db.queue) < queued+i+1 { // queued in this order
			time.Sleep(time.Millisecond)
		}
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	got := map[string]result{}
	for range 5 {
		r := <-results
		got[r.name] = r
	}
	if r := got["ok before"]; r.err != nil || r.dup {
		t.Errorf("ok before: %+v", r)
	}
	if r := got["missing session"]; r.err == nil {
		t.Errorf("a turn for a missing session: %+v", r)
	}
	if r := got["duplicate input"]; r.err != nil || !r.dup {
		t.Errorf("a duplicate input: %+v", r)
	}
	if r := got["gap"]; !errors.Is(r.err, ErrGap) {
		t.Errorf("a turn past a gap: %+v", r)
	}
	if r := got["ok after"]; r.err != nil || r.dup {
		t.Errorf("ok after: %+v", r)
	}
	w, err := db.Window(ctx, "s", 10)
	if err != nil || len(w) != 2 || w[0].Content != "1" || w[1].Content != "2" {
		t.Errorf("messages %+v, %v; want 1 and 2", w, err)
	}
	if in, _ := db.Inbox(ctx, "s"); len(in) != 1 {
		t.Errorf("inbox %+v, want the first input alone", in)
	}
}
