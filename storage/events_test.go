package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// ev is storetest.Event, the event the suite's tests use.
func ev(session string, seq int64, typ switchboard.EventType, data string) switchboard.Event {
	return storetest.Event(session, seq, typ, data)
}

func flush(t testing.TB, db *DB) {
	t.Helper()
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
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

// One session's gap fails that session's events alone, also when another
// session's share the batch: the writer writes each part of a failed batch
// on its own (writeBatch). How a gap is refused, and numbered past, is the
// suite's (storetest).
func TestAGapFailsOnlyItsSessionInASharedBatch(t *testing.T) {
	ctx := context.Background()
	hold, entered, release, batches := holdWriter()
	db, _ := openFile(t, hold)
	t.Cleanup(release)

	if err := db.AppendEvents(ctx, nil, ev("first", 1, switchboard.EventState, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	// Held: a's events and b's, which start at 2, share the next batch.
	var a, b storetest.Recorder
	for _, e := range []switchboard.Event{ev("a", 1, switchboard.EventDelta, `{}`), ev("a", 2, switchboard.EventDelta, `{}`), ev("b", 2, switchboard.EventDelta, `{}`),
		ev("a", 3, switchboard.EventDelta, `{}`), ev("b", 3, switchboard.EventDelta, `{}`)} {
		r := &a
		if e.Session == "b" {
			r = &b
		}
		if err := db.AppendEvents(ctx, r.Published, e); err != nil {
			t.Fatal(err)
		}
	}
	release()
	if err := db.Flush(ctx); !errors.Is(err, switchboard.ErrGap) {
		t.Errorf("Flush after a gap = %v, want ErrGap", err)
	}
	if len(*batches) != 2 || len((*batches)[1]) != 5 {
		t.Fatalf("batches %v, want the held one and then a's and b's events in one", *batches)
	}
	if got := fmt.Sprint(a.Seqs(true), b.Seqs(false)); got != "[1 2 3] [2 3]" || len(a.Seqs(false))+len(b.Seqs(true)) != 0 {
		t.Errorf("published: a's %v stored, b's %v refused; want a's 1-3 stored, b's 2-3 refused, nothing else", a.Seqs(true), b.Seqs(false))
	}
	storetest.CheckPublished(t, db, &a)
	storetest.CheckPublished(t, db, &b)
}
