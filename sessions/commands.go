package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/tools"
)

type command struct {
	name string
	args string
}

// parseCommand recognises "/name args". A lone "/" or a path-like "/ foo"
// is a message, not a command.
func parseCommand(text string) (command, bool) {
	text = strings.TrimSpace(text)
	if len(text) < 2 || text[0] != '/' || !isLetter(text[1]) {
		return command{}, false
	}
	name, args, _ := strings.Cut(text[1:], " ")
	return command{name: strings.ToLower(name), args: strings.TrimSpace(args)}, true
}

// readOnly are the commands a viewer may use: they change nothing in the
// conversation (leaving changes only where it is shown).
var readOnly = map[string]bool{"help": true, "who": true, "approvals": true, "pending": true, "tools": true, "usage": true, "leave": true, "files": true,
	"memory": true, "memories": true, "forget": true} // a person's own memories are theirs in any role

// commandOf is the command an input's text is, unless the input is
// Plain (a stateless API's message: text, never a command).
func commandOf(in switchboard.Input) (command, bool) {
	if in.Plain {
		return command{}, false
	}
	return parseCommand(in.Text)
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// Help lists the slash commands every channel understands.
const Help = `Commands:
  /help                     this list
  /guide [name]             show the guide, or switch to another
  /tools                    the guide's tools and their approval policy
  /pending                  the tool calls waiting for approval
  /approve [id] [always]    approve a waiting tool call (always: this tool, for the rest of the session)
  /deny [id]                deny a waiting tool call
  /revoke <tool>            ask again before <tool> runs (undoes "always")
  /share [role] [uses N] [expires 24h]
                            an invite code for others (viewer, member or approver)
  /unshare                  withdraw the open invite codes
  /who                      the people here, their role and channel
  /role <name> <role>       give someone another role (owner)
  /approvals                the last tool calls approved or denied, by whom
  /leave                    stop showing this conversation here
  /files                    the files in this conversation's sandbox
  /memory                   what I remember about you (to you alone)
  /forget <id>              delete one of your memories for good
  /usage                    tokens and cost of this session, and your budget
  /stop                     stop the running turn
  /reset                    start a new conversation
  /<tool> <json-args>       run a tool yourself, e.g. /calculator {"expression":"2+2"}`

// command runs a slash command. Answers go to the whole session as system
// messages: in a shared session everyone sees what was done.
func (s *session) command(ctx context.Context, j job, cmd command) {
	in := j.input
	switch cmd.name {
	case "help":
		s.systemMessage(ctx, Help)
	case "stop":
		s.stop(ctx, in.Author, j.stoppedRunning)
	case "usage":
		s.usage(ctx, in.Author)
	case "tools":
		s.systemMessage(ctx, s.describeTools())
	case "guide":
		s.switchGuide(ctx, in, cmd.args)
	case "reset":
		s.reset(ctx, j)
	case "pending":
		s.systemMessage(ctx, s.describePending())
	case "approve", "deny":
		s.answerCommand(ctx, in, cmd)
	case "revoke":
		s.revoke(ctx, in.Author, cmd.args)
	case "share":
		s.share(ctx, in.Author, cmd.args)
	case "unshare":
		s.unshare(ctx, in.Author)
	case "who":
		s.who(in.Author)
	case "role":
		s.setRole(ctx, in.Author, cmd.args)
	case "leave":
		j.receipt.left = s.leave(ctx, in)
	case "approvals":
		s.approvals(ctx, in.Author)
	case "files":
		s.files(in.Author)
	case "memory", "memories":
		s.listMemories(ctx, in.Author)
	case "forget":
		s.forgetMemory(ctx, in.Author, cmd.args)
	default:
		if _, ok := s.m.cfg.Tools.Lookup(cmd.name); ok {
			s.runToolDirectly(ctx, in.Author, cmd)
			return
		}
		s.tell(in.Author, switchboard.ErrCodeBadInput, fmt.Sprintf("Unknown command %s. Send /help for the list.", quoteID("/"+cmd.name)))
	}
}

// describePending lists the open approval requests with their ids.
func (s *session) describePending() string {
	if s.pending == nil || !s.pending.asking() {
		return "No tool call is waiting for approval."
	}
	var b strings.Builder
	b.WriteString("Waiting for approval:\n")
	now := s.m.cfg.Now()
	for _, c := range s.pending.Confirmations {
		if c.Resolved || c.Client {
			continue
		}
		call := s.pending.Assistant.ToolCalls[c.CallIndex]
		fmt.Fprintf(&b, "  %s  %s %s  (expires in %s)\n", c.ID, call.Name, argsJSON(call.Args), c.ExpiresAt.Sub(now).Round(time.Second))
	}
	b.WriteString("Answer with /approve [id] [always] or /deny [id]; without an id, the first one.")
	return b.String()
}

// answerCommand is /approve [id] [always] and /deny [id]: the typed form
// of the Approve / Deny buttons, for channels without them and for people
// who prefer typing. Without an id it answers the first open request.
func (s *session) answerCommand(ctx context.Context, in switchboard.Input, cmd command) {
	approve := cmd.name == "approve"
	var id, scope string
	for _, arg := range strings.Fields(cmd.args) {
		switch {
		case approve && strings.EqualFold(arg, "always"):
			scope = switchboard.ScopeSession
		case id == "":
			id = arg
		default:
			usage := "Usage: /deny [id]"
			if approve {
				usage = "Usage: /approve [id] [always]"
			}
			s.tell(in.Author, switchboard.ErrCodeBadInput, usage)
			return
		}
	}
	if id == "" {
		if s.pending == nil || !s.pending.asking() {
			s.tell(in.Author, switchboard.ErrCodeNotFound, "No tool call is waiting for approval.")
			return
		}
		for _, c := range s.pending.Confirmations {
			if !c.Resolved && !c.Client {
				id = c.ID
				break
			}
		}
	}
	s.confirm(ctx, switchboard.Input{
		Kind: switchboard.InputConfirm, Author: in.Author, ConfirmationID: id, Approved: approve, Scope: scope,
	})
}

// revoke undoes "Always allow" for a tool: it asks again from now on.
func (s *session) revoke(ctx context.Context, by switchboard.Author, tool string) {
	if tool == "" {
		s.tell(by, switchboard.ErrCodeBadInput, "Usage: /revoke <tool>. /tools shows which tools are allowed for this session.")
		return
	}
	if !s.role(by).CanApprove() {
		s.tell(by, switchboard.ErrCodeForbidden, "Only the session's owner or an approver may revoke a tool's approval.")
		return
	}
	if !s.allowedForSession(tool) {
		s.tell(by, switchboard.ErrCodeNotFound, fmt.Sprintf("The tool %s is not allowed for this session, so there is nothing to revoke. /tools shows the tools.", quoteID(tool)))
		return
	}
	// Not nil even when empty (the clone of a list holding tool): an empty
	// Allowed clears the stored list.
	allowed := slices.DeleteFunc(slices.Clone(s.rec.AllowedTools), func(t string) bool { return t == tool })
	evs := s.collect(func() {
		s.systemMessage(ctx, fmt.Sprintf("%s revoked the approval of %s: it asks again before running.", by.DisplayName(), tool))
	})
	if !s.write(ctx, switchboard.TurnWrite{Allowed: allowed, Events: evs, Published: s.onCommit}) {
		return
	}
	s.rec.AllowedTools = allowed
}

func (s *session) describeTools() string {
	if len(s.guide.Tools) == 0 {
		return fmt.Sprintf("The guide %q uses no tools.", s.guide.Name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Tools of the guide %q:\n", s.guide.Name)
	for _, name := range s.guideTools() {
		desc := ""
		if t, ok := s.m.cfg.Tools.Lookup(name); ok {
			desc = t.Description
		}
		policy := string(s.guide.Approval.For(name))
		if policy == string(guides.Ask) && s.allowedForSession(name) {
			policy = "allowed for this session"
		}
		fmt.Fprintf(&b, "  %-14s [%s] %s\n", name, policy, desc)
	}
	if len(s.rec.AllowedTools) > 0 {
		b.WriteString("/revoke <tool> asks again before a tool allowed for this session runs.\n")
	}
	if n := len(s.offerable()); n > s.toolsMax() {
		fmt.Fprintf(&b, "Each message is offered at most %d of these %d tools, chosen for it (tools_max); the assistant can look for the others.\n", s.toolsMax(), n)
	}
	return strings.TrimRight(b.String(), "\n")
}

// describeGuide is /guide: what the persona is and does.
func (s *session) describeGuide() string {
	g := s.guide
	var b strings.Builder
	fmt.Fprintf(&b, "Guide: %s", g.Name)
	if g.Description != "" {
		fmt.Fprintf(&b, " — %s", g.Description)
	}
	b.WriteString("\n")
	provider := s.m.providers().nameFor(g)
	if g.Model != "" {
		fmt.Fprintf(&b, "  model:   %s (provider %s)\n", g.Model, provider)
	} else {
		fmt.Fprintf(&b, "  model:   provider %s's\n", provider)
	}
	fmt.Fprintf(&b, "  memory:  the last %d messages\n", g.Memory.Window)
	if len(g.Tools) > 0 {
		fmt.Fprintf(&b, "  tools:   %s (/tools for their approval policy)\n", strings.Join(g.Tools, ", "))
	}
	if len(g.Handoffs) > 0 {
		fmt.Fprintf(&b, "  passes to: %s (when a question is theirs)\n", strings.Join(g.Handoffs, ", "))
	}
	fmt.Fprintf(&b, "Available guides: %s. /guide <name> switches (owner or approver).", strings.Join(s.m.cfg.Guides.Names(), ", "))
	return b.String()
}

func (s *session) switchGuide(ctx context.Context, in switchboard.Input, name string) {
	if name == "" {
		s.systemMessage(ctx, s.describeGuide())
		return
	}
	if !s.role(in.Author).CanApprove() {
		s.tell(in.Author, switchboard.ErrCodeForbidden, "Only the session's owner or an approver may switch the guide.")
		return
	}
	if s.pending != nil {
		s.tell(in.Author, switchboard.ErrCodeBusy, s.pending.busy()+" Then switch guides.")
		return
	}
	g, ok := s.m.cfg.Guides.Get(name)
	if !ok {
		s.tell(in.Author, switchboard.ErrCodeNotFound, fmt.Sprintf("No guide %s. Available: %s.", quoteID(name), strings.Join(s.m.cfg.Guides.Names(), ", ")))
		return
	}
	if err := s.m.cfg.Store.SetSessionGuide(ctx, s.id, g.Name); err != nil {
		s.log.Error("guide switch not stored", "err", err)
		s.tell(in.Author, switchboard.ErrCodeInternal, "The guide could not be switched; try again.")
		return
	}
	// A different memory: reloaded, the store has the whole history.
	s.useGuide(ctx, g)
	s.rec.Guide = g.Name
	s.systemMessage(ctx, fmt.Sprintf("Guide switched to %s: %s", g.Name, g.Description))
}

// reset starts a new session in this one's place: it takes over the key
// (the terminal, the Slack thread), the guide, and the members' roles
// restart with the one who reset as owner.
func (s *session) reset(ctx context.Context, j job) {
	in := j.input
	if !s.role(in.Author).CanApprove() {
		s.tell(in.Author, switchboard.ErrCodeForbidden, "Only the session's owner or an approver may reset the conversation.")
		return
	}
	if ephemeral(s.rec) {
		s.tell(in.Author, switchboard.ErrCodeBadInput, "A stateless request's conversation is not kept: there is nothing to reset.")
		return
	}
	if s.rec.Key != "" {
		if err := s.m.cfg.Store.ClearSessionKey(ctx, s.id); err != nil {
			s.log.Error("reset failed", "err", err)
			s.tell(in.Author, switchboard.ErrCodeInternal, "The conversation could not be reset; try again.")
			return
		}
	}
	next, err := s.m.create(ctx, s.rec.Key, s.guide.Name, in.Author)
	if err != nil {
		s.log.Error("reset failed", "err", err)
		s.tell(in.Author, switchboard.ErrCodeInternal, "The conversation could not be reset; try again.")
		return
	}
	s.rec.Key = ""
	j.receipt.NewSession = next.id
	s.systemMessage(ctx, fmt.Sprintf("%s started a new conversation: %s", in.Author.DisplayName(), next.id))
}

// runToolDirectly runs "/tool {json}": the user asked for it, so no
// approval is needed, but a tool the guide denies stays denied. The call
// and result are shown, not added to the model's context.
func (s *session) runToolDirectly(ctx context.Context, by switchboard.Author, cmd command) {
	name := cmd.name
	if !guides.Covers(s.guide.Tools, name) || s.guide.Approval.For(name) == guides.Deny {
		s.tell(by, switchboard.ErrCodeForbidden, fmt.Sprintf("The tool %s is not available in this conversation. Send /tools for the list.", quoteID(name)))
		return
	}
	args := json.RawMessage(cmd.args)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	call := switchboard.ToolCall{ID: newID("call_"), Name: name, Args: args}
	p := &pendingTurn{
		Assistant: switchboard.Message{Role: switchboard.RoleAssistant, ToolCalls: []switchboard.ToolCall{call}},
		Results:   make([]*switchboard.Message, 1),
		ranBy:     &by,
	}
	s.emit(ctx, switchboard.EventToolCall, switchboard.ToolCallData{ID: call.ID, Name: name, Args: args})
	if err := s.m.cfg.Tools.Validate(name, args); err != nil {
		s.setResult(ctx, p, 0, err.Error(), true)
		return
	}
	turnCtx, cancel := context.WithCancelCause(s.m.turns)
	s.setCancel(cancel)
	defer func() {
		s.setCancel(nil)
		cancel(nil)
	}()
	s.runTools(ctx, turnCtx, p, []int{0})
	s.emitState(ctx, switchboard.StateIdle, "")
}

// action turns a click or submit on a UI segment into the user's next
// message, in words the model understands.
func (s *session) action(ctx context.Context, in switchboard.Input) {
	uiID, _, _, err := tools.ParseActionID(in.ActionID)
	if err != nil {
		s.tell(in.Author, switchboard.ErrCodeBadInput, fmt.Sprintf("Unknown action %s.", quoteID(in.ActionID)))
		return
	}
	// A card a user could click was published, so it is stored.
	ui, err := s.m.cfg.Store.FindUI(ctx, s.id, uiID)
	if err != nil {
		s.tell(in.Author, switchboard.ErrCodeNotFound, fmt.Sprintf("The control %s is not part of this conversation.", quoteID(in.ActionID)))
		return
	}
	text, err := tools.DescribeAction(ui, in.ActionID, in.Value)
	if err != nil {
		s.tell(in.Author, switchboard.ErrCodeBadInput, err.Error())
		return
	}
	s.userTurn(ctx, job{input: in}, text)
}
