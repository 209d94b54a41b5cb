// Package switchboard holds the domain types every other package speaks:
// conversation messages, the event envelope of protocol v1 (CONTRACT §4),
// inputs from listeners and the channel-neutral UI segments (CONTRACT §5).
//
// It depends on nothing but the standard library, so storage, providers,
// sessions and listeners can all import it without cycles.
package switchboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MessageRole is the role of a message in the model's context.
type MessageRole string

const (
	RoleSystem    MessageRole = "system"
	RoleUser      MessageRole = "user"
	RoleAssistant MessageRole = "assistant"
	RoleTool      MessageRole = "tool"
)

// ToolCall is one call the model asked for. Args is the raw JSON object the
// model produced; it is validated against the tool's schema before running.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Message is one entry of a conversation's context, in the provider-neutral
// shape the adapters translate to each wire format.
type Message struct {
	Role    MessageRole `json:"role"`
	Content string      `json:"content,omitempty"`
	// Author is the display name of a user message's writer; several users
	// can share one session, so the model is told who said what.
	Author string `json:"author,omitempty"`
	// ToolCalls are set on assistant messages that asked for tools.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID, ToolName and IsError are set on tool results.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	// Files are what a person sent with a user message, saved in the
	// conversation's workspace.
	Files []File `json:"files,omitempty"`
}

// File is a file a person sent with a message, saved in the
// conversation's workspace: the sandboxed python sees it at
// /workspace/<Path>.
type File struct {
	// Name is the name the person's file had (made safe to show).
	Name string `json:"name"`
	// Path is where it was saved, relative to the workspace:
	// "uploads/<a safe name, unique in the folder>".
	Path string `json:"path"`
	// Type is the media type its bytes show ("image/png", "text/csv"),
	// whatever its name says.
	Type string `json:"type"`
	Size int64  `json:"size"`
}

// WorkspacePath is where the sandbox sees the file.
func (f File) WorkspacePath() string { return "/workspace/" + f.Path }

