package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/tools"
)

// This file is the agent loop: a user's message goes to the model with the
// context window; the model answers with text, or asks for tools; the tools
// run (after a human's approval where the guide says so) and their results
// go back to the model; until the model answers without tools.
//
// Two rules keep stored history consistent whatever fails: a model reply is
// only added to the context once its stream has ended well, and an
// assistant message that called tools is stored in one transaction together
// with all of its results.

// turn is what one user message has cost so far; it survives a suspension
// for approval, and a restart, inside pendingTurn.
type turn struct {
	// ID names the turn in the trace log; Trace is its span, linked to
	// when a restart runs it again (trace.go).
	ID        string            `json:"id,omitempty"`
	Trace     TraceRef          `json:"trace,omitzero"`
	Iteration int               `json:"iteration"`
	Usage     switchboard.Usage `json:"usage"`
	Model     string            `json:"model,omitempty"`
	// Resumed counts how often a crash or a failed write cut the turn and
	// it was run again (see resumeInterrupted).
	Resumed int `json:"resumed,omitempty"`
	// Author is whose message the turn answers: their memories are
	// offered, and remember and forget act for them (memories.go).
	Author switchboard.Author `json:"author,omitzero"`
	// Found are the tools find_tools found in this turn: its requests
	// carry them from then on (toolpick.go).
	Found []string `json:"found,omitempty"`
	// ClientTools are the tools the turn's caller offered
	// (Input.ClientTools): its requests carry them, and the caller runs
	// them (clienttools.go).
	ClientTools []switchboard.ClientTool `json:"client_tools,omitempty"`
	// Wait is how long the turn waits on people or the caller
	// (Input.WaitTimeout); 0: Limits.ApprovalTimeout.
	Wait time.Duration `json:"wait,omitempty"`
	// Guides are the guides the turn passed through by handoffs, the one
	// it began with first; empty until its first handoff (handoff.go).
	Guides []string `json:"guides,omitempty"`
	// started is when the user's message arrived, for the turn-duration
	// metric; a turn resumed after an approval does not count the wait.
	started time.Time
	// usageStored is set once Usage is in the store with the answer.
	usageStored bool
	// tail is the last text of the model's latest response, not yet shown:
	// its delta goes in the write of the message that shows it whole
	// (showTail).
	tail string
	// thinking: the turn's first "thinking" state was stored with its
	// message (userTurn), so the first model call does not emit it again.
	// ended: its usage and "idle" state were stored with the answer.
	thinking, ended bool
	// notes are what the turn's requests are told of the person it
	// answers — their memories, what memory.recall found — read once
	// (noted) and given with every request of the turn (memories.go).
	notes string
	noted bool
	span  Span // the turn's span under way; nil without a Tracer
}

