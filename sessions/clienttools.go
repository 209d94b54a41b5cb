package sessions

// Client tools: the tools the caller of a turn offers and runs itself (an
// OpenAI client's "tools", the official function-calling loop).
//
// A message may carry them (Input.ClientTools); the turn keeps them, in
// its stored state, for all its steps, and each of its requests offers
// them after the guide's. When the model calls one, the gateway cannot
// run it: the step is suspended as for an approval (the same pendingTurn,
// stored with the step, its expiry armed, taken up again after a
// restart), with a confirmation marked Client for each such call. The
// guide's own calls of the same reply are handled as usual (auto: run;
// ask: an approval request). EventToolsRequested tells the caller which
// calls to run; other channels see their tool_call events and the state
// executing_tool. The turn's author returns the results together
// (InputToolResults); once they and every approval are in, the step is
// stored whole and the loop goes on. Results not back in time are errors
// the model reads ("the caller did not return this tool's result in
// time").

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// maxClientTools bounds the tools one input offers (OpenAI's own bound).
const maxClientTools = 128

// clientToolName is the providers' rule for a function's name.
var clientToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkClientTools refuses, with the sentence for the caller, tools that
// no provider would take or that the guide's tools would shadow: a name
// the providers refuse, one offered twice, one of the guide's tools (ours
// lists every name the guide may offer, find_tools included), parameters
// that are not a JSON object.
func checkClientTools(offered []switchboard.ClientTool, ours []string) error {
	if len(offered) > maxClientTools {
		return refuse(ErrBadInput, "%d tools were offered; at most %d are taken", len(offered), maxClientTools)
	}
	seen := make(map[string]bool, len(offered))
	for _, t := range offered {
		switch {
		case !clientToolName.MatchString(t.Name):
			return refuse(ErrBadInput, "the tool name %s is not valid: a name is 1 to 64 letters, digits, _ or -", quoteID(t.Name))
		case seen[t.Name]:
			return refuse(ErrBadInput, "the tool %s is offered twice", quoteID(t.Name))
		case t.Name == findToolsName || slices.Contains(ours, t.Name):
			return refuse(ErrBadInput, "the tool %s has the name of one of the guide's own tools: give it another name", quoteID(t.Name))
		}
		seen[t.Name] = true
		if len(t.Parameters) > 0 {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(t.Parameters, &obj); err != nil || obj == nil {
				return refuse(ErrBadInput, "the parameters of the tool %s are not a JSON object (a JSON Schema of type object)", quoteID(t.Name))
			}
		}
	}
	return nil
}

// checkOffered checks the client tools an input offers against the
// session's guide, as Submit takes the input.
func (s *session) checkOffered(in switchboard.Input) error {
	if len(in.ClientTools) == 0 {
		return nil
	}
	g := s.guideSnapshot()
	if err := checkClientTools(in.ClientTools, s.m.toolsOf(g.Tools)); err != nil {
		return fmt.Errorf("sessions: submit: %w", err)
	}
	return nil
}

// offers reports whether the turn's caller offered a tool of that name.
func (t *turn) offers(name string) bool {
	return slices.ContainsFunc(t.ClientTools, func(c switchboard.ClientTool) bool { return c.Name == name })
}

// waitFor is how long turn t waits on people or its caller.
func (s *session) waitFor(t *turn) time.Duration {
	if t.Wait > 0 {
		return t.Wait
	}
	return s.m.limits().ApprovalTimeout
}

// noParameters is the schema of a tool offered without one.
var noParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// clientSpecs are the turn's client tools as a request offers them, after
// the guide's (taken): a name the guide took meanwhile (a reload) is the
// guide's.
func (s *session) clientSpecs(t *turn, taken []providers.ToolSpec) []providers.ToolSpec {
	var specs []providers.ToolSpec
	for _, c := range t.ClientTools {
		if slices.ContainsFunc(taken, func(sp providers.ToolSpec) bool { return sp.Name == c.Name }) {
			continue
		}
		params := c.Parameters
		if len(params) == 0 {
			params = noParameters
		}
		specs = append(specs, providers.ToolSpec{Name: c.Name, Description: c.Description, Parameters: params})
	}
	return specs
}

// requested is what the caller is asked for: the calls of its tools the
// step waits on; false when there are none.
func (p *pendingTurn) requested() (switchboard.ToolsRequestedData, bool) {
	d := switchboard.ToolsRequestedData{For: p.Turn.Author.Key()}
	for _, c := range p.Confirmations {
		if c.Client && !c.Resolved {
			d.Calls = append(d.Calls, p.Assistant.ToolCalls[c.CallIndex])
			d.ExpiresAt = c.ExpiresAt
		}
	}
	return d, len(d.Calls) > 0
}

// awaiting is what a session waits for from its caller, kept under the
// session's mu (setPending) for Submit to check results against.
type awaiting struct {
	author switchboard.Author // the turn's
	calls  []string           // call ids
}

// awaitedBy is what turn p awaits from its caller.
func awaitedBy(p *pendingTurn) awaiting {
	if p == nil {
		return awaiting{}
	}
	aw := awaiting{author: p.Turn.Author}
	for _, c := range p.Confirmations {
		if c.Client && !c.Resolved {
			aw.calls = append(aw.calls, p.Assistant.ToolCalls[c.CallIndex].ID)
		}
	}
	return aw
}

