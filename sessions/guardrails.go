package sessions

// Guardrails (issue 30, docs/guardrails.md): the guide's input rules check
// a person's message before anything of it is stored or sent to the
// model; its output rules check the model's text before anyone sees it.
//
// Input. A block refuses the message as a budget does (budget.go,
// spend.go): its writer is told the rule's message, its inbox entry is
// taken up and its id forgotten, its files discarded; the session stays
// usable. A mask changes the message before it is stored: the stored
// message, the event that shows it to the session's other people and the
// model's request all carry the masked text. (In a shared session one
// person's data never reaches another; the writer's own client shows
// what they typed.) The raw text lived only in the inbox, which the
// turn's first write empties.
//
// Output. The model's streamed text passes a guardrails.Stream, which
// holds back the longest match a rule can make: what is shown is what it
// releases, already masked, and the message that ends the response is
// the masked whole. A block found after some text was shown replaces the
// answer: the stored reply and the final message event are the rule's
// message, with the streamed deltas' message id, so every channel shows
// it in place of what streamed; the model's tool calls of that response
// are not run.
//
// Every decision is a stored EventGuardrail, a trace-log line and a
// metric, naming the rule, its action and how often it applied; never
// what it matched.

import (
	"context"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guardrails"
)

// Sides of a guardrail decision (GuardrailData.Side).
const (
	sideInput  = "input"
	sideOutput = "output"
)

// guardrailMetrics is what a Metrics counts of guardrails, when it does
// (metrics.Metrics): switchboard_guardrail_decisions_total.
type guardrailMetrics interface {
	GuardrailDecided(guide, side, rule, action string)
}

// guardInput checks a person's message with the guide's input rules. It
// returns the text the conversation keeps (masked), or false when a rule
// blocked it: then the person was told, and nothing of it is kept.
func (s *session) guardInput(ctx context.Context, j job, text string) (string, bool) {
	g := s.guide.Guardrails.Input
	if g == nil || text == "" {
		return text, true
	}
	res := g.Check(text)
	s.guardDecided(ctx, sideInput, j.input.Author, nil, "", res.Decisions)
	if res.Blocked == nil {
		return res.Text, true
	}
	s.tell(j.input.Author, switchboard.ErrCodeGuardrail, res.Text)
	s.write(ctx, switchboard.TurnWrite{InboxID: j.inboxID, ClientID: dedupeKey(j.input), Forget: true})
	s.m.Discard(ctx, s.id, j.input.Files)
	j.ack(nil)
	return "", false
}

// outputStream checks a model response's text as it streams (nil rules:
// everything passes at once).
func (s *session) outputStream() *guardrails.Stream {
	return s.guide.Guardrails.Output.NewStream()
}

// guardReply ends a response's stream: the reply's text becomes what
// people may see of it (masked, or the block's message, without its tool
// calls), the rest still held back joins the tail shown with the message
// (t.tail), and the decisions are reported.
func (s *session) guardReply(ctx context.Context, t *turn, out *guardrails.Stream, reply *switchboard.Message) {
	rest, whole := out.Close()
	s.guardDecided(ctx, sideOutput, switchboard.Author{}, t.span, t.ID, whole.Decisions)
	if whole.Blocked != nil {
		reply.Content, reply.ToolCalls, t.tail = whole.Text, nil, ""
		return
	}
	reply.Content = whole.Text
	t.tail += rest
}

// guardDecided reports guardrail decisions: a stored event each, a
// trace-log line (under span, the turn's, when there is one), a metric
// and, for a block, a log line. who is whose message it was (input).
func (s *session) guardDecided(ctx context.Context, side string, who switchboard.Author, span Span, turnID string, ds []guardrails.Decision) {
	m, _ := s.m.cfg.Metrics.(guardrailMetrics)
	key := ""
	if who != (switchboard.Author{}) {
		key = who.Key()
	}
	for _, d := range ds {
		s.emit(ctx, switchboard.EventGuardrail, switchboard.GuardrailData{
			Side: side, Rule: d.Rule, Action: string(d.Action), Count: d.Count, For: key,
		})
		if tr := s.m.cfg.Tracer; tr != nil {
			tr.Mark(under(ctx, span), Step{Kind: StepGuardrail, Session: s.id, Turn: turnID, Guide: s.guide.Name, Side: side,
				Rule: d.Rule, Decision: string(d.Action), Count: d.Count, By: key, Channel: who.Channel})
		}
		if m != nil {
			m.GuardrailDecided(s.guide.Name, side, d.Rule, string(d.Action))
		}
		if d.Action == guardrails.Block {
			s.log.Info("a guardrail blocked a message", "guide", s.guide.Name, "side", side, "rule", d.Rule, "who", key)
		}
	}
}
