package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// CreateSession stores a new session. A non-empty Key must not be held by
// another session (switchboard.ErrExists).
func (db *DB) CreateSession(ctx context.Context, s switchboard.Session) error {
	_, err := db.write.ExecContext(ctx, `INSERT INTO sessions
		(id, key, guide, owner, created_at, active_at, prompt_tokens, completion_tokens, total_tokens, allowed_tools)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, nullable(s.Key), s.Guide, s.Owner, s.CreatedAt.UnixMilli(), s.CreatedAt.UnixMilli(),
		s.Usage.PromptTokens, s.Usage.CompletionTokens, s.Usage.TotalTokens, allowedJSON(s.AllowedTools))
	if isUnique(err) {
		return fmt.Errorf("storage: create session %s (key %q): %w", s.ID, s.Key, switchboard.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("storage: create session %s: %w", s.ID, err)
	}
	return nil
}

const sessionColumns = `id, key, guide, owner, created_at, prompt_tokens, completion_tokens, total_tokens, allowed_tools`

// allowedJSON encodes a session's always-allowed tools, "" for none.
func allowedJSON(tools []string) string {
	if len(tools) == 0 {
		return ""
	}
	b, _ := json.Marshal(tools) // strings: cannot fail
	return string(b)
}

// Session returns the session with the given id.
func (db *DB) Session(ctx context.Context, id string) (switchboard.Session, error) {
	s, err := scanSession(db.read.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id))
	if err != nil {
		return s, fmt.Errorf("storage: session %s: %w", id, err)
	}
	return s, nil
}

// SessionByKey returns the session holding a listener's natural key.
func (db *DB) SessionByKey(ctx context.Context, key string) (switchboard.Session, error) {
	if key == "" {
		return switchboard.Session{}, fmt.Errorf("storage: session by key: empty key: %w", ErrNotFound)
	}
	s, err := scanSession(db.read.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE key = ?`, key))
	if err != nil {
		return s, fmt.Errorf("storage: session by key %q: %w", key, err)
	}
	return s, nil
}

func scanSession(row *sql.Row) (switchboard.Session, error) {
	var (
		s       switchboard.Session
		key     sql.NullString
		ms      int64
		allowed string
	)
	err := row.Scan(&s.ID, &key, &s.Guide, &s.Owner, &ms,
		&s.Usage.PromptTokens, &s.Usage.CompletionTokens, &s.Usage.TotalTokens, &allowed)
	if errors.Is(err, sql.ErrNoRows) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, err
	}
	s.Key = key.String
	s.CreatedAt = fromMillis(ms)
	if allowed != "" {
		if err := json.Unmarshal([]byte(allowed), &s.AllowedTools); err != nil {
			return s, fmt.Errorf("allowed tools: %w", err)
		}
	}
	return s, nil
}

// ClearSessionKey releases a session's natural key, so that /reset can
// give the key to a fresh session while the old one stays readable by id.
func (db *DB) ClearSessionKey(ctx context.Context, id string) error {
	return db.updateSession(ctx, "clear session key", id, `UPDATE sessions SET key = NULL WHERE id = ?`, id)
}

// SetSessionGuide records the guide a session now uses.
func (db *DB) SetSessionGuide(ctx context.Context, id, guide string) error {
	return db.updateSession(ctx, "set session guide", id, `UPDATE sessions SET guide = ? WHERE id = ?`, guide, id)
}

// endTurn adds a turn's tokens to the session's totals and notes when it
// was last active, in one statement on a row the turn's end writes anyway.
const endTurn = `UPDATE sessions SET
	prompt_tokens = prompt_tokens + ?,
	completion_tokens = completion_tokens + ?,
	total_tokens = total_tokens + ?,
	active_at = max(active_at, ?)
	WHERE id = ?`

