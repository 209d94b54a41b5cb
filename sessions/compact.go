package sessions

// Compaction, the guide's memory policy "compact". Before a model call,
// when the window holds more than memory.window messages or the request
// would pass compactAt of the context budget (budget.go), the older part of
// the window is summarised by the model (memory.summary_model, else the
// guide's), the previous summary with it: the summary is incremental. The
// cut falls only before a user message, so a tool call and its results are
// never split. The summary and a compaction event are stored in one write
// (the summaries table keeps what it covers); from then on the model is
// given the summary, in its system prompt, and the messages after it, also
// after a restart. A summary that cannot be made leaves the window as it is
// (the request is still made to fit): the turn goes on, and the log says
// why. The messages themselves are never changed: the history is whole.

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers"
)

// compactAt is the share of the budget past which a request is compacted
// first.
const compactAt = 0.8

// compactCap is how many messages a compacting session keeps in memory at
// the most, should its summaries keep failing.
func compactCap(g guides.Guide) int { return max(4*g.Memory.Window, 100) }

// summaryPrompt asks for a summary that the model can go on from.
const summaryPrompt = `You keep the memory of a conversation between people and an assistant, which will continue from your notes without the messages they replace.
Write notes on the conversation below (and on the earlier notes, if any): every fact, name, number, date, code, decision, preference, promise and open question the assistant may need later, who said what where it matters, and what tools were used for. Leave out greetings and small talk.
Write in the conversation's language, as short plain notes, at most 400 words. Do not address anyone.`

// maxQuoted bounds each message in what a summary is made from.
const maxQuoted = 4000

// maybeCompact summarises the older part of the window when the guide's
// policy asks for it and the request (system, tools and window) is due.
func (s *session) maybeCompact(ctx, turnCtx context.Context, t *turn, system string, tools []providers.ToolSpec) {
	g := s.guide
	if g.Memory.Policy != guides.Compact {
		return
	}
	budget := s.budget()
	size := func(msgs []switchboard.Message) int {
		return s.fitting.tokens(providers.EstimateTokens(providers.Request{System: system, Tools: tools, Messages: msgs}))
	}
	if len(s.window) <= g.Memory.Window && (budget <= 0 || float64(size(s.window)) <= compactAt*float64(budget)) {
		return
	}
	// The longest tail that fits half the window and half the budget,
	// starting with a user message; at least the last exchange.
	cut := -1
	for i := len(s.window) - 1; i > 0; i-- {
		if s.window[i].Role != switchboard.RoleUser {
			continue
		}
		tail := s.window[i:]
		if cut >= 0 && (len(tail) > max(g.Memory.Window/2, 1) || budget > 0 && size(tail) > budget/2) {
			break
		}
		cut = i
	}
	// The summary request itself must fit: after summaries failed for a
	// while, the window may hold more than the model takes at once. Then
	// the oldest part that fits is summarised now, the rest next time.
	for budget > 0 && cut > 0 && s.fitting.tokens(providers.EstimateTokens(s.summaryRequest(s.window[:cut]))) > budget {
		prev := 0
		for i := cut - 1; i > 0; i-- {
			if s.window[i].Role == switchboard.RoleUser {
				prev = i
				break
			}
		}
		cut = prev
	}
	if cut <= 0 {
		return // nothing before the last exchange, or not one exchange fits
	}
	summary, usage, err := s.summarise(turnCtx, t, s.window[:cut])
	t.Usage = t.Usage.Add(usage)
	if err != nil {
		if turnCtx.Err() == nil {
			s.log.Warn("compaction failed: the turn goes on with the messages it has", "messages", cut, "err", err)
		}
		return
	}
	tail := s.window[cut:]
	w := switchboard.TurnWrite{Summary: &switchboard.Summary{Text: summary, Keep: len(tail)}}
	if ev, ok := s.event(switchboard.EventCompaction, switchboard.CompactionData{Messages: cut, Summary: summary}); ok {
		w.Events, w.Published = []switchboard.Event{ev}, s.onCommit
	}
	if _, err := s.store(context.WithoutCancel(ctx), w); err != nil {
		s.log.Warn("compaction not stored: the turn goes on with the messages it has", "err", err)
		return
	}
	s.summary = summary
	s.window = append(make([]switchboard.Message, 0, len(tail)+8), tail...)
	s.traceCompaction(ctx, t, cut, len(tail))
	s.log.Info("conversation compacted", "summarised_messages", cut, "kept_messages", len(tail), "summary_bytes", len(summary))
}

// summarise asks the model for notes on msgs, after the session's
// summary: a model call of turn t.
func (s *session) summarise(ctx context.Context, t *turn, msgs []switchboard.Message) (string, switchboard.Usage, error) {
	req := s.summaryRequest(msgs)
	span := s.traceModel(ctx, t, req)
	var out strings.Builder
	var usage switchboard.Usage
	for ev, err := range s.provider().Stream(ctx, req) {
		if err != nil {
			s.traceModelEnd(span, t, usage, "", nil, err)
			return "", usage, err
		}
		switch ev.Kind {
		case providers.EventTextDelta:
			out.WriteString(ev.Text)
		case providers.EventUsage:
			usage = usage.Add(ev.Usage)
		}
	}
	text := strings.TrimSpace(out.String())
	s.traceModelEnd(span, t, usage, "", &switchboard.Message{Role: switchboard.RoleAssistant, Content: text}, nil)
	if text == "" {
		return "", usage, fmt.Errorf("sessions: the summary came back empty")
	}
	return text, usage, nil
}

// summaryRequest asks for notes on msgs, after the session's summary.
func (s *session) summaryRequest(msgs []switchboard.Message) providers.Request {
	var b strings.Builder
	if s.summary != "" {
		b.WriteString("Earlier notes:\n" + s.summary + "\n\nThe conversation since:\n")
	}
	for _, m := range msgs {
		switch m.Role {
		case switchboard.RoleUser:
			fmt.Fprintf(&b, "%s: %s\n", cmp.Or(m.Author, "User"), quoted(m.Content))
		case switchboard.RoleAssistant:
			if m.Content != "" {
				fmt.Fprintf(&b, "Assistant: %s\n", quoted(m.Content))
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "Assistant called %s %s\n", c.Name, quoted(string(c.Args)))
			}
		case switchboard.RoleTool:
			fmt.Fprintf(&b, "%s returned: %s\n", cmp.Or(m.ToolName, "A tool"), quoted(m.Content))
		}
	}
	return providers.Request{
		Model:    cmp.Or(s.guide.Memory.SummaryModel, s.guide.Model),
		System:   summaryPrompt,
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: b.String()}},
	}
}

// quoted is a message's text for a summary, cut to maxQuoted bytes.
func quoted(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return cutTo(s, maxQuoted)
}

// withSummary is the system prompt with the session's summary, if any.
func (s *session) withSummary(system string) string {
	if s.summary == "" {
		return system
	}
	return system + "\n\nNotes on the earlier part of this conversation (its messages are not repeated here):\n" + s.summary
}
