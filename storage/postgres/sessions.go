package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-gw/switchboard"
)

// CreateSession stores a new session. A non-empty Key must not be held by
// another session (ErrExists), nor the id by one (ErrExists). Any replica
// may create one: it is not fenced.
func (db *DB) CreateSession(ctx context.Context, s switchboard.Session) error {
	var key *string
	if s.Key != "" {
		key = &s.Key
	}
	_, err := db.pool.Exec(ctx, `INSERT INTO sessions
		(id, key, guide, owner, created_at, active_at, prompt_tokens, completion_tokens, total_tokens, allowed_tools)
		VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9)`,
		s.ID, key, s.Guide, s.Owner, s.CreatedAt.UnixMilli(),
		s.Usage.PromptTokens, s.Usage.CompletionTokens, s.Usage.TotalTokens, allowedJSON(s.AllowedTools))
	if code, _ := pgCode(err); code == codeUnique {
		return fmt.Errorf("postgres: create session %s (key %q): %w", s.ID, s.Key, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("postgres: create session %s: %w", s.ID, err)
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
	s, err := scanSession(db.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = $1`, id))
	if err != nil {
		return s, fmt.Errorf("postgres: session %s: %w", id, err)
	}
	return s, nil
}

// SessionByKey returns the session holding a listener's natural key.
func (db *DB) SessionByKey(ctx context.Context, key string) (switchboard.Session, error) {
	if key == "" {
		return switchboard.Session{}, fmt.Errorf("postgres: session by key: empty key: %w", ErrNotFound)
	}
	s, err := scanSession(db.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE key = $1`, key))
	if err != nil {
		return s, fmt.Errorf("postgres: session by key %q: %w", key, err)
	}
	return s, nil
}

func scanSession(row pgx.Row) (switchboard.Session, error) {
	var (
		s       switchboard.Session
		key     *string
		ms      int64
		allowed string
	)
	err := row.Scan(&s.ID, &key, &s.Guide, &s.Owner, &ms,
		&s.Usage.PromptTokens, &s.Usage.CompletionTokens, &s.Usage.TotalTokens, &allowed)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, err
	}
	if key != nil {
		s.Key = *key
	}
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
	return db.updateSession(ctx, "clear session key", id, `UPDATE sessions SET key = NULL WHERE id = $1`, id)
}

// SetSessionGuide records the guide a session now uses.
func (db *DB) SetSessionGuide(ctx context.Context, id, guide string) error {
	return db.updateSession(ctx, "set session guide", id, `UPDATE sessions SET guide = $2 WHERE id = $1`, id, guide)
}

func (db *DB) updateSession(ctx context.Context, op, id, query string, args ...any) error {
	tag, err := db.pool.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("postgres: %s %s: %w", op, id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: %s %s: %w", op, id, ErrNotFound)
	}
	return nil
}

// Expired returns up to limit sessions whose last turn ended before
// before (or that never had one and were created before it), oldest
// first, leaving out any with an open turn or accepted input.
func (db *DB) Expired(ctx context.Context, before time.Time, limit int) ([]string, error) {
	ids, err := db.texts(ctx, `SELECT id FROM sessions s WHERE active_at < $1
		AND NOT EXISTS (SELECT 1 FROM pending_turns p WHERE p.session_id = s.id)
		AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.session_id = s.id)
		ORDER BY active_at LIMIT $2`, before.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: expired sessions: %w", err)
	}
	return ids, nil
}

