package sessions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// This file is what turns spend and the budgets that bound it.
//
// A turn's charge (its tokens, guide, model, person, channel and cost at
// the prices in force when it ends) is stored in the write that ends the
// turn, answered, stopped or failed (answer, endTurn), and that write adds
// it to the running totals (switchboard.Charge.Tallies) in the same
// transaction. Budgets are checked before a model is called: when a turn
// starts, before its message is stored (userTurn), and before every
// further model call of the turn (agentLoop). The check reads each
// applicable total with one point lookup; a total in the store is shared
// by every replica and survives restarts. A turn running when its budget
// is reached finishes its model call: a budget is reached, not exceeded
// by nothing, and the next call is refused.
//
// The prices and budgets are a Spending the manager reads once per check
// or charge through an atomic pointer: SetSpending swaps them (a config
// reload) for the next check, without a lock on the turn's path.

// Spending is what turns are priced and bounded by.
type Spending struct {
	// Prices are by model name: a response's model (as the provider named
	// it) is priced by its own entry, else by the entry of the model the
	// guide or provider asked for. A model with no price has a cost that
	// is not known.
	Prices map[string]switchboard.Price
	// Budgets bound what turns may spend; every one that applies to a
	// turn is checked.
	Budgets []Budget
}

// Budget is a limit on what a scope spends in a period.
type Budget struct {
	// Scope is switchboard.ScopePerson, ScopeGuide or ScopeOverall.
	Scope string
	// Key is the person (Author.Key()) or guide a budget is for; empty
	// for the overall budget, and for the default person or guide budget,
	// which applies to each person (guide) that has no budget of its own
	// for the same period.
	Key string
	// Period is switchboard.PeriodDay or PeriodMonth, in UTC.
	Period string
	// Tokens or USD is the limit (the other is 0): in tokens, or in US
	// dollars of the turns whose model has a price.
	Tokens int64
	USD    float64
}

// Describe says the budget as people read it: "daily budget of 100000
// tokens", "monthly budget of $50.00".
func (b Budget) Describe() string {
	period := "daily"
	if b.Period == switchboard.PeriodMonth {
		period = "monthly"
	}
	if b.USD > 0 {
		return fmt.Sprintf("%s budget of $%.2f", period, b.USD)
	}
	return fmt.Sprintf("%s budget of %d tokens", period, b.Tokens)
}

// reached reports whether the total has reached the budget.
func (b Budget) reached(t switchboard.Tally) bool {
	if b.USD > 0 {
		return t.CostUSD >= b.USD
	}
	return b.Tokens > 0 && t.Tokens >= b.Tokens
}

// used says how much of the budget the total is: "1200 of 100000 tokens".
func (b Budget) used(t switchboard.Tally) string {
	if b.USD > 0 {
		return fmt.Sprintf("$%.4f of $%.2f", t.CostUSD, b.USD)
	}
	return fmt.Sprintf("%d of %d tokens", t.Tokens, b.Tokens)
}

// applying are the budgets of scope that bind key: its own, and for each
// period it has none of, the scope's default (Key "").
func (sp *Spending) applying(scope, key string) []Budget {
	if sp == nil {
		return nil
	}
	var own, dflt []Budget
	for _, b := range sp.Budgets {
		switch {
		case b.Scope != scope:
		case scope == switchboard.ScopeOverall || (b.Key == key && key != ""):
			own = append(own, b)
		case b.Key == "":
			dflt = append(dflt, b)
		}
	}
	for _, d := range dflt {
		if !hasPeriod(own, d.Period) {
			own = append(own, d)
		}
	}
	return own
}

func hasPeriod(bs []Budget, period string) bool {
	for _, b := range bs {
		if b.Period == period {
			return true
		}
	}
	return false
}

// price finds the price of a response's model, else of the one asked for.
func (sp *Spending) price(model, requested string) (switchboard.Price, bool) {
	if sp == nil {
		return switchboard.Price{}, false
	}
	if p, ok := sp.Prices[model]; ok {
		return p, true
	}
	p, ok := sp.Prices[requested]
	return p, ok
}

