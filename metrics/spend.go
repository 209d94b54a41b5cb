package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-gw/switchboard"
)

// spendCounters are the counters of what turns spent. Their guide label
// is a guide's name, their model label one of a set the sessions bound
// (a priced or configured model, else "other"), and scope one of three,
// so every label set stays small.
func spendCounters() (tokens, cost, unpriced, refusals *prometheus.CounterVec) {
	tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_tokens_total",
		Help: "Tokens turns spent, by guide, model (a priced or configured model, else other) and kind: input (all of it, cached or not), cached_input (the part of input read from the provider's cache) and output.",
	}, []string{"guide", "model", "kind"})
	cost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_cost_usd_total",
		Help: "What turns cost in US dollars at the prices in pricing:, by guide and model; turns of a model with no price are not in it (switchboard_unpriced_turns_total).",
	}, []string{"guide", "model"})
	unpriced = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_unpriced_turns_total",
		Help: "Turns whose model had no price in pricing:, so their cost is not known, by guide and model.",
	}, []string{"guide", "model"})
	refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_budget_refusals_total",
		Help: "Turns a reached budget refused before the model was called, by the budget's scope (person, guide, overall).",
	}, []string{"scope"})
	return tokens, cost, unpriced, refusals
}

// Spent counts a turn's tokens, and its cost when its model had a price.
func (m *Metrics) Spent(guide, model string, u switchboard.Usage, costUSD float64, priced bool) {
	if m == nil {
		return
	}
	m.tokens.WithLabelValues(guide, model, "input").Add(float64(u.PromptTokens))
	m.tokens.WithLabelValues(guide, model, "output").Add(float64(u.CompletionTokens))
	if u.CachedTokens > 0 {
		m.tokens.WithLabelValues(guide, model, "cached_input").Add(float64(u.CachedTokens))
	}
	if priced {
		m.cost.WithLabelValues(guide, model).Add(costUSD)
	} else {
		m.unpriced.WithLabelValues(guide, model).Inc()
	}
}

// BudgetRefused counts a turn a budget of scope refused.
func (m *Metrics) BudgetRefused(scope string) {
	if m == nil {
		return
	}
	m.budgetRefusals.WithLabelValues(scope).Inc()
}