// userTurn answers a user's message. The message, its event and the turn
// it opens are stored in one write before the model is called: from then
// on, a crash at any point leaves an open turn that the next start runs
// again, so every stored message gets its answer.
func (s *session) userTurn(ctx context.Context, j job, text string) {
	in := j.input
	if s.pending != nil {
		s.tell(in.Author, switchboard.ErrCodeBusy, s.pending.busy())
		// Refused, not taken: forget its id so it can be sent again, and
		// its files, which no message brings now.
		s.write(ctx, switchboard.TurnWrite{InboxID: j.inboxID, ClientID: dedupeKey(in), Forget: true})
		s.m.Discard(ctx, s.id, in.Files)
		return
	}
	s.takeUpGuide(ctx) // a guide reloaded since the last turn: this one runs the new version
	// A new conversation's first message chooses its guide (routing.go).
	s.routeFirstTurn(ctx, in, text)
	if s.refusedByBudget(ctx, j) {
		return
	}
	text, ok := s.guardInput(ctx, j, text) // guardrails.go
	if !ok {
		return
	}
	msg := switchboard.Message{Role: switchboard.RoleUser, Content: text, Files: in.Files}
	if s.memberCount() > 1 {
		msg.Author = in.Author.DisplayName() // several people: tell the model who spoke
	}
	ev, ok := s.event(switchboard.EventMessage, switchboard.MessageData{
		ID: newID("m_"), Role: switchboard.RoleUser, Author: in.Author.DisplayName(),
		AuthorID: in.Author.ID, Channel: in.Author.Channel, Place: in.Place, Content: text, Format: switchboard.FormatText,
		Files: in.Files, ClientID: in.ClientID,
	})
	if !ok {
		return
	}
	// The turn starts thinking in the same write: a write, and a commit
	// touching this session's pages, fewer a turn.
	thinking, ok := s.event(switchboard.EventState, switchboard.StateData{State: switchboard.StateThinking})
	if !ok {
		s.seq--
		return
	}
	t := &turn{started: s.m.cfg.Now(), Author: in.Author, thinking: true, ClientTools: in.ClientTools, Wait: max(in.WaitTimeout, 0)}
	s.traceTurn(ctx, t, "", in.Trace)
	w := switchboard.TurnWrite{
		InboxID: j.inboxID, Messages: []switchboard.Message{msg},
		Events: []switchboard.Event{ev, thinking}, Published: s.onCommit, Turn: running(*t),
	}
	if j.inboxID == 0 {
		// Not in the inbox (handed over, or a click): de-duplicated here,
		// and a handed-over message is stored as the inbox would have.
		w.ClientID, w.Durable = dedupeKey(in), j.stored != nil
	}
	dup, err := s.store(ctx, w)
	j.ack(err)
	if err != nil {
		s.traceTurnEnd(t, "not_stored", err)
	} else if dup {
		s.traceTurnEnd(t, "duplicate", nil)
	}
	if err != nil {
		return
	}
	if dup {
		s.seq -= 2 // its events were not stored, and nothing was numbered since
		s.tell(in.Author, switchboard.ErrCodeDuplicate, fmt.Sprintf("Already received (id %s): it is answered once.", quoteID(in.ClientID)))
		return
	}
	s.remember(msg)
	s.agentLoop(ctx, t, nil)
}

// agentLoop calls the model until it answers without tools. With resume
// set, it first finishes a turn that was waiting for approvals.
func (s *session) agentLoop(ctx context.Context, t *turn, resume *pendingTurn) {
	// turnCtx ends on /stop, on a failed write and when a shutdown runs
	// out of time; ctx (the session's) keeps storing and emitting, so a
	// stopped turn still reports and stores cleanly.
	turnCtx, cancel := context.WithCancelCause(s.m.turns)
	s.setCancel(cancel)
	s.answering = t.Author
	defer func() {
		s.setCancel(nil)
		cancel(nil)
		s.answering = switchboard.Author{}
	}()

	if resume != nil {
		s.runTools(ctx, turnCtx, resume, resume.approvedCalls())
		if s.cutShort(turnCtx) {
			s.endTurn(ctx, t, context.Cause(turnCtx))
			return
		}
		if err := s.finishStep(ctx, t, resume); err != nil {
			s.endTurn(ctx, t, err)
			return
		}
		if resume.Stopped {
			s.endTurn(ctx, t, context.Canceled)
			return
		}
		t.Iteration++
	}

	for {
		final := t.Iteration >= s.guide.MaxIterations
		if err := s.budgetBeforeCall(ctx, t); err != nil {
			s.endTurn(ctx, t, err)
			return
		}
		if t.thinking {
			t.thinking = false // stored with the message
		} else {
			s.emitState(ctx, switchboard.StateThinking, "")
		}
		reply, shown, err := s.callModel(ctx, turnCtx, t, final)
		if err != nil {
			if turnCtx.Err() != nil {
				err = context.Cause(turnCtx)
			}
			s.endTurn(ctx, t, err)
			return
		}
		if final || len(reply.ToolCalls) == 0 {
			reply.ToolCalls = nil // the last, tool-less call may still try
			if err := s.answer(ctx, t, reply, shown); err != nil {
				s.endTurn(ctx, t, err)
				return
			}
			s.endTurn(ctx, t, nil)
			return
		}
		if shown != nil {
			if d, ok := showTail(t, shown); ok {
				s.emit(ctx, switchboard.EventDelta, d)
			}
			s.emit(ctx, switchboard.EventMessage, shown)
		}

		p := &pendingTurn{Turn: *t, Assistant: reply, Results: make([]*switchboard.Message, len(reply.ToolCalls))}
		auto := s.triage(ctx, p)
		t.Found = p.Turn.Found
		s.runTools(ctx, turnCtx, p, auto)
		if s.cutShort(turnCtx) {
			// Not stored: the step is asked for again when the turn is.
			s.endTurn(ctx, t, context.Cause(turnCtx))
			return
		}
		if len(p.Confirmations) > 0 && turnCtx.Err() == nil {
			s.suspend(ctx, p)
			s.traceTurnEnd(t, "awaiting_approval", nil)
			return
		}
		p.cancelUnresolved(s.m.cfg.Now())
		if err := s.finishStep(ctx, t, p); err != nil {
			s.endTurn(ctx, t, err)
			return
		}
		if turnCtx.Err() != nil {
			s.endTurn(ctx, t, context.Canceled)
			return
		}
		t.Iteration++
	}
}

