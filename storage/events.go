package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/switchboard-gw/switchboard"
)

// AppendEvents queues a session's events for the background writer and
// returns without waiting for the commit. Only when the queue is full does
// it wait, until there is room or ctx ends: slowing producers down rather
// than dropping events. If ctx ends midway, the events before that point
// stay queued.
//
// The caller numbers the events; a session's events are stored only in
// order and without a gap (switchboard.ErrGap), and a seq is never stored
// twice. published, if not nil, is called by the writer once the events
// are committed, or with the error that kept them out: a caller that
// shows events only from there never shows one a crash could lose. It is
// the session's publisher: every call for one session passes the same one
// (a batch tells the first it holds of all the session's events in it).
func (db *DB) AppendEvents(ctx context.Context, published func([]switchboard.Event, error), evs ...switchboard.Event) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return fmt.Errorf("storage: append events: %w", switchboard.ErrClosed)
	}
	// Checked here, where the caller can still act on it, rather than in a
	// batch that other sessions' events share.
	for _, ev := range evs {
		if err := ev.Numbered(); err != nil {
			return fmt.Errorf("storage: append events: %w", err)
		}
	}
	for _, ev := range evs {
		if err := db.enqueue(ctx, writeReq{ev: ev, published: published}); err != nil {
			return fmt.Errorf("storage: append events: %w", err)
		}
	}
	return nil
}

// Flush returns once every event queued before the call is committed. It
// also returns any write error the writer hit since the previous Flush.
func (db *DB) Flush(ctx context.Context) error {
	done := make(chan error, 1)
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return fmt.Errorf("storage: flush: %w", switchboard.ErrClosed)
	}
	err := db.enqueue(ctx, writeReq{flush: done})
	db.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("storage: flush: %w", err)
	}
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("storage: flush: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("storage: flush: %w", ctx.Err())
	}
}

// EventsAfter returns up to limit stored events of a session with seq
// greater than afterSeq, in seq order; limit <= 0 means no limit. It sees
// committed events only: Flush first to include queued ones.
func (db *DB) EventsAfter(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]switchboard.Event, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := db.read.QueryContext(ctx, `SELECT seq, time, type, agent, data FROM events
		WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`, sessionID, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("storage: events after: %w", err)
	}
	evs, err := scanEvents(sessionID, rows)
	if err != nil {
		return nil, fmt.Errorf("storage: events after: %w", err)
	}
	return evs, nil
}

// RecentMessages returns the message events of the last n user and
// assistant messages at or below throughSeq, in seq order: a recap of
// where a conversation was. It reads the events index backwards from
// throughSeq, so its cost does not grow with the history.
func (db *DB) RecentMessages(ctx context.Context, sessionID string, n int, throughSeq int64) ([]switchboard.Event, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT seq, time, type, agent, data FROM events
		WHERE session_id = ? AND seq <= ? AND type = 'message'
		AND json_extract(data, '$.role') IN ('user', 'assistant')
		ORDER BY seq DESC LIMIT ?`, sessionID, throughSeq, n)
	if err != nil {
		return nil, fmt.Errorf("storage: recent messages: %w", err)
	}
	evs, err := scanEvents(sessionID, rows)
	if err != nil {
		return nil, fmt.Errorf("storage: recent messages: %w", err)
	}
	slices.Reverse(evs)
	return evs, nil
}

// Decisions returns the last n answered approval requests of a session,
// oldest first: each confirmation_resolved event (who, from where, when)
// with the confirmation_request it answered (which tool, which arguments).
// The event log is the record: nothing is stored twice.
func (db *DB) Decisions(ctx context.Context, sessionID string, n int) ([]switchboard.Decision, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT r.seq, r.time, r.type, r.agent, r.data, q.data FROM events r
		LEFT JOIN events q ON q.session_id = r.session_id AND q.type = 'confirmation_request'
		  AND q.seq < r.seq AND json_valid(q.data) AND json_valid(r.data)
		  AND json_extract(q.data, '$.confirmation_id') = json_extract(r.data, '$.confirmation_id')
		WHERE r.session_id = ? AND r.type = 'confirmation_resolved'
		ORDER BY r.seq DESC LIMIT ?`, sessionID, n)
	if err != nil {
		return nil, fmt.Errorf("storage: decisions: %w", err)
	}
	defer rows.Close()
	var ds []switchboard.Decision
	for rows.Next() {
		var (
			ms              int64
			typ, agent, res string
			req             sql.NullString
			d               switchboard.Decision
		)
		if err := rows.Scan(&d.Seq, &ms, &typ, &agent, &res, &req); err != nil {
			return nil, fmt.Errorf("storage: decisions: %w", err)
		}
		d.Time = fromMillis(ms)
		if err := json.Unmarshal([]byte(res), &d.Resolved); err != nil {
			continue // a row this gateway did not write: nothing to list
		}
		if req.Valid {
			_ = json.Unmarshal([]byte(req.String), &d.Request)
		}
		ds = append(ds, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: decisions: %w", err)
	}
	slices.Reverse(ds)
	return ds, nil
}

func scanEvents(sessionID string, rows *sql.Rows) ([]switchboard.Event, error) {
	defer rows.Close()
	var evs []switchboard.Event
	for rows.Next() {
		var (
			ev   = switchboard.Event{Session: sessionID}
			ms   int64
			typ  string
			data string
		)
		if err := rows.Scan(&ev.Seq, &ms, &typ, &ev.Agent, &data); err != nil {
			return nil, err
		}
		ev.Time = fromMillis(ms)
		ev.Type = switchboard.EventType(typ)
		if data != "" {
			ev.Data = json.RawMessage(data)
		}
		evs = append(evs, ev)
	}
	return evs, rows.Err()
}

// LastSeq returns the highest committed seq of a session, 0 if it has none.
// It does not flush: a caller that must count queued events flushes first.
func (db *DB) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	var seq int64
	err := db.read.QueryRowContext(ctx,
		`SELECT seq FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1`, sessionID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("storage: last seq: %w", err)
	}
	return seq, nil
}

// FindUI returns the UI segment with the given id from the session's stored
// ui events, the latest if several carry it, so an action can be checked
// against what was actually shown.
func (db *DB) FindUI(ctx context.Context, sessionID, uiID string) (switchboard.UI, error) {
	var data string
	// json_valid guards json_extract, which fails the whole query on one
	// malformed row.
	err := db.read.QueryRowContext(ctx, `SELECT data FROM events
		WHERE session_id = ? AND type = ?
		  AND CASE WHEN json_valid(data) THEN json_extract(data, '$.id') END = ?
		ORDER BY seq DESC LIMIT 1`, sessionID, string(switchboard.EventUI), uiID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return switchboard.UI{}, fmt.Errorf("storage: find ui %q: %w", uiID, ErrNotFound)
	}
	if err != nil {
		return switchboard.UI{}, fmt.Errorf("storage: find ui %q: %w", uiID, err)
	}
	var ui switchboard.UI
	if err := json.Unmarshal([]byte(data), &ui); err != nil {
		return switchboard.UI{}, fmt.Errorf("storage: find ui %q: %w", uiID, err)
	}
	return ui, nil
}
