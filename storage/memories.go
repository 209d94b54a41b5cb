package storage

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
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
	db.mems.forget(m.Owner)
	if err != nil {
		return fmt.Errorf("storage: add memory: %w", err)
	}
	return nil
}

// Memories are a person's memories, newest first, at most limit.
//
// Every turn reads the memories of the person it answers, and most people
// have none: they are kept in memory (memoryCache) from the first read
// until AddMemory or ForgetMemory changes them, so a turn costs no query.
// The cache is right because this process is the database file's only
// writer (lockFile) and those two are the only writes to the table.
func (db *DB) Memories(ctx context.Context, owner string, limit int) ([]switchboard.Memory, error) {
	if mems, ok := db.mems.get(owner); ok {
		return slices.Clone(mems[:min(limit, len(mems))]), nil
	}
	gen := db.mems.generation()
	// All of them (AddMemory keeps them within MaxMemories), so the list
	// kept answers any limit.
	all := max(limit, switchboard.MaxMemories)
	mems, err := db.readMemories(ctx, owner, all)
	if err != nil {
		return nil, err
	}
	if len(mems) < all {
		db.mems.put(gen, owner, mems)
	}
	return slices.Clone(mems[:min(limit, len(mems))]), nil
}

func (db *DB) readMemories(ctx context.Context, owner string, limit int) ([]switchboard.Memory, error) {
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

// maxCachedOwners bounds memoryCache: past it, an owner read is kept in
// place of one kept before. An owner with no memories costs a map entry.
const maxCachedOwners = 8192

// memoryCache holds people's memories as the database has them. A read
// that raced a change is not kept: put is refused when forget ran since
// the read's generation was taken, so a list read before a write committed
// cannot be kept after it.
type memoryCache struct {
	mu      sync.Mutex
	gen     uint64
	byOwner map[string][]switchboard.Memory
}

func (c *memoryCache) get(owner string) ([]switchboard.Memory, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mems, ok := c.byOwner[owner]
	return mems, ok
}

func (c *memoryCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *memoryCache) put(gen uint64, owner string, mems []switchboard.Memory) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.byOwner == nil {
		c.byOwner = map[string][]switchboard.Memory{}
	}
	if len(c.byOwner) >= maxCachedOwners {
		for k := range c.byOwner { // any one: map order is unspecified
			delete(c.byOwner, k)
			break
		}
	}
	c.byOwner[owner] = mems
}

// forget drops owner's list after a write to it (whether it committed or
// not: the next read asks the database).
func (c *memoryCache) forget(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.byOwner, owner)
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
	db.mems.forget(owner)
	if err != nil {
		return fmt.Errorf("storage: forget memory %s: %w", id, err)
	}
	return nil
}
