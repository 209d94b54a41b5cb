package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-gw/switchboard"
)

// AppendMessages adds messages to a session's context in one transaction:
// an assistant message that called tools is always stored with all of its
// results, or not at all. With clearPending, the session's open turn is
// deleted in the same transaction, since these messages complete it.
func (db *DB) AppendMessages(ctx context.Context, sessionID string, msgs []switchboard.Message, clearPending bool) error {
	if _, err := db.WriteTurn(ctx, sessionID, switchboard.TurnWrite{Messages: msgs, EndTurn: clearPending}); err != nil {
		return fmt.Errorf("postgres: append messages: %w", err)
	}
	return nil
}

// Window returns the session's last n messages, oldest first, minus any
// tool results at its start: those belong to an assistant message that fell
// outside the window, and a provider rejects a result without its call.
// It reads the (session_id, id) index backwards, so its cost does not grow
// with the history.
func (db *DB) Window(ctx context.Context, sessionID string, n int) ([]switchboard.Message, error) {
	return db.window(ctx, `SELECT data FROM messages WHERE session_id = $1 ORDER BY id DESC LIMIT $2`, n, sessionID)
}

// window reads the last n messages query selects (args, then n), newest
// first, and returns them oldest first without leading tool results.
func (db *DB) window(ctx context.Context, query string, n int, args ...any) ([]switchboard.Message, error) {
	if n <= 0 {
		return nil, nil
	}
	rows, err := db.pool.Query(ctx, query, append(args, n)...)
	if err != nil {
		return nil, fmt.Errorf("postgres: window: %w", err)
	}
	msgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (switchboard.Message, error) {
		var (
			data []byte
			m    switchboard.Message
		)
		if err := row.Scan(&data); err != nil {
			return m, err
		}
		return m, json.Unmarshal(data, &m)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: window: %w", err)
	}
	slices.Reverse(msgs)
	start := 0
	for start < len(msgs) && msgs[start].Role == switchboard.RoleTool {
		start++
	}
	return msgs[start:], nil
}

