package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
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
					if err := db.AppendEvents(ctx,
						ev(id, seq, switchboard.EventDelta, fmt.Sprintf(`{"content":"%s-%d"}`, id, seq)),
						ev(id, seq+1, switchboard.EventDelta, fmt.Sprintf(`{"content":"%s-%d"}`, id, seq+1)),
					); err != nil {
						errs <- err
						return
					}
					seq++
					continue
				}
				if err := db.AppendEvents(ctx, ev(id, seq, switchboard.EventDelta, fmt.Sprintf(`{"content":"%s-%d"}`, id, seq))); err != nil {
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

	if err := db.AppendEvents(ctx, ev("first", 1, switchboard.EventState, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	// While the writer is busy, three sessions queue events.
	for seq := int64(1); seq <= 10; seq++ {
		for _, s := range []string{"a", "b", "c"} {
			if err := db.AppendEvents(ctx, ev(s, seq, switchboard.EventDelta, `{}`)); err != nil {
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

	if err := db.AppendEvents(ctx, ev("s", 1, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered // the writer holds event 1; the queue is empty
	if err := db.AppendEvents(ctx, ev("s", 2, switchboard.EventDelta, `{}`), ev("s", 3, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	// The queue is full: a caller whose context ends gives up with its error.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := db.AppendEvents(cancelled, ev("s", 4, switchboard.EventDelta, `{}`)); !errors.Is(err, context.Canceled) {
		t.Fatalf("AppendEvents on a full queue with an ended context = %v, want context.Canceled", err)
	}

	// A patient caller waits, and goes through once the writer moves on.
	done := make(chan error, 1)
	go func() { done <- db.AppendEvents(ctx, ev("s", 4, switchboard.EventDelta, `{}`)) }()
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

	if err := db.AppendEvents(ctx, ev("s", 1, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	// Still queued when Close is called: the writer is held.
	for seq := int64(2); seq <= 100; seq++ {
		if err := db.AppendEvents(ctx, ev("s", seq, switchboard.EventDelta, `{}`)); err != nil {
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
	if err := db.AppendEvents(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	// A repeated (session, seq) is ignored: the first one stays.
	if err := db.AppendEvents(ctx, ev("s1", 3, switchboard.EventError, `{"code":"dup"}`), ev("other", 1, switchboard.EventState, `{}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, db)

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
		if err := db.AppendEvents(context.Background(), e); err == nil {
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
	if err := db.AppendEvents(ctx, ev("s", 1, switchboard.EventState, `{}`)); err != nil {
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
	if err := db.AppendEvents(ctx,
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
