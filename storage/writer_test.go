package storage

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// Messages, input ids and usage from many sessions go through the event
// writer's transaction (group commit); one caller's failure must undo only
// its own writes, and every caller must learn its own outcome. In a
// synctest bubble, so that the writes are known queued, not polled for.
func TestWritesShareACommitAndFailAlone(t *testing.T) {
	synctest.Test(t, testWritesShareACommitAndFailAlone)
}

func testWritesShareACommitAndFailAlone(t *testing.T) {
	ctx := context.Background()
	hold, entered, release, _ := holdWriter()
	db, _ := openFile(t, hold)
	t.Cleanup(release)
	storetest.NewSession(t, db, "a", "")

	if err := db.AppendEvents(ctx, nil, ev("a", 1, switchboard.EventState, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	// The writer is held: these queue up and will share its next batch.
	type result struct {
		name string
		err  error
		seen bool
	}
	results := make(chan result, 4)
	go func() {
		err := db.AppendMessages(ctx, "a", []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}}, false)
		results <- result{name: "messages a", err: err}
	}()
	go func() {
		// No such session: the foreign key fails this job only.
		err := db.AppendMessages(ctx, "ghost", []switchboard.Message{{Role: switchboard.RoleUser, Content: "boo"}}, false)
		results <- result{name: "messages ghost", err: err}
	}()
	go func() {
		seen, err := db.SeenInput(ctx, "a", "c1")
		results <- result{name: "seen a", err: err, seen: seen}
	}()
	go func() {
		err := writeTurn(ctx, db, "a", switchboard.TurnWrite{Usage: switchboard.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}})
		results <- result{name: "usage a", err: err}
	}()
	synctest.Wait() // each waits for its answer
	if n := len(db.queue); n != 4 {
		t.Fatalf("%d writes queued, want 4", n)
	}
	release()

	for range 4 {
		r := <-results
		switch r.name {
		case "messages ghost":
			if r.err == nil {
				t.Errorf("messages for a session that does not exist were accepted")
			}
		default:
			if r.err != nil || r.seen {
				t.Errorf("%s: err=%v seen=%v, want it stored beside the failed job", r.name, r.err, r.seen)
			}
		}
	}
	w, err := db.Window(ctx, "a", 10)
	if err != nil || len(w) != 1 || w[0].Content != "hi" {
		t.Fatalf("window of a = %v, %v; want the one message", w, err)
	}
	if n, err := db.MessageCount(ctx, "ghost"); err != nil || n != 0 {
		t.Fatalf("ghost has %d messages (%v), want none", n, err)
	}
	s, err := db.Session(ctx, "a")
	if err != nil || s.Usage.TotalTokens != 7 {
		t.Fatalf("usage of a = %+v, %v; want 7 tokens", s.Usage, err)
	}
	if seen, err := db.SeenInput(ctx, "a", "c1"); err != nil || !seen {
		t.Fatalf("second SeenInput = %v, %v; want seen", seen, err)
	}
	flush(t, db)
	if evs, err := db.EventsAfter(ctx, "a", 0, 0); err != nil || len(evs) != 1 {
		t.Fatalf("events of a = %v, %v; want the held one", evs, err)
	}
}

func TestWritesAfterCloseAreRefused(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	storetest.NewSession(t, db, "a", "")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendMessages(ctx, "a", []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}}, false); !errors.Is(err, switchboard.ErrClosed) {
		t.Errorf("AppendMessages after Close = %v, want ErrClosed", err)
	}
	if _, err := db.SeenInput(ctx, "a", "c1"); !errors.Is(err, switchboard.ErrClosed) {
		t.Errorf("SeenInput after Close = %v, want ErrClosed", err)
	}
}

// Events nobody waits for linger to share a commit; a Flush, which someone
// waits for, ends the linger at once; without one, the batch commits when
// the linger is up. The clock is synctest's: the linger is an hour, and a
// Flush that waited for it would show on the clock.
func TestEventsLingerUntilSomeoneWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const linger = time.Hour
		var mu sync.Mutex
		var batches [][]switchboard.Event
		record := func(o *options) {
			o.beforeBatch = func(evs []switchboard.Event) {
				mu.Lock()
				defer mu.Unlock()
				batches = append(batches, append([]switchboard.Event(nil), evs...))
			}
		}
		committed := func() [][]switchboard.Event {
			mu.Lock()
			defer mu.Unlock()
			return append([][]switchboard.Event(nil), batches...)
		}
		db, _ := openFile(t, WithLinger(linger), record)

		start := time.Now()
		for seq := int64(1); seq <= 3; seq++ {
			if err := db.AppendEvents(ctx, nil, ev("a", seq, switchboard.EventDelta, `{}`)); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // the writer has taken it: without the linger, it would commit it alone
			if b := committed(); len(b) != 0 {
				t.Fatalf("after event %d: batches %v committed, want them lingering", seq, b)
			}
		}
		flush(t, db)
		if waited := time.Since(start); waited >= linger {
			t.Fatalf("Flush returned %s after the first event: it waited for the linger (%s)", waited, linger)
		}
		if b := committed(); len(b) != 1 || len(b[0]) != 3 {
			t.Fatalf("batches %v, want the three events in one", b)
		}

		// Nobody waits for the next one: it commits when the linger is up,
		// not a moment before.
		if err := db.AppendEvents(ctx, nil, ev("a", 4, switchboard.EventDelta, `{}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(linger - time.Nanosecond)
		synctest.Wait()
		if b := committed(); len(b) != 1 {
			t.Fatalf("%d batches a moment before the linger is up, want 1", len(b))
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if b := committed(); len(b) != 2 || len(b[1]) != 1 || b[1][0].Seq != 4 {
			t.Fatalf("batches %v once the linger is up, want the fourth event alone in a second", b)
		}
	})
}
