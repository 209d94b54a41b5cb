package storage

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// AcceptInput's commit waits for the disk (synchronous=FULL); the writes
// after it go back to NORMAL.
func TestAcceptInputIsDurable(t *testing.T) {
	ctx := context.Background()
	hold, entered, release, _ := holdWriter()
	db, _ := openFile(t, hold)
	t.Cleanup(release)
	storetest.NewSession(t, db, "s1", "")
	// syncMode reads the writer connection's mode inside a batch.
	syncMode := func() (int, error) {
		var mode int
		err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&mode)
		})
		return mode, err
	}
	if mode, err := syncMode(); err != nil || mode != 1 {
		t.Fatalf("synchronous = %d, %v; want 1 (NORMAL) by default", mode, err)
	}

	if err := db.AppendEvents(ctx, nil, ev("first", 1, switchboard.EventState, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered
	// Held: the input and the probe share the next batch.
	accepted := make(chan error, 1)
	go func() {
		_, _, err := db.AcceptInput(ctx, "s1", "c1", switchboard.Input{Kind: switchboard.InputText, ClientID: "c1", Text: "hi"})
		accepted <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); len(db.queue) < 1; {
		if time.Now().After(deadline) {
			t.Fatal("AcceptInput not queued")
		}
		time.Sleep(time.Millisecond)
	}
	type probe struct {
		mode int
		err  error
	}
	probed := make(chan probe, 1)
	go func() {
		mode, err := syncMode()
		probed <- probe{mode, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); len(db.queue) < 2; {
		if time.Now().After(deadline) {
			t.Fatal("probe not queued")
		}
		time.Sleep(time.Millisecond)
	}
	release()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	if p := <-probed; p.err != nil || p.mode != 2 {
		t.Errorf("synchronous in AcceptInput's batch = %d, %v; want 2 (FULL)", p.mode, p.err)
	}
	if mode, err := syncMode(); err != nil || mode != 1 {
		t.Errorf("synchronous after AcceptInput = %d, %v; want 1 (NORMAL) again", mode, err)
	}
}
