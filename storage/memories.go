package storage

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// AddMemory keeps something a person asked the assistant to remember.
func (db *DB) AddMemory(ctx context.Context, m switchboard.Memory) error {
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM memories WHERE owner = ?`, m.Owner).Scan(&n); err != nil {
			return err
		}
		if n >= switchboard.MaxMemories {
			return fmt.Errorf("%w (%d)", switchboard.ErrMemoriesFull, n)
		}
		_, err := db.execWrite(ctx, tx, `INSERT INTO memories (id, owner, text, session_id, channel, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			m.ID, m.Owner, m.Text, m.SessionID, m.Channel, m.CreatedAt.UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("storage: add memory: %w", err)
	}
	return nil
}

// Memories are a person's memories, newest first, at most limit.
func (db *DB) Memories(ctx context.Context, owner string, limit int) ([]switchboard.Memory, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, text, session_id, channel, created_at FROM memories
		WHERE owner = ? ORDER BY created_at DESC, id DESC LIMIT ?`, owner, limit)
	if err != nil {
		return nil, fmt.Errorf("storage: memories: %w", err)
	}
	defer rows.Close()
	var out []switchboard.Memory
	for rows.Next() {
		m := switchboard.Memory{Owner: owner}
		var at int64
		if err := rows.Scan(&m.ID, &m.Text, &m.SessionID, &m.Channel, &at); err != nil {
			return nil, fmt.Errorf("storage: memories: %w", err)
		}
		m.CreatedAt = time.UnixMilli(at).UTC()
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: memories: %w", err)
	}
	return out, nil
}

// ForgetMemory deletes one of owner's memories for good: ErrNotFound when
// there is no such memory of theirs (someone else's is not touched).
func (db *DB) ForgetMemory(ctx context.Context, owner, id string) error {
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := db.execWrite(ctx, tx, `DELETE FROM memories WHERE id = ? AND owner = ?`, id, owner)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmp.Or(err, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: forget memory %s: %w", id, err)
	}
	return nil
}
