package telemetry

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
)

// The spans follow the OpenTelemetry GenAI semantic conventions
// (gen_ai.*); what they have no name for is switchboard.*. Each Begin and
// End also writes the trace log's line for the step (tracelog.go), from
// the same Step: the log and the spans cannot disagree.

var _ sessions.Tracer = (*Telemetry)(nil)

// Begin starts the span of a step and writes its first log line.
func (t *Telemetry) Begin(ctx context.Context, st sessions.Step) sessions.Span {
	var input string // gen_ai.input.messages, for the span and the line
	if t.content && st.Messages != nil {
		input = messagesJSON(st.Messages)
	}
	name, kind, attrs := t.describe(st, input)
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind), trace.WithAttributes(attrs...)}
	start := st.Start
	if start.IsZero() {
		start = time.Now()
	}
	opts = append(opts, trace.WithTimestamp(start))
	if sc, ok := spanContext(st.Parent); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	if sc, ok := spanContext(st.Link); ok {
		// A turn run again after a restart: a new trace, linked to the
		// turn the restart cut.
		opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{
			SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("switchboard.link.reason", "restart")},
		}))
	}
	if st.Cause != "" {
		// The chat app's span that handed the message in.
		cause := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": st.Cause}))
		if cause.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{
				SpanContext: cause, Attributes: []attribute.KeyValue{attribute.String("switchboard.link.reason", "input")},
			}))
		}
	}
	_, span := t.tracer.Start(ctx, name, opts...)
	sp := &step{t: t, span: span, start: start, kind: st.Kind, session: st.Session, turn: st.Turn, tool: st.Tool, callID: st.CallID}
	if typ := beginLine[st.Kind]; typ != "" {
		t.line(typ, st, sp.Ref(), start, func(l *Line) {
			l.Guide, l.Resumed = st.Guide, st.Resumed
			if !st.Link.IsZero() {
				l.Link = &st.Link
			}
			l.Provider, l.ProviderKind, l.Model, l.Temperature, l.MaxTokens = st.Provider, st.ProviderKind, st.Model, st.Temperature, st.MaxTokens
			if st.Kind == sessions.StepModel {
				l.Messages = len(st.Messages)
			}
			if t.content {
				l.System, l.Input, l.Args = st.System, input, st.Args
			}
		})
	}
	return sp
}

// Mark records a point step: an event on the span ctx carries, and its
// log line.
func (t *Telemetry) Mark(ctx context.Context, st sessions.Step) {
	span := trace.SpanFromContext(ctx)
	sc := span.SpanContext()
	ref := sessions.TraceRef{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), Sampled: sc.IsSampled()}
	now := time.Now()
	switch st.Kind {
	case sessions.StepApproval:
		span.AddEvent("approval_requested", trace.WithTimestamp(now), trace.WithAttributes(
			attribute.String("gen_ai.tool.name", st.Tool), attribute.String("gen_ai.tool.call.id", st.CallID),
			attribute.String("switchboard.approval.id", st.Confirmation)))
		t.line("approval_requested", st, ref, now, func(l *Line) {
			l.Confirmation, l.ExpiresAt = st.Confirmation, st.ExpiresAt
			if t.content {
				l.Args = st.Args
			}
		})
	case sessions.StepCompaction:
		span.AddEvent("compaction", trace.WithTimestamp(now), trace.WithAttributes(
			attribute.Int("switchboard.compaction.summarised_messages", st.Summarised),
			attribute.Int("switchboard.compaction.kept_messages", st.Kept)))
		t.line("compaction", st, ref, now, func(l *Line) { l.Summarised, l.Kept = st.Summarised, st.Kept })
	case sessions.StepHandoff:
		attrs := []attribute.KeyValue{attribute.String("switchboard.handoff.from", st.From), attribute.String("switchboard.handoff.to", st.To)}
		if st.Refused != "" {
			attrs = append(attrs, attribute.String("switchboard.handoff.refused", st.Refused))
		}
		span.AddEvent("handoff", trace.WithTimestamp(now), trace.WithAttributes(attrs...))
		t.line("handoff", st, ref, now, func(l *Line) {
			l.Guide, l.From, l.To, l.Refused = st.Guide, st.From, st.To, st.Refused
			if t.content {
				l.Reason = st.Reason
			}
		})
	case sessions.StepGuardrail:
		t.guardrail(span, st, ref, now)
	}
}

