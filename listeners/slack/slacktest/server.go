package slacktest

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Defaults used when no Option overrides them. They are shaped like real IDs
// so code that checks prefixes (xoxb-, U…, B…) behaves as in production.
const (
	DefaultBotToken  = "xoxb-1000000000-2000000000-fakebottoken0000000"
	DefaultAppToken  = "xapp-1-A0FAKEAPP01-3000000000-fakeapptoken000000000"
	DefaultTeamID    = "T0FAKETEAM1"
	DefaultTeamName  = "Switchboard Test"
	DefaultTeamHost  = "switchboard-test"
	DefaultBotUserID = "U0FAKEBOT01"
	DefaultBotName   = "switchboard"
	DefaultBotID     = "B0FAKEBOT01"
	DefaultAppID     = "A0FAKEAPP01"
)

// TriggerTTL is how long Slack honours a trigger_id: views.open answers
// expired_trigger_id for older ones.
const TriggerTTL = 3 * time.Second

// Option configures a Server.
type Option func(*config)

type config struct {
	botToken, appToken        string
	teamID, teamName, host    string
	botUserID, botName, botID string
	appID                     string
	users                     []User
	channels                  []Channel
	clock                     func() time.Time
	pingInterval              time.Duration
	startStreamError          string
	disconnectGrace           time.Duration
	noFilesRead               bool
}

// WithBotToken sets the xoxb- token Web API methods accept.
func WithBotToken(token string) Option { return func(c *config) { c.botToken = token } }

// WithAppToken sets the xapp- token apps.connections.open accepts.
func WithAppToken(token string) Option { return func(c *config) { c.appToken = token } }

// WithTeam sets the workspace ID, name and subdomain auth.test reports.
func WithTeam(id, name, subdomain string) Option {
	return func(c *config) { c.teamID, c.teamName, c.host = id, name, subdomain }
}

// WithBot sets the bot's user ID, handle and bot ID.
func WithBot(userID, name, botID string) Option {
	return func(c *config) { c.botUserID, c.botName, c.botID = userID, name, botID }
}

// WithAppID sets the app ID sent in hello and payloads.
func WithAppID(id string) Option { return func(c *config) { c.appID = id } }

// WithUsers adds workspace members users.info knows.
func WithUsers(users ...User) Option {
	return func(c *config) { c.users = append(c.users, users...) }
}

// WithChannels adds named channels (others are created on first use).
func WithChannels(channels ...Channel) Option {
	return func(c *config) { c.channels = append(c.channels, channels...) }
}

// WithClock replaces time.Now for message timestamps, trigger_id expiry and
// request times, so a test can age a trigger_id without sleeping. Ack
// latencies are always measured with the real monotonic clock.
func WithClock(now func() time.Time) Option { return func(c *config) { c.clock = now } }

// WithPingInterval sets how often the Socket Mode server pings each
// connection (slack-go declares a connection dead after its own ping interval,
// 30 s by default, passes without one). The first ping goes right after hello.
func WithPingInterval(d time.Duration) Option { return func(c *config) { c.pingInterval = d } }

// WithStartStreamError makes chat.startStream fail with the given error code
// (e.g. "feature_not_enabled", "not_allowed_token_type"), as Slack does for
// workspaces or apps without streaming; see also SetStartStreamError.
func WithStartStreamError(code string) Option {
	return func(c *config) { c.startStreamError = code }
}

// WithDisconnectGrace sets how long after a disconnect request the server
// closes a connection the client has not closed itself (Slack: ~10 s).
func WithDisconnectGrace(d time.Duration) Option {
	return func(c *config) { c.disconnectGrace = d }
}

// Server is the fake Slack. Create it with New; all methods are safe for
// concurrent use.
type Server struct {
	cfg  config
	http *httptest.Server

	mu sync.Mutex
	// workspace model
	users      map[string]User
	channels   map[string]Channel
	messages   map[string]map[string]*Message // channel → ts → message
	ephemerals []Ephemeral
	files      map[string]*File
	downloads  []Download
	uploads    map[string]string // upload path token → file ID
	views      map[string]*View
	triggers   map[string]*trigger
	responses  map[string]responseTarget // response_url path → what it answers for
	respPosts  []ResponseURLPost
	statuses   []AssistantStatus
	prompts    []SuggestedPrompts
	lastTS     time.Time
	seq        uint64
	// fault injection and recording
	requests  []Request
	failures  map[string][]failure
	streamErr string
	// Socket Mode
	sm socketState

	handlers map[string]func(url.Values) apiResult

	closeOnce sync.Once
	wg        sync.WaitGroup
	done      chan struct{}
}

type trigger struct {
	issued time.Time
	used   bool
}

type failure struct {
	status     int
	code       string
	retryAfter time.Duration
}

