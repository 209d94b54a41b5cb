package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

var t0 = time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)

func ev(session string, seq int64, typ switchboard.EventType, data string) switchboard.Event {
	return switchboard.Event{
		Seq: seq, Session: session, Agent: "assistant", Type: typ, Data: json.RawMessage(data),
		Time: t0.Add(time.Duration(seq) * time.Millisecond),
	}
}

func flush(t testing.TB, db *DB) {
	t.Helper()
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestEventsFromManySessionsLandInOrder(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t, WithQueueSize(64), WithBatchSize(32))
	const sessions, perSession = 8, 300
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("s%d", s)
			for seq := int64(1); seq <= perSession; seq++ {
				// Some one by one, some several per call.
				if seq%3 == 0 && seq < perSession {
					if err := db.AppendEvents(ctx, nil,
						ev(id, seq, switchboard.EventDelta, fmt.Sprintf(`{"content":"%s-%d"}`, id, seq)),
						ev(id, seq+1, switchboard.EventDelta, fmt.Sprintf(`{"content":"%s-%d"}`, id, seq+1)),
					); err != nil {
						errs <- err
						return
					}
					seq++
					continue
				}
				if err := db.AppendEvents(ctx, nil, ev(id, seq, switchboard.EventDelta, fmt.Sprintf(`{"content":"%s-%d"}`, id, seq))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	flush(t, db)

	for s := range sessions {
		id := fmt.Sprintf("s%d", s)
		got, err := db.EventsAfter(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != perSession {
			t.Fatalf("%s: %d events stored, want %d", id, len(got), perSession)
		}
		for i, e := range got {
			want := ev(id, int64(i+1), switchboard.EventDelta, fmt.Sprintf(`{"content":"%s-%d"}`, id, i+1))
			if e.Seq != want.Seq || string(e.Data) != string(want.Data) || e.Session != id {
				t.Fatalf("%s: event %d = %+v, want %+v", id, i, e, want)
			}
		}
		if last, err := db.LastSeq(ctx, id); err != nil || last != perSession {
			t.Errorf("%s: LastSeq = %d, %v; want %d", id, last, err, perSession)
		}
	}
}

// holdWriter returns an Option that stops the writer at its first batch
// until release is called; entered is closed once the writer is held.
// Every batch the writer takes is recorded in batches.
func holdWriter() (opt Option, entered chan struct{}, release func(), batches *[][]switchboard.Event) {
	entered, released := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var once, releaseOnce sync.Once
	batches = new([][]switchboard.Event)
	opt = func(o *options) {
		o.beforeBatch = func(evs []switchboard.Event) {
			mu.Lock()
			*batches = append(*batches, append([]switchboard.Event(nil), evs...))
			mu.Unlock()
			once.Do(func() {
				close(entered)
				<-released
			})
		}
	}
	release = func() { releaseOnce.Do(func() { close(released) }) }
	return opt, entered, release, batches
}

func TestSessionsShareCommits(t *testing.T) {
	ctx := context.Background()
	hold, entered, release, batches := holdWriter()
	db, _ := openFile(t, hold)
	t.Cleanup(release) // before Close, which waits for the writer, if the test fails early

	if err := db.AppendEvents(ctx, nil, ev("first", 1, switchboard.EventState, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	// While the writer is busy, three sessions queue events.
	for seq := int64(1); seq <= 10; seq++ {
		for _, s := range []string{"a", "b", "c"} {
			if err := db.AppendEvents(ctx, nil, ev(s, seq, switchboard.EventDelta, `{}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	release()
	flush(t, db)

	if len(*batches) != 2 {
		t.Fatalf("wrote %d batches, want 2 (the held one, then all 30 queued events at once)", len(*batches))
	}
	second := (*batches)[1]
	sessions := map[string]int{}
	for _, e := range second {
		sessions[e.Session]++
	}
	if len(second) != 30 || len(sessions) != 3 {
		t.Errorf("second batch has %d events of sessions %v, want 30 events of 3 sessions in one commit", len(second), sessions)
	}
}

func TestAppendEventsBlocksWhenQueueIsFull(t *testing.T) {
	ctx := context.Background()
	hold, entered, release, _ := holdWriter()
	db, _ := openFile(t, hold, WithQueueSize(2))
	t.Cleanup(release) // before Close, which waits for the writer, if the test fails early

	if err := db.AppendEvents(ctx, nil, ev("s", 1, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered // the writer holds event 1; the queue is empty
	if err := db.AppendEvents(ctx, nil, ev("s", 2, switchboard.EventDelta, `{}`), ev("s", 3, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	// The queue is full: a caller whose context ends gives up with its error.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := db.AppendEvents(cancelled, nil, ev("s", 4, switchboard.EventDelta, `{}`)); !errors.Is(err, context.Canceled) {
		t.Fatalf("AppendEvents on a full queue with an ended context = %v, want context.Canceled", err)
	}

	// A patient caller waits, and goes through once the writer moves on.
	done := make(chan error, 1)
	go func() { done <- db.AppendEvents(ctx, nil, ev("s", 4, switchboard.EventDelta, `{}`)) }()
	select {
	case err := <-done:
		t.Fatalf("AppendEvents returned (%v) while the queue was full", err)
	default:
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	got, err := db.EventsAfter(ctx, "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Errorf("%d events stored, want 4: nothing may be dropped", len(got))
	}
}

func TestCloseCommitsQueuedEvents(t *testing.T) {
	ctx := context.Background()
	hold, entered, release, _ := holdWriter()
	db, path := openFile(t, hold)
	t.Cleanup(release)

	if err := db.AppendEvents(ctx, nil, ev("s", 1, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	// Still queued when Close is called: the writer is held.
	for seq := int64(2); seq <= 100; seq++ {
		if err := db.AppendEvents(ctx, nil, ev("s", seq, switchboard.EventDelta, `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}

	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if last, err := db.LastSeq(ctx, "s"); err != nil || last != 100 {
		t.Errorf("LastSeq after Close and reopen = %d, %v; want 100", last, err)
	}
}

func TestEventsAfterPagesAndRoundTrips(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	var evs []switchboard.Event
	for seq := int64(1); seq <= 25; seq++ {
		e := ev("s1", seq, switchboard.EventMessage, fmt.Sprintf(`{"id":"m%d","content":"x"}`, seq))
		e.Time = e.Time.Add(456 * time.Microsecond) // below ms precision: dropped
		evs = append(evs, e)
	}
	if err := db.AppendEvents(ctx, nil, evs...); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	// A repeated (session, seq) is refused, not dropped in silence: the
	// first one stays, and another session's event beside it is stored.
	if err := db.AppendEvents(ctx, nil, ev("s1", 3, switchboard.EventError, `{"code":"dup"}`), ev("other", 1, switchboard.EventState, `{}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(ctx); err == nil {
		t.Error("Flush after a repeated seq = nil, want its write error")
	}
	if last, err := db.LastSeq(ctx, "other"); err != nil || last != 1 {
		t.Errorf("LastSeq(other) = %d, %v; want 1: its event shared a call with the refused one", last, err)
	}

	var got []switchboard.Event
	var pages []int
	after := int64(0)
	for {
		page, err := db.EventsAfter(ctx, "s1", after, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		pages = append(pages, len(page))
		got = append(got, page...)
		after = page[len(page)-1].Seq
	}
	if fmt.Sprint(pages) != "[10 10 5]" {
		t.Errorf("page sizes = %v, want [10 10 5]", pages)
	}
	if len(got) != len(evs) {
		t.Fatalf("got %d events, want %d", len(got), len(evs))
	}
	for i, e := range got {
		w := evs[i]
		wantTime := w.Time.Truncate(time.Millisecond)
		if e.Seq != w.Seq || e.Session != w.Session || e.Agent != w.Agent || e.Type != w.Type ||
			string(e.Data) != string(w.Data) || !e.Time.Equal(wantTime) || e.Time.Location() != time.UTC {
			t.Errorf("event %d = %+v, want %+v (time %v)", i, e, w, wantTime)
		}
	}
	if last, err := db.LastSeq(ctx, "s1"); err != nil || last != 25 {
		t.Errorf("LastSeq = %d, %v; want 25", last, err)
	}
	if last, err := db.LastSeq(ctx, "nobody"); err != nil || last != 0 {
		t.Errorf("LastSeq of an empty session = %d, %v; want 0", last, err)
	}
}

func TestAppendEventsRejectsUnnumberedEvents(t *testing.T) {
	db, _ := openFile(t)
	for _, e := range []switchboard.Event{ev("", 1, switchboard.EventState, `{}`), ev("s", 0, switchboard.EventState, `{}`)} {
		if err := db.AppendEvents(context.Background(), nil, e); err == nil {
			t.Errorf("AppendEvents(%q/%d) succeeded", e.Session, e.Seq)
		}
	}
}

func TestFlushReportsWriteErrorOnce(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	// Break the table under the writer's feet.
	if _, err := db.write.ExecContext(ctx, `ALTER TABLE events RENAME TO events_gone`); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendEvents(ctx, nil, ev("s", 1, switchboard.EventState, `{}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(ctx); err == nil {
		t.Fatal("Flush after a failed write returned nil")
	}
	if err := db.Flush(ctx); err != nil {
		t.Errorf("second Flush = %v, want nil: the error was already reported", err)
	}
}

func TestFindUI(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	card := switchboard.UI{ID: "ui_1", Title: "Pick", Buttons: []switchboard.UIButton{{ActionID: "a1", Label: "Yes"}}}
	data, err := json.Marshal(card)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.AppendEvents(ctx, nil,
		ev("s1", 1, switchboard.EventMessage, `{"id":"ui_2","content":"not a ui event"}`),
		ev("s1", 2, switchboard.EventUI, string(data)),
		ev("s1", 3, switchboard.EventUI, `not json`),
		ev("s2", 1, switchboard.EventUI, `{"id":"ui_3"}`),
	); err != nil {
		t.Fatal(err)
	}
	flush(t, db)

	got, err := db.FindUI(ctx, "s1", "ui_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != card.Title || len(got.Buttons) != 1 || got.Buttons[0].ActionID != "a1" {
		t.Errorf("FindUI = %+v, want %+v", got, card)
	}
	for _, id := range []string{"ui_2", "ui_3", "missing"} {
		if _, err := db.FindUI(ctx, "s1", id); !errors.Is(err, ErrNotFound) {
			t.Errorf("FindUI(s1, %s) err = %v, want ErrNotFound", id, err)
		}
	}
}

// publication is one call of a published callback.
type publication struct {
	evs []switchboard.Event
	err error
}

// recorder collects the calls of a published callback.
type recorder struct {
	mu   sync.Mutex
	pubs []publication
}

func (r *recorder) published(evs []switchboard.Event, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pubs = append(r.pubs, publication{append([]switchboard.Event(nil), evs...), err})
}

func (r *recorder) calls() []publication {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]publication(nil), r.pubs...)
}

// seqs lists the seqs of the publications with (ok) or without a nil error.
func (r *recorder) seqs(ok bool) []int64 {
	var out []int64
	for _, p := range r.calls() {
		if (p.err == nil) == ok {
			for _, e := range p.evs {
				out = append(out, e.Seq)
			}
		}
	}
	return out
}

// checkPublished fails if the recorder was told an event was stored that
// is not (or is stored with other data), or that an event was refused
// that is stored with its data.
func checkPublished(t *testing.T, db *DB, r *recorder) {
	t.Helper()
	stored := map[string]map[int64]string{}
	for _, p := range r.calls() {
		for _, e := range p.evs {
			if stored[e.Session] == nil {
				got, err := db.EventsAfter(context.Background(), e.Session, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				stored[e.Session] = map[int64]string{}
				for _, g := range got {
					stored[e.Session][g.Seq] = string(g.Data)
				}
			}
			data, ok := stored[e.Session][e.Seq]
			switch {
			case p.err == nil && (!ok || data != string(e.Data)):
				t.Errorf("%s/%d %s published as stored, but the store has %q", e.Session, e.Seq, e.Data, data)
			case p.err != nil && ok && data == string(e.Data):
				t.Errorf("%s/%d %s published as refused (%v), but it is stored", e.Session, e.Seq, e.Data, p.err)
			}
		}
	}
}

// A session's events are stored without a hole: an event whose seq-1 is
// not stored is refused with ErrGap, and so is every later one until the
// numbering continues from the last stored event. Another session's events
// in the same batch are stored all the same.
func TestGapIsRefusedAndOtherSessionsAreStored(t *testing.T) {
	ctx := context.Background()
	hold, entered, release, batches := holdWriter()
	db, _ := openFile(t, hold)
	t.Cleanup(release)

	if err := db.AppendEvents(ctx, nil, ev("first", 1, switchboard.EventState, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	// Held: a's events and b's, which start at 2, share the next batch.
	var a, b recorder
	for seq := int64(1); seq <= 3; seq++ {
		if err := db.AppendEvents(ctx, a.published, ev("a", seq, switchboard.EventDelta, fmt.Sprintf(`{"a":%d}`, seq))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AppendEvents(ctx, b.published, ev("b", 2, switchboard.EventDelta, `{"try":1}`), ev("b", 3, switchboard.EventDelta, `{"try":1}`)); err != nil {
		t.Fatal(err)
	}
	release()
	if err := db.Flush(ctx); !errors.Is(err, switchboard.ErrGap) {
		t.Errorf("Flush after a gap = %v, want switchboard.ErrGap", err)
	}
	if len(*batches) != 2 || len((*batches)[1]) != 5 {
		t.Fatalf("batches %v, want the held one and then a's and b's events in one", *batches)
	}
	if got := fmt.Sprint(a.seqs(true)); got != "[1 2 3]" || len(a.seqs(false)) != 0 {
		t.Errorf("a published as stored %v, refused %v; want [1 2 3] stored", got, a.seqs(false))
	}
	if got := b.seqs(false); fmt.Sprint(got) != "[2 3]" || len(b.seqs(true)) != 0 {
		t.Errorf("b published as refused %v, stored %v; want [2 3] refused", got, b.seqs(true))
	}
	for _, p := range b.calls() {
		if !errors.Is(p.err, switchboard.ErrGap) {
			t.Errorf("b's events refused with %v, want switchboard.ErrGap", p.err)
		}
	}
	if last, err := db.LastSeq(ctx, "a"); err != nil || last != 3 {
		t.Errorf("LastSeq(a) = %d, %v; want 3", last, err)
	}
	if last, err := db.LastSeq(ctx, "b"); err != nil || last != 0 {
		t.Errorf("LastSeq(b) = %d, %v; want 0", last, err)
	}

	// b keeps numbering past its refused events: still refused.
	appendAndFlush := func(r *recorder, evs ...switchboard.Event) error {
		t.Helper()
		if err := db.AppendEvents(ctx, r.published, evs...); err != nil {
			t.Fatal(err)
		}
		return db.Flush(ctx)
	}
	if err := appendAndFlush(&b, ev("b", 4, switchboard.EventDelta, `{"try":2}`)); !errors.Is(err, switchboard.ErrGap) {
		t.Errorf("b/4 after refused b/2-3: Flush = %v, want switchboard.ErrGap", err)
	}
	// It numbers from its last stored event (none): stored again.
	if err := appendAndFlush(&b, ev("b", 1, switchboard.EventDelta, `{"try":3}`), ev("b", 2, switchboard.EventDelta, `{"try":3}`)); err != nil {
		t.Fatalf("b/1-2 after the gap: %v", err)
	}
	// A gap past stored events: refused, and the one after it too.
	if err := appendAndFlush(&b, ev("b", 4, switchboard.EventDelta, `{"try":4}`)); !errors.Is(err, switchboard.ErrGap) {
		t.Errorf("b/4 after b/2: Flush = %v, want switchboard.ErrGap", err)
	}
	if err := appendAndFlush(&b, ev("b", 5, switchboard.EventDelta, `{"try":5}`)); !errors.Is(err, switchboard.ErrGap) {
		t.Errorf("b/5 after refused b/4: Flush = %v, want switchboard.ErrGap", err)
	}
	if err := appendAndFlush(&b, ev("b", 3, switchboard.EventDelta, `{"try":6}`)); err != nil {
		t.Errorf("b/3 after b/2: %v", err)
	}
	if got := fmt.Sprint(b.seqs(true)); got != "[1 2 3]" {
		t.Errorf("b published as stored %v, want [1 2 3]", got)
	}
	if got := fmt.Sprint(b.seqs(false)); got != "[2 3 4 4 5]" {
		t.Errorf("b published as refused %v, want [2 3 4 4 5]", got)
	}
	if last, err := db.LastSeq(ctx, "b"); err != nil || last != 3 {
		t.Errorf("LastSeq(b) = %d, %v; want 3", last, err)
	}
	checkPublished(t, db, &a)
	checkPublished(t, db, &b)
}

// A seq is stored once: a second event with it is refused, not dropped in
// silence, and the first one stays.
func TestRepeatedSeqIsRefused(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	var r recorder
	if err := db.AppendEvents(ctx, r.published, ev("s", 1, switchboard.EventDelta, `{"v":1}`), ev("s", 2, switchboard.EventDelta, `{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	for _, seq := range []int64{1, 2} {
		if err := db.AppendEvents(ctx, r.published, ev("s", seq, switchboard.EventError, `{"v":"again"}`)); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(ctx); err == nil {
			t.Errorf("s/%d stored twice: Flush = nil, want an error", seq)
		}
	}
	// Twice in one call.
	if err := db.AppendEvents(ctx, r.published, ev("s", 3, switchboard.EventDelta, `{"v":3}`), ev("s", 3, switchboard.EventDelta, `{"v":"again"}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(ctx); err == nil {
		t.Error("s/3 twice in one call: Flush = nil, want an error")
	}
	got, err := db.EventsAfter(ctx, "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 2 || string(got[0].Data) != `{"v":1}` || string(got[1].Data) != `{"v":2}` || got[1].Type != switchboard.EventDelta {
		t.Errorf("events = %+v, want the first s/1 and s/2 kept", got)
	}
	for _, e := range got {
		if string(e.Data) == `{"v":"again"}` {
			t.Errorf("repeated s/%d stored", e.Seq)
		}
	}
	if refused := r.seqs(false); len(refused) < 2 || fmt.Sprint(refused[:2]) != "[1 2]" {
		t.Errorf("published as refused %v, want the repeated 1 and 2 first", r.seqs(false))
	}
	checkPublished(t, db, &r)
}

// published is told once the events are committed (a reader sees them
// from inside the callback), and in seq order.
func TestPublishedInSeqOrderAfterCommit(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t, WithBatchSize(16))
	const n = 400
	var (
		mu        sync.Mutex
		order     []int64
		problems  []string
		published = make(chan struct{})
	)
	cb := func(evs []switchboard.Event, err error) {
		// On the writer's goroutine, after its commit: the read pool, a
		// different connection, must see every event it is told about.
		var problem string
		if err != nil {
			problem = fmt.Sprintf("events %d-%d refused: %v", evs[0].Seq, evs[len(evs)-1].Seq, err)
		} else if got, qerr := db.EventsAfter(ctx, "s", evs[0].Seq-1, len(evs)); qerr != nil || len(got) != len(evs) {
			problem = fmt.Sprintf("published %d-%d, a reader sees %d of them (%v)", evs[0].Seq, evs[len(evs)-1].Seq, len(got), qerr)
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
			close(published)
		}
	}
	for seq := int64(1); seq <= n; seq++ {
		if seq%5 == 0 {
			time.Sleep(100 * time.Microsecond) // some batches small, some large
		}
		if err := db.AppendEvents(ctx, cb, ev("s", seq, switchboard.EventDelta, `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, db)
	select {
	case <-published:
	case <-time.After(30 * time.Second):
		t.Fatal("not every event was published")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	for i, seq := range order {
		if seq != int64(i+1) {
			t.Fatalf("published in order %v…, want 1..%d", order[:i+1], n)
		}
	}
}

// A recap is the last n user and assistant messages up to a seq, in
// order, leaving out system messages and every other event.
func TestRecentMessages(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	storetest.NewSession(t, db, "s1", "")
	evs := []switchboard.Event{
		ev("s1", 1, switchboard.EventMessage, `{"role":"user","content":"one"}`),
		ev("s1", 2, switchboard.EventDelta, `{"content":"t"}`),
		ev("s1", 3, switchboard.EventMessage, `{"role":"assistant","content":"two"}`),
		ev("s1", 4, switchboard.EventMessage, `{"role":"system","content":"help text"}`),
		ev("s1", 5, switchboard.EventMessage, `{"role":"user","content":"three"}`),
		ev("s1", 6, switchboard.EventToolCall, `{"name":"calculator"}`),
		ev("s1", 7, switchboard.EventMessage, `{"role":"assistant","content":"four"}`),
		ev("s1", 8, switchboard.EventMessage, `{"role":"user","content":"five"}`),
	}
	if err := db.AppendEvents(ctx, nil, evs...); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	got, err := db.RecentMessages(ctx, "s1", 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, e := range got {
		seqs = append(seqs, e.Seq)
	}
	if fmt.Sprint(seqs) != "[3 5 7]" {
		t.Fatalf("recap seqs = %v, want [3 5 7]", seqs)
	}
	if none, err := db.RecentMessages(ctx, "nobody", 3, 100); err != nil || len(none) != 0 {
		t.Fatalf("recap of an unknown session = %v, %v", none, err)
	}
}

func TestDecisionsPairAnswersWithTheirRequests(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	storetest.NewSession(t, db, "s1", "")
	storetest.NewSession(t, db, "s2", "")
	evs := []switchboard.Event{
		ev("s1", 1, switchboard.EventConfirmationRequest, `{"confirmation_id":"c1","tool_name":"shell","args":{"cmd":"ls"}}`),
		ev("s1", 2, switchboard.EventConfirmationResolved, `{"confirmation_id":"c1","approved":true,"by":"Carol","channel":"slack"}`),
		ev("s1", 3, switchboard.EventConfirmationRequest, `{"confirmation_id":"c2","tool_name":"deploy","args":{}}`),
		ev("s1", 4, switchboard.EventMessage, `{"role":"user","content":"hi"}`),
		ev("s1", 5, switchboard.EventConfirmationResolved, `{"confirmation_id":"c2","approved":false,"by":"expired"}`),
		ev("s1", 6, switchboard.EventConfirmationResolved, `not json`),
		ev("s1", 7, switchboard.EventConfirmationResolved, `{"confirmation_id":"c9","approved":true,"by":"Dan","channel":"discord"}`),
	}
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{Events: evs}); err != nil {
		t.Fatal(err)
	}
	if err := writeTurn(ctx, db, "s2", switchboard.TurnWrite{Events: []switchboard.Event{
		ev("s2", 1, switchboard.EventConfirmationResolved, `{"confirmation_id":"c1","approved":false,"by":"Eve"}`),
	}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Decisions(ctx, "s1", 10)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		seq             int64
		tool, by, where string
		approved        bool
	}
	var rows []row
	for _, d := range got {
		rows = append(rows, row{d.Seq, d.Request.ToolName, d.Resolved.By, d.Resolved.Channel, d.Resolved.Approved})
	}
	want := []row{{2, "shell", "Carol", "slack", true}, {5, "deploy", "expired", "", false}, {7, "", "Dan", "discord", true}}
	if !slices.Equal(rows, want) {
		t.Errorf("Decisions = %+v, want %+v (oldest first; a request that is gone leaves the tool empty; other sessions' and malformed rows left out)", rows, want)
	}
	if got, _ := db.Decisions(ctx, "s1", 1); len(got) != 1 || got[0].Seq != 7 {
		t.Errorf("Decisions(1) = %+v, want the last answer only", got)
	}
}
