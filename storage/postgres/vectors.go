package postgres

// Message vectors for semantic recall: bytea of little-endian float32, as
// the SQLite store keeps them, each with the space (embedding model and
// dimensions) that made it. A vector goes with its message.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-gw/switchboard"
)

// The byte format is the SQLite store's (storage.EncodeVector and
// DecodeVector), so a database moves from one store to the other as it
// is; the two could share one package for it.

// encodeVector is v as stored: its numbers as little-endian float32.
func encodeVector(v []float32) []byte {
	// Never nil, which would be stored as NULL: an empty vector is one.
	b, _ := binary.Append(make([]byte, 0, 4*len(v)), binary.LittleEndian, v) // fixed-size numbers: cannot fail
	return b
}

// decodeVector appends the vector b holds to dst; it refuses one that is
// not whole float32s or holds a number that is not finite, so a damaged
// row turns no search's scores into NaN.
func decodeVector(dst []float32, b []byte) ([]float32, error) {
	if len(b)%4 != 0 || len(b)/4 > switchboard.MaxVectorDims {
		return dst, fmt.Errorf("a vector of %d bytes", len(b))
	}
	v := make([]float32, len(b)/4)
	if _, err := binary.Decode(b, binary.LittleEndian, v); err != nil {
		return dst, err
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return dst, fmt.Errorf("number %d of the vector is not finite", i)
		}
	}
	return append(dst, v...), nil
}

// unembedded are the messages Search indexes (a person's and the
// assistant's, with text) that have no vector of the space $1, after the
// message $2, in the order they were stored. A vector of another space
// counts as none.
const unembedded = `FROM messages m
	LEFT JOIN message_vectors v ON v.message_id = m.id AND v.space = $1
	WHERE m.id > $2 AND v.message_id IS NULL AND m.role IN ('user', 'assistant')
	  AND switchboard_content(m.data) IS NOT NULL`

