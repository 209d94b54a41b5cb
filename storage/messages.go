package storage

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-gw/switchboard"
)

const (
	insertMessage = `INSERT INTO messages (session_id, role, data, created_at) VALUES (?, ?, ?, ?)`
	// indexMessage makes a message's text findable by Search.
	indexMessage = `INSERT INTO messages_fts (rowid, text) VALUES (?, ?)`
	savePending  = `INSERT INTO pending_turns (session_id, data, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (session_id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`
	deletePending   = `DELETE FROM pending_turns WHERE session_id = ?`
	insertSeenInput = `INSERT INTO seen_inputs (session_id, client_id, seen_at) VALUES (?, ?, ?)
		ON CONFLICT (session_id, client_id) DO NOTHING`
	deleteSeenInput = `DELETE FROM seen_inputs WHERE session_id = ? AND client_id = ?`
	insertInbox     = `INSERT INTO inbox (session_id, data, received_at) VALUES (?, ?, ?)`
	deleteInbox     = `DELETE FROM inbox WHERE id = ? AND session_id = ?`
)

// AppendMessages adds messages to a session's context in one transaction:
// an assistant message that called tools is always stored with all of its
// results, or not at all. With clearPending, the session's open turn is
// deleted in the same transaction, since these messages complete it.
func (db *DB) AppendMessages(ctx context.Context, sessionID string, msgs []switchboard.Message, clearPending bool) error {
	if _, err := db.WriteTurn(ctx, sessionID, switchboard.TurnWrite{Messages: msgs, EndTurn: clearPending}); err != nil {
		return fmt.Errorf("storage: append messages: %w", err)
	}
	return nil
}

// windowQuery walks the (session_id, id) index backwards from the newest
// message and stops after n rows, so its cost does not grow with history.
const windowQuery = `SELECT data FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT ?`

// Window returns the session's last n messages, oldest first, minus any
// tool results at its start: those belong to an assistant message that fell
// outside the window, and a provider rejects a result without its call.
// The window may therefore hold fewer than n messages.
func (db *DB) Window(ctx context.Context, sessionID string, n int) ([]switchboard.Message, error) {
	return db.window(ctx, windowQuery, n, sessionID)
}

// window reads the last n messages query selects (args, then n), newest
// first, and returns them oldest first without leading tool results.
func (db *DB) window(ctx context.Context, query string, n int, args ...any) ([]switchboard.Message, error) {
	if n <= 0 {
		return nil, nil
	}
	rows, err := db.read.QueryContext(ctx, query, append(args, n)...)
	if err != nil {
		return nil, fmt.Errorf("storage: window: %w", err)
	}
	defer rows.Close()
	msgs := make([]switchboard.Message, 0, n)
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("storage: window: %w", err)
		}
		var m switchboard.Message
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			return nil, fmt.Errorf("storage: window: %w", err)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: window: %w", err)
	}
	slices.Reverse(msgs)
	// Tool results follow their assistant message, so once the leading
	// orphans are gone every remaining group is whole.
	start := 0
	for start < len(msgs) && msgs[start].Role == switchboard.RoleTool {
		start++
	}
	return msgs[start:], nil
}