// Expired returns up to limit sessions whose last turn ended before
// before (or that never had one and were created before it), oldest
// first, leaving out any with an open turn or accepted input.
func (db *DB) Expired(ctx context.Context, before time.Time, limit int) ([]string, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id FROM sessions WHERE active_at < ?
		AND id NOT IN (SELECT session_id FROM pending_turns)
		AND id NOT IN (SELECT session_id FROM inbox)
		ORDER BY active_at LIMIT ?`, before.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("storage: expired sessions: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("storage: expired sessions: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: expired sessions: %w", err)
	}
	return ids, nil
}

// DeleteSessions deletes sessions with everything they hold: events,
// messages, members, open turns, input ids and inbox, in one transaction.
func (db *DB) DeleteSessions(ctx context.Context, ids []string) error {
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, id := range ids {
			// Events have no foreign key (see the schema), nor has the
			// search index; the rest cascade.
			if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE session_id = ?`, id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM messages WHERE session_id = ?)`, id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id); err != nil {
				return err
			}
			delete(db.seqs.committed, id) // the writer's goroutine: see lastSeqs
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: delete sessions: %w", err)
	}
	return nil
}

func (db *DB) updateSession(ctx context.Context, op, id, query string, args ...any) error {
	var n int64
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := db.execWrite(ctx, tx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("storage: %s %s: %w", op, id, err)
	}
	if n == 0 {
		return fmt.Errorf("storage: %s %s: %w", op, id, ErrNotFound)
	}
	return nil
}

// SetMember grants a member their role in a session under the name given,
// replacing what was there; a LastSeen of zero keeps the stored one.
func (db *DB) SetMember(ctx context.Context, sessionID string, m switchboard.Member) error {
	_, err := db.write.ExecContext(ctx, `INSERT INTO members (session_id, author_key, role, name, last_seen, pinned) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (session_id, author_key) DO UPDATE SET role = excluded.role, name = excluded.name,
		last_seen = max(last_seen, excluded.last_seen), pinned = excluded.pinned`, sessionID, m.Key, m.Role, m.Name, unixMilli(m.LastSeen), m.Pinned)
	if err != nil {
		return fmt.Errorf("storage: set member %s in %s: %w", m.Key, sessionID, err)
	}
	return nil
}

// RemoveMember takes a member out of a session (/leave); removing one who
// is not there is no error.
func (db *DB) RemoveMember(ctx context.Context, sessionID, authorKey string) error {
	if _, err := db.write.ExecContext(ctx, `DELETE FROM members WHERE session_id = ? AND author_key = ?`, sessionID, authorKey); err != nil {
		return fmt.Errorf("storage: remove member %s from %s: %w", authorKey, sessionID, err)
	}
	return nil
}

// SeenMembers records when members were last seen (key → time), in one
// transaction; a time earlier than the stored one changes nothing.
func (db *DB) SeenMembers(ctx context.Context, sessionID string, seen map[string]time.Time) error {
	if len(seen) == 0 {
		return nil
	}
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for k, t := range seen {
			if _, err := tx.ExecContext(ctx, `UPDATE members SET last_seen = max(last_seen, ?) WHERE session_id = ? AND author_key = ?`,
				t.UnixMilli(), sessionID, k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: members seen in %s: %w", sessionID, err)
	}
	return nil
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Member returns authorKey's role in a session.
func (db *DB) Member(ctx context.Context, sessionID, authorKey string) (string, error) {
	var role string
	err := db.read.QueryRowContext(ctx, `SELECT role FROM members WHERE session_id = ? AND author_key = ?`,
		sessionID, authorKey).Scan(&role)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("storage: member %s in %s: %w", authorKey, sessionID, err)
	}
	return role, nil
}

// Members returns every member of a session, by author key.
func (db *DB) Members(ctx context.Context, sessionID string) ([]switchboard.Member, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT author_key, role, name, last_seen, pinned FROM members WHERE session_id = ? ORDER BY author_key`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("storage: members of %s: %w", sessionID, err)
	}
	defer rows.Close()
	var ms []switchboard.Member
	for rows.Next() {
		var m switchboard.Member
		var seen int64
		if err := rows.Scan(&m.Key, &m.Role, &m.Name, &seen, &m.Pinned); err != nil {
			return nil, fmt.Errorf("storage: members of %s: %w", sessionID, err)
		}
		if seen > 0 {
			m.LastSeen = time.UnixMilli(seen).UTC()
		}
		ms = append(ms, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: members of %s: %w", sessionID, err)
	}
	return ms, nil
}

// SessionsOf lists the sessions a person (an author's key) is a member
// of, the most recently active first, at most limit; a stateless
// request's session (switchboard.EphemeralKey) is none of them.
func (db *DB) SessionsOf(ctx context.Context, authorKey string, limit int) ([]switchboard.MemberSession, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT s.id, s.guide, m.role, s.created_at, s.active_at
		FROM members m JOIN sessions s ON s.id = m.session_id
		WHERE m.author_key = ? AND (s.key IS NULL OR substr(s.key, 1, ?) <> ?)
		ORDER BY s.active_at DESC, s.id LIMIT ?`, authorKey, len(switchboard.EphemeralKey), switchboard.EphemeralKey, limit)
	if err != nil {
		return nil, fmt.Errorf("storage: sessions of %s: %w", authorKey, err)
	}
	defer rows.Close()
	var out []switchboard.MemberSession
	for rows.Next() {
		var s switchboard.MemberSession
		var created, active int64
		if err := rows.Scan(&s.ID, &s.Guide, &s.Role, &created, &active); err != nil {
			return nil, fmt.Errorf("storage: sessions of %s: %w", authorKey, err)
		}
		s.CreatedAt, s.ActiveAt = time.UnixMilli(created).UTC(), time.UnixMilli(active).UTC()
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: sessions of %s: %w", authorKey, err)
	}
	return out, nil
}