// New starts a fake Slack on 127.0.0.1. With a non-nil t, Close runs in
// t.Cleanup; otherwise the caller must call Close.
func New(t testing.TB, opts ...Option) *Server {
	cfg := config{
		botToken:        DefaultBotToken,
		appToken:        DefaultAppToken,
		teamID:          DefaultTeamID,
		teamName:        DefaultTeamName,
		host:            DefaultTeamHost,
		botUserID:       DefaultBotUserID,
		botName:         DefaultBotName,
		botID:           DefaultBotID,
		appID:           DefaultAppID,
		clock:           time.Now,
		pingInterval:    5 * time.Second,
		disconnectGrace: 10 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Server{
		cfg:       cfg,
		users:     map[string]User{},
		channels:  map[string]Channel{},
		messages:  map[string]map[string]*Message{},
		files:     map[string]*File{},
		uploads:   map[string]string{},
		views:     map[string]*View{},
		triggers:  map[string]*trigger{},
		responses: map[string]responseTarget{},
		failures:  map[string][]failure{},
		streamErr: cfg.startStreamError,
		done:      make(chan struct{}),
	}
	s.sm.init()
	s.handlers = s.methods()
	s.users[cfg.botUserID] = User{ID: cfg.botUserID, Name: cfg.botName, RealName: cfg.botName, DisplayName: cfg.botName, IsBot: true}
	for _, u := range cfg.users {
		s.users[u.ID] = u
	}
	for _, c := range cfg.channels {
		s.channels[c.ID] = c
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.handleAPI)
	mux.HandleFunc("/link/", s.handleSocket)
	mux.HandleFunc("/upload/", s.handleUpload)
	mux.HandleFunc("/response/", s.handleResponseURL)
	mux.HandleFunc("/files-pri/", s.handleFile)
	mux.HandleFunc("/", s.handleSignIn)
	s.http = httptest.NewServer(mux)
	if t != nil {
		t.Cleanup(s.Close)
	}
	return s
}

// Close disconnects every Socket Mode client, stops the server and waits for
// its goroutines. It is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.closeSockets()
		s.http.Close()
		s.wg.Wait()
	})
}

// URL is the server's base URL, http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.http.URL }

// APIURL is the value for slack.OptionAPIURL: URL()+"/api/".
func (s *Server) APIURL() string { return s.http.URL + "/api/" }

// BotToken is the xoxb- token the Web API accepts.
func (s *Server) BotToken() string { return s.cfg.botToken }

// AppToken is the xapp- token apps.connections.open accepts.
func (s *Server) AppToken() string { return s.cfg.appToken }

// TeamID is the workspace ID.
func (s *Server) TeamID() string { return s.cfg.teamID }

// BotUserID is the bot's user ID (the author of bot posts, the target of
// app mentions).
func (s *Server) BotUserID() string { return s.cfg.botUserID }

// BotID is the bot's B… ID.
func (s *Server) BotID() string { return s.cfg.botID }

// AppID is the app's A… ID.
func (s *Server) AppID() string { return s.cfg.appID }

func (s *Server) now() time.Time { return s.cfg.clock() }

// AddUser adds or replaces a workspace member.
func (s *Server) AddUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.ID] = u
}

// AddChannel adds or replaces a channel.
func (s *Server) AddChannel(c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[c.ID] = c
}

// SetStartStreamError makes chat.startStream answer code ("" re-enables
// streaming), so a listener's fallback to postMessage+update can be tested.
func (s *Server) SetStartStreamError(code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streamErr = code
}

// FailNext makes the next call of method answer {"ok":false,"error":code}.
// Calls queue: FailNext twice fails the next two calls.
func (s *Server) FailNext(method, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], failure{status: http.StatusOK, code: code})
}

// FailNextStatus makes the next call of method answer a bare HTTP status
// (e.g. 500 or 503), which slack-go reports as slack.StatusCodeError.
func (s *Server) FailNextStatus(method string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], failure{status: status})
}

// RateLimit makes the next n calls of method answer HTTP 429 with a
// Retry-After header of retryAfter rounded up to whole seconds, which slack-go
// turns into *slack.RateLimitedError.
func (s *Server) RateLimit(method string, retryAfter time.Duration, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures[method] = append(s.failures[method], failure{status: http.StatusTooManyRequests, code: "ratelimited", retryAfter: retryAfter})
	}
}

func (s *Server) takeFailure(method string) (failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.failures[method]
	if len(q) == 0 {
		return failure{}, false
	}
	s.failures[method] = q[1:]
	return q[0], true
}

// Calls is how many requests method has received, failed ones included.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Method == method {
			n++
		}
	}
	return n
}

// Requests returns copies of the recorded requests of method in arrival
// order; with method "" it returns all of them.
func (s *Server) Requests(method string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if method == "" || r.Method == method {
			out = append(out, r.clone())
		}
	}
	return out
}

// Messages returns copies of the channel's messages (top level and replies,
// deleted ones left out) in ts order.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.collect(channel, func(*Message) bool { return true })
}

// Thread returns copies of the thread's parent (when stored) and replies in
// ts order, deleted ones left out.
func (s *Server) Thread(channel, threadTS string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.collect(channel, func(m *Message) bool { return m.TS == threadTS || m.ThreadTS == threadTS })
}

