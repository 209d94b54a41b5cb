package discordtest

import (
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"time"
)

// Channel types, as Discord numbers them.
const (
	ChannelTypeGuildText     = 0
	ChannelTypeDM            = 1
	ChannelTypeAnnouncement  = 5
	ChannelTypePublicThread  = 11
	ChannelTypePrivateThread = 12
)

// Message flags the fake reads or sets.
const (
	FlagSuppressEmbeds        = 1 << 2
	FlagHasThread             = 1 << 5
	FlagEphemeral             = 1 << 6
	FlagLoading               = 1 << 7
	FlagSuppressNotifications = 1 << 12
	FlagIsComponentsV2        = 1 << 15
)

// Message types the fake produces.
const (
	MessageTypeDefault          = 0
	MessageTypeReply            = 19
	MessageTypeChatInputCommand = 20
)

// User is a Discord user the fake knows.
type User struct {
	ID         string
	Username   string // the unique handle, e.g. "ada"
	GlobalName string // the display name; "" for none
	Bot        bool
}

// Guild is a server the bot is in.
type Guild struct {
	ID      string
	Name    string
	OwnerID string
}

// Member is a user's membership of a guild.
type Member struct {
	GuildID string
	UserID  string
	Nick    string   // "" for none
	Roles   []string // role IDs
}

func (m Member) clone() Member { m.Roles = slices.Clone(m.Roles); return m }

// Channel is a guild text channel, a thread (ParentID set) or a DM
// (Type ChannelTypeDM, Recipient set, no GuildID).
type Channel struct {
	ID       string
	Type     int
	GuildID  string
	Name     string
	ParentID string // threads: the channel the thread is in
	OwnerID  string // threads: who started it
	// Recipient is the other user of a DM channel.
	Recipient string
	// Threads only.
	AutoArchiveDuration int
	Archived            bool
	Locked              bool
	MessageCount        int
	// StarterMessageID is the message a thread was started from ("" for a
	// thread started without one). Discord gives such a thread the
	// message's ID.
	StarterMessageID string
	CreatedAt        time.Time
	// BotDenied are the Permission… bits the server's roles and overwrites
	// leave the bot without here; a thread also lacks what its parent
	// denies. Without PermissionViewChannel every route on the channel
	// answers 50001 Missing Access and its messages reach no Gateway
	// session; without another permission the route that needs it answers
	// 50013 Missing Permissions. An interaction used here still arrives,
	// its app_permissions without these bits, as on Discord.
	BotDenied int64
}

// Permissions the fake enforces for the bot, as Discord numbers them.
const (
	PermissionViewChannel           int64 = 1 << 10
	PermissionSendMessages          int64 = 1 << 11
	PermissionEmbedLinks            int64 = 1 << 14
	PermissionAttachFiles           int64 = 1 << 15
	PermissionReadMessageHistory    int64 = 1 << 16
	PermissionCreatePublicThreads   int64 = 1 << 35
	PermissionCreatePrivateThreads  int64 = 1 << 36
	PermissionSendMessagesInThreads int64 = 1 << 38
)

// appPermissions is what interactions report the bot may do in a channel
// where nothing is denied: a bot invited with the usual permissions.
const appPermissions int64 = 2248473465835073

// IsThread reports whether the channel is a thread.
func (c Channel) IsThread() bool {
	return c.Type == ChannelTypePublicThread || c.Type == ChannelTypePrivateThread || c.Type == 10
}

// Attachment is a file attached to a message. Its URL points at the fake's
// CDN (URL()+"/attachments/…"), which serves Data. The URL is signed, as
// Discord's have been since December 2023: ?ex=<expiry>&is=<issued>
// &hm=<signature>, the times in hexadecimal Unix seconds; the CDN answers
// 404 "This content is no longer available." for a URL unsigned, altered
// or past its expiry.
type Attachment struct {
	ID          string
	Filename    string
	Description string
	ContentType string
	Size        int
	URL         string
	Data        []byte
	// Expires is when URL stops working: 24 hours after it was issued,
	// unless a person's message (UserMessage.Attachments) sets it, to
	// post one whose link has expired.
	Expires time.Time
}

func (a Attachment) clone() Attachment { a.Data = slices.Clone(a.Data); return a }

// Revision is one state of a message's content. A message's History starts
// with the content it was posted with; every accepted edit appends one.
type Revision struct {
	Route       string // what produced it: a Route… constant, or "user" for people's messages
	Content     string
	Embeds      json.RawMessage
	Components  json.RawMessage
	Flags       int
	Attachments []string // attachment IDs
	At          time.Time
}

