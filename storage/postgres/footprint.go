package postgres

import (
	"context"
	"fmt"

	"github.com/switchboard-gw/switchboard"
)

// Footprint reads how many memories, summaries and indexed messages the
// store holds and how much disk the recall index takes: the GIN index's
// size (the words themselves live in the messages' rows, in their recall
// column). Counting the indexed messages reads every message's row: read
// it at most once a minute, as the gateway does.
func (db *DB) Footprint(ctx context.Context) (switchboard.Footprint, error) {
	var f switchboard.Footprint
	err := db.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM memories),
		(SELECT count(*) FROM summaries),
		(SELECT count(*) FROM messages WHERE recall IS NOT NULL),
		pg_relation_size('messages_recall')`).Scan(&f.Memories, &f.Summaries, &f.IndexedMessages, &f.IndexBytes)
	if err != nil {
		return switchboard.Footprint{}, fmt.Errorf("postgres: footprint: %w", err)
	}
	return f, nil
}