// step is a step under way.
type step struct {
	t                           *Telemetry
	span                        trace.Span
	start                       time.Time
	kind                        sessions.StepKind
	session, turn, tool, callID string
}

func (s *step) Context(ctx context.Context) context.Context {
	return trace.ContextWithSpan(ctx, s.span)
}

func (s *step) Ref() sessions.TraceRef {
	sc := s.span.SpanContext()
	return sessions.TraceRef{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), Sampled: sc.IsSampled()}
}

// End ends the span with the step's outcome and writes its last line (and
// an error line when it failed).
func (s *step) End(st sessions.Step) {
	t, span := s.t, s.span
	now := time.Now()
	st.Session, st.Turn = s.session, s.turn
	if st.Tool == "" {
		st.Tool, st.CallID = s.tool, s.callID
	}
	switch s.kind {
	case sessions.StepTurn:
		span.SetAttributes(attribute.String("switchboard.turn.outcome", st.Outcome))
		setUsage(span, st.Usage)
	case sessions.StepModel:
		if st.ResponseModel != "" {
			span.SetAttributes(attribute.String("gen_ai.response.model", st.ResponseModel))
		}
		if st.FinishReason != "" {
			span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{st.FinishReason}))
		}
		setUsage(span, st.Usage)
		if t.content && st.Reply != nil {
			span.SetAttributes(attribute.String("gen_ai.output.messages", messagesJSON([]switchboard.Message{*st.Reply})))
		}
	case sessions.StepTool:
		if t.content {
			span.SetAttributes(attribute.String("gen_ai.tool.call.result", st.Result))
		}
	case sessions.StepApproval:
		span.SetAttributes(
			attribute.String("switchboard.approval.decision", st.Decision),
			attribute.String("switchboard.approval.by", st.By),
			attribute.String("switchboard.approval.channel", st.Channel),
			attribute.Int64("switchboard.approval.wait_ms", now.Sub(s.start).Milliseconds()))
	}
	if st.Err != "" {
		span.SetAttributes(attribute.String("error.type", st.ErrType))
		span.AddEvent("exception", trace.WithTimestamp(now), trace.WithAttributes(
			attribute.String("exception.type", st.ErrType), attribute.String("exception.message", st.Err)))
		span.SetStatus(codes.Error, st.Err)
	}
	span.End(trace.WithTimestamp(now))

	ref := s.Ref()
	if typ := endLine[s.kind]; typ != "" {
		t.line(typ, st, ref, now, func(l *Line) {
			l.DurationMS = float64(now.Sub(s.start).Microseconds()) / 1000
			l.Outcome, l.ErrorType, l.Error = st.Outcome, st.ErrType, st.Err
			if st.Usage != (switchboard.Usage{}) {
				l.Usage = &Usage{InputTokens: st.Usage.PromptTokens, CachedTokens: st.Usage.CachedTokens, OutputTokens: st.Usage.CompletionTokens}
			}
			l.Model, l.FinishReason = st.ResponseModel, st.FinishReason
			l.IsError = st.IsError
			l.Confirmation, l.Decision, l.By, l.Channel = st.Confirmation, st.Decision, st.By, st.Channel
			if st.Reply != nil {
				l.ToolCalls = len(st.Reply.ToolCalls)
				if t.content {
					l.Output = messagesJSON([]switchboard.Message{*st.Reply})
				}
			}
			if t.content && s.kind == sessions.StepTool {
				l.Result = &st.Result
			}
		})
	}
	if st.Err != "" && s.kind != sessions.StepTurn {
		t.line("error", st, ref, now, func(l *Line) { l.Step, l.ErrorType, l.Error = string(s.kind), st.ErrType, st.Err })
	}
}

// The log line types of each step's Begin and End.
var (
	beginLine = map[sessions.StepKind]string{
		sessions.StepTurn: "turn_start", sessions.StepModel: "model_request", sessions.StepTool: "tool_call",
	}
	endLine = map[sessions.StepKind]string{
		sessions.StepTurn: "turn_end", sessions.StepModel: "model_response", sessions.StepTool: "tool_result",
		sessions.StepApproval: "approval_decided",
	}
)

