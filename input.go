package switchboard

import (
	"encoding/json"
	"time"
)

// InputKind says what an Input carries.
type InputKind string

const (
	InputText    InputKind = "input"   // a message or slash command
	InputConfirm InputKind = "confirm" // an answer to a confirmation request
	InputAction  InputKind = "action"  // a click or submit on a UI segment
	InputCancel  InputKind = "cancel"  // stop the running turn
	// InputToolResults returns the results of the caller's own tools
	// (Input.ClientTools) that a turn waits for (EventToolsRequested).
	InputToolResults InputKind = "tool_results"
)

// ScopeSession answers an approval request for the rest of the session.
const ScopeSession = "session"

// Input is what a listener hands the session manager. ClientID is the
// client's id for the input; a repeated one is ignored so a client that
// retries after a reconnect does not send twice.
type Input struct {
	Kind     InputKind
	ClientID string
	Author   Author
	// Place is where the input was written, in a channel that can show a
	// session in several places ("slack:T1:C1:1700000000.000100"): those
	// places show it to the others, and not back where it came from.
	Place string
	// Where are ids the place is known by besides its address, from the
	// widest (a Discord server, then the channel a thread was opened
	// in), for routing a new conversation (docs/routing.md); a Slack
	// address names its workspace and channel itself.
	Where []string `json:",omitempty"`
	// Grant is a role the channel vouches for, for a person its
	// configuration names ("approver": Slack's or Discord's approvers).
	// It raises the person's role in the session, never lowers it, and
	// does not change a role the owner set with /role.
	Grant string

	Text string // InputText
	// Plain says Text is a message even when it starts with a slash: a
	// stateless API's content is the user's words, never a command.
	Plain bool `json:",omitempty"`
	// Files came with the message (Manager.Upload saved them first).
	Files []File
	// ClientTools are the tools the caller offers for the turn this
	// message starts (a stateless API's function calling): the model may
	// call them besides the guide's, and the gateway, which cannot run
	// them, asks the caller for their results (EventToolsRequested). The
	// turn keeps them for all its steps. On InputToolResults, when set,
	// they replace the turn's for its steps to come.
	ClientTools []ClientTool `json:",omitempty"`
	// WaitTimeout is how long the turn this input starts or resumes waits
	// on people or the caller (approvals, client tools) before giving up;
	// 0: the gateway's approval timeout.
	WaitTimeout time.Duration `json:",omitempty"`

	ConfirmationID string // InputConfirm
	Approved       bool
	// Scope ScopeSession with Approved: allow this tool without asking for
	// the rest of the session (approvers only; /revoke undoes it).
	Scope string

	ActionID string // InputAction
	Value    string

	// ToolResults are the results of the caller's tools, one for each
	// call the turn waits for (InputToolResults).
	ToolResults []ToolResult `json:",omitempty"`

	// Trace is the W3C traceparent of the span that handed the input in
	// (a chat app's, when tracing is on), which the turn it starts links
	// to; empty otherwise.
	Trace string `json:",omitempty"`
}

// ClientTool is a tool the caller of a turn offers and runs itself (an
// OpenAI client's "tools"). Name follows the providers' rule
// ^[a-zA-Z0-9_-]{1,64}$; Parameters is a JSON Schema object (empty: no
// parameters).
type ClientTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ToolResult is the caller's result of one call of its tools: CallID is
// the ToolCall.ID the model gave it.
type ToolResult struct {
	CallID  string `json:"call_id"`
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// QueuedInput is an input a session has accepted and not yet taken up. It
// is stored as it is accepted, so a restart takes it up; ID is its place
// in the session's inbox.
type QueuedInput struct {
	ID    int64
	Input Input
}
