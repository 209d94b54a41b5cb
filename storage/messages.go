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
	insertMessage   = `INSERT INTO messages (session_id, role, data) VALUES (?, ?, ?)`
	deletePending   = `DELETE FROM pending_turns WHERE session_id = ?`
	insertSeenInput = `INSERT INTO seen_inputs (session_id, client_id, seen_at) VALUES (?, ?, ?)
		ON CONFLICT (session_id, client_id) DO NOTHING`
)

// AppendMessages adds messages to a session's context in one transaction:
// an assistant message that called tools is always stored with all of its
// results, or not at all. With clearPending, the session's suspended turn
// is deleted in the same transaction, since these messages complete it.
func (db *DB) AppendMessages(ctx context.Context, sessionID string, msgs []switchboard.Message, clearPending bool) error {
	// Encoded before queueing, so the writer's transaction holds only SQL.
	data := make([]string, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("storage: append messages: message %d: %w", i, err)
		}
		data[i] = string(b)
	}
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if len(msgs) > 0 {
			stmt, err := db.writeStmt(ctx, tx, insertMessage)
			if err != nil {
				return err
			}
			for i, m := range msgs {
				if _, err := stmt.ExecContext(ctx, sessionID, string(m.Role), data[i]); err != nil {
					return fmt.Errorf("message %d: %w", i, err)
				}
			}
		}
		if clearPending {
			if _, err := db.execWrite(ctx, tx, deletePending, sessionID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
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
	if n <= 0 {
		return nil, nil
	}
	rows, err := db.read.QueryContext(ctx, windowQuery, sessionID, n)
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

// SavePending stores a session's suspended turn, replacing any earlier one.
// The data is opaque here; the sessions package owns its format.
func (db *DB) SavePending(ctx context.Context, sessionID string, data []byte) error {
	if data == nil {
		data = []byte{} // nil would be NULL
	}
	_, err := db.write.ExecContext(ctx, `INSERT INTO pending_turns (session_id, data, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (session_id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
		sessionID, data, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("storage: save pending %s: %w", sessionID, err)
	}
	return nil
}

// LoadPending returns a session's suspended turn (ErrNotFound if none).
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

// DeletePending removes a session's suspended turn; none is not an error.
func (db *DB) DeletePending(ctx context.Context, sessionID string) error {
	if _, err := db.write.ExecContext(ctx, `DELETE FROM pending_turns WHERE session_id = ?`, sessionID); err != nil {
		return fmt.Errorf("storage: delete pending %s: %w", sessionID, err)
	}
	return nil
}

// AppendReply ends a turn in one write: it stores the model's final reply
// (unless it is empty) and adds the tokens the turn spent to the session's
// running total.
func (db *DB) AppendReply(ctx context.Context, sessionID string, reply switchboard.Message, usage switchboard.Usage) error {
	var data []byte
	if reply.Content != "" {
		var err error
		if data, err = json.Marshal(reply); err != nil {
			return fmt.Errorf("storage: append reply: %w", err)
		}
	}
	if data == nil && usage == (switchboard.Usage{}) {
		return nil
	}
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if data != nil {
			if _, err := db.execWrite(ctx, tx, insertMessage, sessionID, string(reply.Role), string(data)); err != nil {
				return err
			}
		}
		if usage == (switchboard.Usage{}) {
			return nil
		}
		res, err := db.execWrite(ctx, tx, addUsage, usage.PromptTokens, usage.CompletionTokens, usage.TotalTokens, sessionID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmp.Or(err, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: append reply: %w", err)
	}
	return nil
}

// AppendInput stores a user's message and records the client's id for it
// in one transaction: an input is stored and marked seen, or neither. So a
// client that sends again after a reconnect is answered once, and an input
// refused before it was stored (a full queue, a turn waiting for approval)
// can be sent again with the same id. dup reports an id the session has
// already seen; nothing is stored then. An empty id is never recorded.
func (db *DB) AppendInput(ctx context.Context, sessionID, clientID string, msg switchboard.Message) (dup bool, err error) {
	data, err := json.Marshal(msg)
	if err != nil {
		return false, fmt.Errorf("storage: append input: %w", err)
	}
	err = db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if clientID != "" {
			seen, err := db.markSeen(ctx, tx, sessionID, clientID)
			if err != nil || seen {
				dup = seen
				return err
			}
		}
		_, err := db.execWrite(ctx, tx, insertMessage, sessionID, string(msg.Role), string(data))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("storage: append input: %w", err)
	}
	return dup, nil
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