// MessageCount returns how many context messages a session has stored.
func (db *DB) MessageCount(ctx context.Context, sessionID string) (int64, error) {
	var n int64
	if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE session_id = ?`, sessionID).Scan(&n); err != nil {
		return 0, fmt.Errorf("storage: message count: %w", err)
	}
	return n, nil
}

// LoadPending returns a session's open turn (ErrNotFound if none).
func (db *DB) LoadPending(ctx context.Context, sessionID string) ([]byte, error) {
	var data []byte
	err := db.read.QueryRowContext(ctx, `SELECT data FROM pending_turns WHERE session_id = ?`, sessionID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("storage: load pending %s: %w", sessionID, err)
	}
	return data, nil
}

const setAllowed = `UPDATE sessions SET allowed_tools = ? WHERE id = ?`

// setGuide is a handoff's guide, stored with its step (TurnWrite.Guide).
const setGuide = `UPDATE sessions SET guide = ? WHERE id = ?`

// saveSummary keeps a session's summary through the message before its
// last Keep (?2) messages: the summary covers everything but them.
const saveSummary = `INSERT INTO summaries (session_id, through_id, text)
	VALUES (?1, COALESCE((SELECT id FROM messages WHERE session_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2), 0), ?3)
	ON CONFLICT (session_id) DO UPDATE SET through_id = excluded.through_id, text = excluded.text`

// Context returns what a compacted session's model is given of its past:
// the summary ("" when it has none) and up to n messages after what it
// covers, oldest first, minus tool results at the start (see Window).
func (db *DB) Context(ctx context.Context, sessionID string, n int) (summary string, msgs []switchboard.Message, err error) {
	var through int64
	err = db.read.QueryRowContext(ctx, `SELECT text, through_id FROM summaries WHERE session_id = ?`, sessionID).Scan(&summary, &through)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", nil, fmt.Errorf("storage: summary: %w", err)
	}
	msgs, err = db.window(ctx, windowAfterQuery, n, sessionID, through)
	return summary, msgs, err
}

const windowAfterQuery = `SELECT data FROM messages WHERE session_id = ? AND id > ? ORDER BY id DESC LIMIT ?`

// WriteTurn makes one atomic change to a session (see
// switchboard.TurnWrite) in the writer's next batch, and returns once it is
// committed. dup reports a ClientID the session had seen already: nothing
// is written then.
func (db *DB) WriteTurn(ctx context.Context, sessionID string, w switchboard.TurnWrite) (dup bool, err error) {
	// Encoded before queueing, so the writer's transaction holds only SQL.
	data := make([]string, len(w.Messages))
	for i, m := range w.Messages {
		b, err := json.Marshal(m)
		if err != nil {
			return false, fmt.Errorf("storage: write turn: message %d: %w", i, err)
		}
		data[i] = string(b)
	}
	for _, ev := range w.Events {
		if ev.Session != sessionID || ev.Seq <= 0 {
			return false, fmt.Errorf("storage: write turn: event %q/%d is not a numbered event of %s", ev.Session, ev.Seq, sessionID)
		}
	}
	j := &writeJob{published: w.Published, durable: w.Durable, session: sessionID}
	j.run = func(ctx context.Context, tx *sql.Tx) error {
		dup = false
		if len(w.Events) == 0 && w.EventsThrough > 0 {
			if err := db.checkStored(ctx, tx, sessionID, w.EventsThrough); err != nil {
				return err
			}
		}
		if w.ClientID != "" {
			if w.Forget {
				if _, err := db.execWrite(ctx, tx, deleteSeenInput, sessionID, w.ClientID); err != nil {
					return err
				}
			} else {
				seen, err := db.markSeen(ctx, tx, sessionID, w.ClientID)
				if err != nil || seen {
					dup = seen
					return err
				}
			}
		}
		if w.InboxID != 0 {
			if _, err := db.execWrite(ctx, tx, deleteInbox, w.InboxID, sessionID); err != nil {
				return err
			}
		}
		if len(w.Messages) > 0 {
			stmt, err := db.writeStmt(ctx, tx, insertMessage)
			if err != nil {
				return err
			}
			now := time.Now().UnixMilli()
			for i, m := range w.Messages {
				res, err := stmt.ExecContext(ctx, sessionID, string(m.Role), data[i], now)
				if err != nil {
					return fmt.Errorf("message %d: %w", i, err)
				}
				if m.Content == "" || (m.Role != switchboard.RoleUser && m.Role != switchboard.RoleAssistant) {
					continue
				}
				id, err := res.LastInsertId()
				if err != nil {
					return fmt.Errorf("message %d: %w", i, err)
				}
				if _, err := db.execWrite(ctx, tx, indexMessage, id, m.Content); err != nil {
					return fmt.Errorf("message %d: index: %w", i, err)
				}
			}
		}
		if err := db.insertEvents(ctx, tx, w.Events); err != nil {
			return err
		}
		j.events = w.Events
		switch {
		case w.EndTurn:
			if _, err := db.execWrite(ctx, tx, deletePending, sessionID); err != nil {
				return err
			}
		case w.Turn != nil:
			if _, err := db.execWrite(ctx, tx, savePending, sessionID, w.Turn, time.Now().UnixMilli()); err != nil {
				return err
			}
		}
		if w.Allowed != nil {
			if _, err := db.execWrite(ctx, tx, setAllowed, allowedJSON(w.Allowed), sessionID); err != nil {
				return err
			}
		}
		if w.Guide != "" {
			if _, err := db.execWrite(ctx, tx, setGuide, w.Guide, sessionID); err != nil {
				return err
			}
		}
		if w.Summary != nil {
			if _, err := db.execWrite(ctx, tx, saveSummary, sessionID, w.Summary.Keep, w.Summary.Text); err != nil {
				return err
			}
		}
		if w.Charge != nil {
			if err := db.writeCharge(ctx, tx, sessionID, w.Charge); err != nil {
				return err
			}
		}
		if w.Usage != (switchboard.Usage{}) || w.EndTurn {
			u := w.Usage
			res, err := db.execWrite(ctx, tx, endTurn, u.PromptTokens, u.CompletionTokens, u.TotalTokens, time.Now().UnixMilli(), sessionID)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return cmp.Or(err, ErrNotFound)
			}
		}
		return nil
	}
	if err := db.runJob(ctx, j); err != nil {
		return false, fmt.Errorf("storage: write turn %s: %w", sessionID, err)
	}
	return dup, nil
}

// AcceptInput stores an input its session has not taken up yet, and
// records its de-duplication key (the caller's: the sessions make it from
// the author and the client's id), in one write that waits for the disk:
// once it returns, the input survives a crash and a power cut, and a
// restart takes it up (Inbox). dup reports a key the session has seen
// already: nothing is stored then. An empty key is never recorded.
func (db *DB) AcceptInput(ctx context.Context, sessionID, key string, in switchboard.Input) (id int64, dup bool, err error) {
	data, err := json.Marshal(in)
	if err != nil {
		return 0, false, fmt.Errorf("storage: accept input: %w", err)
	}
	j := &writeJob{durable: true}
	j.run = func(ctx context.Context, tx *sql.Tx) error {
		id, dup = 0, false
		if key != "" {
			seen, err := db.markSeen(ctx, tx, sessionID, key)
			if err != nil || seen {
				dup = seen
				return err
			}
		}
		res, err := tx.StmtContext(ctx, db.stmts[insertInbox]).ExecContext(ctx, sessionID, data, time.Now().UnixMilli())
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	}
	if err := db.runJob(ctx, j); err != nil {
		return 0, false, fmt.Errorf("storage: accept input: %w", err)
	}
	return id, dup, nil
}

// Inbox returns the inputs a session accepted and has not taken up, oldest
// first.
func (db *DB) Inbox(ctx context.Context, sessionID string) ([]switchboard.QueuedInput, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, data FROM inbox WHERE session_id = ? ORDER BY id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("storage: inbox: %w", err)
	}
	defer rows.Close()
	var out []switchboard.QueuedInput
	for rows.Next() {
		var (
			q    switchboard.QueuedInput
			data []byte
		)
		if err := rows.Scan(&q.ID, &data); err != nil {
			return nil, fmt.Errorf("storage: inbox: %w", err)
		}
		if err := json.Unmarshal(data, &q.Input); err != nil {
			return nil, fmt.Errorf("storage: inbox: input %d: %w", q.ID, err)
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: inbox: %w", err)
	}
	return out, nil
}

// Unfinished returns the sessions with work a restart must take up: an
// open turn (interrupted, or waiting for an approval) or accepted inputs.
func (db *DB) Unfinished(ctx context.Context) ([]string, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT session_id FROM pending_turns
		UNION SELECT DISTINCT session_id FROM inbox`)
	if err != nil {
		return nil, fmt.Errorf("storage: unfinished sessions: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("storage: unfinished sessions: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: unfinished sessions: %w", err)
	}
	return ids, nil
}

// SeenInput records a client's input id and reports whether the session had
// already seen it, so a client retrying after a reconnect is not answered
// twice. An empty id is never recorded and never seen.
func (db *DB) SeenInput(ctx context.Context, sessionID, clientID string) (bool, error) {
	if clientID == "" {
		return false, nil
	}
	var seen bool
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) (err error) {
		seen, err = db.markSeen(ctx, tx, sessionID, clientID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("storage: seen input: %w", err)
	}
	return seen, nil
}

// markSeen records an input id, reporting whether it was there already.
func (db *DB) markSeen(ctx context.Context, tx *sql.Tx, sessionID, clientID string) (bool, error) {
	res, err := db.execWrite(ctx, tx, insertSeenInput, sessionID, clientID, time.Now().UnixMilli())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 0, err
}
