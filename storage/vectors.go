package storage

// Message vectors for semantic recall (package semantic): stored as BLOBs
// of little-endian float32, each with the space (the embedding model and
// its dimensions) that made it, and read back a conversation at a time.
// A vector goes with its message: deleting the message deletes it.

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// EncodeVector is v as it is stored: its numbers as little-endian float32.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// ErrBadVector is returned (wrapped) for a stored vector that cannot be
// read back.
var ErrBadVector = errors.New("not a vector")

// DecodeVector appends the vector b holds to dst. It refuses a BLOB that
// is not whole float32s, is longer than switchboard.MaxVectorDims, or
// holds a number that is not finite: the database is the gateway's own,
// but a damaged or edited file must turn neither a search's scores into
// NaN nor a read into a huge allocation.
func DecodeVector(dst []float32, b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return dst, fmt.Errorf("%w: %d bytes are not whole float32s", ErrBadVector, len(b))
	}
	n := len(b) / 4
	if n > switchboard.MaxVectorDims {
		return dst, fmt.Errorf("%w: %d numbers, more than %d", ErrBadVector, n, switchboard.MaxVectorDims)
	}
	start := len(dst)
	for i := range n {
		x := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return dst[:start], fmt.Errorf("%w: number %d is not finite", ErrBadVector, i)
		}
		dst = append(dst, x)
	}
	return dst, nil
}

// unembedded are the messages Search indexes (a person's and the
// assistant's, with text) that have no vector of the space ?1, after the
// message ?2, in the order they were stored. A vector of another space
// (the model changed) counts as none.
const unembedded = `FROM messages m
	LEFT JOIN message_vectors v ON v.message_id = m.id AND v.space = ?1
	WHERE m.id > ?2 AND v.message_id IS NULL AND m.role IN ('user', 'assistant')
	  AND COALESCE(json_extract(m.data, '$.content'), '') != ''`

// Unembedded returns up to limit messages with no vector of space, after
// the message after (0: from the first), oldest first. What is left to
// embed is always the database's to say, so an indexer that stops anywhere
// takes up where it was.
func (db *DB) Unembedded(ctx context.Context, space string, after int64, limit int) ([]switchboard.Unembedded, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT m.id, m.session_id, json_extract(m.data, '$.content') `+unembedded+`
		ORDER BY m.id LIMIT ?3`, space, after, limit)
	if err != nil {
		return nil, fmt.Errorf("storage: unembedded messages: %w", err)
	}
	defer rows.Close()
	var out []switchboard.Unembedded
	for rows.Next() {
		var u switchboard.Unembedded
		if err := rows.Scan(&u.ID, &u.SessionID, &u.Text); err != nil {
			return nil, fmt.Errorf("storage: unembedded messages: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: unembedded messages: %w", err)
	}
	return out, nil
}

// CountUnembedded is how many messages after the message after have no
// vector of space. It reads every message after after: it is for
// metrics and the doctor, not for each search.
func (db *DB) CountUnembedded(ctx context.Context, space string, after int64) (int64, error) {
	var n int64
	if err := db.read.QueryRowContext(ctx, `SELECT count(*) `+unembedded, space, after).Scan(&n); err != nil {
		return 0, fmt.Errorf("storage: count unembedded messages: %w", err)
	}
	return n, nil
}

// CountUnembeddedIn counts, in a database opened elsewhere (gateway
// doctor's read-only open of a file no gateway holds), the messages
// semantic recall embeds and how many of them have no vector of space.
// A database from before semantic recall has no vectors at all: every
// message waits.
func CountUnembeddedIn(ctx context.Context, db *sql.DB, space string) (pending, total int64, err error) {
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM messages m WHERE m.role IN ('user', 'assistant')
		AND COALESCE(json_extract(m.data, '$.content'), '') != ''`).Scan(&total); err != nil {
		return 0, 0, fmt.Errorf("storage: count messages: %w", err)
	}
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'message_vectors'`).Scan(&tables); err != nil {
		return 0, 0, fmt.Errorf("storage: count unembedded messages: %w", err)
	}
	if tables == 0 {
		return total, total, nil
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) `+unembedded, space, 0).Scan(&pending); err != nil {
		return 0, 0, fmt.Errorf("storage: count unembedded messages: %w", err)
	}
	return pending, total, nil
}

