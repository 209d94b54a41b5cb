package switchboard

import (
	"encoding/json"
	"fmt"
	"time"
)

// EventType names an event of protocol v1 (CONTRACT §4).
type EventType string

const (
	EventReady                EventType = "ready"
	EventMessage              EventType = "message"
	EventDelta                EventType = "delta"
	EventToolCall             EventType = "tool_call"
	EventToolResponse         EventType = "tool_response"
	EventConfirmationRequest  EventType = "confirmation_request"
	EventConfirmationResolved EventType = "confirmation_resolved"
	EventUI                   EventType = "ui"
	EventState                EventType = "state"
	EventUsage                EventType = "usage"
	EventError                EventType = "error"
	// EventMembers tells who is in a session and who is here now. Like a
	// notice it has no seq and is not stored: it is the present, sent on
	// every change (someone attaches, leaves, joins, changes role).
	EventMembers EventType = "members"
	// EventCompaction: the older part of the conversation was summarised
	// for the model's context (the guide's memory policy "compact"). The
	// history keeps every message; clients may show a dim line.
	EventCompaction EventType = "compaction"
	// EventToolsRequested: the model called tools the turn's caller
	// offered (Input.ClientTools); the turn waits for their results from
	// For (InputToolResults) until ExpiresAt. Other channels see the
	// calls' tool_call events and the state executing_tool.
	EventToolsRequested EventType = "tools_requested"
	// EventHandoff: the conversation passed from one guide to another (a
	// guide's handoff tool, issue 30): from then on the other guide's
	// prompt, tools and policies apply. Every channel shows it ("Passed
	// to billing: …").
	EventHandoff EventType = "handoff"
	// EventPlan: the model's plan for the work under way, as it now
	// stands (the built-in plan tool); each one replaces the last.
	// Channels show it natively: a checklist, a Slack plan, a Discord
	// container.
	EventPlan EventType = "plan"
	// EventGuardrail: a rule of the guide's guardrails applied to a
	// person's message or to an answer: which rule, what it did, how
	// often; never what it matched.
	EventGuardrail EventType = "guardrail"
)

// Event is the envelope every listener consumes. Seq is per session, starts
// at 1 and is assigned by the session as the event is produced; the store
// keeps it, so it survives restarts. Data is the JSON of one of the *Data
// types below, encoded once so that fan-out to many subscribers is free.
type Event struct {
	Seq     int64           `json:"seq"`
	Time    time.Time       `json:"time"`
	Session string          `json:"session"`
	Agent   string          `json:"agent"`
	Type    EventType       `json:"type"`
	Data    json.RawMessage `json:"data"`
}

// Numbered fails for an event that a store cannot take: one without a
// session or a seq (seqs start at 1). Stores check it as events are
// queued, where the caller can still act on it.
func (e Event) Numbered() error {
	if e.Session == "" || e.Seq <= 0 {
		return fmt.Errorf("event %q/%d needs a session and a seq > 0", e.Session, e.Seq)
	}
	return nil
}

// Ephemeral reports whether the event is sent live but not stored or
// numbered: a ready event is per connection. (A notice, such as a storage
// failure, is an error event with seq 0: it is not part of the history.)
func (t EventType) Ephemeral() bool { return t == EventReady }

// Payload decodes Data into the typed struct for the event's type.
func (e Event) Payload() (any, error) {
	var v any
	switch e.Type {
	case EventReady:
		v = &ReadyData{}
	case EventMessage:
		v = &MessageData{}
	case EventDelta:
		v = &DeltaData{}
	case EventToolCall:
		v = &ToolCallData{}
	case EventToolResponse:
		v = &ToolResponseData{}
	case EventConfirmationRequest:
		v = &ConfirmationRequestData{}
	case EventConfirmationResolved:
		v = &ConfirmationResolvedData{}
	case EventUI:
		v = &UI{}
	case EventState:
		v = &StateData{}
	case EventUsage:
		v = &UsageData{}
	case EventError:
		v = &ErrorData{}
	case EventMembers:
		v = &MembersData{}
	case EventCompaction:
		v = &CompactionData{}
	case EventToolsRequested:
		v = &ToolsRequestedData{}
	case EventHandoff:
		v = &HandoffData{}
	case EventPlan:
		v = &PlanData{}
	case EventGuardrail:
		v = &GuardrailData{}
	default:
		return nil, fmt.Errorf("event %d: unknown type %q", e.Seq, e.Type)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return nil, fmt.Errorf("event %d (%s): %w", e.Seq, e.Type, err)
	}
	return v, nil
}

// CompactionData is EventCompaction: how many messages the summary now
// covers beyond the last one, and the summary the model is given.
type CompactionData struct {
	Messages int    `json:"messages"`
	Summary  string `json:"summary"`
}

