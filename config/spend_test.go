package config

import (
	"reflect"
	"testing"
)

func TestPricingAndBudgets(t *testing.T) {
	c := mustLoad(t, writeFile(t, `
pricing:
  - model: gpt-4o-mini
    input: 0.15
    output: 0.60
    cached_input: 0.075
  - { model: gpt-4.1, input: 2, output: 8 }
budgets:
  - { scope: person, period: day, usd: 2 }
  - { scope: person, key: "slack:U123", period: day, usd: 10 }
  - { scope: guide, key: support, period: month, tokens: 5000000 }
  - { scope: overall, period: month, usd: 500 }
`), nil, nil)
	wantPrices := []Price{{Model: "gpt-4o-mini", Input: 0.15, Output: 0.6, CachedInput: 0.075}, {Model: "gpt-4.1", Input: 2, Output: 8}}
	if !reflect.DeepEqual(c.Pricing, wantPrices) {
		t.Errorf("pricing = %+v", c.Pricing)
	}
	wantBudgets := []Budget{
		{Scope: "person", Period: "day", USD: 2},
		{Scope: "person", Key: "slack:U123", Period: "day", USD: 10},
		{Scope: "guide", Key: "support", Period: "month", Tokens: 5000000},
		{Scope: "overall", Period: "month", USD: 500},
	}
	if !reflect.DeepEqual(c.Budgets, wantBudgets) {
		t.Errorf("budgets = %+v", c.Budgets)
	}
	if d := mustLoad(t, "", nil, nil); len(d.Pricing) != 0 || len(d.Budgets) != 0 {
		t.Errorf("defaults price or bound something: %+v %+v", d.Pricing, d.Budgets)
	}
}

func TestPricingAndBudgetsAreChecked(t *testing.T) {
	wantErr(t, writeFile(t, "budgets:\n  - { scope: overall, period: month, usd: 100 }\n"), nil, nil,
		"budgets[0].usd: no model has a price, so no turn costs anything and this budget is never reached")
	wantErr(t, writeFile(t, `
pricing:
  - { input: 1, output: 2 }
  - { model: a, input: -1, output: 2 }
  - { model: a, input: 1, output: 2 }
`), nil, nil, "pricing[0].model: name the model", "pricing[1].input: want US dollars per million tokens, 0 or more, not -1",
		`pricing[2].model: "a" is priced twice`)
	wantErr(t, writeFile(t, "pricing:\n  - { model: b, inptu: 1 }\n"), nil, nil, `unknown key "pricing[0].inptu"`)
	wantErr(t, writeFile(t, `
pricing:
  - { model: a, input: 1, output: 2 }
budgets:
  - { scope: people, period: day, usd: 1 }
  - { scope: person, period: week, usd: 1 }
  - { scope: person, period: day }
  - { scope: person, period: day, usd: 1, tokens: 5 }
  - { scope: overall, key: x, period: day, usd: 1 }
  - { scope: person, key: alice, period: day, usd: 1 }
  - { scope: guide, key: support, period: day, tokens: 10 }
  - { scope: guide, key: support, period: day, tokens: 20 }
  - { scope: guide, period: day, usd: -3 }
`), nil, nil, `budgets[0].scope: want person, guide or overall, not "people"`, `budgets[1].period: want day or month (UTC), not "week"`,
		"budgets[2]: set tokens or usd, one of them", "budgets[3]: set tokens or usd, one of them",
		`budgets[4].key: an overall budget is everyone's`, `budgets[5].key: want a person as channel:id`,
		`budgets[7]: a second day budget in tokens for the same guide "support"`, "budgets[8]: a limit must be positive")
}