// Message returns a copy of one message, deleted or not.
func (s *Server) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[channel][ts]
	if !ok {
		return Message{}, false
	}
	return m.clone(), true
}

func (s *Server) collect(channel string, keep func(*Message) bool) []Message {
	var out []Message
	for _, m := range s.messages[channel] {
		if !m.Deleted && keep(m) {
			out = append(out, m.clone())
		}
	}
	slices.SortFunc(out, func(a, b Message) int { return compareTS(a.TS, b.TS) })
	return out
}

// Ephemerals returns the ephemeral messages posted in channel.
func (s *Server) Ephemerals(channel string) []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Ephemeral
	for _, e := range s.ephemerals {
		if e.Channel == channel {
			e.Blocks = cloneRaw(e.Blocks)
			out = append(out, e)
		}
	}
	return out
}

// Files returns the files of the workspace, ordered by ID.
func (s *Server) Files() []File {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]File, 0, len(s.files))
	for _, f := range s.files {
		out = append(out, f.clone())
	}
	slices.SortFunc(out, func(a, b File) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Views returns the modals opened so far, ordered by ID.
func (s *Server) Views() []View {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]View, 0, len(s.views))
	for _, v := range s.views {
		c := *v
		c.Raw = cloneRaw(v.Raw)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b View) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// AssistantStatuses returns every assistant.threads.setStatus call accepted.
func (s *Server) AssistantStatuses() []AssistantStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.statuses)
	for i := range out {
		out[i].LoadingMessages = slices.Clone(out[i].LoadingMessages)
	}
	return out
}

// SuggestedPrompts returns every assistant.threads.setSuggestedPrompts call
// accepted.
func (s *Server) SuggestedPrompts() []SuggestedPrompts {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.prompts)
	for i := range out {
		out[i].Prompts = slices.Clone(out[i].Prompts)
	}
	return out
}

// ResponseURLPosts returns every POST made to a response_url.
func (s *Server) ResponseURLPosts() []ResponseURLPost {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.respPosts)
	for i := range out {
		out[i].Body = cloneRaw(out[i].Body)
		out[i].Blocks = cloneRaw(out[i].Blocks)
	}
	return out
}

// AgeTrigger moves a trigger_id's issue time back by d, e.g. past TriggerTTL
// so views.open answers expired_trigger_id, without sleeping.
func (s *Server) AgeTrigger(triggerID string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tr, ok := s.triggers[triggerID]; ok {
		tr.issued = tr.issued.Add(-d)
	}
}

// IssueTrigger issues a trigger_id as Slack does with each interaction; the
// payload builders call it, tests rarely need to.
func (s *Server) IssueTrigger() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issueTriggerLocked()
}

// ensureUserLocked makes a person who acts in the workspace a member
// users.info knows, named after the ID unless added with a name.
func (s *Server) ensureUserLocked(id string) {
	if _, ok := s.users[id]; !ok && id != "" {
		s.users[id] = User{ID: id, Name: strings.ToLower(id), RealName: id, DisplayName: strings.ToLower(id)}
	}
}

func (s *Server) issueTriggerLocked() string {
	// Slack's documented shape: "132456.7890123.abcdef…".
	s.seq++
	id := fmt.Sprintf("%d.%d.%s", 1000000000+s.seq, 2000000000+s.seq, randomHex(16))
	s.triggers[id] = &trigger{issued: s.now()}
	return id
}

// newTSLocked returns a message ts that is unique and strictly increasing
// across the workspace, derived from the clock: "1700000000.000100".
func (s *Server) newTSLocked() string {
	now := s.now().Truncate(time.Microsecond)
	if !now.After(s.lastTS) {
		now = s.lastTS.Add(time.Microsecond)
	}
	s.lastTS = now
	return formatTS(now)
}

// noteTSLocked keeps generated ts values above one supplied by a test.
func (s *Server) noteTSLocked(ts string) {
	if t, ok := parseTS(ts); ok && t.After(s.lastTS) {
		s.lastTS = t
	}
}

func formatTS(t time.Time) string {
	return fmt.Sprintf("%d.%06d", t.Unix(), t.Nanosecond()/1000)
}

func parseTS(ts string) (time.Time, bool) {
	sec, frac, ok := strings.Cut(ts, ".")
	if !ok || len(frac) != 6 {
		return time.Time{}, false
	}
	s, err1 := strconv.ParseInt(sec, 10, 64)
	us, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil || s < 0 {
		return time.Time{}, false
	}
	return time.Unix(s, us*1000), true
}

func validTS(ts string) bool { _, ok := parseTS(ts); return ok }

// compareTS orders Slack timestamps numerically.
func compareTS(a, b string) int {
	ta, oka := parseTS(a)
	tb, okb := parseTS(b)
	if oka && okb {
		return ta.Compare(tb)
	}
	return cmp.Compare(a, b)
}

// newIDLocked returns a fresh Slack-style ID with the given prefix.
func (s *Server) newIDLocked(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s0%09d", prefix, s.seq)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// retryAfterSeconds renders a Retry-After header: whole seconds, rounded up.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(int(math.Ceil(d.Seconds())))
}
