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
	Iteration int               `json:"iteration"`
	Usage     switchboard.Usage `json:"usage"`
	Model     string            `json:"model,omitempty"`
	// started is when the user's message arrived, for the turn-duration
	// metric; a turn resumed after an approval does not count the wait.
	started time.Time
	// usageStored is set once Usage is in the store with the answer.
	usageStored bool
}

// userTurn answers a user's message.
func (s *session) userTurn(ctx context.Context, in switchboard.Input, text string) {
	if s.pending != nil {
		s.emitError(ctx, switchboard.ErrCodeBusy, fmt.Sprintf(
			"A tool call is waiting for approval (%s). Approve or deny it first, or send /stop.", s.pending.waitingFor()))
		return
	}
	msg := switchboard.Message{Role: switchboard.RoleUser, Content: text}
	if s.memberCount() > 1 {
		msg.Author = in.Author.DisplayName() // several people: tell the model who spoke
	}
	dup, err := s.m.cfg.Store.AppendInput(ctx, s.id, in.ClientID, msg)
	if err != nil {
		s.log.Error("user message not stored", "err", err)
		s.emitError(ctx, switchboard.ErrCodeInternal, "Your message could not be saved, so it was not sent to the model. Please try again.")
		return
	}
	if dup {
		return // sent again after a reconnect: it was answered the first time
	}
	s.remember(msg)
	s.emit(ctx, switchboard.EventMessage, switchboard.MessageData{
		ID: newID("m_"), Role: switchboard.RoleUser, Author: in.Author.DisplayName(),
		AuthorID: in.Author.ID, Channel: in.Author.Channel, Content: text, Format: switchboard.FormatText,
	})
	s.agentLoop(ctx, &turn{started: s.m.cfg.Now()}, nil)
}

