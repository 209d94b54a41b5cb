package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// pendingTurn is an open turn as it is stored: from the user's message
// until the answer or an error is stored. While the turn runs it holds
// only its progress (phaseRunning); while tool calls wait for a human or
// for the caller (client tools, clienttools.go) it holds the whole step,
// so a restart loses nothing and the same requests can still be answered.
type pendingTurn struct {
	Phase     string                 `json:"phase,omitempty"`
	Turn      turn                   `json:"turn"`
	Assistant switchboard.Message    `json:"assistant"`
	Results   []*switchboard.Message `json:"results"` // by call index; nil until known
	// Confirmations are the calls the step waits on: those that needed
	// approval, and the calls of the caller's tools (Client).
	Confirmations []*confirmation `json:"confirmations"`
	// Stopped: the user stopped the turn; finish storing it, call no model.
	Stopped bool `json:"stopped,omitempty"`
	// Handoff is the step's accepted handoff, taking effect as the step
	// is stored (handoff.go).
	Handoff *handoffTo `json:"handoff,omitempty"`
	// ranBy is who ran the call by hand (/tool args); nil when the model
	// asked for it.
	ranBy *switchboard.Author
}

// phaseRunning: the turn was running, not waiting; a restart that finds it
// open knows a crash cut it short. A stored turn without a phase (written
// before phases existed) was waiting for approval.
const phaseRunning = "running"

// running is the stored state of a turn under way.
func running(t turn) []byte {
	b, _ := json.Marshal(pendingTurn{Phase: phaseRunning, Turn: t}) // plain data: cannot fail
	return b
}

type confirmation struct {
	ID        string    `json:"id"`
	CallIndex int       `json:"call_index"`
	AskedAt   time.Time `json:"asked_at,omitzero"` // for the approval's span (trace.go)
	ExpiresAt time.Time `json:"expires_at"`
	Resolved  bool      `json:"resolved,omitempty"`
	Approved  bool      `json:"approved,omitempty"`
	By        string    `json:"by,omitempty"`
	// Client: the call is of a tool the caller offered; it waits for its
	// result from the turn's author (InputToolResults), not for an
	// approval, and nobody approves it.
	Client bool `json:"client,omitempty"`
}

// find is the approval request id (never a client call's wait).
func (p *pendingTurn) find(id string) *confirmation {
	for _, c := range p.Confirmations {
		if c.ID == id && !c.Client {
			return c
		}
	}
	return nil
}

func (p *pendingTurn) allResolved() bool {
	for _, c := range p.Confirmations {
		if !c.Resolved {
			return false
		}
	}
	return true
}

// approvedCalls are the calls approved and not yet run.
func (p *pendingTurn) approvedCalls() []int {
	var idx []int
	for _, c := range p.Confirmations {
		if c.Approved && p.Results[c.CallIndex] == nil {
			idx = append(idx, c.CallIndex)
		}
	}
	return idx
}

// waitingFor names the tools still waiting for approval (client is
// false) or for the caller's results (client), for messages.
func (p *pendingTurn) waitingFor(client bool) string {
	var names []string
	for _, c := range p.Confirmations {
		if !c.Resolved && c.Client == client {
			names = append(names, p.Assistant.ToolCalls[c.CallIndex].Name)
		}
	}
	return strings.Join(names, ", ")
}

// asking reports whether an approval request is open.
func (p *pendingTurn) asking() bool { return p.waitingFor(false) != "" }

// busy is what someone who writes while the step waits is told.
func (p *pendingTurn) busy() string {
	if p.asking() {
		return fmt.Sprintf("A tool call is waiting for approval (%s). Answer it first (/approve or /deny; /pending shows it), or send /stop.", p.waitingFor(false))
	}
	return fmt.Sprintf("The assistant is waiting for %s to return the results of their tools (%s). Wait for them, or send /stop.",
		p.Turn.Author.DisplayName(), p.waitingFor(true))
}

// emitWaiting tells what the step waits on now: people's approvals
// first, then the caller's results, shown to the channels as the
// caller's tools running.
func (s *session) emitWaiting(ctx context.Context, p *pendingTurn) {
	switch {
	case p.asking():
		s.emitState(ctx, switchboard.StateAwaitingConfirmation, p.waitingFor(false))
	case !p.allResolved():
		s.emitState(ctx, switchboard.StateExecutingTool, p.waitingFor(true))
	}
}