// Unembedded returns up to limit messages with no vector of space, after
// the message after (0: from the first), oldest first.
func (db *DB) Unembedded(ctx context.Context, space string, after int64, limit int) ([]switchboard.Unembedded, error) {
	rows, err := db.pool.Query(ctx, `SELECT m.id, m.session_id, switchboard_content(m.data) `+unembedded+`
		ORDER BY m.id LIMIT $3`, space, after, max(limit, 0))
	if err != nil {
		return nil, fmt.Errorf("postgres: unembedded messages: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (switchboard.Unembedded, error) {
		var u switchboard.Unembedded
		err := row.Scan(&u.ID, &u.SessionID, &u.Text)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: unembedded messages: %w", err)
	}
	return out, nil
}

// CountUnembedded is how many messages after the message after have no
// vector of space. It reads every message after after: it is for metrics
// and the doctor, not for each search.
func (db *DB) CountUnembedded(ctx context.Context, space string, after int64) (int64, error) {
	n, err := countUnembedded(ctx, db.pool, space, after)
	if err != nil {
		return 0, fmt.Errorf("postgres: count unembedded messages: %w", err)
	}
	return n, nil
}

// countUnembedded is CountUnembedded on pool (a store's, or an
// Inspector's).
func countUnembedded(ctx context.Context, pool *pgxpool.Pool, space string, after int64) (int64, error) {
	var n int64
	err := pool.QueryRow(ctx, `SELECT count(*) `+unembedded, space, after).Scan(&n)
	return n, err
}

// saveVector stores a message's vector of a space, replacing one of
// another space; a message deleted meanwhile (retention) is skipped.
const saveVectors = `INSERT INTO message_vectors (message_id, space, vector)
	SELECT m.id, $1, v.vector FROM unnest($2::bigint[], $3::bytea[]) AS v(id, vector)
	JOIN messages m ON m.id = v.id
	ON CONFLICT (message_id) DO UPDATE SET space = excluded.space, vector = excluded.vector`

// SaveVectors stores vectors of space in the writer's next batch, and
// returns once they are committed.
func (db *DB) SaveVectors(ctx context.Context, space string, vs []switchboard.Vector) error {
	if len(vs) == 0 {
		return nil
	}
	ids := make([]int64, len(vs))
	blobs := make([][]byte, len(vs))
	for i, v := range vs {
		if len(v.Values) > switchboard.MaxVectorDims {
			return fmt.Errorf("postgres: save vectors: message %d: %d numbers, more than %d", v.MessageID, len(v.Values), switchboard.MaxVectorDims)
		}
		ids[i], blobs[i] = v.MessageID, encodeVector(v.Values)
	}
	err := db.inBatch(ctx, func(s *steps) error {
		s.exec(saveVectors, space, ids, blobs)
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: save vectors: %w", err)
	}
	return nil
}

// MemberSessions are the conversations reader (an author key) is a member
// of: those their searches may find messages in.
func (db *DB) MemberSessions(ctx context.Context, reader string) ([]string, error) {
	ids, err := db.texts(ctx, `SELECT session_id FROM members WHERE author_key = $1 ORDER BY session_id COLLATE "C"`, reader)
	if err != nil {
		return nil, fmt.Errorf("postgres: sessions of %s: %w", reader, err)
	}
	return ids, nil
}

// SessionVectors are a conversation's vectors of space that have dims
// numbers, oldest message first: their messages' ids, and the vectors one
// after another in flat. Vectors of another length are left out, and so
// is one that cannot be read, which is logged.
func (db *DB) SessionVectors(ctx context.Context, space, sessionID string, dims int) (ids []int64, flat []float32, err error) {
	if dims <= 0 || dims > switchboard.MaxVectorDims {
		return nil, nil, fmt.Errorf("postgres: vectors of %s: dims %d", sessionID, dims)
	}
	rows, err := db.pool.Query(ctx, `SELECT v.message_id, v.vector FROM messages m
		JOIN message_vectors v ON v.message_id = m.id
		WHERE m.session_id = $1 AND v.space = $2 AND length(v.vector) = $3 ORDER BY m.id`, sessionID, space, 4*dims)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: vectors of %s: %w", sessionID, err)
	}
	var (
		id   int64
		blob []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &blob}, func() error {
		var derr error
		if flat, derr = decodeVector(flat, blob); derr != nil {
			db.log.Warn("postgres: a message's vector cannot be read; semantic recall leaves the message out", "message", id, "err", derr)
			return nil
		}
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: vectors of %s: %w", sessionID, err)
	}
	return ids, flat, nil
}

// Hits are the messages of ids that reader (an author key) may read, a
// member of their conversation, in no particular order.
func (db *DB) Hits(ctx context.Context, reader string, ids []int64) ([]switchboard.Hit, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return db.hits(ctx, "messages found", `SELECT id, session_id, data, created_at FROM messages
		WHERE id = ANY($1) AND session_id IN (SELECT session_id FROM members WHERE author_key = $2)`, ids, reader)
}

// hits reads the messages query returns (id, session_id, data,
// created_at).
func (db *DB) hits(ctx context.Context, op, query string, args ...any) ([]switchboard.Hit, error) {
	rows, err := db.pool.Query(ctx, query, args...)
	var hits []switchboard.Hit
	if err == nil {
		hits, err = pgx.CollectRows(rows, scanHit)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	return hits, nil
}

// scanHit reads a row of id, session_id, data, created_at.
func scanHit(row pgx.CollectableRow) (switchboard.Hit, error) {
	var (
		h    switchboard.Hit
		data []byte
		at   int64
	)
	if err := row.Scan(&h.ID, &h.SessionID, &data, &at); err != nil {
		return h, err
	}
	if err := json.Unmarshal(data, &h.Message); err != nil {
		return h, err
	}
	if at > 0 {
		h.At = fromMillis(at)
	}
	return h, nil
}
