package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-gw/switchboard"
)

// AddMemory keeps something a person asked the assistant to remember, up
// to switchboard.MaxMemories a person (ErrMemoriesFull). The count and the
// insert run under a lock on the person, so replicas adding at once cannot
// pass the bound together.
func (db *DB) AddMemory(ctx context.Context, m switchboard.Memory) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('memories:' || $1, 0))`, m.Owner); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM memories WHERE owner = $1`, m.Owner).Scan(&n); err != nil {
			return err
		}
		if n >= switchboard.MaxMemories {
			return fmt.Errorf("%w (%d)", switchboard.ErrMemoriesFull, n)
		}
		_, err := tx.Exec(ctx, `INSERT INTO memories (id, owner, text, session_id, channel, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			m.ID, m.Owner, m.Text, m.SessionID, m.Channel, m.CreatedAt.UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: add memory: %w", err)
	}
	return nil
}

// Memories are a person's memories, newest first, at most limit.
//
// Unlike the SQLite store, which keeps them in memory between changes
// because its process is the database's only writer, this reads them each
// time (one index probe): another replica may have changed them.
func (db *DB) Memories(ctx context.Context, owner string, limit int) ([]switchboard.Memory, error) {
	rows, err := db.pool.Query(ctx, `SELECT id, text, session_id, channel, created_at FROM memories
		WHERE owner = $1 ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT $2`, owner, max(limit, 0))
	if err != nil {
		return nil, fmt.Errorf("postgres: memories: %w", err)
	}
	mems, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (switchboard.Memory, error) {
		m := switchboard.Memory{Owner: owner}
		var at int64
		err := row.Scan(&m.ID, &m.Text, &m.SessionID, &m.Channel, &at)
		m.CreatedAt = fromMillis(at)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: memories: %w", err)
	}
	return mems, nil
}

// ForgetMemory deletes one of owner's memories for good: ErrNotFound when
// there is no such memory of theirs (someone else's is not touched).
func (db *DB) ForgetMemory(ctx context.Context, owner, id string) error {
	tag, err := db.pool.Exec(ctx, `DELETE FROM memories WHERE id = $1 AND owner = $2`, id, owner)
	if err == nil && tag.RowsAffected() == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres: forget memory %s: %w", id, err)
	}
	return nil
}
