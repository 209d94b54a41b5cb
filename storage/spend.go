package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/switchboard-gw/switchboard"
)

const (
	insertCharge = `INSERT INTO charges (session_id, guide, model, person, channel,
		prompt_tokens, completion_tokens, cached_tokens, total_tokens, cost_usd, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	addTally = `INSERT INTO tallies (scope, key, period, tokens, cost_usd) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (scope, key, period) DO UPDATE SET tokens = tokens + excluded.tokens, cost_usd = cost_usd + excluded.cost_usd`
)

// writeCharge stores a turn's charge and adds it to its running totals
// (switchboard.Charge.Tallies), inside the turn's transaction.
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
	priced := 0.0
	if c.Priced {
		priced = c.CostUSD
	}
	for _, k := range c.Tallies() {
		if _, err := db.execWrite(ctx, tx, addTally, k.Scope, k.Key, k.Period, u.TotalTokens, priced); err != nil {
			return fmt.Errorf("charge: tally %s: %w", k.Scope, err)
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
	query := `SELECT ` + col + ` AS k, count(*), sum(prompt_tokens), sum(completion_tokens), sum(cached_tokens),
		sum(total_tokens), coalesce(sum(cost_usd), 0), count(*) - count(cost_usd)
		FROM charges WHERE at >= ? AND (? = '' OR session_id = ?)
		GROUP BY k ORDER BY 7 DESC, 6 DESC, k`
	rows, err := db.QueryContext(ctx, query, q.Since.UnixMilli(), q.Session, q.Session)
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
