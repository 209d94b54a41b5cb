package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-gw/switchboard"
)

const (
	insertCharge = `INSERT INTO charges (session_id, guide, model, person, channel,
		prompt_tokens, completion_tokens, cached_tokens, total_tokens, cost_usd, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`
	// addTallies adds a charge to its running totals, in the rows of
	// the writer's shard (tallyShard), one row a key, in the order given:
	// the all-time overall row first (Charge.Tallies), so that two
	// transactions adding to the same shard's rows (two replicas whose ids
	// fall in one shard) take them in one order and never deadlock.
	addTallies = `INSERT INTO tallies (scope, key, period, shard, tokens, cost_usd)
		SELECT t.scope, t.key, t.period, $6, $4, $5
		FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(scope, key, period, n) ORDER BY t.n
		ON CONFLICT (scope, key, period, shard) DO UPDATE SET tokens = tallies.tokens + excluded.tokens,
			cost_usd = tallies.cost_usd + excluded.cost_usd`
)

// tallyShards is how many rows a running total may be kept in.
const tallyShards = 16

// tallyShard is the shard of the running totals' rows a replica adds to:
// replicas in different shards never wait for each other's commits to add
// to the same total (every turn adds to the overall ones). One gateway
// (no replica id) adds to shard 0.
func tallyShard(replica string) int16 {
	if replica == "" {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(replica))
	return int16(h.Sum32() % tallyShards)
}

// chargeSteps store a turn's charge and add it to its running totals
// (switchboard.Charge.Tallies), in the turn's transaction.
func chargeSteps(s *steps, sessionID string, c *switchboard.Charge, shard int16) {
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
	s.exec(addTallies, scopes, names, periods, u.TotalTokens, priced, shard)
}

// Tally reads one running total: zero when nothing was charged to it.
func (db *DB) Tally(ctx context.Context, k switchboard.TallyKey) (switchboard.Tally, error) {
	var t switchboard.Tally
	err := db.pool.QueryRow(ctx, `SELECT coalesce(sum(tokens), 0)::bigint, coalesce(sum(cost_usd), 0)::double precision FROM tallies
		WHERE scope = $1 AND key = $2 AND period = $3`,
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
	// One session's (/usage) by its index, not by a scan of every charge
	// since q.Since: a condition "$2 = '' OR session_id = $2" uses neither.
	where, args := `at >= $1`, []any{q.Since.UnixMilli()}
	if q.Session != "" {
		where, args = `session_id = $2 AND at >= $1`, []any{q.Since.UnixMilli(), q.Session}
	}
	query := `SELECT ` + col + `::text AS k, count(*), sum(prompt_tokens), sum(completion_tokens), sum(cached_tokens),
		sum(total_tokens), coalesce(sum(cost_usd), 0), count(*) - count(cost_usd)
		FROM charges WHERE ` + where + `
		GROUP BY k ORDER BY 7 DESC, 6 DESC, k`
	rows, err := pool.Query(ctx, query, args...)
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
