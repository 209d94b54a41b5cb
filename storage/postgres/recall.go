package postgres

// Recall: full-text search of people's and the assistant's messages. The
// messages table keeps each such message's words in a generated tsvector
// column (recall, with a GIN index; migrations/0001_schema.sql), made by
// switchboard_fold and the 'simple' configuration: no stemming and no stop
// words, like the SQLite store's FTS5 index (unicode61, accents removed).
// A query is folded by the same function, so indexing and searching never
// disagree on a word.

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-gw/switchboard"
)

// commonWord is how many messages a word may be in and still tell them
// apart, as in the SQLite store: the words of a question ("what", "the")
// are left out, so a search's cost stays bounded however long the
// conversations. A question of common words alone finds nothing.
const commonWord = 5000

// maxQueryWords bounds a search's words, as the SQLite store's MaxQuery.
const maxQueryWords = 32

// maxQueryText bounds the text of a query that is folded into words.
const maxQueryText = 4096

// Search finds the messages (people's and the assistant's) that best
// match query, best first (ts_rank_cd), among the conversations reader is
// a member of (an author key): nobody finds what was said in a
// conversation they are not in. The query is taken as words, any of which
// may match, each a whole word as the index has it (no prefixes, as the
// SQLite store's quoted FTS5 terms); no query syntax is: a person's
// quotes, stars and operators are text.
func (db *DB) Search(ctx context.Context, reader, query string, limit int) ([]switchboard.Found, error) {
	hits, err := db.SearchHits(ctx, reader, query, limit)
	return switchboard.Founds(hits), err
}

// SearchHits is Search with each message's id, which semantic recall
// merges its own matches with.
func (db *DB) SearchHits(ctx context.Context, reader, query string, limit int) ([]switchboard.Hit, error) {
	words, err := db.telling(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("postgres: search: %w", err)
	}
	if len(words) == 0 {
		return nil, nil
	}
	return db.hits(ctx, "search", `SELECT m.id, m.session_id, m.data, m.created_at
		FROM messages m, CAST($1 AS tsquery) q
		WHERE m.recall @@ q
		  AND m.session_id IN (SELECT session_id FROM members WHERE author_key = $2)
		ORDER BY ts_rank_cd(m.recall, q) DESC, m.id DESC LIMIT $3`, anyOf(words), reader, max(limit, 0))
}

// telling folds the query into its words, as the index folds messages
// (the first maxQueryWords, in the query's order), and keeps those in at most
// commonWord messages, counting each word's messages only up to that
// bound.
func (db *DB) telling(ctx context.Context, query string) ([]string, error) {
	// PostgreSQL's text holds neither NUL nor invalid UTF-8: they
	// separate words like any other character that is not a letter.
	query = strings.ReplaceAll(strings.ToValidUTF8(query[:min(len(query), maxQueryText)], " "), "\x00", " ")
	rows, err := db.pool.Query(ctx, `SELECT w.lexeme FROM unnest(to_tsvector('simple', switchboard_fold($1))) w
		ORDER BY w.positions[1] LIMIT $2`, query, maxQueryWords)
	if err != nil {
		return nil, err
	}
	words, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(words) == 0 {
		return nil, err
	}
	keep := words[:0]
	for _, w := range words {
		var docs int
		err := db.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM messages WHERE recall @@ CAST($1 AS tsquery) LIMIT $2) m`,
			anyOf([]string{w}), commonWord+1).Scan(&docs)
		if err != nil {
			return nil, err
		}
		if docs > 0 && docs <= commonWord {
			keep = append(keep, w)
		}
	}
	return keep, nil
}

// anyOf is a tsquery that matches any of words, lexemes as the index has
// them: each quoted, so nothing in them is taken as an operator.
func anyOf(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(w) + "'"
	}
	return strings.Join(quoted, " | ")
}
