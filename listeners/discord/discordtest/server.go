package discordtest

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Defaults used when no Option overrides them. IDs are snowflakes and the
// token has the shape of a real bot token (base64 of the bot's ID, a
// timestamp part, an HMAC part), so code that parses them behaves as in
// production. The bot's user ID equals the application ID, as for every
// application created since 2021.
const (
	DefaultToken         = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.GfAkE0.discordtest-fake-bot-token-00000000000"
	DefaultApplicationID = "1100000000000000001"
	DefaultBotUserID     = DefaultApplicationID
	DefaultBotUsername   = "switchboard"
	DefaultGuildID       = "1200000000000000001"
	DefaultGuildName     = "Switchboard Test"
	DefaultChannelID     = "1200000000000000002"
	DefaultChannelName   = "general"
	DefaultOwnerID       = "1300000000000000001"
)

// Interaction and gateway timing Discord documents.
const (
	// InteractionAckWindow is how long after an interaction is sent the app
	// may send its initial response; later callbacks answer 10062 Unknown
	// interaction and the token is invalidated.
	InteractionAckWindow = 3 * time.Second
	// InteractionTokenTTL is how long an interaction token works for
	// follow-ups and edits of the original response.
	InteractionTokenTTL = 15 * time.Minute
	// DefaultHeartbeatInterval is the heartbeat_interval HELLO announces
	// unless WithHeartbeatInterval changes it (Discord's usual value).
	DefaultHeartbeatInterval = 41250 * time.Millisecond
)

// Option configures a Server.
type Option func(*config)

type config struct {
	token              string
	appID              string
	appFlags           int
	botID, botName     string
	guilds             []Guild
	channels           []Channel
	users              []User
	members            []Member
	clock              func() time.Time
	heartbeat          time.Duration
	bucketLimit        int
	bucketWindow       time.Duration
	reconnectGrace     time.Duration
	pub                ed25519.PublicKey
	priv               ed25519.PrivateKey
	allowedPrivileged  int64
	compressThreshold  int
	noDefaultWorkspace bool
	maxAttachmentBytes int
	sessionStartLimit  int
}

// WithToken sets the bot token the REST API ("Authorization: Bot <token>")
// and the gateway's IDENTIFY and RESUME accept.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithApplication sets the application ID (and, by default, the bot's user
// ID, as for every application created since 2021) and the application
// flags READY reports.
func WithApplication(id string, flags int) Option {
	return func(c *config) {
		if c.botID == c.appID {
			c.botID = id
		}
		c.appID, c.appFlags = id, flags
	}
}

// WithBot sets the bot user's ID and username.
func WithBot(userID, username string) Option {
	return func(c *config) { c.botID, c.botName = userID, username }
}

// WithGuilds adds guilds the bot is in (the default guild is always there
// unless WithoutDefaultWorkspace).
func WithGuilds(guilds ...Guild) Option {
	return func(c *config) { c.guilds = append(c.guilds, guilds...) }
}

// WithChannels adds channels; see AddChannel.
func WithChannels(channels ...Channel) Option {
	return func(c *config) { c.channels = append(c.channels, channels...) }
}

// WithUsers adds users; see AddUser.
func WithUsers(users ...User) Option {
	return func(c *config) { c.users = append(c.users, users...) }
}

// WithMembers adds guild members; see AddMember.
func WithMembers(members ...Member) Option {
	return func(c *config) { c.members = append(c.members, members...) }
}

// WithoutDefaultWorkspace leaves out the default guild and #general
// channel, for tests that build their own.
func WithoutDefaultWorkspace() Option { return func(c *config) { c.noDefaultWorkspace = true } }

// WithClock replaces time.Now for snowflakes, message timestamps, request
// times, the 3 s interaction window and the 15 min token lifetime, so a
// test can age an interaction without sleeping. Ack latencies, gateway
// timing and rate-limit buckets always use the real clock, because the
// client (discordgo) measures them with it.
func WithClock(now func() time.Time) Option { return func(c *config) { c.clock = now } }

