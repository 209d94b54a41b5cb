package telemetry

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-gw/switchboard/sessions"
)

// guardrail records a guardrail's decision (issue 30): an event on the
// turn's span and a "guardrail" line naming the side, the rule, its action,
// how often it applied and whose message it was. What it matched is never
// in the step, so it is never here either, capture_content or not.
func (t *Telemetry) guardrail(span trace.Span, st sessions.Step, ref sessions.TraceRef, now time.Time) {
	span.AddEvent("guardrail", trace.WithTimestamp(now), trace.WithAttributes(
		attribute.String("switchboard.guardrail.side", st.Side),
		attribute.String("switchboard.guardrail.rule", st.Rule),
		attribute.String("switchboard.guardrail.action", st.Decision),
		attribute.Int("switchboard.guardrail.count", st.Count)))
	t.line("guardrail", st, ref, now, func(l *Line) {
		l.Guide, l.Side, l.Rule, l.Action, l.Count = st.Guide, st.Side, st.Rule, st.Decision, st.Count
		l.By, l.Channel = st.By, st.Channel
	})
}