// describe names a step's span and gives its first attributes.
func (t *Telemetry) describe(st sessions.Step, input string) (string, trace.SpanKind, []attribute.KeyValue) {
	conv := attribute.String("gen_ai.conversation.id", st.Session)
	turn := attribute.String("switchboard.turn.id", st.Turn)
	switch st.Kind {
	case sessions.StepTurn:
		a := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", st.Guide), conv, turn}
		if st.Resumed != "" {
			a = append(a, attribute.String("switchboard.turn.resumed", st.Resumed))
		}
		return "invoke_agent " + st.Guide, trace.SpanKindInternal, a
	case sessions.StepModel:
		a := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", providerName(st.ProviderKind)),
			attribute.String("gen_ai.request.model", st.Model), conv, turn,
			attribute.String("switchboard.provider", st.Provider)}
		if st.Temperature != nil {
			a = append(a, attribute.Float64("gen_ai.request.temperature", *st.Temperature))
		}
		if st.MaxTokens > 0 {
			a = append(a, attribute.Int("gen_ai.request.max_tokens", st.MaxTokens))
		}
		if t.content {
			if st.System != "" {
				a = append(a, attribute.String("gen_ai.system_instructions", st.System))
			}
			a = append(a, attribute.String("gen_ai.input.messages", input))
		}
		return "chat " + st.Model, trace.SpanKindClient, a
	case sessions.StepTool:
		a := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", st.Tool), attribute.String("gen_ai.tool.call.id", st.CallID),
			attribute.String("gen_ai.tool.type", st.ToolType), conv, turn}
		if t.content {
			a = append(a, attribute.String("gen_ai.tool.call.arguments", string(st.Args)))
		}
		return "execute_tool " + st.Tool, trace.SpanKindInternal, a
	case sessions.StepApproval:
		return "approval " + st.Tool, trace.SpanKindInternal, []attribute.KeyValue{
			attribute.String("gen_ai.tool.name", st.Tool), attribute.String("gen_ai.tool.call.id", st.CallID),
			attribute.String("switchboard.approval.id", st.Confirmation), conv, turn}
	}
	return string(st.Kind), trace.SpanKindInternal, []attribute.KeyValue{conv, turn}
}

// providerName is gen_ai.provider.name for a provider kind of the
// configuration.
func providerName(kind string) string {
	switch kind {
	case "gemini":
		return "gcp.gemini"
	case "":
		return "unknown"
	}
	return kind // openai, anthropic, ollama, demo
}

func setUsage(span trace.Span, u switchboard.Usage) {
	if u == (switchboard.Usage{}) {
		return
	}
	span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", u.PromptTokens),
		attribute.Int("gen_ai.usage.output_tokens", u.CompletionTokens))
	if u.CachedTokens > 0 { // part of input_tokens, as the convention has it
		span.SetAttributes(attribute.Int("gen_ai.usage.cache_read.input_tokens", u.CachedTokens))
	}
}

func spanContext(r sessions.TraceRef) (trace.SpanContext, bool) {
	if r.IsZero() {
		return trace.SpanContext{}, false
	}
	tid, err1 := trace.TraceIDFromHex(r.TraceID)
	sid, err2 := trace.SpanIDFromHex(r.SpanID)
	if err1 != nil || err2 != nil {
		return trace.SpanContext{}, false
	}
	var flags trace.TraceFlags
	if r.Sampled {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}), true
}

// genAIMessage is a message as gen_ai.input.messages and
// gen_ai.output.messages record it: a role and its parts.
type genAIMessage struct {
	Role  string      `json:"role"`
	Parts []genAIPart `json:"parts"`
}

type genAIPart struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  string          `json:"response,omitempty"`
}

func messagesJSON(msgs []switchboard.Message) string {
	out := make([]genAIMessage, 0, len(msgs))
	for _, m := range msgs {
		g := genAIMessage{Role: string(m.Role)}
		switch {
		case m.Role == switchboard.RoleTool:
			g.Parts = append(g.Parts, genAIPart{Type: "tool_call_response", ID: m.ToolCallID, Response: m.Content})
		case m.Content != "":
			g.Parts = append(g.Parts, genAIPart{Type: "text", Content: m.Content})
		}
		for _, c := range m.ToolCalls {
			g.Parts = append(g.Parts, genAIPart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: validJSON(c.Args)})
		}
		out = append(out, g)
	}
	b, _ := json.Marshal(out) // plain data
	return string(b)
}

func validJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || !json.Valid(raw) {
		b, _ := json.Marshal(string(raw))
		return b
	}
	return raw
}
