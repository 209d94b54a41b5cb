package metrics_test

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/metrics"
)

func TestSpendingAppearsInTheScrape(t *testing.T) {
	m := metrics.New()
	m.Spent("support", "gpt-4o-mini", switchboard.Usage{PromptTokens: 1000, CompletionTokens: 200, TotalTokens: 1200, CachedTokens: 800}, 0.25, true)
	m.Spent("support", "gpt-4o-mini", switchboard.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}, 0.5, true)
	m.Spent("support", "other", switchboard.Usage{PromptTokens: 30, CompletionTokens: 3, TotalTokens: 33}, 0, false)
	m.BudgetRefused("person")
	body := scrape(t, m)
	for _, want := range []string{
		`switchboard_tokens_total{guide="support",kind="input",model="gpt-4o-mini"} 1010`,
		`switchboard_tokens_total{guide="support",kind="cached_input",model="gpt-4o-mini"} 800`,
		`switchboard_tokens_total{guide="support",kind="output",model="gpt-4o-mini"} 205`,
		`switchboard_tokens_total{guide="support",kind="input",model="other"} 30`,
		`switchboard_cost_usd_total{guide="support",model="gpt-4o-mini"} 0.75`,
		`switchboard_unpriced_turns_total{guide="support",model="other"} 1`,
		`switchboard_budget_refusals_total{scope="person"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if strings.Contains(body, `switchboard_cost_usd_total{guide="support",model="other"}`) {
		t.Error("an unpriced turn added to the cost in dollars")
	}
	var nilMetrics *metrics.Metrics
	nilMetrics.Spent("g", "m", switchboard.Usage{}, 1, true) // counts nothing, and does not panic
	nilMetrics.BudgetRefused("overall")
}
