package storage

// The recall index's health, for gateway doctor: CheckRecallIndex runs on
// any read-only handle of the file, and RebuildRecallSQL is the repair the
// doctor prints.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// RecallCheck is what CheckRecallIndex found.
type RecallCheck struct {
	// Indexed is how many messages the index holds.
	Indexed int64
	// Missing are the stored messages with text (people's and the
	// assistant's) that are not in the index: recall cannot find them.
	Missing int64
	// Orphans are index rows whose message is gone.
	Orphans int64
	// Bytes is the index on disk (see Footprint).
	Bytes int64
	// Problem is what FTS5's integrity check found, "" when the index
	// agrees with itself. A broken index fails the store's writes of new
	// messages, whose text is indexed in the same transaction, as soon as
	// FTS5 merges its segments (every few writes) and reads a broken one.
	Problem string
}

// Sound reports whether the index is whole and agrees with the messages.
func (c RecallCheck) Sound() bool { return c.Problem == "" && c.Missing == 0 && c.Orphans == 0 }

// indexable is the messages the index holds, as WriteTurn and migration
// 0012 choose them.
const indexable = `role IN ('user', 'assistant') AND COALESCE(json_extract(data, '$.content'), '') != ''`

// CheckRecallIndex runs FTS5's integrity check on the recall index
// (messages_fts) and compares its rows with the stored messages, in one
// read transaction of db, which may be read-only (gateway doctor opens the
// file with mode=ro): the check is PRAGMA integrity_check on the table,
// which runs FTS5's own check (its xIntegrity, the same as the
// 'integrity-check' command, which is an INSERT and so needs a writable
// database) and writes nothing. It reads the whole index and every
// message: about 3.5 s for a million chat-line messages. A database
// without the index (before migration 0012) is ErrNotFound.
func CheckRecallIndex(ctx context.Context, db *sql.DB) (RecallCheck, error) {
	var c RecallCheck
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return c, fmt.Errorf("storage: check recall index: %w", err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'messages_fts'`).Scan(&n); err != nil {
		return c, fmt.Errorf("storage: check recall index: %w", err)
	}
	if n == 0 {
		return c, fmt.Errorf("storage: check recall index: messages_fts: %w", ErrNotFound)
	}
	if c.Problem, err = integrity(ctx, tx); err != nil {
		return c, fmt.Errorf("storage: check recall index: %w", err)
	}
	for _, q := range []struct {
		into  *int64
		query string
	}{
		{&c.Indexed, `SELECT count(*) FROM messages_fts_docsize`},
		{&c.Missing, `SELECT count(*) FROM messages m WHERE ` + indexable + ` AND NOT EXISTS (SELECT 1 FROM messages_fts_docsize d WHERE d.id = m.id)`},
		{&c.Orphans, `SELECT count(*) FROM messages_fts_docsize d WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = d.id)`},
		{&c.Bytes, `SELECT COALESCE(sum(pgsize), 0) FROM dbstat WHERE aggregate = TRUE AND name IN (` + recallTables + `)`},
	} {
		if err := tx.QueryRowContext(ctx, q.query).Scan(q.into); err != nil {
			return c, fmt.Errorf("storage: check recall index: %w", err)
		}
	}
	return c, nil
}

// integrity is what FTS5's integrity check of messages_fts reports, ""
// for "ok". Corruption SQLite reports as an error, rather than as a row,
// is a finding too.
func integrity(ctx context.Context, tx *sql.Tx) (string, error) {
	rows, err := tx.QueryContext(ctx, `PRAGMA integrity_check(messages_fts)`)
	if err != nil {
		return corruption(err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		if line != "ok" {
			found = append(found, line)
		}
	}
	if err := rows.Err(); err != nil {
		return corruption(err)
	}
	return strings.Join(found, "; "), nil
}

// corruption turns SQLite's "database disk image is malformed" into a
// finding; any other error stays one.
func corruption(err error) (string, error) {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CORRUPT {
		return err.Error(), nil
	}
	return "", err
}

// RebuildRecallSQL rebuilds the recall index from the stored messages, as
// migration 0012 built it, in one transaction. It is for an operator to
// run in the sqlite3 shell, with the gateway stopped, when gateway doctor
// finds the index broken or short of messages: dropping the table drops
// FTS5's tables however damaged they are, and the messages are the source
// of truth.
const RebuildRecallSQL = `BEGIN; DROP TABLE IF EXISTS messages_fts; ` +
	`CREATE VIRTUAL TABLE messages_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2'); ` +
	`INSERT INTO messages_fts (rowid, text) SELECT id, json_extract(data, '$.content') FROM messages WHERE ` + indexable + `; COMMIT;`