// priced reports whether model has a price of its own.
func (sp *Spending) priced(model string) bool {
	if sp == nil {
		return false
	}
	_, ok := sp.Prices[model]
	return ok
}

// spendState is the manager's part: the Spending in force, and which
// reached budgets and unpriced models were logged already.
type spendState struct {
	policy atomic.Pointer[Spending]
	mu     sync.Mutex
	// logged maps a reached budget (scope, key, period) to the period it
	// was logged in: once a period. unpriced are the models (their metric
	// label) logged as having no price.
	logged   map[string]string
	unpriced map[string]bool
}

// SetSpending replaces the prices and budgets (nil: none) for every turn
// checked or charged from now on: a config reload calls it. What a turn
// ended with stays priced as it was.
func (m *Manager) SetSpending(sp *Spending) { m.spend.policy.Store(sp) }

// Spending returns the prices and budgets in force (nil: none).
func (m *Manager) Spending() *Spending { return m.spend.policy.Load() }

// budgetError is a turn refused by a reached budget.
type budgetError struct {
	budget switchboard.TallyKey // the total that reached it
	limit  Budget
	who    string // the person's name, or the guide's
	resets time.Time
	now    time.Time
}

func (e *budgetError) Error() string { return e.sentence(false) }

// sentence says which budget was reached and when it resets, to the
// person refused (you) or to others.
func (e *budgetError) sentence(you bool) string {
	var whose string
	switch e.budget.Scope {
	case switchboard.ScopePerson:
		whose = e.who + " has reached their " + e.limit.Describe()
		if you {
			whose = "You have reached your " + e.limit.Describe()
		}
	case switchboard.ScopeGuide:
		whose = "The assistant " + e.who + " has reached its " + e.limit.Describe()
	default:
		whose = "This gateway has reached its overall " + e.limit.Describe()
	}
	return whose + ". It resets " + resetsText(e.resets, e.now) + "."
}

// resetsText says when a period ends: "at 00:00 UTC (in 5h20m)", or "on
// 1 Dec 2026 at 00:00 UTC" when that is more than a day away.
func resetsText(at, now time.Time) string {
	left := at.Sub(now).Truncate(time.Minute)
	if left <= 24*time.Hour {
		return fmt.Sprintf("at 00:00 UTC (in %s)", strings.TrimSuffix(left.String(), "0s"))
	}
	return "on " + at.Format("2 Jan 2006") + " at 00:00 UTC"
}

// overBudget returns the first budget that a turn for person with the
// session's guide has reached (as a *budgetError), or nil. What the turn
// under way spent so far (spent: not charged until it ends) counts with
// the stored totals. Each budget that applies costs one point lookup; a
// total that cannot be read is logged and does not refuse the turn (the
// store failing is told elsewhere; a budget does not stop every
// conversation with it).
func (s *session) overBudget(ctx context.Context, person switchboard.Author, spent *switchboard.Charge) error {
	sp := s.m.Spending()
	if sp == nil || len(sp.Budgets) == 0 {
		return nil
	}
	now := s.m.cfg.Now().UTC()
	for _, scope := range []struct{ scope, key, who string }{
		{switchboard.ScopePerson, person.Key(), person.DisplayName()},
		{switchboard.ScopeGuide, s.guide.Name, s.guide.Name},
		{switchboard.ScopeOverall, "", ""},
	} {
		for _, b := range sp.applying(scope.scope, scope.key) {
			k := switchboard.TallyKey{Scope: scope.scope, Key: scope.key, Period: switchboard.PeriodOf(b.Period, now)}
			total, err := s.m.cfg.Store.Tally(ctx, k)
			if err != nil {
				s.log.Error("a budget could not be checked: the turn goes on unchecked", "scope", k.Scope, "key", k.Key, "period", k.Period, "err", err)
				continue
			}
			if spent != nil {
				total.Tokens += int64(spent.Usage.TotalTokens)
				total.CostUSD += spent.CostUSD
			}
			if b.reached(total) {
				return &budgetError{budget: k, limit: b, who: scope.who, resets: switchboard.PeriodEnd(b.Period, now), now: now}
			}
		}
	}
	return nil
}

