package config

import (
	"fmt"
	"math"
	"strings"
)

// Price is what a model costs (docs/operating.md, "Usage, cost and
// budgets"), in US dollars per million tokens. A response is priced by
// its own model's entry (the dated name a provider answers with, such as
// gpt-4o-mini-2024-07-18), else by the entry of the model the guide or
// provider asked for; a model with neither has a cost that is not known.
type Price struct {
	Model  string  `koanf:"model"`
	Input  float64 `koanf:"input"`
	Output float64 `koanf:"output"`
	// CachedInput prices input read from the provider's prompt cache; 0
	// prices it as Input.
	CachedInput float64 `koanf:"cached_input"`
}

// Budget bounds what turns spend in a day or a month (UTC): a turn whose
// scope has reached it is refused before its model is called.
type Budget struct {
	// Scope is person, guide or overall.
	Scope string `koanf:"scope"`
	// Key is the person (slack:U123, web:alice: the channel and the
	// person's id there) or the guide a budget is for; empty, a person
	// (guide) budget is everyone's (every guide's) that has none of its
	// own for the period. Empty for overall.
	Key string `koanf:"key"`
	// Period is day or month.
	Period string `koanf:"period"`
	// Tokens or USD is the limit, one of them.
	Tokens int64   `koanf:"tokens"`
	USD    float64 `koanf:"usd"`
}

// validateSpend checks pricing and budgets.
func (c Config) validateSpend(bad func(key, format string, args ...any)) {
	models := map[string]bool{}
	for i, p := range c.Pricing {
		key := fmt.Sprintf("pricing[%d]", i)
		switch {
		case strings.TrimSpace(p.Model) == "":
			bad(key+".model", "name the model the price is for, e.g. gpt-4o-mini")
		case models[p.Model]:
			bad(key+".model", "%q is priced twice", p.Model)
		}
		models[p.Model] = true
		for _, f := range []struct {
			name string
			v    float64
		}{{"input", p.Input}, {"output", p.Output}, {"cached_input", p.CachedInput}} {
			if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
				bad(key+"."+f.name, "want US dollars per million tokens, 0 or more, not %v", f.v)
			}
		}
	}
	type id struct{ scope, key, period, unit string }
	seen := map[id]bool{}
	for i, b := range c.Budgets {
		key := fmt.Sprintf("budgets[%d]", i)
		ok := true
		switch b.Scope {
		case "person", "guide":
		case "overall":
			if b.Key != "" {
				bad(key+".key", "an overall budget is everyone's: leave key out, not %q", b.Key)
				ok = false
			}
		default:
			bad(key+".scope", "want person, guide or overall, not %q", b.Scope)
			ok = false
		}
		if b.Scope == "person" && b.Key != "" && !strings.Contains(b.Key, ":") {
			bad(key+".key", "want a person as channel:id (slack:U123, web:alice), or leave it out for everyone's budget, not %q", b.Key)
			ok = false
		}
		if b.Period != "day" && b.Period != "month" {
			bad(key+".period", "want day or month (UTC), not %q", b.Period)
			ok = false
		}
		unit := "tokens"
		switch {
		case b.Tokens < 0 || b.USD < 0 || math.IsNaN(b.USD) || math.IsInf(b.USD, 0):
			bad(key, "a limit must be positive")
			ok = false
		case (b.Tokens > 0) == (b.USD > 0):
			bad(key, "set tokens or usd, one of them, to the limit")
			ok = false
		case b.USD > 0 && len(c.Pricing) == 0:
			bad(key+".usd", "no model has a price, so no turn costs anything and this budget is never reached: add the models to pricing:, or give the limit in tokens")
			ok = false
		case b.USD > 0:
			unit = "usd"
		}
		if k := (id{b.Scope, b.Key, b.Period, unit}); ok && seen[k] {
			bad(key, "a second %s budget in %s for the same %s %q: keep one", b.Period, unit, b.Scope, b.Key)
		} else {
			seen[k] = true
		}
	}
}
