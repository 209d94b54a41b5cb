package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// chargeAt is a priced charge of tokens (a third prompt) by person with
// guide and model at at.
func chargeAt(person, guide, model string, tokens int, cost float64, at time.Time) *switchboard.Charge {
	return &switchboard.Charge{
		Guide: guide, Model: model, Person: person, Channel: "web",
		Usage:   switchboard.Usage{PromptTokens: tokens / 3, CompletionTokens: tokens - tokens/3, TotalTokens: tokens, CachedTokens: tokens / 6},
		CostUSD: cost, Priced: true, At: at,
	}
}

func tally(t testing.TB, db Store, scope, key, period string) switchboard.Tally {
	t.Helper()
	got, err := db.Tally(context.Background(), switchboard.TallyKey{Scope: scope, Key: key, Period: period})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sameTally(t testing.TB, what string, got switchboard.Tally, tokens int64, cost float64) {
	t.Helper()
	if got.Tokens != tokens || math.Abs(got.CostUSD-cost) > 1e-9 {
		t.Errorf("%s = %+v, want %d tokens and $%g", what, got, tokens, cost)
	}
}

func testChargesAddToTheirTallies(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	NewSession(t, db, "s2", "")
	day := time.Date(2026, 11, 27, 23, 59, 0, 0, time.UTC)
	next := day.Add(2 * time.Minute) // the next day, same month
	for _, w := range []struct {
		session string
		c       *switchboard.Charge
	}{
		{"s1", chargeAt("web:ann", "support", "gpt-4o-mini", 300, 0.01, day)},
		{"s2", chargeAt("web:bob", "support", "gpt-4o-mini", 600, 0.02, day)},
		{"s1", chargeAt("web:ann", "assistant", "gpt-4o", 900, 0.5, next)},
	} {
		if err := writeTurn(ctx, db, w.session, switchboard.TurnWrite{EndTurn: true, Usage: w.c.Usage, Charge: w.c}); err != nil {
			t.Fatal(err)
		}
	}
	// A model with no price: its tokens count, its cost is not known and
	// adds nothing to a total in dollars.
	unpriced := chargeAt("web:ann", "support", "llama3", 120, 0, next)
	unpriced.Priced = false
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{EndTurn: true, Usage: unpriced.Usage, Charge: unpriced}); err != nil {
		t.Fatal(err)
	}

	d1, d2 := switchboard.PeriodOf(switchboard.PeriodDay, day), switchboard.PeriodOf(switchboard.PeriodDay, next)
	month := switchboard.PeriodOf(switchboard.PeriodMonth, day)
	if d1 != "day:2026-11-27" || d2 != "day:2026-11-28" || month != "month:2026-11" {
		t.Fatalf("periods %q %q %q", d1, d2, month)
	}
	sameTally(t, "ann's day 1", tally(t, db, switchboard.ScopePerson, "web:ann", d1), 300, 0.01)
	sameTally(t, "ann's day 2", tally(t, db, switchboard.ScopePerson, "web:ann", d2), 1020, 0.5)
	sameTally(t, "ann's month", tally(t, db, switchboard.ScopePerson, "web:ann", month), 1320, 0.51)
	sameTally(t, "bob's month", tally(t, db, switchboard.ScopePerson, "web:bob", month), 600, 0.02)
	sameTally(t, "support's day 1", tally(t, db, switchboard.ScopeGuide, "support", d1), 900, 0.03)
	sameTally(t, "support's month", tally(t, db, switchboard.ScopeGuide, "support", month), 1020, 0.03)
	sameTally(t, "overall day 2", tally(t, db, switchboard.ScopeOverall, "", d2), 1020, 0.5)
	sameTally(t, "overall month", tally(t, db, switchboard.ScopeOverall, "", month), 1920, 0.53)
	sameTally(t, "overall ever", tally(t, db, switchboard.ScopeOverall, "", switchboard.PeriodAll), 1920, 0.53)
	sameTally(t, "nobody's", tally(t, db, switchboard.ScopePerson, "web:carol", month), 0, 0)
	// The session's own total counts the tokens as before.
	s, err := db.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if s.Usage.TotalTokens != 300+900+120 {
		t.Errorf("s1's usage = %+v, want 1320 tokens", s.Usage)
	}
}

