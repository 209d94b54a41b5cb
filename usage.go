package switchboard

import (
	"fmt"
	"time"
)

// Usage and cost: what a turn spent, as the stores record it and budgets
// read it back.

// Price is what a model costs, in US dollars per million tokens.
// CachedInput is the price of input read from the provider's prompt
// cache; 0 prices cached input as Input.
type Price struct {
	Input       float64 `json:"input"`
	Output      float64 `json:"output"`
	CachedInput float64 `json:"cached_input,omitempty"`
}

// Cost is what u costs at p, in US dollars: uncached input, cached input
// and output each at their price.
func (p Price) Cost(u Usage) float64 {
	cached := min(max(u.CachedTokens, 0), max(u.PromptTokens, 0))
	cachedPrice := p.CachedInput
	if cachedPrice == 0 {
		cachedPrice = p.Input
	}
	return (float64(u.PromptTokens-cached)*p.Input + float64(cached)*cachedPrice + float64(u.CompletionTokens)*p.Output) / 1e6
}

// Charge is what one turn spent: stored with the write that ends the
// turn, once, whether it was answered, stopped or failed.
type Charge struct {
	Guide string
	// Model is the model that answered (as the provider named it, else as
	// it was asked for); the turn's last, should a fallback have served a
	// part of it.
	Model   string
	Person  string // Author.Key() of whose message the turn answered
	Channel string // the listener the message came through
	Usage   Usage
	// CostUSD is the turn's cost at the prices in force when it ended;
	// meaningful only when Priced: a model with no price has a cost that
	// is not known, never 0.
	CostUSD float64
	Priced  bool
	At      time.Time
}

// Budget scopes: whose running total a charge adds to.
const (
	ScopePerson  = "person"
	ScopeGuide   = "guide"
	ScopeOverall = "overall"
)

// Budget periods, in UTC.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
	// PeriodAll names the all-time overall total, which every charge adds
	// to first (Tallies).
	PeriodAll = "all"
)

// TallyKey names one running total: a scope (ScopePerson and a person's
// key, ScopeGuide and a guide's name, ScopeOverall and ""), and a period
// ("day:2026-11-27" or "month:2026-11", in UTC; PeriodOf).
type TallyKey struct {
	Scope  string
	Key    string
	Period string
}

// Tally is a running total: the tokens charged to a TallyKey, and the
// cost of those of them that had a price.
type Tally struct {
	Tokens  int64
	CostUSD float64
}

// PeriodOf names the day or month (PeriodDay, PeriodMonth) that holds at,
// in UTC.
func PeriodOf(period string, at time.Time) string {
	at = at.UTC()
	if period == PeriodMonth {
		return fmt.Sprintf("month:%04d-%02d", at.Year(), at.Month())
	}
	return fmt.Sprintf("day:%04d-%02d-%02d", at.Year(), at.Month(), at.Day())
}

// PeriodEnd is when the day or month that holds at ends (and a budget of
// it starts again), in UTC.
func PeriodEnd(period string, at time.Time) time.Time {
	at = at.UTC()
	if period == PeriodMonth {
		return time.Date(at.Year(), at.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(at.Year(), at.Month(), at.Day()+1, 0, 0, 0, 0, time.UTC)
}

// Tallies are the running totals c adds to: the all-time overall one,
// then the overall one, the guide's and the person's, each of its day and
// of its month. Every store adds a charge to exactly these, in the write
// that stores it and in this order: the first is the same row for every
// charge, so a store that locks rows as it updates them (PostgreSQL, with
// several charges in one transaction and replicas writing at once) takes
// the rest only while holding it, and two writers never deadlock.
func (c Charge) Tallies() []TallyKey {
	keys := make([]TallyKey, 0, 7)
	keys = append(keys, TallyKey{Scope: ScopeOverall, Period: PeriodAll})
	for _, period := range []string{PeriodDay, PeriodMonth} {
		p := PeriodOf(period, c.At)
		keys = append(keys,
			TallyKey{Scope: ScopeOverall, Key: "", Period: p},
			TallyKey{Scope: ScopeGuide, Key: c.Guide, Period: p},
			TallyKey{Scope: ScopePerson, Key: c.Person, Period: p})
	}
	return keys
}

// What a spending report groups by (SpendQuery.By).
const (
	ByPerson  = "person"
	ByGuide   = "guide"
	ByModel   = "model"
	ByChannel = "channel"
)

// SpendQuery asks a store for the turns charged since a time, grouped by
// one of the By constants ("" for one row of everything), of one session
// when Session is set.
type SpendQuery struct {
	Since   time.Time
	By      string
	Session string
}

// SpendRow is one group of a spending report.
type SpendRow struct {
	Key   string // the person, guide, model or channel; "" ungrouped
	Turns int64
	Usage Usage
	// CostUSD is the cost of the group's priced turns; Unpriced counts the
	// turns whose cost is not known (their model had no price), whose
	// tokens Usage counts all the same.
	CostUSD  float64
	Unpriced int64
}

// CostText says a cost as people read it: "$0.0123", "unknown" when no
// turn had a price, and "$0.0123 + unknown" when some had none.
func CostText(cost float64, turns, unpriced int64) string {
	switch {
	case turns > 0 && unpriced == turns:
		return "unknown"
	case unpriced > 0:
		return fmt.Sprintf("$%.4f + unknown", cost)
	}
	return fmt.Sprintf("$%.4f", cost)
}

// SpendColumn is the column of a store's charges that a report groups by
// (SpendQuery.By): the column of the same name, or the empty string
// literal for one row of everything. Any other By is refused with an
// error that says which there are.
func SpendColumn(by string) (string, error) {
	switch by {
	case "":
		return "''", nil
	case ByPerson, ByGuide, ByModel, ByChannel:
		return by, nil
	}
	return "", fmt.Errorf("cannot group spending by %q: use person, guide, model or channel", by)
}