// MessageCount returns how many context messages a session has stored.
func (db *DB) MessageCount(ctx context.Context, sessionID string) (int64, error) {
	var n int64
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE session_id = $1`, sessionID).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: message count: %w", err)
	}
	return n, nil
}

// LoadPending returns a session's open turn (ErrNotFound if none).
func (db *DB) LoadPending(ctx context.Context, sessionID string) ([]byte, error) {
	var data []byte
	err := db.pool.QueryRow(ctx, `SELECT data FROM pending_turns WHERE session_id = $1`, sessionID).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: load pending %s: %w", sessionID, err)
	}
	return data, nil
}

// Context returns what a compacted session's model is given of its past:
// the summary ("" when it has none) and up to n messages after what it
// covers, oldest first, minus tool results at the start (see Window).
func (db *DB) Context(ctx context.Context, sessionID string, n int) (summary string, msgs []switchboard.Message, err error) {
	var through int64
	err = db.pool.QueryRow(ctx, `SELECT text, through_id FROM summaries WHERE session_id = $1`, sessionID).Scan(&summary, &through)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", nil, fmt.Errorf("postgres: summary: %w", err)
	}
	msgs, err = db.window(ctx, `SELECT data FROM messages WHERE session_id = $1 AND id > $2 ORDER BY id DESC LIMIT $3`, n, sessionID, through)
	return summary, msgs, err
}

// Statements of a turn's write.
const (
	insertSeen = `INSERT INTO seen_inputs (session_id, client_id, seen_at) VALUES ($1, $2, $3)`
	forgetSeen = `DELETE FROM seen_inputs WHERE session_id = $1 AND client_id = $2`
	takeInput  = `DELETE FROM inbox WHERE id = $1 AND session_id = $2`
	// Messages get their ids in the order given.
	insertMessages = `INSERT INTO messages (session_id, role, data, created_at)
		SELECT $1, m.role, m.data, $4 FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS m(role, data, n) ORDER BY m.n`
	endPending  = `DELETE FROM pending_turns WHERE session_id = $1`
	savePending = `INSERT INTO pending_turns (session_id, data, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (session_id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`
	setAllowed = `UPDATE sessions SET allowed_tools = $1 WHERE id = $2`
	setGuide   = `UPDATE sessions SET guide = $1 WHERE id = $2`
	// saveSummary keeps a session's summary through the message before its
	// last Keep ($2) messages: the summary covers everything but them.
	saveSummary = `INSERT INTO summaries (session_id, through_id, text)
		VALUES ($1, COALESCE((SELECT id FROM messages WHERE session_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2), 0), $3)
		ON CONFLICT (session_id) DO UPDATE SET through_id = excluded.through_id, text = excluded.text`
	// endTurn adds a turn's tokens to the session's totals and notes when
	// it was last active; a missing session fails the write.
	endTurn = `WITH s AS (UPDATE sessions SET
			prompt_tokens = prompt_tokens + $1,
			completion_tokens = completion_tokens + $2,
			total_tokens = total_tokens + $3,
			active_at = GREATEST(active_at, $4)
			WHERE id = $5 RETURNING 1)
		SELECT switchboard_found(count(*), 'session ' || $5) FROM s`
)

// duplicateIsNoError is a job's failed for a write that records an input
// key: the key's row already there (the session had seen the input) undid
// the write, which is no error to its caller but *dup.
func duplicateIsNoError(dup *bool) func(error) error {
	return func(err error) error {
		if code, constraint := pgCode(err); code == codeUnique && constraint == "seen_inputs_pkey" {
			*dup = true
			return nil
		}
		return err
	}
}

// WriteTurn makes one atomic change to a session (see
// switchboard.TurnWrite) in the writer's next batch, and returns once it is
// committed. dup reports a ClientID the session had seen already: nothing
// is written then.
//
// On a replica (WithReplica), the write carries the epoch of the lease
// Fence recorded for the session and is stored only if the lease still
// has it; otherwise it fails with ErrLeaseLost and nothing of it is
// stored.
func (db *DB) WriteTurn(ctx context.Context, sessionID string, w switchboard.TurnWrite) (dup bool, err error) {
	roles := make([]string, len(w.Messages))
	data := make([]string, len(w.Messages))
	for i, m := range w.Messages {
		b, err := json.Marshal(m)
		if err != nil {
			return false, fmt.Errorf("postgres: write turn: message %d: %w", i, err)
		}
		roles[i], data[i] = string(m.Role), string(b)
	}
	for _, ev := range w.Events {
		if ev.Session != sessionID || ev.Seq <= 0 {
			return false, fmt.Errorf("postgres: write turn: event %q/%d is not a numbered event of %s", ev.Session, ev.Seq, sessionID)
		}
	}
	j := &job{session: sessionID, fenced: true, epoch: db.fenceOf(sessionID), durable: w.Durable,
		events: w.Events, published: w.Published}
	j.failed = duplicateIsNoError(&dup)
	j.build = func(s *steps) error {
		now := time.Now().UnixMilli()
		if len(w.Events) == 0 && w.EventsThrough > 0 {
			s.exec(checkStored, sessionID, w.EventsThrough)
		}
		if w.ClientID != "" {
			if w.Forget {
				s.exec(forgetSeen, sessionID, w.ClientID)
			} else {
				// No ON CONFLICT: a seen id fails the write, which undoes
				// it whole (a duplicate writes nothing).
				s.exec(insertSeen, sessionID, w.ClientID, now)
			}
		}
		if w.InboxID != 0 {
			s.exec(takeInput, w.InboxID, sessionID)
		}
		if len(w.Messages) > 0 {
			s.exec(insertMessages, sessionID, roles, data, now)
		}
		if err := eventSteps(s, w.Events); err != nil {
			return err
		}
		switch {
		case w.EndTurn:
			s.exec(endPending, sessionID)
		case w.Turn != nil:
			s.exec(savePending, sessionID, w.Turn, now)
		}
		if w.Allowed != nil {
			s.exec(setAllowed, allowedJSON(w.Allowed), sessionID)
		}
		if w.Guide != "" {
			s.exec(setGuide, w.Guide, sessionID)
		}
		if w.Summary != nil {
			s.exec(saveSummary, sessionID, w.Summary.Keep, w.Summary.Text)
		}
		if w.Charge != nil {
			chargeSteps(s, sessionID, w.Charge, tallyShard(db.replica))
		}
		if w.Usage != (switchboard.Usage{}) || w.EndTurn {
			u := w.Usage
			s.exec(endTurn, u.PromptTokens, u.CompletionTokens, u.TotalTokens, now, sessionID)
		}
		return nil
	}
	if err := db.runJob(ctx, j); err != nil {
		return false, fmt.Errorf("postgres: write turn %s: %w", sessionID, err)
	}
	return dup, nil
}

// AcceptInput stores an input its session has not taken up yet, and
// records its de-duplication key, in one write that waits for the WAL
// flush: once it returns, the input survives a crash, and a replica takes
// it up (Inbox). dup reports a key the session has seen already: nothing
// is stored then. An empty key is never recorded. Any replica may accept
// an input for any conversation: it is not fenced. The commit notifies
// the replicas (a Note of kind "input").
func (db *DB) AcceptInput(ctx context.Context, sessionID, key string, in switchboard.Input) (id int64, dup bool, err error) {
	data, err := json.Marshal(in)
	if err != nil {
		return 0, false, fmt.Errorf("postgres: accept input: %w", err)
	}
	j := &job{durable: true}
	j.failed = duplicateIsNoError(&dup)
	j.build = func(s *steps) error {
		now := time.Now().UnixMilli()
		if key != "" {
			s.exec(insertSeen, sessionID, key, now)
		}
		s.queryRow(`INSERT INTO inbox (session_id, data, received_at) VALUES ($1, $2, $3) RETURNING id`,
			[]any{sessionID, data, now}, &id)
		s.exec(`SELECT pg_notify('switchboard', $1 || currval(pg_get_serial_sequence('inbox', 'id')) || $2)`,
			inputPayloadHead(sessionID), inputPayloadTail)
		return nil
	}
	if err := db.runJob(ctx, j); err != nil {
		return 0, false, fmt.Errorf("postgres: accept input: %w", err)
	}
	if dup {
		id = 0
	}
	return id, dup, nil
}

// Inbox returns the inputs a session accepted and has not taken up, oldest
// first.
func (db *DB) Inbox(ctx context.Context, sessionID string) ([]switchboard.QueuedInput, error) {
	rows, err := db.pool.Query(ctx, `SELECT id, data FROM inbox WHERE session_id = $1 ORDER BY id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (switchboard.QueuedInput, error) {
		var (
			q    switchboard.QueuedInput
			data []byte
		)
		if err := row.Scan(&q.ID, &data); err != nil {
			return q, err
		}
		if err := json.Unmarshal(data, &q.Input); err != nil {
			return q, fmt.Errorf("input %d: %w", q.ID, err)
		}
		return q, nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox: %w", err)
	}
	return out, nil
}

// unfinished is the sessions with an open turn or accepted inputs.
const unfinished = `SELECT session_id FROM pending_turns UNION SELECT session_id FROM inbox`

// Unfinished returns the sessions with work a restart must take up: an
// open turn (interrupted, or waiting for an approval) or accepted inputs.
// With several replicas, Orphans is the part of it nobody runs.
func (db *DB) Unfinished(ctx context.Context) ([]string, error) {
	ids, err := db.texts(ctx, unfinished)
	if err != nil {
		return nil, fmt.Errorf("postgres: unfinished sessions: %w", err)
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
	err := db.inBatch(ctx, func(s *steps) error {
		s.execTag(func(tag pgconn.CommandTag) { seen = tag.RowsAffected() == 0 },
			insertSeen+` ON CONFLICT (session_id, client_id) DO NOTHING`, sessionID, clientID, time.Now().UnixMilli())
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("postgres: seen input: %w", err)
	}
	return seen, nil
}
