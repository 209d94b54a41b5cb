package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-gw/switchboard"
)

// Bind stores that b.Address shows b.SessionID. A place already bound to
// another session is bound anew, from b.RenderedSeq; binding it again to
// the same session keeps how far it was rendered and how it was bound.
//
// The same statement notifies NoteBound for the session, so that the
// replica running it, whichever it is, renders the place.
func (db *DB) Bind(ctx context.Context, b switchboard.Binding) error {
	_, err := db.pool.Exec(ctx, `WITH bound AS (
		INSERT INTO bindings AS o (channel, address, session_id, rendered_seq, created_at, by_invite)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (channel, address) DO UPDATE SET
			rendered_seq = CASE WHEN o.session_id = excluded.session_id THEN o.rendered_seq ELSE excluded.rendered_seq END,
			state = CASE WHEN o.session_id = excluded.session_id THEN o.state ELSE '' END,
			by_invite = CASE WHEN o.session_id = excluded.session_id THEN o.by_invite ELSE excluded.by_invite END,
			session_id = excluded.session_id
		RETURNING 1)
		SELECT pg_notify('switchboard', $7) FROM bound`,
		b.Channel, b.Address, b.SessionID, b.RenderedSeq, b.CreatedAt.UnixMilli(), b.ByInvite, payload(Note{Kind: NoteBound, Session: b.SessionID}))
	if err != nil {
		return fmt.Errorf("postgres: bind %s %s to %s: %w", b.Channel, b.Address, b.SessionID, err)
	}
	return nil
}

// Unbind removes the binding of a place, if any.
func (db *DB) Unbind(ctx context.Context, channel, address string) error {
	if _, err := db.pool.Exec(ctx, `DELETE FROM bindings WHERE channel = $1 AND address = $2`, channel, address); err != nil {
		return fmt.Errorf("postgres: unbind %s %s: %w", channel, address, err)
	}
	return nil
}

const bindingColumns = `b.channel, b.address, b.session_id, b.rendered_seq, b.created_at, b.state, b.by_invite`

func scanBinding(row pgx.CollectableRow) (switchboard.Binding, error) {
	var (
		b       switchboard.Binding
		created int64
	)
	err := row.Scan(&b.Channel, &b.Address, &b.SessionID, &b.RenderedSeq, &created, &b.State, &b.ByInvite)
	b.CreatedAt = fromMillis(created)
	return b, err
}

// Binding returns the binding of a place (ErrNotFound when it has none).
func (db *DB) Binding(ctx context.Context, channel, address string) (switchboard.Binding, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+bindingColumns+` FROM bindings b WHERE channel = $1 AND address = $2`, channel, address)
	var b switchboard.Binding
	if err == nil {
		b, err = pgx.CollectExactlyOneRow(rows, scanBinding)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return switchboard.Binding{Channel: channel, Address: address}, fmt.Errorf("postgres: binding %s %s: %w", channel, address, err)
	}
	return b, nil
}

// SessionBindings returns the places a session is shown in.
func (db *DB) SessionBindings(ctx context.Context, sessionID string) ([]switchboard.Binding, error) {
	return db.bindings(ctx, "session "+sessionID, `SELECT `+bindingColumns+`
		FROM bindings b WHERE session_id = $1 ORDER BY created_at, channel COLLATE "C", address COLLATE "C"`, sessionID)
}

// BindingsBehind returns a channel's bindings whose session has events
// the place has not been shown: what its listener catches up on start.
// One index probe per binding.
func (db *DB) BindingsBehind(ctx context.Context, channel string) ([]switchboard.Binding, error) {
	return db.bindings(ctx, "behind in "+channel, `SELECT `+bindingColumns+` FROM bindings b
		WHERE b.channel = $1 AND b.rendered_seq < (SELECT COALESCE(max(e.seq), 0) FROM events e WHERE e.session_id = b.session_id)
		ORDER BY b.created_at`, channel)
}

func (db *DB) bindings(ctx context.Context, what, query string, args ...any) ([]switchboard.Binding, error) {
	rows, err := db.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: bindings of %s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scanBinding)
	if err != nil {
		return nil, fmt.Errorf("postgres: bindings of %s: %w", what, err)
	}
	return out, nil
}

// SetRendered records that a place has been shown its session's events
// through seq. It never goes back: a late write of an older seq is a no-op.
// It is written in the writer's next batch (group commit, without waiting
// for the WAL flush): listeners record progress often, and losing the
// last of it only means showing an event again.
func (db *DB) SetRendered(ctx context.Context, channel, address, sessionID string, seq int64) error {
	err := db.inBatch(ctx, func(s *steps) error {
		s.exec(`UPDATE bindings SET rendered_seq = GREATEST(rendered_seq, $1)
			WHERE channel = $2 AND address = $3 AND session_id = $4`, seq, channel, address, sessionID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: rendered %s %s through %d: %w", channel, address, seq, err)
	}
	return nil
}

// SetBindingState keeps a listener's note about a place (see
// switchboard.Binding.State) while it shows sessionID. Like SetRendered,
// it shares the writer's next batch.
func (db *DB) SetBindingState(ctx context.Context, channel, address, sessionID, state string) error {
	err := db.inBatch(ctx, func(s *steps) error {
		s.exec(`UPDATE bindings SET state = $1 WHERE channel = $2 AND address = $3 AND session_id = $4`,
			state, channel, address, sessionID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: state of %s %s: %w", channel, address, err)
	}
	return nil
}
