package sessions

// Handoffs: a guide that lists others in its front matter (handoffs:
// [billing]) gives its model a handoff tool, {"guide": "billing",
// "reason": "…"}. The call needs no approval. Accepted, it takes effect
// as the step that made it is stored: the session's guide is billing
// from then on, stored as /guide stores it, and the same turn goes on
// with billing's prompt, tools, approval and memory policy, so billing
// answers the person in this turn. An EventHandoff in the step's write
// tells every channel ("Passed to billing: …").
//
// A turn passes at most maxHandoffs times, and never back to a guide it
// has passed through (support → billing → support is refused: a circle
// would be a loop between two models); a refused call is a tool result
// saying why, and the turn goes on with the guide that made it.
//
// A handoff made in the same step as a call waiting for approval waits
// with the step: the approval is decided under the guide that asked for
// it (its policy chose to ask), and the handoff takes effect once the
// step is complete; the pending handoff is stored with the step, so a
// restart keeps it. What the session carries — the conversation, the
// tools an approver allowed for it (a guide's deny still wins), people's
// memories — carries over; the turn's tool rounds go on counting under
// the new guide's max_iterations.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/tools"
)

// handoffName is the built-in tool of a guide with handoffs. No
// registered tool has its name (built-ins are named here, an MCP
// server's are "server.tool").
const handoffName = tools.HandoffTool

// maxHandoffs is how often one turn may pass between guides.
const maxHandoffs = 3

// maxHandoffReason bounds the reason every channel is sent (each shows
// less: places.MaxHandoffReason).
const maxHandoffReason = 1000 // bytes

// handoffTo is an accepted handoff of a step, taking effect as the step
// is stored (pendingTurn.Handoff).
type handoffTo struct {
	Guide     string `json:"guide"`
	Reason    string `json:"reason"`
	CallIndex int    `json:"call_index"`
}