// refuseForBudget tells the person why their turn was refused, and the
// session's owner when that is someone else; logs the reached budget once
// a period, and counts the refusal.
func (s *session) refuseForBudget(person switchboard.Author, e *budgetError) {
	s.m.cfg.Metrics.BudgetRefused(e.budget.Scope)
	s.tell(person, switchboard.ErrCodeBudget, e.sentence(true))
	if owner := s.rec.Owner; owner != "" && owner != person.Key() {
		s.mu.Lock()
		s.noticeToLocked(owner, NoticeInfo, fmt.Sprintf("A turn for %s was refused: %s", person.DisplayName(), e.sentence(false)))
		s.mu.Unlock()
	}
	id := e.budget.Scope + "\x00" + e.budget.Key + "\x00" + e.limit.Period
	st := &s.m.spend
	st.mu.Lock()
	first := st.logged[id] != e.budget.Period
	if first {
		if st.logged == nil {
			st.logged = map[string]string{}
		}
		st.logged[id] = e.budget.Period
	}
	st.mu.Unlock()
	if first {
		s.log.Warn("a budget was reached: turns it covers are refused until it resets (raise it in budgets: in config.yaml to let them through)",
			"scope", e.budget.Scope, "key", e.budget.Key, "period", e.budget.Period, "budget", e.limit.Describe(), "resets", e.resets)
	}
}

// refusedByBudget refuses a message whose turn a reached budget does not
// let start, before anything of it is stored: its inbox entry is taken
// up and its id forgotten (it can be sent again once the budget resets),
// its files discarded, and the person and the owner are told.
func (s *session) refusedByBudget(ctx context.Context, j job) bool {
	var e *budgetError
	if !errors.As(s.overBudget(ctx, j.input.Author, nil), &e) {
		return false
	}
	s.refuseForBudget(j.input.Author, e)
	s.write(ctx, switchboard.TurnWrite{InboxID: j.inboxID, ClientID: dedupeKey(j.input), Forget: true})
	s.m.Discard(ctx, s.id, j.input.Files)
	j.ack(nil)
	return true
}

// budgetBeforeCall checks the budgets before a model call of a turn
// under way (its first call was checked with its message, in userTurn).
func (s *session) budgetBeforeCall(ctx context.Context, t *turn) error {
	if t.thinking {
		return nil
	}
	return s.overBudget(ctx, t.Author, s.charge(t))
}

// stopForBudget ends a turn refused before a further model call: the
// person and the owner are told (refuseForBudget), and everyone sees the
// turn stop.
func (s *session) stopForBudget(ctx context.Context, person switchboard.Author, err error) {
	var e *budgetError
	if !errors.As(err, &e) {
		return
	}
	s.refuseForBudget(person, e)
	s.emitError(ctx, switchboard.ErrCodeBudget, "Stopped before the next model call: "+e.sentence(false))
}

// isBudget reports whether err is a budget's refusal.
func isBudget(err error) bool {
	var e *budgetError
	return errors.As(err, &e)
}

// requestedModel is the model the turn's requests ask for: the guide's,
// else its provider's.
func (s *session) requestedModel() string {
	if s.guide.Model != "" {
		return s.guide.Model
	}
	if _, p := s.configured(); p != nil {
		return p.Model
	}
	return ""
}