// WithHeartbeatInterval sets the heartbeat_interval sent in HELLO. discordgo
// heartbeats right after READY and then at this interval, and reconnects
// when no ACK arrived for five intervals.
func WithHeartbeatInterval(d time.Duration) Option { return func(c *config) { c.heartbeat = d } }

// WithBucketLimit sets every REST route's rate-limit bucket: limit requests
// per window per route and major parameter (channel, guild, webhook or
// interaction). The default is 50 per second, generous enough that a
// well-behaved client never meets it; Discord's message buckets are closer
// to 5 per 5 s. Requests beyond the limit answer 429 like Discord does.
func WithBucketLimit(limit int, window time.Duration) Option {
	return func(c *config) { c.bucketLimit, c.bucketWindow = limit, window }
}

// WithReconnectGrace sets how long after an op 7 Reconnect the server
// closes a connection the client keeps open (default 5 s).
func WithReconnectGrace(d time.Duration) Option { return func(c *config) { c.reconnectGrace = d } }

// WithKeyPair sets the application's Ed25519 key pair, used to sign
// interactions delivered over HTTP (PostInteraction). By default New
// generates one; PublicKey returns it.
func WithKeyPair(pub ed25519.PublicKey, priv ed25519.PrivateKey) Option {
	return func(c *config) { c.pub, c.priv = pub, priv }
}

// WithPrivilegedIntents sets which privileged intents (GUILD_MEMBERS 1<<1,
// GUILD_PRESENCES 1<<8, MESSAGE_CONTENT 1<<15) are enabled for the
// application. IDENTIFY asking for one that is not is closed with 4014
// Disallowed intent(s). By default all three are enabled.
func WithPrivilegedIntents(mask int64) Option {
	return func(c *config) { c.allowedPrivileged = mask & privilegedIntents }
}

// WithCompressThreshold sets the size above which dispatches are sent
// zlib-compressed (a binary frame) to sessions that IDENTIFY with compress
// true. READY is always compressed for them. The default is 1024 bytes.
func WithCompressThreshold(n int) Option { return func(c *config) { c.compressThreshold = n } }

// WithMaxAttachmentSize sets the largest file a message may carry (default
// 10 MiB, Discord's limit for bots); larger uploads answer 413 / 40005.
func WithMaxAttachmentSize(n int) Option { return func(c *config) { c.maxAttachmentBytes = n } }

// Server is the fake Discord. Create it with New; all methods are safe for
// concurrent use.
type Server struct {
	cfg  config
	http *httptest.Server

	// mu guards everything below: the workspace model, REST bookkeeping and
	// gateway state share one lock so dispatch order always matches the
	// order of the changes they describe.
	mu sync.Mutex
	// workspace model
	users    map[string]*User
	guilds   map[string]*Guild
	channels map[string]*Channel
	members  map[string]map[string]*Member // guild → user → member
	messages map[string]map[string]*Message
	files    map[string]*Attachment // attachment ID → file, for the CDN
	dms      map[string]string      // user ID → DM channel ID
	commands map[string][]map[string]any
	cmdIDs   map[string]string // scope + "/" + type + name → command ID
	cmdLog   []CommandOverwrite
	typing   []Typing
	lastID   int64
	// interactions
	interactions map[string]*interactionState
	byToken      map[string]*interactionState
	responses    []InteractionResponse
	acks         []Ack
	modals       []Modal
	// REST bookkeeping
	requests []Request
	failures map[string][]failure
	buckets  map[string]*bucket
	limits   map[string]routeLimit
	// gateway
	gw gatewayState

	changed   chan struct{} // closed and replaced on every change
	cdnKey    []byte        // signs attachments' CDN URLs
	downloads []Download    // requests to the CDN

	closeOnce sync.Once
	wg        sync.WaitGroup
	done      chan struct{}
}