// cancelUnresolved gives every call without a result an error result, so
// the assistant message can be stored whole when a turn is stopped.
func (p *pendingTurn) cancelUnresolved(now time.Time) {
	for i, r := range p.Results {
		if r == nil {
			call := p.Assistant.ToolCalls[i]
			p.Results[i] = &switchboard.Message{
				Role: switchboard.RoleTool, ToolCallID: call.ID, ToolName: call.Name, IsError: true,
				Content: "cancelled: the user stopped the turn before this call ran",
			}
		}
	}
}

// suspend stores the turn, with the requests for approval of each waiting
// call in the same write: a request a client was shown is always one the
// stored turn waits for.
//
// A step that waits on the caller (client tools) ends the caller's
// request: what the turn spent so far is reported (EventUsage, before
// EventToolsRequested) and charged in the same write, and the rest of the
// turn counts afresh, so each of the caller's requests gets its own usage
// and a stateless session deleted while it waits has paid its way.
func (s *session) suspend(ctx context.Context, p *pendingTurn) {
	var w switchboard.TurnWrite
	var total switchboard.Usage
	req, asked := p.requested()
	w.Events = s.collect(func() {
		for _, c := range p.Confirmations {
			if !c.Client {
				s.emit(ctx, switchboard.EventConfirmationRequest, s.request(p, c))
			}
		}
		if asked && p.Turn.Usage != (switchboard.Usage{}) {
			w.Usage, w.Charge, total = p.Turn.Usage, s.charge(&p.Turn), s.rec.Usage.Add(p.Turn.Usage)
			s.emit(ctx, switchboard.EventUsage, switchboard.UsageData{Usage: w.Usage, Session: total, Model: p.Turn.Model})
			p.Turn.Usage = switchboard.Usage{}
		}
		if asked {
			s.emit(ctx, switchboard.EventToolsRequested, req)
		}
		s.emitWaiting(ctx, p)
	})
	if !s.savePendingWrite(ctx, p, w) {
		// The stored turn is still the running one: repair runs it again,
		// and the model asks again.
		return
	}
	if w.Charge != nil {
		s.rec.Usage = total
		s.charged(w.Charge)
	}
	s.setPending(p)
	s.armTimers()
	s.traceAsked(ctx, p)
}

// request is how a confirmation is shown to listeners.
func (s *session) request(p *pendingTurn, c *confirmation) switchboard.ConfirmationRequestData {
	call := p.Assistant.ToolCalls[c.CallIndex]
	warning := ""
	if t, ok := s.m.cfg.Tools.Lookup(call.Name); ok {
		warning = t.SecurityWarning
	}
	return switchboard.ConfirmationRequestData{
		ConfirmationID: c.ID, ToolCallID: call.ID, ToolName: call.Name, Args: json.RawMessage(argsJSON(call.Args)),
		SecurityWarning: warning, ExpiresAt: c.ExpiresAt,
	}
}

// setPending makes p the turn waiting for approval or results (nil:
// none), and keeps the list of its open requests that attaching listeners
// are given, and the calls it awaits from the caller, which Submit checks
// results against.
func (s *session) setPending(p *pendingTurn) {
	s.pending = p
	open := s.openOf(p)
	aw := awaitedBy(p)
	s.mu.Lock()
	s.open, s.awaiting = open, aw
	s.mu.Unlock()
}

// openOf lists the requests of turn p that are not answered yet.
func (s *session) openOf(p *pendingTurn) []switchboard.ConfirmationRequestData {
	var open []switchboard.ConfirmationRequestData
	if p != nil {
		for _, c := range p.Confirmations {
			if !c.Resolved && !c.Client {
				open = append(open, s.request(p, c))
			}
		}
	}
	return open
}

// openRequests are the approval requests open now.
func (s *session) openRequests() []switchboard.ConfirmationRequestData {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.open)
}

