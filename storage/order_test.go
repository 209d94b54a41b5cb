package storage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// waitQueued waits until n requests wait in the writer's queue.
func waitQueued(t *testing.T, db *DB, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(db.queue) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued, want %d", len(db.queue), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The writer keeps queue order: events queued after a WriteTurn's events
// follow them, even when both share a batch (else s/2 would be refused
// with switchboard.ErrGap).
func TestEventsQueuedAfterAWriteTurnAreWrittenAfterIt(t *testing.T) {
	ctx := context.Background()
	hold, entered, release, _ := holdWriter()
	db, _ := openFile(t, hold)
	t.Cleanup(release)
	storetest.NewSession(t, db, "s", "")
	if err := db.AppendEvents(ctx, nil, ev("first", 1, switchboard.EventState, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	wrote := make(chan error, 1)
	go func() {
		_, err := db.WriteTurn(ctx, "s", switchboard.TurnWrite{
			Messages: []switchboard.Message{user("hi")},
			Events:   []switchboard.Event{ev("s", 1, switchboard.EventMessage, `{}`)},
		})
		wrote <- err
	}()
	waitQueued(t, db, 1)
	var r storetest.Recorder
	if err := db.AppendEvents(ctx, r.Published, ev("s", 2, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(ctx); errors.Is(err, switchboard.ErrGap) {
		t.Errorf("s/2, queued after the write of s/1, was refused: %v", err)
	}
	if last, err := db.LastSeq(ctx, "s"); err != nil || last != 2 {
		t.Errorf("LastSeq = %d, %v; want 2", last, err)
	}
}

// A WriteTurn's Published hears only of events it stored: a write that
// fails, whichever part failed, returns its error to the caller and tells
// Published nothing.
func TestWriteTurnPublishesOnlyWhatItStored(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	var early, late storetest.Recorder
	// Fails on its message: ghost is not a session.
	if _, err := db.WriteTurn(ctx, "ghost", switchboard.TurnWrite{
		Messages:  []switchboard.Message{user("hi")},
		Events:    []switchboard.Event{ev("ghost", 1, switchboard.EventMessage, `{}`)},
		Published: early.Published,
	}); err == nil {
		t.Fatal("WriteTurn for an unknown session succeeded")
	}
	// Fails on its usage, after the events.
	if _, err := db.WriteTurn(ctx, "ghost", switchboard.TurnWrite{
		Events:    []switchboard.Event{ev("ghost", 1, switchboard.EventMessage, `{}`)},
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
func TestWriteTurnWaitsForTheEventsBeforeIt(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	storetest.NewSession(t, db, "s", "")
	if err := db.AppendEvents(ctx, nil, ev("s", 1, switchboard.EventMessage, `{}`), ev("s", 2, switchboard.EventDelta, `{}`)); err != nil {
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
	if err := db.AppendEvents(ctx, nil, ev("s", 3, switchboard.EventDelta, `{}`)); err != nil {
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