// New starts a fake Discord on 127.0.0.1 with a bot user, a default guild
// (DefaultGuildID) and its #general text channel (DefaultChannelID). With a
// non-nil t, Close runs in t.Cleanup; otherwise the caller must call Close.
func New(t testing.TB, opts ...Option) *Server {
	cfg := config{
		token:              DefaultToken,
		appID:              DefaultApplicationID,
		appFlags:           1<<19 | 1<<15 | 1<<23, // GATEWAY_MESSAGE_CONTENT_LIMITED | GATEWAY_GUILD_MEMBERS_LIMITED | APPLICATION_COMMAND_BADGE
		botID:              DefaultBotUserID,
		botName:            DefaultBotUsername,
		clock:              time.Now,
		heartbeat:          DefaultHeartbeatInterval,
		bucketLimit:        50,
		bucketWindow:       time.Second,
		reconnectGrace:     5 * time.Second,
		allowedPrivileged:  privilegedIntents,
		compressThreshold:  1024,
		maxAttachmentBytes: 10 << 20,
		sessionStartLimit:  1000,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.priv == nil {
		cfg.pub, cfg.priv, _ = ed25519.GenerateKey(rand.Reader)
	}
	s := &Server{
		cfg:          cfg,
		users:        map[string]*User{},
		guilds:       map[string]*Guild{},
		channels:     map[string]*Channel{},
		members:      map[string]map[string]*Member{},
		messages:     map[string]map[string]*Message{},
		files:        map[string]*Attachment{},
		dms:          map[string]string{},
		commands:     map[string][]map[string]any{},
		cmdIDs:       map[string]string{},
		interactions: map[string]*interactionState{},
		byToken:      map[string]*interactionState{},
		failures:     map[string][]failure{},
		buckets:      map[string]*bucket{},
		limits:       map[string]routeLimit{},
		changed:      make(chan struct{}),
		done:         make(chan struct{}),
		cdnKey:       make([]byte, 32),
	}
	_, _ = rand.Read(s.cdnKey)
	s.gw.init()
	s.users[cfg.botID] = &User{ID: cfg.botID, Username: cfg.botName, Bot: true}
	if !cfg.noDefaultWorkspace {
		s.users[DefaultOwnerID] = &User{ID: DefaultOwnerID, Username: "owner", GlobalName: "Owner"}
		s.addGuildLocked(Guild{ID: DefaultGuildID, Name: DefaultGuildName, OwnerID: DefaultOwnerID})
		s.addChannelLocked(Channel{ID: DefaultChannelID, Type: ChannelTypeGuildText, GuildID: DefaultGuildID, Name: DefaultChannelName})
	}
	for _, g := range cfg.guilds {
		s.addGuildLocked(g)
	}
	for _, u := range cfg.users {
		s.addUserLocked(u)
	}
	for _, c := range cfg.channels {
		s.addChannelLocked(c)
	}
	for _, m := range cfg.members {
		s.addMemberLocked(m)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.handleAPI)
	mux.HandleFunc("/gateway", s.handleGateway)
	mux.HandleFunc("/gateway/", s.handleGateway)
	mux.HandleFunc("/resume", s.handleGateway)
	mux.HandleFunc("/resume/", s.handleGateway)
	mux.HandleFunc("/attachments/", s.handleCDN)
	s.http = httptest.NewServer(mux)
	if t != nil {
		t.Cleanup(s.Close)
	}
	return s
}

// Close disconnects every gateway client, stops the server and waits for
// its goroutines. It is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.closeGateway()
		s.http.Close()
		s.wg.Wait()
	})
}

// URL is the server's base URL, http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.http.URL }

// APIURL is the REST base, http://127.0.0.1:PORT/api/v10/ (a listener's
// api_url). The server also answers under /api/v9/.
func (s *Server) APIURL() string { return s.http.URL + "/api/v10/" }