// agentLoop calls the model until it answers without tools. With resume
// set, it first finishes a turn that was waiting for approvals.
func (s *session) agentLoop(ctx context.Context, t *turn, resume *pendingTurn) {
	// turnCtx ends on /stop; ctx (the session's) keeps storing and
	// emitting, so a stopped turn still reports and stores cleanly.
	turnCtx, cancel := context.WithCancel(ctx)
	s.setCancel(cancel)
	defer func() {
		s.setCancel(nil)
		cancel()
	}()

	if resume != nil {
		s.runTools(ctx, turnCtx, resume, resume.approvedCalls())
		if err := s.finishStep(ctx, resume); err != nil {
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
		s.emitState(ctx, switchboard.StateThinking, "")
		reply, err := s.callModel(ctx, turnCtx, t, final)
		if err != nil {
			s.endTurn(ctx, t, err)
			return
		}
		if final || len(reply.ToolCalls) == 0 {
			reply.ToolCalls = nil // the last, tool-less call may still try
			if err := s.answer(ctx, t, reply); err != nil {
				s.endTurn(ctx, t, err)
				return
			}
			s.endTurn(ctx, t, nil)
			return
		}

		p := &pendingTurn{Turn: *t, Assistant: reply, Results: make([]*switchboard.Message, len(reply.ToolCalls))}
		auto := s.triage(ctx, p)
		s.runTools(ctx, turnCtx, p, auto)
		if len(p.Confirmations) > 0 && turnCtx.Err() == nil {
			s.suspend(ctx, p)
			return
		}
		p.cancelUnresolved(s.m.cfg.Now())
		if err := s.finishStep(ctx, p); err != nil {
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

// callModel streams one model response, emitting its text as it arrives
// (merged into fewer deltas when the session falls behind; see readAhead).
// Nothing is added to the context here: a stream that breaks half way
// leaves no half message behind.
func (s *session) callModel(ctx, turnCtx context.Context, t *turn, final bool) (switchboard.Message, error) {
	req := providers.Request{
		Model:       s.guide.Model,
		System:      s.systemPrompt(final),
		Messages:    s.window,
		Temperature: s.guide.Temperature,
		MaxTokens:   s.guide.MaxTokens,
	}
	if !final {
		req.Tools = s.toolSpecs()
	}
	id := newID("m_")
	var text strings.Builder
	var calls []switchboard.ToolCall
	for ev, err := range readAhead(turnCtx, s.provider(), req) {
		if err != nil {
			return switchboard.Message{}, err
		}
		switch ev.Kind {
		case providers.EventTextDelta:
			text.WriteString(ev.Text)
			s.emit(ctx, switchboard.EventDelta, switchboard.DeltaData{MessageID: id, Content: ev.Text})
		case providers.EventToolCall:
			calls = append(calls, ev.ToolCall)
		case providers.EventUsage:
			t.Usage = t.Usage.Add(ev.Usage)
		case providers.EventDone:
			if ev.Model != "" {
				t.Model = ev.Model
			}
		}
	}
	if t.Model == "" {
		t.Model = req.Model
	}
	reply := switchboard.Message{Role: switchboard.RoleAssistant, Content: text.String(), ToolCalls: calls}
	if reply.Content != "" {
		s.emit(ctx, switchboard.EventMessage, switchboard.MessageData{
			ID: id, Role: switchboard.RoleAssistant, Author: s.guide.Name,
			Content: reply.Content, Format: switchboard.FormatMarkdown, Model: t.Model,
		})
	}
	return reply, nil
}

// triage announces each tool call and sorts it: calls that cannot run get
// an error result the model will read and correct itself from; calls the
// guide allows run now; the rest need a human's approval. It returns the
// indexes of the calls to run now.
func (s *session) triage(ctx context.Context, p *pendingTurn) []int {
	var run []int
	for i, call := range p.Assistant.ToolCalls {
		s.emit(ctx, switchboard.EventToolCall, switchboard.ToolCallData{ID: call.ID, Name: call.Name, Args: call.Args})
		policy := s.guide.Approval.For(call.Name)
		switch {
		case !s.guideHasTool(call.Name):
			s.setResult(ctx, p, i, fmt.Sprintf("unknown tool %q; available tools: %s", call.Name, strings.Join(s.guide.Tools, ", ")), true)
		case policy == guides.Deny:
			s.setResult(ctx, p, i, fmt.Sprintf("the tool %q is not allowed in this conversation", call.Name), true)
		default:
			if err := s.m.cfg.Tools.Validate(call.Name, call.Args); err != nil {
				s.setResult(ctx, p, i, err.Error(), true)
			} else if policy == guides.Auto {
				run = append(run, i)
			} else {
				p.Confirmations = append(p.Confirmations, &confirmation{
					ID: newID("c_"), CallIndex: i, ExpiresAt: s.m.cfg.Now().Add(s.m.cfg.ApprovalTimeout).UTC(),
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
	var wg sync.WaitGroup
	for _, i := range idx {
		call := p.Assistant.ToolCalls[i]
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(turnCtx, s.m.cfg.ToolTimeout)
			defer cancel()
			res, err := s.m.cfg.Tools.Run(ctx, call.Name, call.Args)
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
				msg = fmt.Sprintf("timed out after %s", s.m.cfg.ToolTimeout)
			}
			s.setResult(ctx, p, d.i, msg, true)
			continue
		}
		if d.res.UI != nil {
			s.emit(ctx, switchboard.EventUI, d.res.UI)
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
// one transaction, and drops the suspended turn in the same one.
func (s *session) finishStep(ctx context.Context, p *pendingTurn) error {
	msgs := make([]switchboard.Message, 0, 1+len(p.Results))
	msgs = append(msgs, p.Assistant)
	for _, r := range p.Results {
		msgs = append(msgs, *r)
	}
	return s.commit(ctx, true, msgs...)
}

// endTurn reports how the turn ended, its token usage, and goes idle.
func (s *session) endTurn(ctx context.Context, t *turn, err error) {
	outcome := "answered"
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled):
		outcome = "stopped"
		s.emitError(ctx, switchboard.ErrCodeCancelled, "Stopped.")
	default:
		outcome = "error"
		s.log.Warn("turn failed", "err", err)
		s.emitError(ctx, switchboard.ErrCodeProvider, providerErrorMessage(err))
	}
	if !t.started.IsZero() {
		s.m.cfg.Metrics.TurnEnded(outcome, s.m.cfg.Now().Sub(t.started))
	}
	if t.Usage != (switchboard.Usage{}) {
		s.rec.Usage = s.rec.Usage.Add(t.Usage)
		// Tokens spent are spent even when the turn was stopped or the
		// gateway is shutting down, so the write outlives ctx.
		if !t.usageStored {
			if err := s.m.cfg.Store.AddSessionUsage(context.WithoutCancel(ctx), s.id, t.Usage); err != nil {
				s.log.Error("usage not stored", "err", err)
			}
		}
		s.emit(ctx, switchboard.EventUsage, switchboard.UsageData{Usage: t.Usage, Session: s.rec.Usage, Model: t.Model})
	}
	s.emitState(ctx, switchboard.StateIdle, "")
}

// providerErrorMessage says what went wrong in words a user can act on.
func providerErrorMessage(err error) string {
	var pe *providers.Error
	switch {
	case errors.Is(err, providers.ErrIdleTimeout):
		return "The model did not respond in time. Your message is saved; send another message to try again."
	case errors.As(err, &pe) && pe.Status == 429:
		return "The model provider is rate-limiting us and retries ran out. Your message is saved; try again in a minute."
	case errors.As(err, &pe) && pe.Retryable():
		return fmt.Sprintf("The model provider is failing (%v). Your message is saved; try again shortly.", err)
	case errors.As(err, &pe):
		return fmt.Sprintf("The model provider rejected the request: %v", err)
	}
	return fmt.Sprintf("The model call failed: %v", err)
}

// answer stores the model's final reply and the turn's tokens in one
// write, then adds the reply to the window. Like usage alone, the write
// outlives ctx: the tokens are spent.
func (s *session) answer(ctx context.Context, t *turn, reply switchboard.Message) error {
	if err := s.m.cfg.Store.AppendReply(context.WithoutCancel(ctx), s.id, reply, t.Usage); err != nil {
		return fmt.Errorf("sessions: store reply: %w", err)
	}
	t.usageStored = true
	if reply.Content != "" {
		s.remember(reply)
	}
	return nil
}

// commit appends messages to the stored context and to the in-memory
// window, in that order, so the window never holds what the store lost.
func (s *session) commit(ctx context.Context, clearPending bool, msgs ...switchboard.Message) error {
	if err := s.m.cfg.Store.AppendMessages(ctx, s.id, msgs, clearPending); err != nil {
		return fmt.Errorf("sessions: store messages: %w", err)
	}
	s.remember(msgs...)
	return nil
}

// remember adds stored messages to the in-memory window.
func (s *session) remember(msgs ...switchboard.Message) {
	s.window = trimWindow(append(s.window, msgs...), s.guide.Memory.Window)
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

func (s *session) toolSpecs() []providers.ToolSpec {
	var specs []providers.ToolSpec
	for _, name := range s.guide.Tools {
		if s.guide.Approval.For(name) == guides.Deny {
			continue // a tool the model may never use is not offered
		}
		t, ok := s.m.cfg.Tools.Lookup(name)
		if !ok {
			continue
		}
		specs = append(specs, providers.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	return specs
}

func (s *session) guideHasTool(name string) bool {
	for _, t := range s.guide.Tools {
		if t == name {
			_, ok := s.m.cfg.Tools.Lookup(name)
			return ok
		}
	}
	return false
}

// provider is the guide's provider, with its fallback when it names one.
func (s *session) provider() providers.Provider {
	name := s.guide.Provider
	if name == "" {
		name = s.m.cfg.DefaultProvider
	}
	p := s.m.cfg.Providers[name]
	if fb, ok := s.m.cfg.Providers[s.guide.Fallback]; ok && s.guide.Fallback != name {
		withFallback := *p
		withFallback.Fallback = fb
		return &withFallback
	}
	return p
}

func (s *session) setCancel(cancel context.CancelFunc) {
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
