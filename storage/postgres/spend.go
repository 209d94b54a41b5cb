package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-gw/switchboard"
)

const (
	insertCharge = `INSERT INTO charges (session_id, guide, model, person, channel,
		prompt_tokens, completion_tokens, cached_tokens, total_tokens, cost_usd, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`
	// addTallies adds a charge to its running totals, one row a key, in
	// the order given: the rows' locks are taken in the order
	// Charge.Tallies gives them, the all-time overall row first, so that
	// two transactions holding charges (two replicas' batches) never
	// deadlock; the cost is that they commit one after the other.
	addTallies = `INSERT INTO tallies (scope, key, period, tokens, cost_usd)
		SELECT t.scope, t.key, t.period, $4, $5
		FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(scope, key, period, n) ORDER BY t.n
		ON CONFLICT (scope, key, period) DO UPDATE SET tokens = tallies.tokens + excluded.tokens,
			cost_usd = tallies.cost_usd + excluded.cost_usd`
)

// chargeSteps store a turn's charge and add it to its running totals
// (switchboard.Charge.Tallies), in the turn's transaction.
func chargeSteps(s *steps, sessionID string, c *switchboard.Charge) {
	var cost *float64
	priced := 0.0
	if c.Priced {
		cost, priced = &c.CostUSD, c.CostUSD
	}
	u := c.Usage
	s.exec(insertCharge, sessionID, c.Guide, c.Model, c.Person, c.Channel,
		u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.TotalTokens, cost, c.At.UnixMilli())
	keys := c.Tallies()
	scopes, names, periods := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		scopes[i], names[i], periods[i] = k.Scope, k.Key, k.Period
	}
	s.exec(addTallies, scopes, names, periods, u.TotalTokens, priced)
}

// Tally reads one running total: zero when nothing was charged to it.
func (db *DB) Tally(ctx context.Context, k switchboard.TallyKey) (switchboard.Tally, error) {
	var t switchboard.Tally
	err := db.pool.QueryRow(ctx, `SELECT tokens, cost_usd FROM tallies WHERE scope = $1 AND key = $2 AND period = $3`,
		k.Scope, k.Key, k.Period).Scan(&t.Tokens, &t.CostUSD)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return t, fmt.Errorf("postgres: tally %s %q %s: %w", k.Scope, k.Key, k.Period, err)
	}
	return t, nil
}

// Spending reports the turns charged since q.Since, grouped as q.By asks,
// the most costly group first.
func (db *DB) Spending(ctx context.Context, q switchboard.SpendQuery) ([]switchboard.SpendRow, error) {
	return spending(ctx, db.pool, q)
}

// Spending is DB.Spending in read-only transactions (gateway usage).
func (in *Inspector) Spending(ctx context.Context, q switchboard.SpendQuery) ([]switchboard.SpendRow, error) {
	return spending(ctx, in.pool, q)
}

func spending(ctx context.Context, pool *pgxpool.Pool, q switchboard.SpendQuery) ([]switchboard.SpendRow, error) {
	col, err := switchboard.SpendColumn(q.By)
	if err != nil {
		return nil, fmt.Errorf("postgres: spending: %w", err)
	}
	query := `SELECT ` + col + `::text AS k, count(*), sum(prompt_tokens), sum(completion_tokens), sum(cached_tokens),
		sum(total_tokens), coalesce(sum(cost_usd), 0), count(*) - count(cost_usd)
		FROM charges WHERE at >= $1 AND ($2 = '' OR session_id = $2)
		GROUP BY k ORDER BY 7 DESC, 6 DESC, k`
	rows, err := pool.Query(ctx, query, q.Since.UnixMilli(), q.Session)
	if err != nil {
		return nil, fmt.Errorf("postgres: spending: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (switchboard.SpendRow, error) {
		var r switchboard.SpendRow
		err := row.Scan(&r.Key, &r.Turns, &r.Usage.PromptTokens, &r.Usage.CompletionTokens, &r.Usage.CachedTokens,
			&r.Usage.TotalTokens, &r.CostUSD, &r.Unpriced)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: spending: %w", err)
	}
	return out, nil
}