// GatewayURL is the WebSocket URL GET /gateway and GET /gateway/bot
// return, ws://127.0.0.1:PORT/gateway.
func (s *Server) GatewayURL() string {
	return "ws" + strings.TrimPrefix(s.http.URL, "http") + "/gateway"
}

// ResumeGatewayURL is the resume_gateway_url READY carries,
// ws://127.0.0.1:PORT/resume. It serves the same gateway; connections
// record which URL they used, so a test can tell whether a client resumed
// through it as Discord asks.
func (s *Server) ResumeGatewayURL() string {
	return "ws" + strings.TrimPrefix(s.http.URL, "http") + "/resume"
}

// Token is the bot token the server accepts.
func (s *Server) Token() string { return s.cfg.token }

// ApplicationID is the application's ID.
func (s *Server) ApplicationID() string { return s.cfg.appID }

// BotUserID is the bot user's ID: the author of its messages and the
// target of its mentions.
func (s *Server) BotUserID() string { return s.cfg.botID }

// PublicKey is the application's Ed25519 public key (what the Developer
// Portal shows), the key HTTP interactions from PostInteraction verify
// against.
func (s *Server) PublicKey() ed25519.PublicKey { return s.cfg.pub }

// PrivateKey is the private half of PublicKey, for signing interactions by
// hand with SignedInteraction.
func (s *Server) PrivateKey() ed25519.PrivateKey { return s.cfg.priv }

// Mention is the bot's mention markup, "<@id>".
func (s *Server) Mention() string { return "<@" + s.cfg.botID + ">" }

func (s *Server) now() time.Time { return s.cfg.clock() }

// notifyLocked wakes everything waiting in WaitFor.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// WaitFor blocks until cond returns true or ctx ends. cond is called
// without the server's lock held, first right away and then after every
// change to the server's state (a request, a dispatch, a connection, an
// ack), so it may call any accessor.
func (s *Server) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errors.New("discordtest: server closed")
		}
	}
}

// --- workspace model ---

// AddUser adds or replaces a user.
func (s *Server) AddUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addUserLocked(u)
}

func (s *Server) addUserLocked(u User) {
	if u.Username == "" {
		u.Username = "user" + u.ID
	}
	s.users[u.ID] = &u
}

// AddGuild adds or replaces a guild the bot is in.
func (s *Server) AddGuild(g Guild) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addGuildLocked(g)
}

func (s *Server) addGuildLocked(g Guild) {
	if g.OwnerID == "" {
		g.OwnerID = DefaultOwnerID
	}
	s.guilds[g.ID] = &g
	if s.members[g.ID] == nil {
		s.members[g.ID] = map[string]*Member{}
	}
	s.members[g.ID][s.cfg.botID] = &Member{GuildID: g.ID, UserID: s.cfg.botID}
}

// AddChannel adds or replaces a channel. A thread needs ParentID (its
// GuildID and type default from the parent); a DM needs Type
// ChannelTypeDM and Recipient.
func (s *Server) AddChannel(c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addChannelLocked(c)
}

func (s *Server) addChannelLocked(c Channel) {
	if c.ParentID != "" {
		if p, ok := s.channels[c.ParentID]; ok && c.GuildID == "" {
			c.GuildID = p.GuildID
		}
		if c.Type == 0 {
			c.Type = ChannelTypePublicThread
		}
		if c.AutoArchiveDuration == 0 {
			c.AutoArchiveDuration = 1440
		}
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.now()
	}
	if c.Type == ChannelTypeDM && c.Recipient != "" {
		s.dms[c.Recipient] = c.ID
		s.ensureUserLocked(c.Recipient)
	}
	s.channels[c.ID] = &c
}

// AddMember adds or replaces a guild member (creating the user if unknown).
func (s *Server) AddMember(m Member) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addMemberLocked(m)
}

func (s *Server) addMemberLocked(m Member) {
	s.ensureUserLocked(m.UserID)
	if s.members[m.GuildID] == nil {
		s.members[m.GuildID] = map[string]*Member{}
	}
	m = m.clone()
	s.members[m.GuildID][m.UserID] = &m
}

