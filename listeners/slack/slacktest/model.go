package slacktest

import (
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
)

// User is a member of the fake workspace, as users.info reports it.
type User struct {
	ID          string
	Name        string // the handle, e.g. "ada"
	RealName    string
	DisplayName string // profile.display_name
	Email       string
	TZ          string
	IsBot       bool
	Deleted     bool
}

// Channel is a conversation of the fake workspace. Channels whose ID starts
// with C (public), G (private) or D (direct message) are created on first use,
// so tests only need AddChannel to set a name or the DM's other member.
type Channel struct {
	ID   string
	Name string
	// User is the other member of a direct message (D…) channel.
	User string
	// What the bot may do there, as Slack decides it. NotMember: the bot
	// is not in the conversation (never invited, removed, or a DM between
	// other people), so posting is refused with not_in_channel in a
	// public channel and channel_not_found elsewhere (the bot cannot see
	// a private one), as is reading it. Archived: is_archived. Restricted:
	// the workspace lets only some people post there (an announcement
	// channel), restricted_action.
	NotMember  bool
	Archived   bool
	Restricted bool
}

// postRefusal is the error Slack answers a bot posting in c, "" when it
// may. The app has chat:write, not chat:write.public, so it posts only
// where it is a member.
func (c Channel) postRefusal() string {
	switch {
	case c.NotMember:
		return c.readRefusal()
	case c.Archived:
		return "is_archived"
	case c.Restricted:
		return "restricted_action"
	}
	return ""
}

// readRefusal is the error Slack answers a bot reading c's messages.
func (c Channel) readRefusal() string {
	switch {
	case !c.NotMember:
		return ""
	case c.Type() == "channel":
		return "not_in_channel"
	}
	return "channel_not_found"
}

// Type returns Slack's channel_type for the channel: "im" for D…, "group" for
// G… and "channel" otherwise, as message events carry it.
func (c Channel) Type() string {
	switch {
	case strings.HasPrefix(c.ID, "D"):
		return "im"
	case strings.HasPrefix(c.ID, "G"):
		return "group"
	default:
		return "channel"
	}
}

// Revision is one state of a message's content. A message's History starts
// with the content it was posted with; every later edit (chat.update,
// chat.appendStream, chat.stopStream, a response_url replace) appends one.
type Revision struct {
	Method string // what produced it: an API method, "response_url", or "user" for people's messages
	Text   string
	Blocks json.RawMessage
	At     time.Time
}

// Message is a message stored in the fake workspace.
type Message struct {
	Channel        string
	TS             string
	ThreadTS       string // empty for a top-level message without replies
	User           string // author; the bot's user ID for bot posts
	BotID          string // set on bot posts
	Text           string
	Blocks         json.RawMessage // nil when the message has none
	Attachments    json.RawMessage
	Metadata       json.RawMessage
	MarkdownText   bool // the text came from markdown_text
	ReplyBroadcast bool
	Files          []string // IDs of files shared with the message
	Reactions      map[string][]string
	ReplyCount     int
	Streaming      bool // started with chat.startStream and not yet stopped
	Deleted        bool
	History        []Revision

	// TaskDisplayMode is how a streamed message shows its tasks
	// (chat.startStream's task_display_mode): "timeline" or "plan".
	TaskDisplayMode string
	PlanTitle       string // the last plan_update chunk's title
	Tasks           []Task // the task_update chunks' tasks, by first appearance
}

// Edits is the number of times the message's content changed after posting.
func (m Message) Edits() int { return max(len(m.History)-1, 0) }

// IsReply reports whether the message is a reply inside a thread.
func (m Message) IsReply() bool { return m.ThreadTS != "" && m.ThreadTS != m.TS }

func (m Message) clone() Message {
	m.Blocks = cloneRaw(m.Blocks)
	m.Attachments = cloneRaw(m.Attachments)
	m.Metadata = cloneRaw(m.Metadata)
	m.Files = slices.Clone(m.Files)
	m.Tasks = slices.Clone(m.Tasks)
	if m.Reactions != nil {
		r := make(map[string][]string, len(m.Reactions))
		for k, v := range m.Reactions {
			r[k] = slices.Clone(v)
		}
		m.Reactions = r
	}
	m.History = slices.Clone(m.History)
	for i := range m.History {
		m.History[i].Blocks = cloneRaw(m.History[i].Blocks)
	}
	return m
}

// Ephemeral is a message posted with chat.postEphemeral (or an ephemeral
// response_url reply): only User sees it and it never enters channel history.
type Ephemeral struct {
	Channel  string
	User     string
	TS       string
	ThreadTS string
	Text     string
	Blocks   json.RawMessage
	At       time.Time
}

// File is a file uploaded through files.getUploadURLExternal, the upload URL
// and files.completeUploadExternal (slack-go's UploadFile), or one a person
// shared with a message (UserMessage.Files; User set).
type File struct {
	ID             string
	Name           string
	Title          string
	Length         int    // the length declared to files.getUploadURLExternal
	Content        []byte // the bytes posted to the upload URL
	Uploaded       bool
	Completed      bool
	AltText        string
	SnippetType    string
	Channels       []string
	ThreadTS       string
	InitialComment string
	// A person's file (UserFile): who shared it, its mimetype, the size
	// Slack announces, whether it is kept outside Slack, its mode, and how
	// events and downloads treat it.
	User          string
	Mimetype      string
	Announced     int
	External      bool
	Mode          string
	CheckFileInfo bool
	Stall         bool
	Created       int64
}

func (f File) clone() File {
	f.Content = slices.Clone(f.Content)
	f.Channels = slices.Clone(f.Channels)
	return f
}

// View is a modal opened with views.open (or pushed with views.push) and
// kept up to date by views.update.
type View struct {
	ID             string
	ExternalID     string
	CallbackID     string
	Hash           string
	TriggerID      string
	PreviousViewID string
	RootViewID     string
	Raw            json.RawMessage // the view object as last accepted
	Updates        int
}

// AssistantStatus is one assistant.threads.setStatus call.
type AssistantStatus struct {
	Channel         string
	ThreadTS        string
	Status          string
	LoadingMessages []string
	At              time.Time
}

// SuggestedPrompts is one assistant.threads.setSuggestedPrompts call.
type SuggestedPrompts struct {
	Channel  string
	ThreadTS string
	Title    string
	Prompts  []Prompt
	At       time.Time
}

// Prompt is one suggested prompt.
type Prompt struct {
	Title   string `json:"title"`
	Message string `json:"message"`
}

// Request is one HTTP request the Web API answered.
type Request struct {
	Method      string     // the API method, e.g. "chat.postMessage"
	Params      url.Values // form fields; for JSON bodies the top-level fields, non-strings as compact JSON
	Body        []byte
	ContentType string
	Token       string
	Time        time.Time // by the server's clock
	Status      int       // HTTP status of the answer
	Error       string    // the Slack error code answered, "" when ok
}

func (r Request) clone() Request {
	r.Params = maps.Clone(r.Params)
	for k, v := range r.Params {
		r.Params[k] = slices.Clone(v)
	}
	r.Body = slices.Clone(r.Body)
	return r
}

// ResponseURLPost is one POST to a response_url the fake handed out with a
// slash command or an interaction.
type ResponseURLPost struct {
	URL             string
	Body            json.RawMessage
	Text            string
	Blocks          json.RawMessage
	ResponseType    string // "ephemeral" (the default) or "in_channel"
	ReplaceOriginal bool
	DeleteOriginal  bool
	ThreadTS        string
	Error           string // the error answered, "" when ok
	At              time.Time
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return slices.Clone(r)
}