// cutShort reports whether the turn was cut by something other than the
// user: a shutdown that ran out of time or a write that failed. Such a
// turn is left open in the store, to be run again, rather than ended.
func (s *session) cutShort(turnCtx context.Context) bool {
	return turnCtx.Err() != nil && s.interrupting(context.Cause(turnCtx))
}

func (s *session) interrupting(err error) bool {
	return s.m.ctx.Err() != nil || s.failing.Load() ||
		errors.Is(err, ErrShuttingDown) || errors.Is(err, errStorage)
}

// callModel streams one model response, emitting its text as it arrives
// (merged into fewer deltas when the session falls behind; see readAhead),
// and returns it with the message event that shows it whole (nil without
// text), which the caller stores with the reply or emits before its tool
// calls. The text held when the response ended is left in t.tail: its
// delta goes with that message (showTail). Nothing is added to the context here: a stream that breaks half
// way leaves no half message behind.
func (s *session) callModel(ctx, turnCtx context.Context, t *turn, final bool) (switchboard.Message, *switchboard.MessageData, error) {
	system := s.systemPrompt(final) + s.turnNotes(ctx, t)
	var tools []providers.ToolSpec
	if !final {
		tools = s.toolSpecs(t)
	}
	s.maybeCompact(ctx, turnCtx, t, system, tools)
	req := providers.Request{
		Model:       s.guide.Model,
		System:      s.withSummary(system),
		Messages:    s.forModel(ctx, s.window),
		Images:      s.pictures(ctx, s.window),
		Tools:       tools,
		Temperature: s.guide.Temperature,
		MaxTokens:   s.guide.MaxTokens,
	}
	id := newID("m_")
	var text strings.Builder
	var calls []switchboard.ToolCall
	t.tail = ""
	out := s.outputStream()    // what people may see of the text (guardrails.go)
	var span Span              // the call's, for the tracer (trace.go)
	var used switchboard.Usage // the call's tokens
	var stop string
	for attempt := 0; ; attempt++ {
		sent, dropped, cut := s.fit(req)
		span, used = s.traceModel(ctx, t, sent), switchboard.Usage{}
		if dropped > 0 || cut > 0 {
			s.log.Info("a request was shortened to fit the model's context", "left_out", dropped, "cut", cut,
				"budget_tokens", s.budget(), "messages", len(sent.Messages))
		}
		estimate := providers.EstimateTokens(sent)
		var err error
		for ev, e := range readAhead(turnCtx, s.provider(), sent, s.m.cfg.DeltaInterval) {
			if e != nil {
				err = e
				break
			}
			switch ev.Kind {
			case providers.EventTextDelta:
				text.WriteString(ev.Text)
				if shown := out.Write(ev.Text); shown != "" {
					s.emit(ctx, switchboard.EventDelta, switchboard.DeltaData{MessageID: id, Content: shown})
				}
			case textTail:
				text.WriteString(ev.Text)
				t.tail = out.Write(ev.Text)
			case providers.EventToolCall:
				calls = append(calls, ev.ToolCall)
			case providers.EventUsage:
				t.Usage, used = t.Usage.Add(ev.Usage), used.Add(ev.Usage)
				s.fitting.observe(estimate, ev.Usage.PromptTokens)
			case providers.EventDone:
				stop = ev.StopReason
				if ev.Model != "" {
					t.Model = ev.Model
				}
			}
		}
		if err == nil {
			break
		}
		s.traceModelEnd(span, t, used, "", nil, err)
		if attempt > 0 || !errors.Is(err, providers.ErrContextTooLong) || text.Len() > 0 || len(calls) > 0 {
			return switchboard.Message{}, nil, err
		}
		// Refused as too long before a word of it: one shorter try, and
		// this session keeps the tighter budget.
		s.fitting.squeeze = max(s.fitting.tokens(estimate)*7/10, minKept*2)
		s.log.Warn("the provider refused a request as longer than the model's context; trying once with a shorter one",
			"estimate_tokens", s.fitting.tokens(estimate), "budget_tokens", s.fitting.squeeze, "err", err)
	}
	if t.Model == "" {
		t.Model = req.Model
	}
	reply := switchboard.Message{Role: switchboard.RoleAssistant, Content: text.String(), ToolCalls: calls}
	s.guardReply(ctx, t, out, &reply)
	s.traceModelEnd(span, t, used, stop, &reply, nil)
	if reply.Content == "" {
		return reply, nil, nil
	}
	return reply, &switchboard.MessageData{
		ID: id, Role: switchboard.RoleAssistant, Author: s.guide.Name,
		Content: reply.Content, Format: switchboard.FormatMarkdown, Model: t.Model,
	}, nil
}