// handoffSpecs is the handoff tool for the next request, when the guide
// hands off to any guide the catalog has.
func (s *session) handoffSpecs() []providers.ToolSpec {
	var names []string
	var b strings.Builder
	b.WriteString("Pass this conversation to another assistant when the person's question is theirs rather than yours. " +
		"They answer from your next step on, in this same turn, with their own instructions and tools; you stop answering. " +
		"Tell the person nothing more yourself. The assistants you can pass to:\n")
	for _, name := range s.guide.Handoffs {
		g, ok := s.m.cfg.Guides.Get(name)
		if !ok {
			continue
		}
		names = append(names, name)
		fmt.Fprintf(&b, "- %s: %s\n", name, g.Description)
	}
	if len(names) == 0 {
		return nil
	}
	enum, _ := json.Marshal(names) // strings: cannot fail
	return []providers.ToolSpec{{
		Name:        handoffName,
		Description: strings.TrimRight(b.String(), "\n"),
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"guide":{"type":"string","enum":` + string(enum) + `,"description":"The assistant to pass the conversation to"},
			"reason":{"type":"string","description":"Why, in one short sentence the person is shown"}},
			"required":["guide","reason"],"additionalProperties":false}`),
	}}
}

// handoffCall answers the step's call i of the handoff tool: accepted, it
// is recorded on the step (p.Handoff) and takes effect as the step is
// stored (handOff); refused, its result tells the model why and the turn
// goes on with this guide.
func (s *session) handoffCall(ctx context.Context, p *pendingTurn, i int) {
	call := p.Assistant.ToolCalls[i]
	var in struct {
		Guide  string `json:"guide"`
		Reason string `json:"reason"`
	}
	refuse := func(why, msg string) {
		s.traceHandoff(ctx, &p.Turn, in.Guide, why)
		s.setResult(ctx, p, i, msg, true)
	}
	if err := json.Unmarshal(call.Args, &in); err != nil || in.Guide == "" {
		refuse("invalid", fmt.Sprintf(`%s takes {"guide": one of %s, "reason": "why"}`, handoffName, strings.Join(s.guide.Handoffs, ", ")))
		return
	}
	in.Reason = preview(strings.Join(strings.Fields(in.Reason), " "), maxHandoffReason)
	chain := p.Turn.guides(s.guide.Name)
	_, exists := s.m.cfg.Guides.Get(in.Guide)
	switch {
	case p.Handoff != nil:
		refuse("twice", fmt.Sprintf("Refused: this step already passes the conversation to %s; one handoff a step.", p.Handoff.Guide))
	case in.Guide == s.guide.Name:
		refuse("self", fmt.Sprintf("Refused: you are %s already; answer the person yourself.", in.Guide))
	case !slices.Contains(s.guide.Handoffs, in.Guide):
		refuse("not_listed", fmt.Sprintf("Refused: %q is not an assistant you can pass to; you can pass to %s.", in.Guide, strings.Join(s.guide.Handoffs, ", ")))
	case slices.Contains(chain, in.Guide):
		refuse("cycle", fmt.Sprintf("Refused: %s had this conversation earlier in this turn (%s → %s would go round in a circle). Answer the person yourself.",
			in.Guide, strings.Join(chain, " → "), in.Guide))
	case len(chain)-1 >= maxHandoffs:
		refuse("depth", fmt.Sprintf("Refused: this turn was passed on %d times already (%s), the most a turn allows. Answer the person yourself.",
			len(chain)-1, strings.Join(chain, " → ")))
	case !exists:
		refuse("missing", fmt.Sprintf("Refused: the assistant %s is not available now. Answer the person yourself.", in.Guide))
	default:
		p.Handoff = &handoffTo{Guide: in.Guide, Reason: in.Reason, CallIndex: i}
		s.setResult(ctx, p, i, fmt.Sprintf("Passed to %s. From your next step on %s answers this conversation, with its own instructions and tools.", in.Guide, in.Guide), false)
	}
}

// guides are the guides the turn has passed through, the one it began
// with first, as a turn running under current sees them.
func (t *turn) guides(current string) []string {
	if len(t.Guides) == 0 {
		return []string{current}
	}
	return t.Guides
}

// handOff makes the step's accepted handoff, if any, as the step is
// stored: it returns the guide passed to and the EventHandoff, which go
// in the step's write (TurnWrite.Guide, with its messages), so that a
// crash leaves either the step and the new guide stored or neither. The
// turn notes it passed (t.Guides, stored with its progress in the same
// write); once the write is made, passTo runs the new guide. A handoff
// that cannot be made now (the guide went in a reload while the step
// waited) turns its call's result into an error the model reads, and the
// turn goes on with this guide.
func (s *session) handOff(ctx context.Context, t *turn, p *pendingTurn) (*guides.Guide, *handoffTo, []switchboard.Event) {
	h := p.Handoff
	if h == nil {
		return nil, nil, nil
	}
	p.Handoff = nil
	g, ok := s.m.cfg.Guides.Get(h.Guide)
	if !ok {
		s.traceHandoff(ctx, t, h.Guide, "missing")
		if r := p.Results[h.CallIndex]; r != nil {
			r.Content, r.IsError = fmt.Sprintf("Refused: the assistant %s is not available now. Answer the person yourself.", h.Guide), true
		}
		return nil, nil, nil
	}
	from := s.guide.Name
	t.Guides = append(t.guides(from), g.Name)
	ev, ok := s.event(switchboard.EventHandoff, switchboard.HandoffData{From: from, To: g.Name, Reason: h.Reason})
	if !ok {
		return &g, h, nil
	}
	ev.Agent = g.Name // from this event on, the other guide speaks
	return &g, h, []switchboard.Event{ev}
}

// passTo runs the guide a stored handoff passed the conversation to:
// its prompt, tools and policies from the next model call on.
func (s *session) passTo(ctx context.Context, t *turn, g guides.Guide, h *handoffTo) {
	from := s.guide.Name
	s.useGuide(ctx, g)
	s.rec.Guide = g.Name
	s.log.Info("conversation handed off", "from", from, "to", g.Name, "handoffs_this_turn", len(t.Guides)-1)
	s.traceHandoffTo(ctx, t, from, h.Reason)
}

// traceHandoff records a handoff refused (why: cycle, depth, not_listed,
// self, twice, invalid, missing), never its reason's words.
func (s *session) traceHandoff(ctx context.Context, t *turn, to, why string) {
	if tr := s.m.cfg.Tracer; tr != nil {
		tr.Mark(t.under(ctx), Step{Kind: StepHandoff, Session: s.id, Turn: t.ID, Guide: s.guide.Name,
			From: s.guide.Name, To: to, Refused: why})
	}
}

// traceHandoffTo records a handoff made: the turn's guide is now the one
// it passed to. Its reason is content, recorded with capture_content.
func (s *session) traceHandoffTo(ctx context.Context, t *turn, from, reason string) {
	if tr := s.m.cfg.Tracer; tr != nil {
		tr.Mark(t.under(ctx), Step{Kind: StepHandoff, Session: s.id, Turn: t.ID, Guide: s.guide.Name,
			From: from, To: s.guide.Name, Reason: reason})
	}
}
