package storage

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// The recall index's bytes are FTS5's tables on disk: some for an empty
// index, and at least as many more as the text it is given. The counts
// beside them are the suite's (storetest).
func TestFootprintIndexBytes(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	empty, err := db.Footprint(ctx)
	if err != nil || empty.IndexBytes <= 0 {
		t.Fatalf("an empty store's footprint: %+v, %v; want the bytes of an empty index", empty, err)
	}
	// 2,000 messages of 1 KiB: the index keeps a copy of their text, so
	// it grows by at least 2 MB.
	storetest.NewSession(t, db, "s1", "")
	msgs := make([]switchboard.Message, 2000)
	for i := range msgs {
		msgs[i] = switchboard.Message{Role: switchboard.RoleUser, Content: fmt.Sprintf("message %d %s", i, strings.Repeat("words of a long message ", 43))}
	}
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	grown, err := db.Footprint(ctx)
	if err != nil || grown.IndexedMessages != 2000 || grown.IndexBytes-empty.IndexBytes < 2_000_000 {
		t.Fatalf("after 2,000 messages of 1 KiB: %+v, %v (was %+v)", grown, err, empty)
	}
}