// triage announces each tool call and sorts it: calls that cannot run get
// an error result the model will read and correct itself from; calls the
// guide allows run now; the rest need a human's approval. It returns the
// indexes of the calls to run now.
func (s *session) triage(ctx context.Context, p *pendingTurn) []int {
	var run []int
	retrieving := len(p.Assistant.ToolCalls) > 0 && len(s.offerable()) > s.toolsMax() // toolpick.go
	for i, call := range p.Assistant.ToolCalls {
		s.emit(ctx, switchboard.EventToolCall, switchboard.ToolCallData{ID: call.ID, Name: call.Name, Args: call.Args})
		policy := s.guide.Approval.For(call.Name)
		switch {
		case call.Name == handoffName && len(s.guide.Handoffs) > 0:
			s.handoffCall(ctx, p, i) // handoff.go
		case s.isPlanCall(call):
			s.runPlan(ctx, p, i) // plan.go: shown now, no approval
		case call.Name == findToolsName && retrieving:
			content, isError := s.findTools(&p.Turn, call.Args)
			s.setResult(ctx, p, i, content, isError)
		case !s.guideHasTool(call.Name) && p.Turn.offers(call.Name):
			// The caller's own tool: it runs it, and the step waits.
			now := s.m.cfg.Now().UTC()
			p.Confirmations = append(p.Confirmations, &confirmation{
				ID: newID("c_"), CallIndex: i, AskedAt: now, ExpiresAt: now.Add(s.waitFor(&p.Turn)), Client: true,
			})
		case !s.guideHasTool(call.Name) && retrieving:
			s.setResult(ctx, p, i, fmt.Sprintf("unknown tool %q; use %s to look for the tool you need", call.Name, findToolsName), true)
		case !s.guideHasTool(call.Name):
			s.setResult(ctx, p, i, fmt.Sprintf("unknown tool %q; available tools: %s", call.Name, strings.Join(s.guideTools(), ", ")), true)
		case policy == guides.Deny:
			s.setResult(ctx, p, i, fmt.Sprintf("the tool %q is not allowed in this conversation", call.Name), true)
		default:
			if err := s.m.cfg.Tools.Validate(call.Name, call.Args); err != nil {
				s.setResult(ctx, p, i, err.Error(), true)
			} else if policy == guides.Auto || s.allowedForSession(call.Name) {
				// Allowed for the session by an approver ("Always allow").
				run = append(run, i)
			} else {
				now := s.m.cfg.Now().UTC()
				p.Confirmations = append(p.Confirmations, &confirmation{
					ID: newID("c_"), CallIndex: i, AskedAt: now, ExpiresAt: now.Add(s.waitFor(&p.Turn)),
				})
			}
		}
	}
	return run
}

