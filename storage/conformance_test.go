package storage

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// The store test suite, which every store passes, on a real SQLite file,
// whose Close must report no write error the suite's tests had not seen.
// It runs twice: as the gateway opens the store, and with a small queue
// and small batches, so that a test's writes are spread over many commits
// and some wait for room in the queue.
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"defaults", nil},
		{"small batches", []Option{WithQueueSize(64), WithBatchSize(16)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Store {
				db, err := Open(context.Background(), filepath.Join(t.TempDir(), "switchboard.db"), c.opts...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := db.Close(); err != nil {
						t.Error(err)
					}
				})
				return db
			})
		})
	}
}
