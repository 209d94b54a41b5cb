package sessions

import (
	"context"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/tools"
)

// The plan tool (tools.PlanTool): the model shows people its plan for the
// work under way, and updates it as it goes. A guide offers it by listing
// "plan" in its tools; it runs at once, during triage, without approval:
// it acts on nothing but what people see of this conversation, so asking
// an approver first would only stall the work it describes. Each call
// replaces the plan: the session emits an EventPlan (stored, replayed like
// every event) and the model reads a short "Plan updated.". A call that
// does not validate (no steps, too many, an empty title, an unknown
// status) is an error result the model reads and corrects itself from,
// and changes nothing shown. Because it runs in triage, in the order of
// the calls, a plan sent with other tool calls is shown before they run:
// channels show those runs as tasks of the plan.

// isPlanCall reports whether call is the plan tool of this guide.
func (s *session) isPlanCall(call switchboard.ToolCall) bool {
	return call.Name == tools.PlanTool && s.guideHasTool(call.Name)
}

// runPlan runs the plan call i of p and shows the plan, or tells the
// model what is wrong with it. The run is traced as any tool's.
func (s *session) runPlan(ctx context.Context, p *pendingTurn, i int) {
	call := p.Assistant.ToolCalls[i]
	span := s.traceTool(ctx, &p.Turn, call)
	res, err := s.m.cfg.Tools.Run(under(ctx, span), call.Name, call.Args)
	traceToolEnd(span, call, res.Content, err)
	if err != nil {
		s.setResult(ctx, p, i, err.Error(), true)
		return
	}
	if res.Plan != nil {
		s.emit(ctx, switchboard.EventPlan, res.Plan)
	}
	s.setResult(ctx, p, i, res.Content, false)
}