// runTools runs the given calls in parallel, each under the tool timeout,
// and records and announces each result as it arrives.
func (s *session) runTools(ctx, turnCtx context.Context, p *pendingTurn, idx []int) {
	if len(idx) == 0 {
		return
	}
	names := make([]string, len(idx))
	for k, i := range idx {
		names[k] = p.Assistant.ToolCalls[i].Name
	}
	s.emitState(ctx, switchboard.StateExecutingTool, strings.Join(names, ", "))
	type done struct {
		i   int
		res tools.Result
		err error
	}
	results := make(chan done, len(idx))
	timeout := s.m.limits().ToolTimeout
	var wg sync.WaitGroup
	for _, i := range idx {
		call := p.Assistant.ToolCalls[i]
		wg.Go(func() {
			span := s.traceTool(turnCtx, &p.Turn, call)
			ctx, cancel := context.WithTimeout(tools.WithAuthor(tools.WithSession(under(turnCtx, span), s.id), s.answering), timeout)
			defer cancel()
			res, err := s.m.cfg.Tools.Run(ctx, call.Name, call.Args)
			traceToolEnd(span, call, res.Content, err)
			results <- done{i, res, err}
		})
	}
	go func() { wg.Wait(); close(results) }()
	for d := range results {
		if d.err != nil {
			msg := d.err.Error()
			if errors.Is(d.err, context.Canceled) {
				msg = "cancelled: the user stopped the turn"
			} else if errors.Is(d.err, context.DeadlineExceeded) {
				msg = fmt.Sprintf("timed out after %s", timeout)
			}
			s.setResult(ctx, p, d.i, msg, true)
			continue
		}
		if d.res.UI != nil {
			if by := p.ranBy; by != nil && !s.role(*by).CanApprove() {
				// A card a member makes would look like the assistant's
				// to everyone (a form asking for a password, say).
				s.tell(*by, switchboard.ErrCodeForbidden, "Only the session's owner or an approver may show a card to everyone; it was not shown.")
			} else {
				s.emit(ctx, switchboard.EventUI, d.res.UI)
			}
		}
		for _, img := range d.res.Images {
			// What a tool drew (a sandboxed run's chart) is shown to the
			// people as it is, in every channel's own way.
			s.emit(ctx, switchboard.EventUI, &switchboard.UI{ID: newID("ui_"), Title: img.Alt, Image: &img})
		}
		s.setResult(ctx, p, d.i, d.res.Content, false)
	}
}

// setResult records a call's result and tells the listeners.
func (s *session) setResult(ctx context.Context, p *pendingTurn, i int, content string, isError bool) {
	call := p.Assistant.ToolCalls[i]
	p.Results[i] = &switchboard.Message{
		Role: switchboard.RoleTool, Content: content, ToolCallID: call.ID, ToolName: call.Name, IsError: isError,
	}
	s.emit(ctx, switchboard.EventToolResponse, switchboard.ToolResponseData{
		ToolCallID: call.ID, Name: call.Name, ContentPreview: preview(content, 300), IsError: isError,
	})
}

// finishStep stores the assistant's tool calls with all their results in
// one transaction, with the turn's progress (the waiting state, if any,
// gives way to it).
func (s *session) finishStep(ctx context.Context, t *turn, p *pendingTurn) error {
	to, h, evs := s.handOff(ctx, t, p) // handoff.go: before the results are copied, which it may change
	msgs := make([]switchboard.Message, 0, 1+len(p.Results))
	msgs = append(msgs, p.Assistant)
	for _, r := range p.Results {
		msgs = append(msgs, *r)
	}
	w := switchboard.TurnWrite{Messages: msgs, Events: evs}
	if len(evs) > 0 {
		w.Published = s.onCommit
	}
	if to != nil {
		w.Guide = to.Name // the handoff is stored with its step
	}
	next := *t
	next.Iteration++
	w.Turn = running(next)
	if _, err := s.store(ctx, w); err != nil {
		return fmt.Errorf("sessions: store tool step: %w", err)
	}
	s.remember(msgs...)
	if to != nil {
		s.passTo(ctx, t, *to, h)
	}
	return nil
}

