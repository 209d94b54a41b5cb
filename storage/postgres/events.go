package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-gw/switchboard"
)

// AppendEvents queues a session's events for the writer and returns
// without waiting for the commit. Only when the queue is full does it
// wait, until there is room or ctx ends: slowing producers down rather
// than dropping events. If ctx ends midway, the events before that point
// stay queued.
//
// The caller numbers the events; a session's events are stored only in
// order and without a gap (ErrGap), and a seq is never stored twice.
// published, if not nil, is called by the writer once the events are
// committed, or with the error that kept them out. It is the session's
// publisher: every call for one session passes the same one.
//
// On a replica (WithReplica), the events carry the epoch of the lease
// Fence recorded for the session when they are queued, and are stored
// only if the lease still has it when they are written; otherwise, or
// without a Fence, published is told ErrLeaseLost and nothing is stored.
func (db *DB) AppendEvents(ctx context.Context, published func([]switchboard.Event, error), evs ...switchboard.Event) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return fmt.Errorf("postgres: append events: %w", ErrClosed)
	}
	for _, ev := range evs {
		if err := ev.Numbered(); err != nil {
			return fmt.Errorf("postgres: append events: %w", err)
		}
	}
	for _, ev := range evs {
		if err := db.enqueue(ctx, request{ev: ev, epoch: db.fenceOf(ev.Session), published: published}); err != nil {
			return fmt.Errorf("postgres: append events: %w", err)
		}
	}
	return nil
}

// Flush returns once every write queued before the call is committed. It
// also returns any event write error the writer hit since the previous
// Flush.
func (db *DB) Flush(ctx context.Context) error {
	done := make(chan error, 1)
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return fmt.Errorf("postgres: flush: %w", ErrClosed)
	}
	err := db.enqueue(ctx, request{flush: done})
	db.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("postgres: flush: %w", err)
	}
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("postgres: flush: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("postgres: flush: %w", ctx.Err())
	}
}

const eventColumns = `seq, time, type, agent, data`

// EventsAfter returns up to limit stored events of a session with seq
// greater than afterSeq, in seq order; limit <= 0 means no limit. It sees
// committed events only: Flush first to include queued ones.
func (db *DB) EventsAfter(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]switchboard.Event, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	evs, err := db.events(ctx, sessionID, `SELECT `+eventColumns+` FROM events
		WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sessionID, afterSeq, lim)
	if err != nil {
		return nil, fmt.Errorf("postgres: events after: %w", err)
	}
	return evs, nil
}

// RecentMessages returns the message events of the last n user and
// assistant messages at or below throughSeq, in seq order: a recap of
// where a conversation was. It reads the events index backwards from
// throughSeq, so its cost does not grow with the history.
func (db *DB) RecentMessages(ctx context.Context, sessionID string, n int, throughSeq int64) ([]switchboard.Event, error) {
	evs, err := db.events(ctx, sessionID, `SELECT `+eventColumns+` FROM events
		WHERE session_id = $1 AND seq <= $2 AND type = 'message'
		AND switchboard_json(data) ->> 'role' IN ('user', 'assistant')
		ORDER BY seq DESC LIMIT $3`, sessionID, throughSeq, n)
	if err != nil {
		return nil, fmt.Errorf("postgres: recent messages: %w", err)
	}
	slices.Reverse(evs)
	return evs, nil
}

func (db *DB) events(ctx context.Context, sessionID, query string, args ...any) ([]switchboard.Event, error) {
	rows, err := db.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (switchboard.Event, error) {
		ev := switchboard.Event{Session: sessionID}
		var (
			ms        int64
			typ, data string
		)
		if err := row.Scan(&ev.Seq, &ms, &typ, &ev.Agent, &data); err != nil {
			return ev, err
		}
		ev.Time = fromMillis(ms)
		ev.Type = switchboard.EventType(typ)
		if data != "" {
			ev.Data = json.RawMessage(data)
		}
		return ev, nil
	})
}

// Decisions returns the last n answered approval requests of a session,
// oldest first: each confirmation_resolved event with the
// confirmation_request it answered. The event log is the record.
func (db *DB) Decisions(ctx context.Context, sessionID string, n int) ([]switchboard.Decision, error) {
	rows, err := db.pool.Query(ctx, `SELECT r.seq, r.time, r.data, q.data FROM events r
		LEFT JOIN LATERAL (
			SELECT q.data FROM events q
			WHERE q.session_id = r.session_id AND q.type = 'confirmation_request' AND q.seq < r.seq
			  AND switchboard_json(q.data) -> 'confirmation_id' = switchboard_json(r.data) -> 'confirmation_id'
			ORDER BY q.seq DESC LIMIT 1) q ON true
		WHERE r.session_id = $1 AND r.type = 'confirmation_resolved'
		ORDER BY r.seq DESC LIMIT $2`, sessionID, n)
	if err != nil {
		return nil, fmt.Errorf("postgres: decisions: %w", err)
	}
	var (
		ds       []switchboard.Decision
		ms       int64
		res      string
		req      *string
		seq      int64
		scanned  = []any{&seq, &ms, &res, &req}
		keepThis = func() error {
			d := switchboard.Decision{Seq: seq, Time: fromMillis(ms)}
			if json.Unmarshal([]byte(res), &d.Resolved) != nil {
				return nil // a row this gateway did not write: nothing to list
			}
			if req != nil {
				_ = json.Unmarshal([]byte(*req), &d.Request)
			}
			ds = append(ds, d)
			return nil
		}
	)
	if _, err := pgx.ForEachRow(rows, scanned, keepThis); err != nil {
		return nil, fmt.Errorf("postgres: decisions: %w", err)
	}
	slices.Reverse(ds)
	return ds, nil
}

// LastSeq returns the highest committed seq of a session, 0 if it has none.
// It does not flush: a caller that must count queued events flushes first.
func (db *DB) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	var seq int64
	err := db.pool.QueryRow(ctx, `SELECT COALESCE(max(seq), 0) FROM events WHERE session_id = $1`, sessionID).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("postgres: last seq: %w", err)
	}
	return seq, nil
}

// FindUI returns the UI segment with the given id from the session's
// stored ui events, the latest if several carry it, so an action can be
// checked against what was actually shown.
func (db *DB) FindUI(ctx context.Context, sessionID, uiID string) (switchboard.UI, error) {
	var data string
	err := db.pool.QueryRow(ctx, `SELECT data FROM events
		WHERE session_id = $1 AND type = $2 AND switchboard_json(data) ->> 'id' = $3
		ORDER BY seq DESC LIMIT 1`, sessionID, string(switchboard.EventUI), uiID).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.UI{}, fmt.Errorf("postgres: find ui %q: %w", uiID, ErrNotFound)
	}
	if err != nil {
		return switchboard.UI{}, fmt.Errorf("postgres: find ui %q: %w", uiID, err)
	}
	var ui switchboard.UI
	if err := json.Unmarshal([]byte(data), &ui); err != nil {
		return switchboard.UI{}, fmt.Errorf("postgres: find ui %q: %w", uiID, err)
	}
	return ui, nil
}