// check refuses results the session does not wait for: from anyone but
// the turn's author, for calls not awaited, twice for one call, or short
// of one (every awaited result comes in one input).
func (aw awaiting) check(in switchboard.Input) error {
	if len(aw.calls) == 0 {
		return refuse(ErrBadInput, "the assistant is not waiting for tool results here: it asked for none, or they came back already, their time ran out, or the turn was stopped")
	}
	if in.Author.Key() != aw.author.Key() {
		return refuse(ErrForbidden, "only %s, whose message the assistant is answering, may return the results of their tools", aw.author.DisplayName())
	}
	seen := make(map[string]bool, len(in.ToolResults))
	for _, r := range in.ToolResults {
		switch {
		case !slices.Contains(aw.calls, r.CallID):
			return refuse(ErrBadInput, "the assistant is not waiting for the result of a call %s: it waits for %s", quoteID(r.CallID), quoteIDs(aw.calls))
		case seen[r.CallID]:
			return refuse(ErrBadInput, "the result of the call %s came twice", quoteID(r.CallID))
		}
		seen[r.CallID] = true
	}
	for _, id := range aw.calls {
		if !seen[id] {
			return refuse(ErrBadInput, "the result of the call %s is missing: send the results of every call the assistant waits for (%s) together", quoteID(id), quoteIDs(aw.calls))
		}
	}
	return nil
}

func quoteIDs(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = quoteID(id)
	}
	return strings.Join(q, ", ")
}

// toolResults takes the caller's results of its tools: checked again here
// (the wait may have ended since Submit checked), stored with their
// events, and the turn goes on once nothing else is awaited.
func (s *session) toolResults(ctx context.Context, in switchboard.Input) {
	p := s.pending
	if err := awaitedBy(p).check(in); err != nil {
		code := switchboard.ErrCodeBadInput
		if errors.Is(err, ErrForbidden) {
			code = switchboard.ErrCodeForbidden
		}
		s.tell(in.Author, code, Reason(err, "Those tool results were not taken")+".")
		return
	}
	if in.ClientTools != nil {
		p.Turn.ClientTools = in.ClientTools
	}
	if in.WaitTimeout > 0 {
		p.Turn.Wait = in.WaitTimeout
	}
	results := make(map[string]switchboard.ToolResult, len(in.ToolResults))
	for _, r := range in.ToolResults {
		results[r.CallID] = r
	}
	s.settle(ctx, p, in.Author.DisplayName(), func(c *confirmation, call switchboard.ToolCall) (switchboard.ToolResult, bool) {
		r, ok := results[call.ID]
		return r, ok
	})
}

// expireResults gives up on the caller's results, once their time ran
// out: every call of its tools awaited until then gets an error result
// the model reads.
func (s *session) expireResults(ctx context.Context, id string) {
	p := s.pending
	i := slices.IndexFunc(p.Confirmations, func(c *confirmation) bool { return c.ID == id && c.Client && !c.Resolved })
	if i < 0 {
		return
	}
	until := p.Confirmations[i].ExpiresAt
	s.settle(ctx, p, switchboard.ReasonExpired, func(c *confirmation, call switchboard.ToolCall) (switchboard.ToolResult, bool) {
		return switchboard.ToolResult{CallID: call.ID, Content: "the caller did not return this tool's result in time", IsError: true},
			c.ID == id || !c.ExpiresAt.After(until)
	})
}

// settle records the results of the caller's calls that result gives,
// stores them with their events, and goes on with the turn once nothing
// else is awaited.
func (s *session) settle(ctx context.Context, p *pendingTurn, by string, result func(*confirmation, switchboard.ToolCall) (switchboard.ToolResult, bool)) {
	evs := s.collect(func() {
		for _, c := range p.Confirmations {
			if !c.Client || c.Resolved {
				continue
			}
			r, ok := result(c, p.Assistant.ToolCalls[c.CallIndex])
			if !ok {
				continue
			}
			c.Resolved, c.By = true, by
			s.setResult(ctx, p, c.CallIndex, r.Content, r.IsError)
		}
		s.emitWaiting(ctx, p)
	})
	if !s.savePending(ctx, p, evs, nil) {
		return
	}
	s.setPending(p)
	if p.allResolved() {
		s.resumePending(ctx)
	}
}

// openStep splits a stateless caller's history that ends with the
// assistant's calls of the caller's tools (and maybe some of their
// results): the messages before that step, and the step, waiting for the
// results still missing from who. A history whose last calls all have
// their results is history: step is nil.
func (m *Manager) openStep(history []switchboard.Message, who switchboard.Author) (before []switchboard.Message, step *pendingTurn) {
	i := len(history) - 1
	for i >= 0 && history[i].Role == switchboard.RoleTool {
		i--
	}
	if i < 0 || history[i].Role != switchboard.RoleAssistant || len(history[i].ToolCalls) == 0 {
		return history, nil
	}
	p := &pendingTurn{Turn: turn{Author: who}, Assistant: history[i], Results: make([]*switchboard.Message, len(history[i].ToolCalls))}
	for _, r := range history[i+1:] {
		if k := slices.IndexFunc(p.Assistant.ToolCalls, func(c switchboard.ToolCall) bool { return c.ID == r.ToolCallID }); k >= 0 && p.Results[k] == nil {
			res := r
			res.ToolName = p.Assistant.ToolCalls[k].Name
			p.Results[k] = &res
		}
	}
	now := m.cfg.Now().UTC()
	for k, r := range p.Results {
		if r == nil {
			p.Confirmations = append(p.Confirmations, &confirmation{
				ID: newID("c_"), CallIndex: k, AskedAt: now, ExpiresAt: now.Add(m.limits().ApprovalTimeout), Client: true,
			})
		}
	}
	if len(p.Confirmations) == 0 {
		return history, nil
	}
	return history[:i], p
}