// ToolsRequestedData is EventToolsRequested: the calls of the caller's
// tools a turn waits for, who is to return their results (For, an
// Author.Key(): the author of the turn's message), and until when.
type ToolsRequestedData struct {
	For       string     `json:"for"`
	Calls     []ToolCall `json:"calls"`
	ExpiresAt time.Time  `json:"expires_at"`
}

// HandoffData is EventHandoff: the guide the conversation passed from,
// the one it passed to, and the reason the model gave.
type HandoffData struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
}

// PlanData is EventPlan: the plan's steps, in order, as they now stand.
type PlanData struct {
	Steps []PlanStep `json:"steps"`
}

// PlanStep is one step of a plan.
type PlanStep struct {
	Title  string `json:"title"`
	Status string `json:"status"` // PlanPending, PlanInProgress, PlanDone, PlanFailed
}

// A plan step's status.
const (
	PlanPending    = "pending"
	PlanInProgress = "in_progress"
	PlanDone       = "done"
	PlanFailed     = "failed"
)

// GuardrailData is EventGuardrail: a guardrail's decision. Side is
// "input" (a person's message, before the model saw it) or "output" (an
// answer, before people saw it); Action "block" or "mask"; For, on the
// input side, is whose message it was (Author.Key()).
type GuardrailData struct {
	Side   string `json:"side"`
	Rule   string `json:"rule"`
	Action string `json:"action"`
	Count  int    `json:"count"`
	For    string `json:"for,omitempty"`
}

// ReadyData answers a listener attaching to a session.
type ReadyData struct {
	Session string `json:"session"`
	Guide   string `json:"guide"`
	Role    string `json:"role"`
	LastSeq int64  `json:"last_seq"`
	// User is who the listener attached as, so a client can tell its own
	// messages (author_id) from others'.
	User *ReadyUser `json:"user,omitempty"`
	// Pending are the approval requests open as the listener attaches, so
	// one that attaches without replay (a terminal after a restart, a
	// channel joining late) can still show and answer them.
	Pending []ConfirmationRequestData `json:"pending,omitempty"`
	// Members are the people in the session as the listener attaches;
	// EventMembers brings the changes.
	Members []MemberData `json:"members,omitempty"`
	// Greeting and Suggestions are the guide's welcome and its suggested
	// first prompts, for channels that show an empty conversation.
	Greeting    string   `json:"greeting,omitempty"`
	Suggestions []string `json:"suggestions,omitempty"`
}

// ReadyUser identifies the attached user.
type ReadyUser struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Message formats.
const (
	FormatMarkdown = "markdown"
	FormatText     = "text"
)

// MessageData is a whole message: a user's input as the session accepted it,
// or the assistant's final text once its stream has ended. Listeners that
// cannot edit what they posted (a terminal) print deltas and skip the final
// assistant message; those that can (Slack, Discord) edit it into place.
type MessageData struct {
	ID       string      `json:"id"`
	Role     MessageRole `json:"role"`
	Author   string      `json:"author"`
	AuthorID string      `json:"author_id,omitempty"`
	Channel  string      `json:"channel,omitempty"`
	// Place is Input.Place: where a person's message was written.
	Place string `json:"place,omitempty"`
	// ClientID is the Input.ClientID a person's message was sent with:
	// the sender's own id for it, by which a client that shares the
	// session with others recognises its message and the turn that
	// answers it. Everyone in the session sees it; it lets no one else
	// stand in for the sender (an id is de-duplicated per author).
	ClientID string `json:"client_id,omitempty"`
	Content  string `json:"content"`
	Format   string `json:"format"`
	// Model names the model that wrote an assistant message; the offline
	// demo model is labelled as such here.
	Model string `json:"model,omitempty"`
	// Files are what a person shared with their message: every place of
	// the conversation shows that they did, in its own way.
	Files []File `json:"files,omitempty"`
}

// DeltaData is a piece of streamed assistant text; MessageID ties the pieces
// to the MessageData that closes them.
type DeltaData struct {
	MessageID string `json:"message_id"`
	Content   string `json:"content"`
}

// ToolCallData announces a tool call the model made.
type ToolCallData struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// ToolResponseData reports a tool's result.
type ToolResponseData struct {
	ToolCallID     string `json:"tool_call_id"`
	Name           string `json:"name"`
	ContentPreview string `json:"content_preview"`
	IsError        bool   `json:"is_error"`
}

// ConfirmationRequestData asks for consent before a tool runs.
type ConfirmationRequestData struct {
	ConfirmationID  string          `json:"confirmation_id"`
	ToolCallID      string          `json:"tool_call_id"`
	ToolName        string          `json:"tool_name"`
	Args            json.RawMessage `json:"args"`
	SecurityWarning string          `json:"security_warning,omitempty"`
	ExpiresAt       time.Time       `json:"expires_at"`
}