// Message is a message stored in the fake.
type Message struct {
	ID        string
	ChannelID string
	GuildID   string // "" in DMs
	AuthorID  string // the bot's user ID for bot posts and interaction responses
	Type      int
	Content   string
	// Embeds and Components are the raw JSON arrays as last accepted (nil
	// when the message has none).
	Embeds      json.RawMessage
	Components  json.RawMessage
	Flags       int
	Attachments []Attachment
	// Mentions are the user IDs mentioned in Content (<@id>, <@!id>);
	// MentionRoles the role IDs (<@&id>).
	Mentions     []string
	MentionRoles []string
	// ReferenceID is the message this one replies to.
	ReferenceID string
	// ThreadID is the thread started from this message.
	ThreadID string
	// WebhookID is set on interaction responses and follow-ups (Discord
	// sends them through the application's webhook).
	WebhookID string
	// InteractionID is the interaction this message answers.
	InteractionID string
	Reactions     map[string][]string // emoji → user IDs
	Ephemeral     bool                // only the interaction's user sees it; never in channel history
	Deleted       bool
	Timestamp     time.Time
	EditedAt      time.Time // zero until edited
	History       []Revision
}

// Edits is the number of times the message's content changed after posting.
func (m Message) Edits() int { return max(len(m.History)-1, 0) }

// EditTimes returns when each edit happened (server clock), oldest first,
// so tests can assert an edit rate.
func (m Message) EditTimes() []time.Time {
	var out []time.Time
	for _, r := range m.History[min(1, len(m.History)):] {
		out = append(out, r.At)
	}
	return out
}

func (m Message) clone() Message {
	m.Embeds = cloneRaw(m.Embeds)
	m.Components = cloneRaw(m.Components)
	m.Attachments = slices.Clone(m.Attachments)
	for i := range m.Attachments {
		m.Attachments[i] = m.Attachments[i].clone()
	}
	m.Mentions = slices.Clone(m.Mentions)
	m.MentionRoles = slices.Clone(m.MentionRoles)
	if m.Reactions != nil {
		r := make(map[string][]string, len(m.Reactions))
		for k, v := range m.Reactions {
			r[k] = slices.Clone(v)
		}
		m.Reactions = r
	}
	m.History = slices.Clone(m.History)
	for i := range m.History {
		h := &m.History[i]
		h.Embeds, h.Components, h.Attachments = cloneRaw(h.Embeds), cloneRaw(h.Components), slices.Clone(h.Attachments)
	}
	return m
}

// Request is one HTTP request the REST API answered.
type Request struct {
	Route       string            // a Route… constant, e.g. RouteCreateMessage; "" when no route matched
	Method      string            // HTTP method
	Path        string            // the path after /api/v{N}
	APIVersion  string            // "10" (or "9"): the version in the URL
	Params      map[string]string // path parameters by name, e.g. "channel.id"
	Query       url.Values
	Body        []byte // the raw body; for multipart requests, payload_json
	ContentType string
	Files       []Attachment // multipart files[n] parts, with ID n
	Token       string       // the bot token after "Bot ", "" when absent
	Time        time.Time    // by the server's clock
	Received    time.Time    // the real time, with a monotonic reading
	Status      int          // HTTP status answered
	Code        int          // Discord's JSON error code answered, 0 when ok
	Message     string       // Discord's error message answered, "" when ok
	Bucket      string       // the X-RateLimit-Bucket answered
}

func (r Request) clone() Request {
	r.Params = maps.Clone(r.Params)
	r.Query = maps.Clone(r.Query)
	for k, v := range r.Query {
		r.Query[k] = slices.Clone(v)
	}
	r.Body = slices.Clone(r.Body)
	r.Files = slices.Clone(r.Files)
	for i := range r.Files {
		r.Files[i] = r.Files[i].clone()
	}
	return r
}

// CommandOverwrite is one accepted or refused bulk overwrite of application
// commands (PUT /applications/{app}/commands or …/guilds/{guild}/commands).
type CommandOverwrite struct {
	GuildID  string          // "" for global commands
	Commands json.RawMessage // the body sent
	Status   int
	At       time.Time
}

// Typing is one POST /channels/{id}/typing.
type Typing struct {
	ChannelID string
	At        time.Time
}

// InteractionResponse is one POST to an interaction's callback endpoint (or
// the inline answer to an HTTP interaction), accepted or not.
type InteractionResponse struct {
	InteractionID string
	Type          int             // the callback type sent (1, 4, 5, 6, 7, 9…)
	Data          json.RawMessage // the callback's data, nil when absent
	Status        int             // HTTP status answered
	Code          int             // Discord's error code answered, 0 when accepted
	MessageID     string          // the message created or updated, if any
	At            time.Time       // server clock
	Latency       time.Duration   // real time since the interaction was sent
}

// Ack is the accepted initial response to an interaction.
type Ack struct {
	InteractionID string
	Type          int // the callback type
	Data          json.RawMessage
	Interaction   Interaction
	AckedAt       time.Time     // real time
	Latency       time.Duration // AckedAt − Interaction.SentAt
}

// Modal is a modal opened by a callback of type 9.
type Modal struct {
	InteractionID string
	CustomID      string
	Title         string
	Raw           json.RawMessage // the callback's data
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return slices.Clone(r)
}
