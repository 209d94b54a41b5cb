package sessions

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// This file reports the steps of an agent turn to a Tracer: the turn, each
// model call, each tool run, each approval, a compaction. One set of calls
// feeds both the OpenTelemetry spans and the JSON-lines trace log
// (telemetry/), so the two cannot disagree. Without a Tracer (the default)
// every helper here returns at once: tracing off costs a nil check.

// Tracer is told each step of a turn as it happens, on the session's
// goroutine (a tool's step on the goroutine running the tool). Its calls
// must not block: the telemetry package buffers, and drops (counting) what
// a full buffer cannot take rather than make a turn wait. A Step's slices
// and pointers are the session's: read them during the call, keep none.
type Tracer interface {
	// Begin starts a step, under the span ctx carries, or step.Parent
	// when set (a turn continued after an approval, an approval span).
	Begin(ctx context.Context, step Step) Span
	// Mark records a step that has no duration (an approval requested, a
	// compaction) on the span ctx carries.
	Mark(ctx context.Context, step Step)
}

// Span is a step under way.
type Span interface {
	// Context is ctx with this span as the current one: the steps and the
	// calls (tools, HTTP clients) made under it are its children.
	Context(ctx context.Context) context.Context
	// Ref identifies the span, to be stored and linked to after a restart.
	Ref() TraceRef
	// End ends the step with what became of it (Outcome, Usage, Err…).
	End(step Step)
}

// StepKind is what a Step is.
type StepKind string

// The steps of a turn.
const (
	StepTurn       StepKind = "turn"       // invoke_agent: one per user message (and per continuation)
	StepModel      StepKind = "model"      // chat: one per model call
	StepTool       StepKind = "tool"       // execute_tool: one per tool run
	StepApproval   StepKind = "approval"   // Mark: requested; Begin/End: the wait, from request to decision
	StepCompaction StepKind = "compaction" // Mark: the conversation was summarised
	StepHandoff    StepKind = "handoff"    // Mark: a turn handed to another guide, or a handoff refused
	StepGuardrail  StepKind = "guardrail"  // Mark: a guardrail applied (Side, Rule, Decision: block | mask, Count, By)
)

// TraceRef is a span's identity, as hex strings; stored with the turn.
type TraceRef struct {
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
	Sampled bool   `json:"sampled,omitempty"`
}

// IsZero reports whether r names no span.
func (r TraceRef) IsZero() bool { return r.TraceID == "" }

// Step describes one step; which fields are set depends on Kind and on
// whether it is the step's Begin, End or Mark.
type Step struct {
	Kind    StepKind
	Session string
	Turn    string // the turn's id
	Guide   string
	// Start, when set, is when the step began (an approval's wait is
	// reported when it is decided, maybe after a restart).
	Start time.Time
	// Parent is the stored span a step continues (Begin); Link is the
	// span of the turn a restart interrupted, linked to (Begin).
	Parent, Link TraceRef
	// Resumed says why a turn span continues an earlier one: "approval"
	// or "restart".
	Resumed string
	// Cause is the W3C traceparent of the span that handed the message in
	// (Input.Trace: a chat app's), which a new turn links to.
	Cause string

	// Model call.
	Provider, ProviderKind, Model string // the configured name, its kind (openai…), the model asked for
	ResponseModel                 string
	Temperature                   *float64
	MaxTokens                     int
	Usage                         switchboard.Usage
	FinishReason                  string
	System                        string                // content: recorded only with capture_content
	Messages                      []switchboard.Message // content: the request's messages
	Reply                         *switchboard.Message  // content: the model's answer

	// Tool run and approval.
	Tool, CallID, ToolType string
	Args                   json.RawMessage // content
	Result                 string          // content
	IsError                bool
	Confirmation           string
	Decision               string // approved | denied | expired | cancelled
	By, Channel            string
	ExpiresAt              time.Time

	// Compaction.
	Summarised, Kept int

	// Handoff: the guide the turn passed from and to (Guide is the one
	// it runs with after it), why one was refused (cycle, depth,
	// not_listed, …; "" when made), and the model's reason (content).
	From, To, Refused string
	Reason            string

	// Guardrail: the side (input | output) and the rule; Decision is its
	// action, Count how often it applied, By whose message (input).
	Side, Rule string
	Count      int

	// End: how it ended. Outcome is the turn's (answered, stopped, error,
	// interrupted, awaiting_approval); ErrType and Err say why it failed,
	// in the words a user is shown (never a provider's raw answer).
	Outcome string
	ErrType string
	Err     string
}

// traceFailure is how a failure is told to the tracer: its kind and the
// stable message a user is shown, with the reference of the log line that
// holds the detail.
func (s *session) traceFailure(err error) (kind, msg string) {
	switch {
	case err == nil:
		return "", ""
	case s.interrupting(err):
		return "interrupted", "the gateway stopped, or could not store the turn: it is run again"
	case errors.Is(err, context.Canceled):
		return "cancelled", "stopped"
	}
	k, m := providers.Describe(err)
	return string(k), m
}

// traceTurn starts the span of a turn: a new one (resumed ""), one
// continued after its approvals (its parent the stored span), or one run
// again after a restart (a new trace, linked to the interrupted span). The
// span's identity is stored with the turn by the next write.
func (s *session) traceTurn(ctx context.Context, t *turn, resumed, cause string) {
	tr := s.m.cfg.Tracer
	if tr == nil {
		return
	}
	if t.ID == "" {
		t.ID = newID("t_")
	}
	step := Step{Kind: StepTurn, Session: s.id, Turn: t.ID, Guide: s.guide.Name, Resumed: resumed, Cause: cause}
	switch resumed {
	case "approval":
		step.Parent = t.Trace
	case "restart":
		step.Link = t.Trace
	}
	t.span = tr.Begin(ctx, step)
	t.Trace = t.span.Ref()
}