// saveVector stores a message's vector of a space, replacing one of
// another space; a message deleted meanwhile (retention) is skipped.
const saveVector = `INSERT INTO message_vectors (message_id, space, vector)
	SELECT id, ?, ? FROM messages WHERE id = ?
	ON CONFLICT (message_id) DO UPDATE SET space = excluded.space, vector = excluded.vector`

// SaveVectors stores vectors of space in the writer's next batch, and
// returns once they are committed.
func (db *DB) SaveVectors(ctx context.Context, space string, vs []switchboard.Vector) error {
	if len(vs) == 0 {
		return nil
	}
	blobs := make([][]byte, len(vs))
	for i, v := range vs {
		if len(v.Values) > switchboard.MaxVectorDims {
			return fmt.Errorf("storage: save vectors: message %d: %d numbers, more than %d", v.MessageID, len(v.Values), switchboard.MaxVectorDims)
		}
		blobs[i] = EncodeVector(v.Values)
	}
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, saveVector)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for i, v := range vs {
			if _, err := stmt.ExecContext(ctx, space, blobs[i], v.MessageID); err != nil {
				return fmt.Errorf("message %d: %w", v.MessageID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: save vectors: %w", err)
	}
	return nil
}

// MemberSessions are the conversations reader (an author key) is a member
// of: those their searches may find messages in.
func (db *DB) MemberSessions(ctx context.Context, reader string) ([]string, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT session_id FROM members WHERE author_key = ? ORDER BY session_id`, reader)
	if err != nil {
		return nil, fmt.Errorf("storage: sessions of %s: %w", reader, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("storage: sessions of %s: %w", reader, err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: sessions of %s: %w", reader, err)
	}
	return out, nil
}

// SessionVectors are a conversation's vectors of space that have dims
// numbers, oldest message first: their messages' ids, and the vectors one
// after another in flat (vector i is flat[i*dims:(i+1)*dims]). Vectors of
// another length (an empty one, for a message with nothing to embed) are
// left out, and so is one that cannot be read, which is logged.
func (db *DB) SessionVectors(ctx context.Context, space, sessionID string, dims int) (ids []int64, flat []float32, err error) {
	if dims <= 0 || dims > switchboard.MaxVectorDims {
		return nil, nil, fmt.Errorf("storage: vectors of %s: dims %d", sessionID, dims)
	}
	rows, err := db.read.QueryContext(ctx, `SELECT v.message_id, v.vector FROM messages m
		JOIN message_vectors v ON v.message_id = m.id
		WHERE m.session_id = ? AND v.space = ? AND length(v.vector) = ? ORDER BY m.id`, sessionID, space, 4*dims)
	if err != nil {
		return nil, nil, fmt.Errorf("storage: vectors of %s: %w", sessionID, err)
	}
	defer rows.Close()
	var blob sql.RawBytes
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &blob); err != nil {
			return nil, nil, fmt.Errorf("storage: vectors of %s: %w", sessionID, err)
		}
		if flat, err = DecodeVector(flat, blob); err != nil {
			db.log.Warn("storage: a message's vector cannot be read; semantic recall leaves the message out", "message", id, "err", err)
			continue
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("storage: vectors of %s: %w", sessionID, err)
	}
	return ids, flat, nil
}

// Hits are the messages of ids that reader (an author key) may read, a
// member of their conversation, in no particular order: a message of a
// conversation reader is not in is left out, whoever asks for it.
func (db *DB) Hits(ctx context.Context, reader string, ids []int64) ([]switchboard.Hit, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(ids)+1)
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, reader)
	rows, err := db.read.QueryContext(ctx, `SELECT id, session_id, data, created_at FROM messages
		WHERE id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)
		  AND session_id IN (SELECT session_id FROM members WHERE author_key = ?)`, args...)
	if err != nil {
		return nil, fmt.Errorf("storage: messages found: %w", err)
	}
	defer rows.Close()
	var out []switchboard.Hit
	for rows.Next() {
		var h switchboard.Hit
		if err := scanHit(rows, &h.ID, &h.Found); err != nil {
			return nil, fmt.Errorf("storage: messages found: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: messages found: %w", err)
	}
	return out, nil
}

// scanHit reads a row of id, session_id, data, created_at.
func scanHit(rows *sql.Rows, id *int64, f *switchboard.Found) error {
	var (
		data string
		at   int64
	)
	if err := rows.Scan(id, &f.SessionID, &data, &at); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(data), &f.Message); err != nil {
		return err
	}
	if at > 0 {
		f.At = time.UnixMilli(at).UTC()
	}
	return nil
}
