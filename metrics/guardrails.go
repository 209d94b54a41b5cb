package metrics

import "github.com/prometheus/client_golang/prometheus"

// guardrailCounter counts guardrails' decisions. Its rule label is a rule's
// name in a guide's guardrails (a detector's name or the one the guide
// gives), so the label sets are as many as the guides' rules.
func guardrailCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_guardrail_decisions_total",
		Help: "Guardrail rules that applied, by guide, side (input: a person's message before the model saw it; output: an answer before people saw it), rule and action (block, mask).",
	}, []string{"guide", "side", "rule", "action"})
}

// GuardrailDecided counts a guardrail rule that applied.
func (m *Metrics) GuardrailDecided(guide, side, rule, action string) {
	if m == nil {
		return
	}
	m.guardrails.WithLabelValues(guide, side, rule, action).Inc()
}