// traceTurnEnd ends the turn's span.
func (s *session) traceTurnEnd(t *turn, outcome string, err error) {
	if t.span == nil {
		return
	}
	kind, msg := s.traceFailure(err)
	t.span.End(Step{Kind: StepTurn, Session: s.id, Turn: t.ID, Guide: s.guide.Name, Outcome: outcome, Usage: t.Usage, ErrType: kind, Err: msg})
	t.span = nil
}

// under is ctx under the turn's span, for its steps and calls.
func (t *turn) under(ctx context.Context) context.Context { return under(ctx, t.span) }

// under is ctx under span, or ctx when there is none.
func under(ctx context.Context, span Span) context.Context {
	if span == nil {
		return ctx
	}
	return span.Context(ctx)
}

// traceModel starts the span of a model call.
func (s *session) traceModel(ctx context.Context, t *turn, req providers.Request) Span {
	tr := s.m.cfg.Tracer
	if tr == nil {
		return nil
	}
	kind, model := "", req.Model
	name, p := s.configured()
	if p != nil {
		kind, model = p.Kind, cmp.Or(model, p.Model)
	}
	return tr.Begin(t.under(ctx), Step{
		Kind: StepModel, Session: s.id, Turn: t.ID, Guide: s.guide.Name, Provider: name, ProviderKind: kind,
		Model: model, Temperature: req.Temperature, MaxTokens: req.MaxTokens, System: req.System, Messages: req.Messages,
	})
}

// traceModelEnd ends a model call's span with what it answered and spent.
func (s *session) traceModelEnd(sp Span, t *turn, usage switchboard.Usage, finish string, reply *switchboard.Message, err error) {
	if sp == nil {
		return
	}
	if finish == "" && err == nil {
		finish = "stop"
		if len(reply.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	kind, msg := s.traceFailure(err)
	sp.End(Step{Kind: StepModel, Session: s.id, Turn: t.ID, ResponseModel: t.Model, Usage: usage,
		FinishReason: finish, Reply: reply, ErrType: kind, Err: msg})
}

// traceTool starts the span of a tool run.
func (s *session) traceTool(ctx context.Context, t *turn, call switchboard.ToolCall) Span {
	tr := s.m.cfg.Tracer
	if tr == nil {
		return nil
	}
	return tr.Begin(t.under(ctx), Step{Kind: StepTool, Session: s.id, Turn: t.ID, Tool: call.Name, CallID: call.ID,
		ToolType: "function", Args: call.Args})
}

// traceToolEnd ends a tool run's span with its result. A run that failed
// (an error, a timeout) is the span's error; a result the tool marks as
// an error is not: the model reads it and goes on.
func traceToolEnd(sp Span, call switchboard.ToolCall, content string, err error) {
	if sp == nil {
		return
	}
	st := Step{Kind: StepTool, Tool: call.Name, CallID: call.ID, Result: content}
	if err != nil {
		st.IsError, st.Result, st.ErrType, st.Err = true, err.Error(), "tool_error", "the tool failed"
		if errors.Is(err, context.DeadlineExceeded) {
			st.ErrType, st.Err = "timeout", "the tool timed out"
		} else if errors.Is(err, context.Canceled) {
			st.ErrType, st.Err = "cancelled", "stopped"
		}
	}
	sp.End(st)
}

// traceAsked records the approval requests of a suspended turn.
func (s *session) traceAsked(ctx context.Context, p *pendingTurn) {
	tr := s.m.cfg.Tracer
	if tr == nil {
		return
	}
	for _, c := range p.Confirmations {
		if c.Client {
			continue // no approval: the caller's own tool
		}
		call := p.Assistant.ToolCalls[c.CallIndex]
		tr.Mark(p.Turn.under(ctx), Step{Kind: StepApproval, Session: s.id, Turn: p.Turn.ID, Tool: call.Name, CallID: call.ID,
			Confirmation: c.ID, ExpiresAt: c.ExpiresAt, Args: call.Args})
	}
}

// traceDecided reports an approval's wait, from its request to its
// decision, as a span under the stored turn's: the wait may have outlived
// the process that asked.
func (s *session) traceDecided(ctx context.Context, p *pendingTurn, c *confirmation, who switchboard.Author, why string) {
	tr := s.m.cfg.Tracer
	if tr == nil {
		return
	}
	decision := "denied"
	switch {
	case c.Approved:
		decision = "approved"
	case why != "":
		decision = why // expired | cancelled
	}
	call := p.Assistant.ToolCalls[c.CallIndex]
	step := Step{Kind: StepApproval, Session: s.id, Turn: p.Turn.ID, Tool: call.Name, CallID: call.ID, Confirmation: c.ID,
		Start: c.AskedAt, Parent: p.Turn.Trace, Decision: decision, By: who.DisplayName(), Channel: who.Channel}
	tr.Begin(ctx, step).End(step)
}

// traceCompaction records a compaction of the conversation.
func (s *session) traceCompaction(ctx context.Context, t *turn, summarised, kept int) {
	if tr := s.m.cfg.Tracer; tr != nil {
		tr.Mark(t.under(ctx), Step{Kind: StepCompaction, Session: s.id, Turn: t.ID, Summarised: summarised, Kept: kept})
	}
}
