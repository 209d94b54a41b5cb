package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/switchboard-gw/switchboard"
)

// MaxQuery bounds a search's words.
const MaxQuery = 32

// Search finds the messages (people's and the assistant's) that best
// match query, by BM25, among the conversations reader is a member of
// (an author key): nobody finds what was said in a conversation they are
// not in. The query is taken as words, any of which may match; FTS5's
// own syntax is not: a person's quotes and stars are text.
func (db *DB) Search(ctx context.Context, reader, query string, limit int) ([]switchboard.Found, error) {
	match := ftsQuery(query)
	if match == "" {
		return nil, nil
	}
	rows, err := db.read.QueryContext(ctx, `SELECT m.session_id, m.data, m.created_at FROM messages_fts f
		JOIN messages m ON m.id = f.rowid
		WHERE messages_fts MATCH ?
		  AND m.session_id IN (SELECT session_id FROM members WHERE author_key = ?)
		ORDER BY bm25(messages_fts) LIMIT ?`, match, reader, limit)
	if err != nil {
		return nil, fmt.Errorf("storage: search: %w", err)
	}
	defer rows.Close()
	var hits []switchboard.Found
	for rows.Next() {
		var h switchboard.Found
		var data string
		var at int64
		if err := rows.Scan(&h.SessionID, &data, &at); err != nil {
			return nil, fmt.Errorf("storage: search: %w", err)
		}
		if err := json.Unmarshal([]byte(data), &h.Message); err != nil {
			return nil, fmt.Errorf("storage: search: %w", err)
		}
		if at > 0 {
			h.At = time.UnixMilli(at).UTC()
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: search: %w", err)
	}
	return hits, nil
}

// ftsQuery is a person's query as an FTS5 query: each word quoted (so no
// operator or syntax of theirs reaches FTS5), any of them matching, at
// most MaxQuery words.
func ftsQuery(q string) string {
	words := strings.FieldsFunc(q, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	if len(words) > MaxQuery {
		words = words[:MaxQuery]
	}
	for i, w := range words {
		words[i] = `"` + w + `"`
	}
	return strings.Join(words, " OR ")
}
