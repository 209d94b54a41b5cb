package storage

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"

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
	hits, err := db.SearchHits(ctx, reader, query, limit)
	return switchboard.Founds(hits), err
}

// SearchHits is Search with each message's id, which semantic recall
// merges its own matches with.
func (db *DB) SearchHits(ctx context.Context, reader, query string, limit int) ([]switchboard.Hit, error) {
	words, err := db.telling(ctx, queryWords(query))
	if err != nil {
		return nil, err
	}
	match := ftsQuery(words)
	if match == "" {
		return nil, nil
	}
	rows, err := db.read.QueryContext(ctx, `SELECT m.id, m.session_id, m.data, m.created_at FROM messages_fts f
		JOIN messages m ON m.id = f.rowid
		WHERE messages_fts MATCH ?
		  AND m.session_id IN (SELECT session_id FROM members WHERE author_key = ?)
		ORDER BY bm25(messages_fts) LIMIT ?`, match, reader, limit)
	if err != nil {
		return nil, fmt.Errorf("storage: search: %w", err)
	}
	defer rows.Close()
	var hits []switchboard.Hit
	for rows.Next() {
		var h switchboard.Hit
		if err := scanHit(rows, &h.ID, &h.Found); err != nil {
			return nil, fmt.Errorf("storage: search: %w", err)
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: search: %w", err)
	}
	return hits, nil
}

// queryWords are a person's query's words, lower case, each once, at most
// MaxQuery.
func queryWords(q string) []string {
	var words []string
	for _, w := range strings.FieldsFunc(fold(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }) {
		if !slices.Contains(words, w) {
			words = append(words, w)
		}
		if len(words) == MaxQuery {
			break
		}
	}
	return words
}

// fold is text as the index's tokenizer keeps it (unicode61 with
// remove_diacritics): lower case, without accents ("Café" is "cafe").
func fold(s string) string {
	out, _, err := transform.String(transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC), strings.ToLower(s))
	if err != nil {
		return strings.ToLower(s)
	}
	return out
}

// commonWord is how many messages a word may be in and still tell them
// apart: ranking costs a row for every message a word is in, so the words
// of a question ("what", "the", "said") are left out, and a search's cost
// stays bounded however long the conversations.
const commonWord = 5000

// telling keeps the words that are in at most commonWord messages, the
// rarest first, counting each word's messages only up to that bound (a
// common word's whole list is never read). A question of common words
// alone finds nothing: they tell nothing.
func (db *DB) telling(ctx context.Context, words []string) ([]string, error) {
	type counted struct {
		word string
		docs int
	}
	var keep []counted
	for _, w := range words {
		var docs int
		err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? LIMIT ?)`,
			ftsQuery([]string{w}), commonWord+1).Scan(&docs)
		if err != nil {
			return nil, fmt.Errorf("storage: search: %w", err)
		}
		if docs > 0 && docs <= commonWord {
			keep = append(keep, counted{w, docs})
		}
	}
	slices.SortFunc(keep, func(a, b counted) int { return cmp.Compare(a.docs, b.docs) })
	out := make([]string, len(keep))
	for i, c := range keep {
		out[i] = c.word
	}
	return out, nil
}

// ftsQuery is words as an FTS5 query: each quoted (so no operator or
// syntax of a person's reaches FTS5), any of them matching.
func ftsQuery(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
	}
	return strings.Join(quoted, " OR ")
}