// confirm handles an answer to a confirmation request.
func (s *session) confirm(ctx context.Context, in switchboard.Input) {
	var c *confirmation
	if s.pending != nil {
		c = s.pending.find(in.ConfirmationID)
	}
	if c == nil || c.Resolved {
		s.tell(in.Author, switchboard.ErrCodeAlreadyResolved, fmt.Sprintf(
			"The approval request %s is not open: it was already answered, has expired, or does not exist.", quoteID(in.ConfirmationID)))
		return
	}
	if role := s.role(in.Author); !role.CanApprove() {
		s.tell(in.Author, switchboard.ErrCodeForbidden, fmt.Sprintf(
			"%s may not approve tools in this session (role: %s). The session's owner or an approver must answer.", in.Author.DisplayName(), role))
		return
	}
	switch in.Scope {
	case "":
	case switchboard.ScopeSession:
		if !in.Approved {
			s.tell(in.Author, switchboard.ErrCodeBadInput, "Only an approval can be for the rest of the session; a denial is for this call.")
			return
		}
	default:
		s.tell(in.Author, switchboard.ErrCodeBadInput, fmt.Sprintf("Unknown approval scope %s: leave it out (this call) or send \"session\" (the rest of the session).", quoteID(in.Scope)))
		return
	}
	s.resolve(ctx, c, in.Approved, in.Author, in.Scope, "")
}

// expire treats an unanswered request whose time ran out as denied.
func (s *session) expire(ctx context.Context, id string) {
	if s.pending == nil {
		return
	}
	if c := s.pending.find(id); c != nil && !c.Resolved {
		// By stays "expired" for clients that read only by.
		s.resolve(ctx, c, false, switchboard.Author{Name: switchboard.ReasonExpired}, "", switchboard.ReasonExpired)
		return
	}
	s.expireResults(ctx, id)
}

// resolve records an answer; once every request of the turn is answered,
// the turn goes on. An approval for the session (scope) allows the tool
// from now on, and answers the turn's other open requests for it too: the
// allowance is stored in the same write as the answers. why is the
// event's Reason: empty for a person's answer.
func (s *session) resolve(ctx context.Context, c *confirmation, approved bool, who switchboard.Author, scope, why string) {
	by := who.DisplayName()
	p := s.pending
	answered := []*confirmation{c}
	var allowed []string
	if scope == switchboard.ScopeSession {
		tool := p.Assistant.ToolCalls[c.CallIndex].Name
		for _, o := range p.Confirmations {
			if o != c && !o.Resolved && !o.Client && p.Assistant.ToolCalls[o.CallIndex].Name == tool {
				answered = append(answered, o)
			}
		}
		allowed = slices.Clone(s.rec.AllowedTools)
		if !slices.Contains(allowed, tool) {
			allowed = append(allowed, tool)
		}
	}
	evs := s.collect(func() {
		for _, c := range answered {
			c.Resolved, c.Approved, c.By = true, approved, by
			s.emit(ctx, switchboard.EventConfirmationResolved, switchboard.ConfirmationResolvedData{
				ConfirmationID: c.ID, Approved: approved, By: by, Channel: who.Channel, Scope: scope, Reason: why,
			})
		}
		if !approved {
			reason := "the user denied this tool call"
			switch why {
			case switchboard.ReasonExpired:
				reason = "nobody approved this tool call in time, so it did not run"
			case switchboard.ReasonCancelled:
				reason = "cancelled: the user stopped the turn"
			}
			s.setResult(ctx, p, c.CallIndex, reason, true)
		}
		s.emitWaiting(ctx, p)
	})
	// Every answer is stored, with its event, before the turn goes on: a
	// crash after the last one runs the approved calls instead of asking
	// again, and an answer a client saw is never forgotten.
	if !s.savePending(ctx, p, evs, allowed) {
		return
	}
	for _, c := range answered {
		s.traceDecided(ctx, p, c, who, why) // stored: decided
	}
	if allowed != nil {
		s.rec.AllowedTools = allowed
	}
	s.setPending(p)
	if p.allResolved() {
		s.resumePending(ctx)
	}
}

// resumePending continues a turn whose requests are all answered.
func (s *session) resumePending(ctx context.Context) {
	p := s.pending
	if p == nil {
		return
	}
	s.stopTimers()
	s.setPending(nil)
	s.traceTurn(ctx, &p.Turn, "approval", "") // its tools run under it too
	t := p.Turn
	t.started = s.m.cfg.Now()
	s.agentLoop(ctx, &t, p)
}