// endTurn reports how the turn ended, ends it in the store with the tokens
// it spent, and goes idle. A turn cut by a shutdown or a failed write is
// not ended: it stays open in the store and is run again.
func (s *session) endTurn(ctx context.Context, t *turn, err error) {
	outcome := "answered"
	switch {
	case err != nil && s.interrupting(err):
		s.traceTurnEnd(t, "interrupted", err)
		if !t.started.IsZero() {
			s.m.cfg.Metrics.TurnEnded("interrupted", s.m.cfg.Now().Sub(t.started))
		}
		if s.m.ctx.Err() != nil || errors.Is(err, ErrShuttingDown) {
			s.mu.Lock()
			s.noticeLocked(switchboard.ErrCodeRestarting, "The gateway is restarting. This answer will be finished when it is back.")
			s.mu.Unlock()
		}
		return
	case err == nil:
	case errors.Is(err, context.Canceled):
		outcome = "stopped"
		s.emitError(ctx, switchboard.ErrCodeCancelled, "Stopped.")
	case isBudget(err):
		outcome = "refused"
		s.stopForBudget(ctx, t.Author, err)
	default:
		outcome = "error"
		s.log.Warn("turn failed", "err", err)
		s.emitError(ctx, switchboard.ErrCodeProvider, providerErrorMessage(err))
	}
	s.traceTurnEnd(t, outcome, err)
	if !t.usageStored {
		// Tokens spent are spent even when the turn was stopped, so the
		// write outlives ctx.
		c := s.charge(t)
		if !s.write(context.WithoutCancel(ctx), switchboard.TurnWrite{EndTurn: true, Usage: t.Usage, Charge: c}) {
			return
		}
		t.usageStored = true
		s.charged(c)
	}
	if !t.started.IsZero() {
		s.m.cfg.Metrics.TurnEnded(outcome, s.m.cfg.Now().Sub(t.started))
	}
	if t.ended {
		return // its usage and state were stored with the answer
	}
	if t.Usage != (switchboard.Usage{}) {
		s.rec.Usage = s.rec.Usage.Add(t.Usage)
		s.emit(ctx, switchboard.EventUsage, switchboard.UsageData{Usage: t.Usage, Session: s.rec.Usage, Model: t.Model})
	}
	s.emitState(ctx, switchboard.StateIdle, "")
}

// providerErrorMessage says what went wrong in words a user can act on:
// one short, stable message per kind of failure, with the reference id of
// the log line that holds the detail. The event is stored and sent to
// everyone in the session, so it never quotes the error itself, which may
// name the provider's URL, its answer or its internals.
func providerErrorMessage(err error) string {
	// A failure a Resilient provider returns carries its reference and was
	// logged with it; anything else is logged here under a new one.
	err = providers.Refer(err, nil)
	_, msg := providers.Describe(err)
	return msg
}

// answer stores the model's final reply, the event that shows it and the
// turn's tokens, and ends the turn, in one write: the answer is stored if
// and only if it was shown. Then it adds the reply to the window. The
// write outlives ctx: the tokens are spent.
func (s *session) answer(ctx context.Context, t *turn, reply switchboard.Message, shown *switchboard.MessageData) error {
	w := switchboard.TurnWrite{Usage: t.Usage, EndTurn: true, Charge: s.charge(t)}
	if reply.Content != "" {
		w.Messages = []switchboard.Message{reply}
	}
	if shown != nil {
		if d, ok := showTail(t, shown); ok {
			if ev, ok := s.event(switchboard.EventDelta, d); ok {
				w.Events = append(w.Events, ev)
			}
		}
		if ev, ok := s.event(switchboard.EventMessage, shown); ok {
			w.Events = append(w.Events, ev)
		}
	}
	// The turn's end goes in the same write: the tokens it spent and the
	// "idle" state, which endTurn would otherwise emit one by one.
	total := s.rec.Usage.Add(t.Usage)
	if t.Usage != (switchboard.Usage{}) {
		if ev, ok := s.event(switchboard.EventUsage, switchboard.UsageData{Usage: t.Usage, Session: total, Model: t.Model}); ok {
			w.Events = append(w.Events, ev)
		}
	}
	if ev, ok := s.event(switchboard.EventState, switchboard.StateData{State: switchboard.StateIdle}); ok {
		w.Events = append(w.Events, ev)
	}
	if len(w.Events) > 0 {
		w.Published = s.onCommit
	}
	if _, err := s.store(context.WithoutCancel(ctx), w); err != nil {
		return fmt.Errorf("sessions: store reply: %w", err)
	}
	s.rec.Usage = total
	t.usageStored, t.ended = true, true
	s.charged(w.Charge)
	if reply.Content != "" {
		s.remember(reply)
	}
	return nil
}

