package storage

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/switchboard-gw/switchboard"
)

const (
	insertCharge = `INSERT INTO charges (session_id, guide, model, person, channel,
		prompt_tokens, completion_tokens, cached_tokens, total_tokens, cost_usd, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// addTally adds to one running total. The charges of a batch are
	// added up first (batchTallies): a batch of turns updates each total
	// once, where one statement per charge cost the writer a sixth of
	// its turns at 100 sessions (make bench).
	addTally = `INSERT INTO tallies (scope, key, period, tokens, cost_usd) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (scope, key, period) DO UPDATE SET tokens = tokens + excluded.tokens, cost_usd = cost_usd + excluded.cost_usd`
)

// writeCharge stores a turn's charge inside the turn's transaction, and
// notes what it adds to its running totals (switchboard.Charge.Tallies),
// which the batch's transaction adds before it commits (addTallies).
func (db *DB) writeCharge(ctx context.Context, tx *sql.Tx, sessionID string, c *switchboard.Charge) error {
	var cost any
	if c.Priced {
		cost = c.CostUSD
	}
	u := c.Usage
	if _, err := db.execWrite(ctx, tx, insertCharge, sessionID, c.Guide, c.Model, c.Person, c.Channel,
		u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.TotalTokens, cost, c.At.UnixMilli()); err != nil {
		return fmt.Errorf("charge: %w", err)
	}
	db.tallies.add(c)
	return nil
}

// batchTallies is what the charges of the transaction under way add to
// their running totals, summed. Only the writer's goroutine touches it,
// as lastSeqs: a batch begins with it empty, and its transaction adds it
// before committing, so the totals change with the charges or not at all.
type batchTallies map[switchboard.TallyKey]switchboard.Tally

func (b batchTallies) add(c *switchboard.Charge) {
	for _, k := range c.Tallies() {
		t := b[k]
		t.Tokens += int64(c.Usage.TotalTokens)
		if c.Priced {
			t.CostUSD += c.CostUSD
		}
		b[k] = t
	}
}

// addTallies adds the batch's charges to their running totals, each once,
// in the order of their keys.
func (db *DB) addTallies(ctx context.Context, tx *sql.Tx) error {
	keys := slices.SortedFunc(maps.Keys(db.tallies), func(a, b switchboard.TallyKey) int {
		return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Period, b.Period))
	})
	for _, k := range keys {
		t := db.tallies[k]
		if _, err := db.execWrite(ctx, tx, addTally, k.Scope, k.Key, k.Period, t.Tokens, t.CostUSD); err != nil {
			return fmt.Errorf("storage: running total %s %q %s: %w", k.Scope, k.Key, k.Period, err)
		}
	}
	return nil
}

// Tally reads one running total: zero when nothing was charged to it.
func (db *DB) Tally(ctx context.Context, k switchboard.TallyKey) (switchboard.Tally, error) {
	var t switchboard.Tally
	err := db.read.QueryRowContext(ctx, `SELECT tokens, cost_usd FROM tallies WHERE scope = ? AND key = ? AND period = ?`,
		k.Scope, k.Key, k.Period).Scan(&t.Tokens, &t.CostUSD)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("storage: tally %s %q %s: %w", k.Scope, k.Key, k.Period, err)
	}
	return t, nil
}

// Spending reports the turns charged since q.Since, grouped as q.By asks,
// the most costly group first.
func (db *DB) Spending(ctx context.Context, q switchboard.SpendQuery) ([]switchboard.SpendRow, error) {
	return ReadSpending(ctx, db.read, q)
}

// ReadSpending is Spending on a database opened by other means: gateway
// usage opens the file read-only, beside a running gateway or not.
func ReadSpending(ctx context.Context, db *sql.DB, q switchboard.SpendQuery) ([]switchboard.SpendRow, error) {
	col, err := switchboard.SpendColumn(q.By)
	if err != nil {
		return nil, fmt.Errorf("storage: spending: %w", err)
	}
	// One session's (/usage) by its index, not by a scan of every charge
	// since q.Since: a condition "? = '' OR session_id = ?" uses neither.
	where, args := `at >= ?`, []any{q.Since.UnixMilli()}
	if q.Session != "" {
		where, args = `session_id = ? AND at >= ?`, []any{q.Session, q.Since.UnixMilli()}
	}
	query := `SELECT ` + col + ` AS k, count(*), sum(prompt_tokens), sum(completion_tokens), sum(cached_tokens),
		sum(total_tokens), coalesce(sum(cost_usd), 0), count(*) - count(cost_usd)
		FROM charges WHERE ` + where + `
		GROUP BY k ORDER BY 7 DESC, 6 DESC, k`
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("storage: spending: %w", err)
	}
	defer rows.Close()
	var out []switchboard.SpendRow
	for rows.Next() {
		var r switchboard.SpendRow
		if err := rows.Scan(&r.Key, &r.Turns, &r.Usage.PromptTokens, &r.Usage.CompletionTokens, &r.Usage.CachedTokens,
			&r.Usage.TotalTokens, &r.CostUSD, &r.Unpriced); err != nil {
			return nil, fmt.Errorf("storage: spending: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: spending: %w", err)
	}
	return out, nil
}
