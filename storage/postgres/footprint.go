package postgres

import (
	"context"
	"fmt"
)

// Footprint reads how many memories, summaries and indexed messages the
// store holds and how much disk the recall index takes: the GIN index's
// size (the words themselves live in the messages' rows, in their recall
// column). Counting the indexed messages reads every message's row: read
// it at most once a minute, as the gateway does.
func (db *DB) Footprint(ctx context.Context) (Footprint, error) {
	var f Footprint
	err := db.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM memories),
		(SELECT count(*) FROM summaries),
		(SELECT count(*) FROM messages WHERE recall IS NOT NULL),
		pg_relation_size('messages_recall')`).Scan(&f.Memories, &f.Summaries, &f.IndexedMessages, &f.IndexBytes)
	if err != nil {
		return Footprint{}, fmt.Errorf("postgres: footprint: %w", err)
	}
	return f, nil
}