// ConfirmationResolvedData closes a confirmation request. By is the display
// name of who answered; for an expiry it is "expired", for a stopped turn
// the name of who stopped it. Whether a person answered is told by Reason
// (read it with Why), never by By: a person may be called "Expired".
type ConfirmationResolvedData struct {
	ConfirmationID string `json:"confirmation_id"`
	Approved       bool   `json:"approved"`
	By             string `json:"by"`
	// Reason is why the request closed without an answer: ReasonExpired
	// or ReasonCancelled; empty for a person's answer.
	Reason string `json:"reason,omitempty"`
	// Channel is where the answer was given ("slack"), empty for an
	// expiry or a cancellation.
	Channel string `json:"channel,omitempty"`
	// Scope is ScopeSession when the approver allowed the tool for the
	// rest of the session ("Always allow"); empty for this call only.
	Scope string `json:"scope,omitempty"`
}

// Why a confirmation request closed without a person's answer
// (ConfirmationResolvedData.Reason).
const (
	ReasonExpired   = "expired"   // nobody answered in time
	ReasonCancelled = "cancelled" // the turn was stopped
)

// Why is why the request closed without a person's answer, ReasonExpired
// or ReasonCancelled, or "" when a person answered. Events stored before
// Reason existed said it only in By, with no Channel (a person's answer
// always has one); they are read the same way here, and only here.
func (d ConfirmationResolvedData) Why() string {
	if d.Reason != "" {
		return d.Reason
	}
	if d.Channel == "" && !d.Approved && (d.By == ReasonExpired || d.By == ReasonCancelled) {
		return d.By
	}
	return ""
}

// Session states.
const (
	StateIdle                 = "idle"
	StateThinking             = "thinking"
	StateExecutingTool        = "executing_tool"
	StateAwaitingConfirmation = "awaiting_confirmation"
)

// StateData tells what the session is doing; Tool names the tool while
// executing_tool.
type StateData struct {
	State string `json:"state"`
	Tool  string `json:"tool,omitempty"`
}

// UsageData reports one turn's tokens and the session's running total.
type UsageData struct {
	Usage
	Session Usage  `json:"session"`
	Model   string `json:"model,omitempty"`
}

// MembersData is EventMembers: everyone in the session.
type MembersData struct {
	Members []MemberData `json:"members"`
}

// MemberData is one person of MembersData. ID is Author.ID in Channel;
// Here says they have a place open on the session now (a browser tab, the
// terminal); LastSeen is when they last wrote or left.
type MemberData struct {
	ID       string     `json:"id"`
	Name     string     `json:"name"`
	Channel  string     `json:"channel"`
	Role     string     `json:"role"`
	Here     bool       `json:"here"`
	LastSeen *time.Time `json:"last_seen,omitempty"`
}

// ErrorData is a user-facing error. Codes are stable strings listeners and
// clients may switch on.
type ErrorData struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// For is the Author.Key() of the one person a notice is for (a
	// command's answer, their mistake); empty when it is for everyone.
	// A channel that renders for many people (a Slack thread) shows it to
	// that person alone.
	For string `json:"for,omitempty"`
	// Link is a URL the notice is about, for a client to offer as such
	// (the invite link of /share).
	Link string `json:"link,omitempty"`
}

// Error codes.
const (
	ErrCodeBadFrame        = "bad_frame"
	ErrCodeBadInput        = "bad_input"
	ErrCodeProvider        = "provider_error"
	ErrCodeBusy            = "busy"
	ErrCodeForbidden       = "forbidden"
	ErrCodeNotFound        = "not_found"
	ErrCodeAlreadyResolved = "already_resolved"
	ErrCodeCancelled       = "cancelled"
	ErrCodeInternal        = "internal"
	// ErrCodeInterrupted marks a turn a crash, a restart or a failed write
	// cut short: whatever was streamed of it before is not its answer, and
	// the turn is being run again from the stored context.
	ErrCodeInterrupted = "interrupted"
	// ErrCodeStorage: the gateway cannot store the conversation (disk full,
	// I/O error) and has paused it. Sent as a notice without a seq.
	ErrCodeStorage = "storage_unavailable"
	// ErrCodeDuplicate: an input with an id its author used before; it was
	// received the first time and is answered once. Sent as a notice to
	// the sender.
	ErrCodeDuplicate = "duplicate"
	// ErrCodeRestarting: the gateway is restarting; the turn is finished
	// when it is back. Sent as a notice without a seq.
	ErrCodeRestarting = "restarting"
	// ErrCodeBudget: a usage budget (budgets: in the config) was reached,
	// so the turn was refused before the model was called. Sent as a
	// notice to the person whose turn it was, saying which budget and when
	// it resets; a turn stopped half way also ends with a stored error
	// event of this code.
	ErrCodeBudget = "budget_exceeded"
	// ErrCodeGuardrail: a rule of the guide's guardrails refused a
	// person's message before the model saw it (issue 30); the message
	// is the rule's. Sent as a notice to its writer; nothing of the
	// message is stored.
	ErrCodeGuardrail = "guardrail_blocked"
)
