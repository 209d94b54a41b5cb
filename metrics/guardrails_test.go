package metrics_test

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/metrics"
)

func TestGuardrailDecisionsAppearInTheScrape(t *testing.T) {
	m := metrics.New()
	m.GuardrailDecided("support", "input", "email", "mask")
	m.GuardrailDecided("support", "input", "email", "mask")
	m.GuardrailDecided("support", "output", "credit_card", "block")
	body := scrape(t, m)
	for _, want := range []string{
		`switchboard_guardrail_decisions_total{action="mask",guide="support",rule="email",side="input"} 2`,
		`switchboard_guardrail_decisions_total{action="block",guide="support",rule="credit_card",side="output"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	var nilMetrics *metrics.Metrics
	nilMetrics.GuardrailDecided("g", "input", "r", "mask") // counts nothing, and does not panic
}