// charge is what the turn spent, priced now; nil when it spent nothing.
func (s *session) charge(t *turn) *switchboard.Charge {
	if t.Usage == (switchboard.Usage{}) {
		return nil
	}
	requested := s.requestedModel()
	c := &switchboard.Charge{
		Guide: s.guide.Name, Model: cmp.Or(t.Model, requested), Person: t.Author.Key(), Channel: t.Author.Channel,
		Usage: t.Usage, At: s.m.cfg.Now().UTC(),
	}
	if p, ok := s.m.Spending().price(c.Model, requested); ok {
		c.CostUSD, c.Priced = p.Cost(t.Usage), true
	}
	return c
}

// charged counts a stored charge in the metrics, by guide and by a model
// label from a bounded set: the response's model when it has a price or
// is the one asked for, else the one asked for (a guide's or provider's,
// from the configuration), else "other". A model with no price is logged
// once, when there are prices at all.
func (s *session) charged(c *switchboard.Charge) {
	if c == nil {
		return
	}
	requested := s.requestedModel()
	sp := s.m.Spending()
	label := "other"
	switch {
	case c.Model == requested || c.Priced && sp.priced(c.Model):
		label = cmp.Or(c.Model, "other")
	case requested != "":
		label = requested
	}
	s.m.cfg.Metrics.Spent(c.Guide, label, c.Usage, c.CostUSD, c.Priced)
	if c.Priced || sp == nil || len(sp.Prices) == 0 {
		return
	}
	st := &s.m.spend
	st.mu.Lock()
	first := !st.unpriced[label]
	if first {
		if st.unpriced == nil {
			st.unpriced = map[string]bool{}
		}
		st.unpriced[label] = true
	}
	st.mu.Unlock()
	if first {
		s.log.Warn("a model has no price: the cost of its turns is not known, and budgets in dollars do not count them (add it to pricing: in config.yaml)",
			"model", c.Model, "requested", requested)
	}
}

// usage answers /usage: the session's tokens and cost to everyone, and
// to the person who asked alone, what they spent against each budget of
// theirs.
func (s *session) usage(ctx context.Context, who switchboard.Author) {
	u := s.rec.Usage
	text := fmt.Sprintf("Tokens used in this session: %d prompt + %d completion = %d total.",
		u.PromptTokens, u.CompletionTokens, u.TotalTokens)
	switch rows, err := s.m.cfg.Store.Spending(ctx, switchboard.SpendQuery{Session: s.id}); {
	case err != nil:
		s.log.Error("/usage: the session's cost could not be read", "err", err)
		text += " Its cost could not be read just now."
	case len(rows) == 1:
		r := rows[0]
		if r.Usage.CachedTokens > 0 {
			text += fmt.Sprintf(" %d of the prompt tokens were read from the provider's cache.", r.Usage.CachedTokens)
		}
		text += " Cost: " + switchboard.CostText(r.CostUSD, r.Turns, r.Unpriced)
		if r.Unpriced > 0 {
			text += fmt.Sprintf(" (%d of %d turns used a model with no price)", r.Unpriced, r.Turns)
		}
		text += "."
	}
	s.systemMessage(ctx, text)
	if own := s.ownBudgets(ctx, who); own != "" {
		s.tell(who, NoticeInfo, own)
	}
}

// ownBudgets says what who spent against each budget of theirs ("" when
// none applies).
func (s *session) ownBudgets(ctx context.Context, who switchboard.Author) string {
	budgets := s.m.Spending().applying(switchboard.ScopePerson, who.Key())
	if len(budgets) == 0 {
		return ""
	}
	now := s.m.cfg.Now().UTC()
	var parts []string
	for _, b := range budgets {
		total, err := s.m.cfg.Store.Tally(ctx, switchboard.TallyKey{Scope: switchboard.ScopePerson, Key: who.Key(), Period: switchboard.PeriodOf(b.Period, now)})
		if err != nil {
			s.log.Error("/usage: a budget's total could not be read", "err", err)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %s used, resets %s", b.Describe(), b.used(total), resetsText(switchboard.PeriodEnd(b.Period, now), now)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "Your spending: " + strings.Join(parts, "; ") + "."
}