// DeleteSessions deletes sessions with everything they hold: events,
// messages (and so their recall index and vectors), members, open turns,
// input ids, inbox and the conversation's lease, in one transaction that
// follows every write queued before it.
func (db *DB) DeleteSessions(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	leases := make([]string, len(ids))
	for i, id := range ids {
		leases[i] = SessionLease(id)
	}
	err := db.inBatch(ctx, func(s *steps) error {
		// Events have no foreign key (see the schema); the rest cascade.
		s.exec(`DELETE FROM events WHERE session_id = ANY($1)`, ids)
		s.exec(`DELETE FROM sessions WHERE id = ANY($1)`, ids)
		s.exec(`DELETE FROM leases WHERE name = ANY($1)`, leases)
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: delete sessions: %w", err)
	}
	return nil
}

// SetMember grants a member their role in a session under the name given,
// replacing what was there; a LastSeen of zero keeps the stored one.
func (db *DB) SetMember(ctx context.Context, sessionID string, m switchboard.Member) error {
	_, err := db.pool.Exec(ctx, `WITH set AS (
		INSERT INTO members (session_id, author_key, role, name, last_seen, pinned) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (session_id, author_key) DO UPDATE SET role = excluded.role, name = excluded.name,
		last_seen = GREATEST(members.last_seen, excluded.last_seen), pinned = excluded.pinned
		RETURNING 1)
		SELECT pg_notify('switchboard', $7) FROM set`,
		sessionID, m.Key, m.Role, m.Name, unixMilli(m.LastSeen), m.Pinned, payload(Note{Kind: NoteMembers, Session: sessionID}))
	if err != nil {
		return fmt.Errorf("postgres: set member %s in %s: %w", m.Key, sessionID, err)
	}
	return nil
}

// RemoveMember takes a member out of a session (/leave); removing one who
// is not there is no error.
func (db *DB) RemoveMember(ctx context.Context, sessionID, authorKey string) error {
	if _, err := db.pool.Exec(ctx, `WITH gone AS (DELETE FROM members WHERE session_id = $1 AND author_key = $2 RETURNING 1)
		SELECT pg_notify('switchboard', $3) FROM gone LIMIT 1`, sessionID, authorKey, payload(Note{Kind: NoteMembers, Session: sessionID})); err != nil {
		return fmt.Errorf("postgres: remove member %s from %s: %w", authorKey, sessionID, err)
	}
	return nil
}

// SeenMembers records when members were last seen (key → time), in one
// statement; a time earlier than the stored one changes nothing.
func (db *DB) SeenMembers(ctx context.Context, sessionID string, seen map[string]time.Time) error {
	if len(seen) == 0 {
		return nil
	}
	keys := make([]string, 0, len(seen))
	times := make([]int64, 0, len(seen))
	for k, t := range seen {
		keys = append(keys, k)
		times = append(times, t.UnixMilli())
	}
	_, err := db.pool.Exec(ctx, `UPDATE members m SET last_seen = GREATEST(m.last_seen, s.at)
		FROM unnest($2::text[], $3::bigint[]) AS s(key, at)
		WHERE m.session_id = $1 AND m.author_key = s.key`, sessionID, keys, times)
	if err != nil {
		return fmt.Errorf("postgres: members seen in %s: %w", sessionID, err)
	}
	return nil
}

// Member returns authorKey's role in a session.
func (db *DB) Member(ctx context.Context, sessionID, authorKey string) (string, error) {
	var role string
	err := db.pool.QueryRow(ctx, `SELECT role FROM members WHERE session_id = $1 AND author_key = $2`,
		sessionID, authorKey).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("postgres: member %s in %s: %w", authorKey, sessionID, err)
	}
	return role, nil
}

// Members returns every member of a session, by author key.
func (db *DB) Members(ctx context.Context, sessionID string) ([]switchboard.Member, error) {
	rows, err := db.pool.Query(ctx, `SELECT author_key, role, name, last_seen, pinned FROM members
		WHERE session_id = $1 ORDER BY author_key COLLATE "C"`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("postgres: members of %s: %w", sessionID, err)
	}
	ms, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (switchboard.Member, error) {
		var (
			m    switchboard.Member
			seen int64
		)
		err := row.Scan(&m.Key, &m.Role, &m.Name, &seen, &m.Pinned)
		if seen > 0 {
			m.LastSeen = fromMillis(seen)
		}
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: members of %s: %w", sessionID, err)
	}
	return ms, nil
}

// SessionsOf lists the sessions a person (an author's key) is a member
// of, the most recently active first, at most limit; a stateless
// request's session (switchboard.EphemeralKey) is none of them.
func (db *DB) SessionsOf(ctx context.Context, authorKey string, limit int) ([]switchboard.MemberSession, error) {
	rows, err := db.pool.Query(ctx, `SELECT s.id, s.guide, m.role, s.created_at, s.active_at
		FROM members m JOIN sessions s ON s.id = m.session_id
		WHERE m.author_key = $1 AND (s.key IS NULL OR left(s.key, $2) <> $3)
		ORDER BY s.active_at DESC, s.id COLLATE "C" LIMIT $4`, authorKey, len(switchboard.EphemeralKey), switchboard.EphemeralKey, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: sessions of %s: %w", authorKey, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (switchboard.MemberSession, error) {
		var s switchboard.MemberSession
		var created, active int64
		err := row.Scan(&s.ID, &s.Guide, &s.Role, &created, &active)
		s.CreatedAt, s.ActiveAt = fromMillis(created), fromMillis(active)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: sessions of %s: %w", authorKey, err)
	}
	return out, nil
}