// stop ends whatever the session is doing for the user: a running turn was
// already cancelled when the input was submitted; a turn waiting for
// approval is finished with its open requests refused.
func (s *session) stop(ctx context.Context, by switchboard.Author, stoppedRunning bool) {
	if s.pending == nil {
		if !stoppedRunning {
			s.tell(by, switchboard.ErrCodeBadInput, "Nothing to stop.")
		}
		return
	}
	p := s.pending
	switch {
	case s.role(by).CanApprove():
	case p.asking():
		// Stopping here would deny the waiting calls: an approver's call.
		s.tell(by, switchboard.ErrCodeForbidden, fmt.Sprintf(
			"A tool call is waiting for approval (%s); only the session's owner or an approver can deny it or stop the turn.", p.waitingFor(false)))
		return
	case by.Key() != p.Turn.Author.Key():
		// Only the caller's results are awaited: the caller may give up.
		s.tell(by, switchboard.ErrCodeForbidden, fmt.Sprintf(
			"The assistant is waiting for %s's tools (%s); only they, the session's owner or an approver can stop the turn.", p.Turn.Author.DisplayName(), p.waitingFor(true)))
		return
	}
	p.Stopped = true
	var cancelled []*confirmation
	evs := s.collect(func() {
		for _, c := range p.Confirmations {
			if !c.Resolved {
				c.Resolved, c.By = true, switchboard.ReasonCancelled
				if !c.Client {
					cancelled = append(cancelled, c)
					s.emit(ctx, switchboard.EventConfirmationResolved, switchboard.ConfirmationResolvedData{
						ConfirmationID: c.ID, Approved: false, By: by.DisplayName(), Reason: switchboard.ReasonCancelled,
					})
				}
				s.setResult(ctx, p, c.CallIndex, "cancelled: the user stopped the turn", true)
			}
		}
	})
	if !s.savePending(ctx, p, evs, nil) {
		return
	}
	for _, c := range cancelled {
		s.traceDecided(ctx, p, c, by, switchboard.ReasonCancelled)
	}
	s.resumePending(ctx)
}

// savePending stores the waiting turn as it is now, with the events that
// announce the change (see collect).
func (s *session) savePending(ctx context.Context, p *pendingTurn, evs []switchboard.Event, allowed []string) bool {
	return s.savePendingWrite(ctx, p, switchboard.TurnWrite{Events: evs, Allowed: allowed})
}

// savePendingWrite is savePending with what else w stores.
func (s *session) savePendingWrite(ctx context.Context, p *pendingTurn, w switchboard.TurnWrite) bool {
	// A stateless session opened awaiting its caller's results
	// (ephemeral.go) is stored with its first write.
	if err := s.persist(ctx); err != nil {
		s.writeFailed(fmt.Errorf("store the session: %w", err))
		return false
	}
	p.Phase = ""
	data, err := json.Marshal(p)
	if err != nil {
		s.writeFailed(fmt.Errorf("encode the waiting turn: %w", err))
		return false
	}
	w.Turn = data
	if len(w.Events) > 0 {
		w.Published = s.onCommit
	}
	return s.write(ctx, w)
}

// armTimers schedules the expiry of every open request; a request already
// past its time (after a long restart) expires at once.
func (s *session) armTimers() {
	s.stopTimers()
	s.timers = map[string]*time.Timer{}
	now := s.m.cfg.Now()
	for _, c := range s.pending.Confirmations {
		if c.Resolved {
			continue
		}
		id := c.ID
		s.timers[id] = time.AfterFunc(max(c.ExpiresAt.Sub(now), 0), func() { s.schedule(job{expire: id}) })
	}
}

func (s *session) stopTimers() {
	for _, t := range s.timers {
		t.Stop()
	}
	s.timers = nil
}

// allowedForSession reports whether an approver allowed the tool for the
// rest of the session ("Always allow").
func (s *session) allowedForSession(tool string) bool {
	return slices.Contains(s.rec.AllowedTools, tool)
}