// Charges written at once, which a store may commit in one batch, add up
// to the same totals as one by one; one whose write fails adds nothing.
func testChargesWrittenAtOnceAddUp(t *testing.T, db Store) {
	ctx := context.Background()
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	const sessions, each = 8, 6
	for i := range sessions {
		NewSession(t, db, fmt.Sprintf("s%d", i), "")
	}
	var wg sync.WaitGroup
	errs := make(chan error, sessions*each+1)
	for i := range sessions {
		wg.Go(func() {
			for range each {
				c := chargeAt(fmt.Sprintf("web:p%d", i%2), "support", "gpt-4o-mini", 100, 0.01, at)
				errs <- writeTurn(ctx, db, fmt.Sprintf("s%d", i), switchboard.TurnWrite{EndTurn: true, Usage: c.Usage, Charge: c})
			}
		})
	}
	wg.Go(func() {
		c := chargeAt("web:p0", "support", "gpt-4o-mini", 5000, 5, at)
		if err := writeTurn(ctx, db, "nope", switchboard.TurnWrite{EndTurn: true, Usage: c.Usage, Charge: c}); err == nil {
			errs <- errors.New("a charge of a missing session was stored")
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	day, month := switchboard.PeriodOf(switchboard.PeriodDay, at), switchboard.PeriodOf(switchboard.PeriodMonth, at)
	sameTally(t, "overall day", tally(t, db, switchboard.ScopeOverall, "", day), sessions*each*100, sessions*each*0.01)
	sameTally(t, "overall month", tally(t, db, switchboard.ScopeOverall, "", month), sessions*each*100, sessions*each*0.01)
	sameTally(t, "the guide's day", tally(t, db, switchboard.ScopeGuide, "support", day), sessions*each*100, sessions*each*0.01)
	sameTally(t, "p0's day", tally(t, db, switchboard.ScopePerson, "web:p0", day), sessions/2*each*100, sessions/2*each*0.01)
	sameTally(t, "p1's month", tally(t, db, switchboard.ScopePerson, "web:p1", month), sessions/2*each*100, sessions/2*each*0.01)
}

func testChargeIsStoredWithItsTurnOrNotAtAll(t *testing.T, db Store) {
	ctx := context.Background()
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	// No session: the write fails, and neither the charge nor its totals
	// are stored.
	c := chargeAt("web:ann", "support", "gpt-4o-mini", 300, 0.01, at)
	if err := writeTurn(ctx, db, "nope", switchboard.TurnWrite{EndTurn: true, Usage: c.Usage, Charge: c}); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("write turn of a missing session: %v, want ErrNotFound", err)
	}
	sameTally(t, "ann's day", tally(t, db, switchboard.ScopePerson, "web:ann", switchboard.PeriodOf(switchboard.PeriodDay, at)), 0, 0)
	rows, err := db.Spending(ctx, switchboard.SpendQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 0 {
		t.Errorf("spending after a failed write = %+v, want none", rows)
	}
	// A duplicate input writes nothing, its charge neither.
	NewSession(t, db, "s1", "")
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{ClientID: "c1"}); err != nil {
		t.Fatal(err)
	}
	dup, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{ClientID: "c1", EndTurn: true, Usage: c.Usage, Charge: c})
	if err != nil || !dup {
		t.Fatalf("duplicate write: dup %v, err %v", dup, err)
	}
	sameTally(t, "ann's day after a duplicate", tally(t, db, switchboard.ScopePerson, "web:ann", switchboard.PeriodOf(switchboard.PeriodDay, at)), 0, 0)
}

func testSpendingReports(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	NewSession(t, db, "s2", "")
	old := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	charges := []struct {
		session string
		c       *switchboard.Charge
	}{
		{"s1", chargeAt("web:ann", "support", "gpt-4o-mini", 300, 0.01, old)},
		{"s1", chargeAt("web:ann", "support", "gpt-4o-mini", 600, 0.02, now)},
		{"s2", chargeAt("slack:U1", "support", "gpt-4o", 1200, 0.5, now)},
		{"s2", chargeAt("slack:U1", "assistant", "llama3", 60, 0, now)},
	}
	charges[2].c.Channel = "slack"
	charges[3].c.Channel, charges[3].c.Priced = "slack", false
	for _, w := range charges {
		if err := writeTurn(ctx, db, w.session, switchboard.TurnWrite{EndTurn: true, Usage: w.c.Usage, Charge: w.c}); err != nil {
			t.Fatal(err)
		}
	}
	report := func(q switchboard.SpendQuery) []switchboard.SpendRow {
		t.Helper()
		rows, err := db.Spending(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	since := now.Add(-7 * 24 * time.Hour)
	byPerson := report(switchboard.SpendQuery{Since: since, By: switchboard.ByPerson})
	want := []switchboard.SpendRow{
		{Key: "slack:U1", Turns: 2, Usage: switchboard.Usage{PromptTokens: 420, CompletionTokens: 840, TotalTokens: 1260, CachedTokens: 210}, CostUSD: 0.5, Unpriced: 1},
		{Key: "web:ann", Turns: 1, Usage: switchboard.Usage{PromptTokens: 200, CompletionTokens: 400, TotalTokens: 600, CachedTokens: 100}, CostUSD: 0.02},
	}
	sameRows(t, "by person since a week", byPerson, want)

	byModel := report(switchboard.SpendQuery{By: switchboard.ByModel})
	if len(byModel) != 3 || byModel[0].Key != "gpt-4o" || byModel[1].Key != "gpt-4o-mini" || byModel[1].Turns != 2 ||
		byModel[2].Key != "llama3" || byModel[2].Unpriced != 1 || byModel[2].CostUSD != 0 {
		t.Errorf("by model, all time = %+v", byModel)
	}
	byGuide := report(switchboard.SpendQuery{Since: since, By: switchboard.ByGuide})
	if len(byGuide) != 2 || byGuide[0].Key != "support" || byGuide[0].Usage.TotalTokens != 1800 || byGuide[1].Key != "assistant" {
		t.Errorf("by guide = %+v", byGuide)
	}
	byChannel := report(switchboard.SpendQuery{Since: since, By: switchboard.ByChannel})
	if len(byChannel) != 2 || byChannel[0].Key != "slack" || byChannel[1].Key != "web" {
		t.Errorf("by channel = %+v", byChannel)
	}
	one := report(switchboard.SpendQuery{Session: "s1"})
	sameRows(t, "session s1, all time", one, []switchboard.SpendRow{
		{Turns: 2, Usage: switchboard.Usage{PromptTokens: 300, CompletionTokens: 600, TotalTokens: 900, CachedTokens: 150}, CostUSD: 0.03},
	})
	if rows := report(switchboard.SpendQuery{Session: "s3"}); len(rows) != 0 {
		t.Errorf("a session with no charges: %+v, want no rows", rows)
	}
	if _, err := db.Spending(ctx, switchboard.SpendQuery{By: "session_id; DROP TABLE charges"}); err == nil {
		t.Error("grouping by an unknown column was not refused")
	}
}

func sameRows(t testing.TB, what string, got, want []switchboard.SpendRow) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		g, w := got[i], want[i]
		ok = g.Key == w.Key && g.Turns == w.Turns && g.Usage == w.Usage && g.Unpriced == w.Unpriced && math.Abs(g.CostUSD-w.CostUSD) < 1e-9
	}
	if !ok {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// The accounts hold no words of a conversation and outlive it: deleting
// a session (retention) leaves its charges and the totals budgets read.
func testChargesOutliveTheirSession(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	c := chargeAt("web:ann", "support", "gpt-4o-mini", 300, 0.01, at)
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{EndTurn: true, Usage: c.Usage, Charge: c}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteSessions(ctx, []string{"s1"}); err != nil {
		t.Fatal(err)
	}
	sameTally(t, "ann's day", tally(t, db, switchboard.ScopePerson, "web:ann", switchboard.PeriodOf(switchboard.PeriodDay, at)), 300, 0.01)
	rows, err := db.Spending(ctx, switchboard.SpendQuery{By: switchboard.ByPerson})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Key != "web:ann" || rows[0].Turns != 1 {
		t.Errorf("spending after the session was deleted = %+v", rows)
	}
}
