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