// ensureUserLocked makes someone who acts in the fake a user it knows.
func (s *Server) ensureUserLocked(id string) *User {
	if u, ok := s.users[id]; ok {
		return u
	}
	u := &User{ID: id, Username: "user" + id}
	s.users[id] = u
	return u
}

// DM returns the DM channel between the bot and user, creating it (and the
// user) when needed, as POST /users/@me/channels does.
func (s *Server) DM(userID string) Channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.dmLocked(userID)
}

func (s *Server) dmLocked(userID string) *Channel {
	if id, ok := s.dms[userID]; ok {
		return s.channels[id]
	}
	s.ensureUserLocked(userID)
	c := Channel{ID: s.newIDLocked(), Type: ChannelTypeDM, Recipient: userID}
	s.addChannelLocked(c)
	return s.channels[c.ID]
}

// User returns a copy of a user.
func (s *Server) User(id string) (User, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[id]
	if !ok {
		return User{}, false
	}
	return *u, true
}

// Channel returns a copy of a channel.
func (s *Server) Channel(id string) (Channel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[id]
	if !ok {
		return Channel{}, false
	}
	return *c, true
}

// Threads returns every thread, oldest first.
func (s *Server) Threads() []Channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Channel
	for _, c := range s.channels {
		if c.IsThread() {
			out = append(out, *c)
		}
	}
	slices.SortFunc(out, func(a, b Channel) int { return compareIDs(a.ID, b.ID) })
	return out
}

// Messages returns copies of the channel's messages in order, leaving out
// deleted and ephemeral ones (which are not part of channel history).
func (s *Server) Messages(channelID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.collectLocked(channelID, func(m *Message) bool { return !m.Deleted && !m.Ephemeral })
}

// Ephemerals returns copies of the channel's ephemeral interaction
// responses and follow-ups in order.
func (s *Server) Ephemerals(channelID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.collectLocked(channelID, func(m *Message) bool { return !m.Deleted && m.Ephemeral })
}

// Message returns a copy of one message, deleted or not.
func (s *Server) Message(channelID, id string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[channelID][id]
	if !ok {
		return Message{}, false
	}
	return m.clone(), true
}

func (s *Server) collectLocked(channelID string, keep func(*Message) bool) []Message {
	var out []Message
	for _, m := range s.messages[channelID] {
		if keep(m) {
			out = append(out, m.clone())
		}
	}
	slices.SortFunc(out, func(a, b Message) int { return compareIDs(a.ID, b.ID) })
	return out
}

// CommandOverwrites returns every bulk overwrite of application commands,
// accepted or refused, in order.
func (s *Server) CommandOverwrites() []CommandOverwrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.cmdLog)
	for i := range out {
		out[i].Commands = cloneRaw(out[i].Commands)
	}
	return out
}

// TypingCalls returns every accepted POST /channels/{id}/typing in order.
func (s *Server) TypingCalls() []Typing {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.typing)
}

// --- IDs ---

// discordEpoch is the first second of 2015, where snowflakes start.
const discordEpoch = 1420070400000

// NewID returns a fresh snowflake from the server's clock, strictly greater
// than every ID the server issued before.
func (s *Server) NewID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newIDLocked()
}

func (s *Server) newIDLocked() string {
	ms := max(s.now().UnixMilli()-discordEpoch, 0)
	id := ms<<22 | 1<<17 // worker 1, process 0
	if id <= s.lastID {
		id = s.lastID + 1
	}
	s.lastID = id
	return strconv.FormatInt(id, 10)
}

// SnowflakeTime returns the time encoded in a snowflake.
func SnowflakeTime(id string) time.Time {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n>>22 + discordEpoch)
}

// compareIDs orders snowflakes numerically.
func compareIDs(a, b string) int {
	if len(a) != len(b) {
		return cmp.Compare(len(a), len(b))
	}
	return cmp.Compare(a, b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