// ByteSize is a byte count as people read it: "27 B", "1.2 KiB",
// "3.4 MiB". Every channel says a file's size and a limit this way.
func ByteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// Usage counts tokens as the provider reported them. PromptTokens are
// all the input the model read, cached or not (every adapter reports it
// so, whatever its API calls input: Anthropic's input_tokens leaves out
// the cache reads, which the adapter adds back); CachedTokens are the part
// of PromptTokens read from the provider's prompt cache, where it says so,
// and are priced at the cached-input rate (usage.go).
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CachedTokens     int `json:"cached_tokens,omitempty"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + o.PromptTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		TotalTokens:      u.TotalTokens + o.TotalTokens,
		CachedTokens:     u.CachedTokens + o.CachedTokens,
	}
}

// Author identifies who sent an input: the listener it came through and the
// user's id there. Key() is the identity roles are granted to.
type Author struct {
	Channel string `json:"channel"` // "stdin", "web", "slack", "discord"
	ID      string `json:"id"`
	Name    string `json:"name,omitempty"`
}

// Key is the author's identity across the gateway, e.g. "slack:U123".
func (a Author) Key() string { return a.Channel + ":" + a.ID }

// ChannelName is a channel as people know the app ("Slack" for
// "slack"), for labels such as "Carol · Slack"; an unknown one as it is.
func ChannelName(channel string) string {
	switch channel {
	case "web":
		return "Web"
	case "stdin":
		return "Terminal"
	case "slack":
		return "Slack"
	case "discord":
		return "Discord"
	}
	return channel
}

// DisplayName is the name to show, falling back to the id.
func (a Author) DisplayName() string {
	if a.Name != "" {
		return a.Name
	}
	return a.ID
}

// Session is the stored record of one conversation.
type Session struct {
	ID string
	// Key is the listener's natural key for the conversation ("stdin",
	// "slack:T1:C1:1700000000.000100"); empty for sessions only known by ID.
	Key       string
	Guide     string
	Owner     string // Author.Key() of the creator
	CreatedAt time.Time
	Usage     Usage
	// AllowedTools are the tools an approver allowed for the rest of the
	// session ("Always allow"): asked for no more.
	AllowedTools []string
}

// Binding ties a place in a channel to the session shown there: a Slack
// thread or DM, a Discord thread. The channel's listener renders every
// event of the session into the place, whoever caused it, and records how
// far it got (RenderedSeq), so that after a restart it goes on from there.
type Binding struct {
	Channel string // the listener: "slack", "discord"
	// Address is the place, in the listener's own terms
	// ("T1/C1/1700000000.000100").
	Address     string
	SessionID   string
	RenderedSeq int64
	CreatedAt   time.Time
	// State is the listener's own note about the place (what it had under
	// way there), kept across restarts; empty for none.
	State string
	// ByInvite: the place was bound by an invite code (a join), not to a
	// conversation it started. Only the conversation's people act there:
	// anyone else who can read the place is refused (sessions' access.go).
	ByInvite bool
}

// EphemeralKey begins the key of a stateless request's session (the
// OpenAI-compatible API's): stored for the request alone, listed to no
// one, and deleted at the next start if a crash left it.
const EphemeralKey = "ephemeral:"

// MemberSession is a session as a list of one member's sessions shows
// it: its id and guide, the member's role there, and when it was created
// and last active.
type MemberSession struct {
	ID, Guide, Role     string
	CreatedAt, ActiveAt time.Time
}

// Member is a person in a session: their role and the name they last
// wrote or attached under. LastSeen is when they last wrote or left; a
// member attached now is "here" (presence comes from attachments).
type Member struct {
	Key      string // Author.Key()
	Name     string
	Role     string
	LastSeen time.Time
	// Pinned: the owner set Role with /role, so a role granted from
	// elsewhere (a configured approver, a token, an invite code) does not
	// change it.
	Pinned bool
}

// Channel is the listener part of Key ("slack" of "slack:U1").
func (m Member) Channel() string {
	ch, _, _ := strings.Cut(m.Key, ":")
	return ch
}

// Decision is an answered approval request, as /approvals lists it.
type Decision struct {
	Seq      int64 // of the answer
	Time     time.Time
	Request  ConfirmationRequestData // empty when the request is gone
	Resolved ConfirmationResolvedData
}

// Invite lets others into a session with a role (/share). Only the hash
// of its code is stored.
type Invite struct {
	CodeHash  string
	SessionID string
	Role      string
	UsesLeft  int
	ExpiresAt time.Time
	CreatedBy string // Author.Key()
	CreatedAt time.Time
	Revoked   bool
}

// Why an invite code lets no one in: each is one clear message and
// changes nothing.
var (
	ErrInviteUnknown = errors.New("that invite code is not known")
	ErrInviteExpired = errors.New("that invite code has expired")
	ErrInviteUsedUp  = errors.New("that invite code has been used as many times as it allows")
	ErrInviteRevoked = errors.New("that invite code was withdrawn")
)

// Redeemable says why inv lets no one in at now (ErrInviteRevoked,
// ErrInviteExpired, ErrInviteUsedUp), or nil when one more may use it:
// every store redeems by this rule.
func (inv Invite) Redeemable(now time.Time) error {
	switch {
	case inv.Revoked:
		return ErrInviteRevoked
	case !now.Before(inv.ExpiresAt):
		return ErrInviteExpired
	case inv.UsesLeft <= 0:
		return ErrInviteUsedUp
	}
	return nil
}

// ErrNotFound is returned (wrapped) by stores for a missing record.
var ErrNotFound = errors.New("not found")

// Why a file a person sent was not saved in the workspace (wrapped by
// the store of files, the sandbox's).
var (
	ErrFileTooLarge  = errors.New("the file is larger than allowed")
	ErrWorkspaceFull = errors.New("the conversation's workspace is full")
)

// TurnWrite is one atomic change to a session's stored conversation, made
// as a turn goes on: all of it is stored, or none of it. Bundling what one
// step changes (the user's message, its event and the open turn; a tool
// step and the turn's progress; the answer, its tokens and the turn's end)
// is what keeps the history consistent through a crash.
type TurnWrite struct {
	// InboxID takes up an accepted input (storage.DB.AcceptInput): it
	// leaves the inbox in this write.
	InboxID int64
	// ClientID is recorded as seen; if it was seen already nothing is
	// written and the write reports a duplicate. With Forget it is removed
	// instead, so that an input the session refused can be sent again.
	ClientID string
	Forget   bool
	// Messages are appended to the model's context, in order.
	Messages []Message
	// Events are stored with the rest; Published is told once they are.
	Events    []Event
	Published func([]Event, error)
	// EventsThrough: nothing is written unless the session's events up to
	// this seq are stored (with Events, the first one's predecessor must
	// be). A turn's progress is then never stored past a hole in what its
	// listeners were shown.
	EventsThrough int64
	// Turn, when not nil, is the open turn's new state: a turn is open
	// from its user message until its answer or error is stored. EndTurn
	// deletes it.
	Turn    []byte
	EndTurn bool
	// Usage is added to the session's running total.
	Usage Usage
	// Charge, when not nil, records what the turn spent (who, with which
	// guide and model, at what cost) and adds it to the running totals
	// budgets read (Charge.Tallies), in this same write.
	Charge *Charge
	// Allowed, when not nil, replaces the session's always-allowed tools
	// (Session.AllowedTools); an empty, non-nil slice clears them.
	Allowed []string
	// Durable makes the commit wait for the disk (an fsync), for a write
	// that stores what a user was told was sent: it then survives a power
	// cut, not only a crash of the process.
	Durable bool
	// Guide, when not empty, is the session's guide from this write on
	// (a handoff: stored with the step that made it).
	Guide string
	// Summary, when not nil, replaces the session's summary: it covers
	// every message but the last Summary.Keep (those of this write
	// included), which stay the model's context after it.
	Summary *Summary
}

// MaxMemories is how many memories one person may keep: a store refuses
// the next with ErrMemoriesFull, and /memory lists them all.
const MaxMemories = 200

// ErrMemoriesFull: the person keeps MaxMemories already.
var ErrMemoriesFull = errors.New("the most memories a person may keep are kept already")

// Memory is something a person asked the assistant to remember about them
// ("I prefer metric units"): theirs alone (Owner is their Author.Key),
// with where and when they said it.
type Memory struct {
	ID        string
	Owner     string
	Text      string
	SessionID string
	Channel   string
	CreatedAt time.Time
}

// Found is a stored message a search found.
type Found struct {
	SessionID string
	Message   Message
	At        time.Time // when it was stored; zero when not known
}

// Summary is what a compaction keeps of a conversation's older messages.
type Summary struct {
	Text string
	Keep int
}
