package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/switchboard-gw/switchboard"
)

// Bind stores that b.Address shows b.SessionID. A place already bound to
// another session is bound anew, from b.RenderedSeq (whether it may be is
// the sessions' decision: a join never re-binds a thread); binding it
// again to the same session keeps how far it was rendered and how it was
// bound.
func (db *DB) Bind(ctx context.Context, b switchboard.Binding) error {
	_, err := db.write.ExecContext(ctx, `INSERT INTO bindings (channel, address, session_id, rendered_seq, created_at, by_invite)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (channel, address) DO UPDATE SET
			rendered_seq = CASE WHEN session_id = excluded.session_id THEN rendered_seq ELSE excluded.rendered_seq END,
			state = CASE WHEN session_id = excluded.session_id THEN state ELSE '' END,
			by_invite = CASE WHEN session_id = excluded.session_id THEN by_invite ELSE excluded.by_invite END,
			session_id = excluded.session_id`,
		b.Channel, b.Address, b.SessionID, b.RenderedSeq, b.CreatedAt.UnixMilli(), b.ByInvite)
	if err != nil {
		return fmt.Errorf("storage: bind %s %s to %s: %w", b.Channel, b.Address, b.SessionID, err)
	}
	return nil
}

// Unbind removes the binding of a place, if any.
func (db *DB) Unbind(ctx context.Context, channel, address string) error {
	if _, err := db.write.ExecContext(ctx, `DELETE FROM bindings WHERE channel = ? AND address = ?`, channel, address); err != nil {
		return fmt.Errorf("storage: unbind %s %s: %w", channel, address, err)
	}
	return nil
}

// Binding returns the binding of a place (ErrNotFound when it has none).
func (db *DB) Binding(ctx context.Context, channel, address string) (switchboard.Binding, error) {
	b := switchboard.Binding{Channel: channel, Address: address}
	var created int64
	err := db.read.QueryRowContext(ctx, `SELECT session_id, rendered_seq, created_at, state, by_invite FROM bindings
		WHERE channel = ? AND address = ?`, channel, address).Scan(&b.SessionID, &b.RenderedSeq, &created, &b.State, &b.ByInvite)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return b, fmt.Errorf("storage: binding %s %s: %w", channel, address, err)
	}
	b.CreatedAt = fromMillis(created)
	return b, nil
}

// SessionBindings returns the places a session is shown in.
func (db *DB) SessionBindings(ctx context.Context, sessionID string) ([]switchboard.Binding, error) {
	return db.bindings(ctx, "session "+sessionID, `SELECT channel, address, session_id, rendered_seq, created_at, state, by_invite
		FROM bindings WHERE session_id = ? ORDER BY created_at, channel, address`, sessionID)
}

// BindingsBehind returns a channel's bindings whose session has events
// the place has not been shown: what its listener catches up on start.
// Cheap however many places are bound: one index probe per binding.
func (db *DB) BindingsBehind(ctx context.Context, channel string) ([]switchboard.Binding, error) {
	return db.bindings(ctx, "behind in "+channel, `SELECT b.channel, b.address, b.session_id, b.rendered_seq, b.created_at, b.state, b.by_invite
		FROM bindings b
		WHERE b.channel = ? AND b.rendered_seq < (SELECT COALESCE(MAX(e.seq), 0) FROM events e WHERE e.session_id = b.session_id)
		ORDER BY b.created_at`, channel)
}

func (db *DB) bindings(ctx context.Context, what, query string, args ...any) ([]switchboard.Binding, error) {
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("storage: bindings of %s: %w", what, err)
	}
	defer rows.Close()
	var out []switchboard.Binding
	for rows.Next() {
		var b switchboard.Binding
		var created int64
		if err := rows.Scan(&b.Channel, &b.Address, &b.SessionID, &b.RenderedSeq, &created, &b.State, &b.ByInvite); err != nil {
			return nil, fmt.Errorf("storage: bindings of %s: %w", what, err)
		}
		b.CreatedAt = fromMillis(created)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: bindings of %s: %w", what, err)
	}
	return out, nil
}

// SetRendered records that a place has been shown its session's events
// through seq. It never goes back: a late write of an older seq is a no-op.
//
// It is written in the writer's next batch (group commit, not waiting for
// the disk): listeners record progress often, and losing the last of it
// to a power cut only means showing an event again.
func (db *DB) SetRendered(ctx context.Context, channel, address, sessionID string, seq int64) error {
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE bindings SET rendered_seq = MAX(rendered_seq, ?)
			WHERE channel = ? AND address = ? AND session_id = ?`, seq, channel, address, sessionID)
		return err
	})
	if err != nil {
		return fmt.Errorf("storage: rendered %s %s through %d: %w", channel, address, seq, err)
	}
	return nil
}

// SetBindingState keeps a listener's note about a place (see
// switchboard.Binding.State) while it shows sessionID.
// Like SetRendered, it shares the writer's next batch.
func (db *DB) SetBindingState(ctx context.Context, channel, address, sessionID, state string) error {
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE bindings SET state = ?
			WHERE channel = ? AND address = ? AND session_id = ?`, state, channel, address, sessionID)
		return err
	})
	if err != nil {
		return fmt.Errorf("storage: state of %s %s: %w", channel, address, err)
	}
	return nil
}
