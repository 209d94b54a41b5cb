package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/storage"
	"github.com/switchboard-gw/switchboard/storage/postgres"
)

// spendingOf is what the configuration prices and bounds turns by, for
// sessions.Config.Spending and Manager.SetSpending.
func spendingOf(cfg config.Config) *sessions.Spending {
	sp := &sessions.Spending{Prices: make(map[string]switchboard.Price, len(cfg.Pricing))}
	for _, p := range cfg.Pricing {
		sp.Prices[p.Model] = switchboard.Price{Input: p.Input, Output: p.Output, CachedInput: p.CachedInput}
	}
	for _, b := range cfg.Budgets {
		sp.Budgets = append(sp.Budgets, sessions.Budget{Scope: b.Scope, Key: b.Key, Period: b.Period, Tokens: b.Tokens, USD: b.USD})
	}
	return sp
}

// runUsage is `gateway usage`: what turns spent since a time, grouped by
// person, guide, model or channel, read from the store without changing
// it (a SQLite file opened read-only, beside a running gateway or not; on
// PostgreSQL, read-only transactions).
func runUsage(ctx context.Context, args []string, out, errOut io.Writer, environ []string) error {
	fs, configFile, sets := commandFlags("usage", "gateway usage [--config FILE] [--set key=value]... [--since 7d] [--by person|guide|model|channel]",
		"Prints the tokens and cost of the turns since a time, from the store, grouped as --by says.", errOut)
	sinceFlag := fs.String("since", "30d", "how far back: days (7d), a duration (12h) or a UTC date (2026-11-01)")
	by := fs.String("by", switchboard.ByPerson, "group by person, guide, model or channel")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("usage: unexpected argument %q", fs.Arg(0))
	}
	now := time.Now().UTC()
	since, err := parseSince(*sinceFlag, now)
	if err != nil {
		return fmt.Errorf("usage: --since: %w", err)
	}
	if _, err := switchboard.SpendColumn(*by); err != nil || *by == "" {
		return fmt.Errorf("usage: --by: want person, guide, model or channel, not %q", *by)
	}
	cfg, err := config.Load(*configFile, *sets, environ)
	if err != nil {
		return err
	}
	rows, err := readSpending(ctx, cfg.Storage.DSN, switchboard.SpendQuery{Since: since, By: *by})
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	printSpending(out, rows, since, *by)
	return nil
}

// parseSince reads --since: "7d" (days), a Go duration ("12h") or a UTC
// date ("2026-11-01").
func parseSince(s string, now time.Time) (time.Time, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n > 0 {
			return now.AddDate(0, 0, -n), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("want days (7d), a duration (12h) or a date (2026-11-01), not %q", s)
}

// readSpending reads a report from the store storage.dsn names, without
// writing to it.
func readSpending(ctx context.Context, dsn string, q switchboard.SpendQuery) ([]switchboard.SpendRow, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if config.IsPostgres(dsn) {
		in, err := postgres.Inspect(ctx, dsn)
		if err != nil {
			return nil, err
		}
		defer in.Close()
		rows, err := in.Spending(ctx, q)
		if err != nil && strings.Contains(err.Error(), "42P01") { // undefined_table
			return nil, errors.New("the database has no charges table yet: start this version of the gateway once to migrate it")
		}
		return rows, err
	}
	if dsn == ":memory:" {
		return nil, errors.New("storage.dsn is :memory:: nothing outlives the gateway that spent it")
	}
	path := absPath(dsn)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("there is no database at %s (storage.dsn) yet", path)
	}
	// Read-only through the WAL while a gateway has the file open (its
	// -shm is there); without one, immutable: nothing is created beside it.
	uri := "file:" + escapePath(path) + "?mode=ro&immutable=1"
	if _, err := os.Stat(path + "-shm"); err == nil {
		uri = "file:" + escapePath(path) + "?mode=ro&_pragma=busy_timeout(5000)&_pragma=query_only(1)"
	}
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := storage.ReadSpending(ctx, db, q)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return nil, errors.New("the database has no charges table yet: start this version of the gateway once to migrate it")
	}
	return rows, err
}

// printSpending prints a report as a table, with its total.
func printSpending(out io.Writer, rows []switchboard.SpendRow, since time.Time, by string) {
	fmt.Fprintf(out, "Usage since %s, by %s\n", since.Format("2006-01-02 15:04 UTC"), by)
	if len(rows) == 0 {
		fmt.Fprintln(out, "No turns were charged in that time.")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tturns\tinput\tcached\toutput\ttotal\tcost\t\n", strings.ToUpper(by))
	var all switchboard.SpendRow
	all.Key = "total"
	line := func(r switchboard.SpendRow) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.Key, r.Turns, r.Usage.PromptTokens, r.Usage.CachedTokens,
			r.Usage.CompletionTokens, r.Usage.TotalTokens, switchboard.CostText(r.CostUSD, r.Turns, r.Unpriced))
	}
	for _, r := range rows {
		if r.Key == "" {
			r.Key = "(none)"
		}
		line(r)
		all.Turns += r.Turns
		all.Usage = all.Usage.Add(r.Usage)
		all.CostUSD += r.CostUSD
		all.Unpriced += r.Unpriced
	}
	line(all)
	_ = tw.Flush()
	if all.Unpriced > 0 {
		fmt.Fprintf(out, "%d of %d turns used a model with no price in pricing: (config.yaml), so their cost is not known and not in the dollars above.\n", all.Unpriced, all.Turns)
	}
}