// showTail is the delta of the response's last text (t.tail), for the
// message that shows the response whole, and clears it: clients that
// add deltas up get the whole text before the message, as always.
func showTail(t *turn, shown *switchboard.MessageData) (switchboard.DeltaData, bool) {
	tail := t.tail
	t.tail = ""
	return switchboard.DeltaData{MessageID: shown.ID, Content: tail}, tail != ""
}

// remember adds stored messages to the in-memory window. Under the
// compact policy the window is summarised before it passes memory.window
// (compact.go); it is cut here only past compactCap, should summaries keep
// failing.
func (s *session) remember(msgs ...switchboard.Message) {
	n := s.guide.Memory.Window
	if s.guide.Memory.Policy == guides.Compact {
		n = compactCap(*s.guide)
	}
	s.window = trimWindow(append(s.window, msgs...), n)
}

// trimWindow keeps the last n messages, never starting with a tool result
// whose call was cut off. It copies when the slice has grown to twice the
// window, so memory stays O(window) however long the conversation.
func trimWindow(w []switchboard.Message, n int) []switchboard.Message {
	if n > 0 && len(w) > n {
		w = w[len(w)-n:]
	}
	for len(w) > 0 && w[0].Role == switchboard.RoleTool {
		w = w[1:]
	}
	if cap(w) > 2*max(n, 8) {
		w = append(make([]switchboard.Message, 0, n+8), w...)
	}
	return w
}

// systemPrompt is the guide's prompt, then its initial memories.
func (s *session) systemPrompt(final bool) string {
	var b strings.Builder
	b.WriteString(s.guide.Prompt)
	if len(s.guide.InitialMemories) > 0 {
		b.WriteString("\n\nThings to remember:\n")
		for _, m := range s.guide.InitialMemories {
			b.WriteString("- ")
			b.WriteString(m)
			b.WriteString("\n")
		}
	}
	if final {
		b.WriteString("\n\nYou have used every tool call this turn allows. Do not call tools: summarise what was done and answer the user.")
	}
	return b.String()
}

// guideTools are the tools the guide offers now: its list, with an MCP
// server's "server.*" standing for the tools the server has at the moment.
func (s *session) guideTools() []string {
	return s.m.toolsOf(s.guide.Tools)
}

// toolsOf is a guide's list of tools with each "server.*" standing for
// the tools the server has at the moment.
func (m *Manager) toolsOf(list []string) []string {
	var names []string
	for _, name := range list {
		if group, ok := strings.CutSuffix(name, ".*"); ok {
			names = append(names, m.cfg.Tools.Group(group)...)
			continue
		}
		names = append(names, name)
	}
	return names
}

func (s *session) guideHasTool(name string) bool {
	if !guides.Covers(s.guide.Tools, name) {
		return false
	}
	_, ok := s.m.cfg.Tools.Lookup(name)
	return ok
}

// providerName is the name of the guide's provider.
func (s *session) providerName() string {
	return s.m.providers().nameFor(s.guide)
}

// configured is the guide's provider as configured now (a reload may
// have swapped it), without its fallback: its name, kind and model.
func (s *session) configured() (string, *providers.Resilient) {
	ps := s.m.providers()
	name := ps.nameFor(s.guide)
	return name, ps.byName[name]
}

// provider is the guide's provider, with its fallback when it names one.
func (s *session) provider() providers.Provider {
	return s.m.ProviderFor(*s.guide) // routing.go
}

func (s *session) setCancel(cancel context.CancelCauseFunc) {
	s.mu.Lock()
	s.cancelTurn = cancel
	s.mu.Unlock()
}

func preview(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// argsJSON renders tool arguments for a prompt.
func argsJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	return string(raw)
}
