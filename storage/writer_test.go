package storage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// Messages, input ids and usage from many sessions go through the event
// writer's transaction (group commit); one caller's failure must undo only
// its own writes, and every caller must learn its own outcome.
func TestWritesShareACommitAndFailAlone(t *testing.T) {
	ctx := context.Background()
	hold, entered, release, _ := holdWriter()
	db, _ := openFile(t, hold)
	t.Cleanup(release)
	newSession(t, db, "a", "")

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
	for deadline := time.Now().Add(10 * time.Second); len(db.queue) < 4; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d writes queued", len(db.queue))
		}
		time.Sleep(time.Millisecond)
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
	newSession(t, db, "a", "")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendMessages(ctx, "a", []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}}, false); !errors.Is(err, ErrClosed) {
		t.Errorf("AppendMessages after Close = %v, want ErrClosed", err)
	}
	if _, err := db.SeenInput(ctx, "a", "c1"); !errors.Is(err, ErrClosed) {
		t.Errorf("SeenInput after Close = %v, want ErrClosed", err)
	}
}

// Events nobody waits for linger to share a commit; a Flush, which someone
// waits for, ends the linger at once.
func TestEventsLingerUntilSomeoneWaits(t *testing.T) {
	ctx := context.Background()
	var batches [][]switchboard.Event
	record := func(o *options) {
		o.beforeBatch = func(evs []switchboard.Event) { batches = append(batches, evs) }
	}
	db, _ := openFile(t, WithLinger(time.Hour), record)
	for seq := int64(1); seq <= 3; seq++ {
		if err := db.AppendEvents(ctx, nil, ev("a", seq, switchboard.EventDelta, `{}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // without the linger, each would be its own batch
	}
	flushed := make(chan error, 1)
	go func() { flushed <- db.Flush(ctx) }()
	select {
	case err := <-flushed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Flush waited for the linger")
	}
	if len(batches) != 1 || len(batches[0]) != 3 {
		t.Fatalf("batches %v, want the three events in one", batches)
	}
}
