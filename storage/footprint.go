package storage

// What the store holds that grows with use besides the conversations'
// events and messages: people's memories, compacted sessions' summaries and
// the recall index (issue 24). Footprint reads their sizes for /metrics.

import (
	"context"
	"fmt"

	"github.com/switchboard-gw/switchboard"
)

// recallTables are the tables FTS5 keeps messages_fts in, for dbstat.
const recallTables = `'messages_fts_data', 'messages_fts_idx', 'messages_fts_content', 'messages_fts_docsize', 'messages_fts_config'`

// Footprint reads how many memories, summaries and indexed messages the
// store holds and how much disk the recall index takes. The counts are
// cheap (an index's or a small table's rows: 3 ms for a million indexed
// messages); the bytes are not, for SQLite's dbstat walks every page of the
// index's tables (~60 ms for a million chat-line messages, growing with
// their text), so the gateway reads this at most once a minute.
func (db *DB) Footprint(ctx context.Context) (switchboard.Footprint, error) {
	var f switchboard.Footprint
	for _, q := range []struct {
		into  *int64
		query string
	}{
		{&f.Memories, `SELECT count(*) FROM memories`},
		{&f.Summaries, `SELECT count(*) FROM summaries`},
		// One docsize row per indexed message: far smaller rows than the
		// index's copy of the text, which count(*) on messages_fts reads.
		{&f.IndexedMessages, `SELECT count(*) FROM messages_fts_docsize`},
		{&f.IndexBytes, `SELECT COALESCE(sum(pgsize), 0) FROM dbstat WHERE aggregate = TRUE AND name IN (` + recallTables + `)`},
	} {
		if err := db.read.QueryRowContext(ctx, q.query).Scan(q.into); err != nil {
			return switchboard.Footprint{}, fmt.Errorf("storage: footprint: %w", err)
		}
	}
	return f, nil
}
