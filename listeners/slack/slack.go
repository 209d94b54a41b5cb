// Package slack is the Slack listener: Socket Mode (or the signed HTTP
// Events API) in, Block Kit out. A thread is a session (a top-level mention
// starts it, its replies need no mention) and so is a DM conversation; the
// session stays bound to its thread, and every event of it is rendered
// there, whoever caused it.
//
// The package reads as lifecycle (this file: configuration, start, the
// transports), inbound (inbound.go: events, clicks, commands into session
// inputs) and render (follow.go, stream.go, render.go, mrkdwn.go: session
// events into Slack messages). What every chat app does the same way with
// a place — its queue, following its session, /reset and /leave, joins,
// who may act — is the place layer's (places); follow.go is this app's
// places.Room.
package slack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/health"
	"github.com/switchboard-gw/switchboard/places"
)

// Channel is the name of this listener in bindings and author keys.
const Channel = "slack"

// Config is the listener's part of the configuration.
type Config struct {
	// Telemetry, when set, traces the Web API calls and the inputs.
	Telemetry places.Telemetry
	// Mode is "socket" (Socket Mode, no public URL) or "http".
	Mode          string
	BotToken      string // xoxb-…
	AppToken      string // xapp-…, socket mode
	SigningSecret string // http mode
	// APIURL is Slack's Web API base ("https://slack.com/api/"); tests
	// point it at a fake.
	APIURL string
	// AllowedChannels and AllowedUsers limit who may talk to the bot
	// (empty: everyone in the workspace). Approvers may approve tool calls
	// in every thread, besides each thread's owner.
	AllowedChannels []string
	AllowedUsers    []string
	Approvers       []string
	// UpdateInterval is the least time between two edits of a streamed
	// reply (1s): Slack allows about one chat.update a second per channel.
	UpdateInterval time.Duration
	// NoNativeStreaming shows replies by editing a message even where
	// Slack's native streaming (chat.startStream) is available.
	NoNativeStreaming bool
	// Greeting and Suggestions (the default guide's) are offered in a new
	// AI-app assistant thread.
	Greeting    string
	Suggestions []string

	// AppTokenFrom and BotTokenFrom say where the tokens came from ("the
	// environment variable SLACK_APP_TOKEN (listeners.slack.app_token_env)"),
	// for the ERROR that tells an operator which one Slack refused.
	AppTokenFrom, BotTokenFrom string
	// Health is told whether the listener is up: connected (socket mode)
	// or authenticated (http mode), or down and why. May be nil.
	Health *health.Reporter
	// RetryMin is the first wait before trying again to authenticate or
	// to open Socket Mode after Slack refused or failed (2s); it doubles
	// up to 5 minutes.
	RetryMin time.Duration
	// DownloadTimeout gives up a file a person shared whose download
	// brings nothing for this long (30s): the sender is told to send it
	// again.
	DownloadTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = "socket"
	}
	if c.APIURL == "" {
		c.APIURL = "https://slack.com/api/"
	}
	if !strings.HasSuffix(c.APIURL, "/") {
		c.APIURL += "/"
	}
	if c.UpdateInterval <= 0 {
		c.UpdateInterval = time.Second
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 2 * time.Second
	}
	c.AppTokenFrom = cmp.Or(c.AppTokenFrom, "listeners.slack.app_token")
	c.BotTokenFrom = cmp.Or(c.BotTokenFrom, "listeners.slack.bot_token")
	return c
}

// Listener is the Slack listener. Create it with New, start it with Run.
type Listener struct {
	cfg    Config
	access atomic.Pointer[Access] // Config's lists, as SetAccess changes them
	places *places.Layer
	log    *slog.Logger
	api    *slackapi.Client
	http   *http.Client // the API client's, also for response_url answers
	files  *http.Client // people's files (files.go)

	// Who the bot is, from auth.test at start.
	botUserID string
	botName   string
	teamID    string

	// last is the place each person last wrote in, per channel
	// ("C1/U1"), for slash commands.
	lastMu sync.Mutex
	last   map[string]place

	users *userCache
	// clicks are the clicks and form submissions taken: a replayed one is
	// taken once.
	clicks *onceSet

	// nativeOK: the app may stream natively (chat.startStream); cleared
	// when Slack says the method is not the app's (stream.go).
	nativeOK atomic.Bool
	// asks are people's messages at DMs' top level, for the streams that
	// answer them (stream.go).
	asks asks
	// readers are the Socket Mode connections' event readers.
	readers sync.WaitGroup
}

// New checks the configuration and returns a listener, registered with s
// as the follower of Slack places at once, so turns the manager resumes
// at start-up (Recover) reach their threads; nothing is contacted until
// Run.
func New(cfg Config, s places.Sessions, log *slog.Logger) (*Listener, error) {
	cfg = cfg.withDefaults()
	switch {
	case cfg.BotToken == "":
		return nil, errors.New("slack: no bot token (listeners.slack.bot_token)")
	case cfg.Mode == "socket" && cfg.AppToken == "":
		return nil, errors.New("slack: socket mode needs an app-level token (listeners.slack.app_token)")
	case cfg.Mode == "http" && cfg.SigningSecret == "":
		return nil, errors.New("slack: http mode needs the signing secret (listeners.slack.signing_secret)")
	case cfg.Mode != "socket" && cfg.Mode != "http":
		return nil, fmt.Errorf("slack: mode %q: want socket or http", cfg.Mode)
	}
	if log == nil {
		log = slog.Default()
	}
	// Keep connections to Slack open for reuse: the default client keeps
	// two, so a busy gateway would open (and TLS-handshake) a connection
	// for most calls.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	var api http.RoundTripper = transport
	if cfg.Telemetry != nil {
		api = cfg.Telemetry.Transport(Channel, transport)
	}
	client := &http.Client{Transport: api, Timeout: 30 * time.Second}
	opts := []slackapi.Option{slackapi.OptionAPIURL(cfg.APIURL), slackapi.OptionHTTPClient(client)}
	if cfg.AppToken != "" {
		opts = append(opts, slackapi.OptionAppLevelToken(cfg.AppToken))
	}
	l := &Listener{
		cfg: cfg, log: log.With("listener", Channel),
		api:  slackapi.New(cfg.BotToken, opts...),
		http: client,
		last: map[string]place{},
	}
	l.SetAccess(Access{AllowedChannels: cfg.AllowedChannels, AllowedUsers: cfg.AllowedUsers, Approvers: cfg.Approvers})
	l.files = l.newFilesClient(transport)
	l.users = newUserCache(l.api)
	l.clicks = newOnceSet()
	l.nativeOK.Store(!cfg.NoNativeStreaming)
	l.places = places.New(places.Config{
		Channel: Channel, Sessions: s, Log: l.log, NewRoom: l.newRoom, Interval: cfg.UpdateInterval, Gate: l.gate, FileStall: cfg.DownloadTimeout,
		Telemetry: cfg.Telemetry,
		Words: places.Words{Escape: mrkdwnEscape, JoinHint: "Mention me with join CODE at the top level of a channel " +
			"(a new thread opens under your message), or write join CODE to me in a DM."},
	})
	return l, nil
}

// Run connects and serves until ctx ends. In socket mode it holds the
// Socket Mode connection (reconnecting as Slack asks); in http mode the
// gateway's HTTP server calls Handler and Run only renders.
func (l *Listener) Run(ctx context.Context) error {
	if p := tokenKinds(l.cfg); p != nil {
		l.log.Error("slack: "+p.Reason, "fix", p.Fix) // Slack will refuse it: said plainly first
	}
	auth, err := l.authenticate(ctx)
	if err != nil {
		return nil // ctx ended while Slack refused or could not be reached
	}
	l.botUserID, l.botName, l.teamID = auth.UserID, auth.User, auth.TeamID
	if l.cfg.Mode == "http" {
		l.log.Info("slack ready", "team", auth.Team, "bot", auth.User, "mode", l.cfg.Mode)
		l.cfg.Health.Up()
	}

	l.places.Start(ctx)
	l.places.Resume()
	defer l.places.Wait()

	if l.cfg.Mode == "socket" {
		err = l.runSocket(ctx)
		l.readers.Wait()
	} else {
		<-ctx.Done()
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// authenticate calls auth.test until Slack accepts the bot token or ctx
// ends: a refusal or an unreachable Slack is an ERROR with what to do, the
// listener is down meanwhile, and it tries again with backoff.
func (l *Listener) authenticate(ctx context.Context) (*slackapi.AuthTestResponse, error) {
	for wait := l.cfg.RetryMin; ; wait = min(2*wait, maxRetry) { // 2s, 4s, … 5m
		auth, err := l.api.AuthTestContext(ctx)
		if err == nil {
			return auth, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		reason, fix := refusal(err, "bot token", l.cfg.BotTokenFrom, botTokenWant)
		l.log.Error("slack: auth.test failed: "+reason, "fix", fix, "retry_in", wait)
		l.cfg.Health.Down(reason, fix)
		if !sleep(ctx, wait) {
			return nil, ctx.Err()
		}
	}
}

// maxRetry is the longest wait between two tries to authenticate or to
// open Socket Mode.
const maxRetry = 5 * time.Minute

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// runSocket holds the Socket Mode connection; slack-go reconnects when
// Slack asks (disconnect) or the socket drops. When Slack refuses the app
// token (apps.connections.open: invalid_auth, at start or revoked later)
// slack-go gives up: the listener is down, says so with the fix, and opens
// Socket Mode again with backoff.
func (l *Listener) runSocket(ctx context.Context) error {
	wait := l.cfg.RetryMin
	for {
		sm := socketmode.New(l.api)
		var connected atomic.Bool
		sctx, stop := context.WithCancel(ctx) // this connection's event reader
		l.readers.Go(func() {
			for {
				select {
				case <-sctx.Done():
					return
				case evt, ok := <-sm.Events:
					if !ok {
						return
					}
					if l.onSocketEvent(ctx, sm, evt) {
						connected.Store(true)
					}
				}
			}
		})
		err := sm.RunContext(ctx)
		stop()
		if ctx.Err() != nil {
			return nil
		}
		if connected.Load() {
			wait = l.cfg.RetryMin // it was up: this failure starts the backoff afresh
		}
		reason, fix := refusal(err, "app-level token", l.cfg.AppTokenFrom, appTokenWant)
		l.log.Error("slack: socket mode stopped: "+reason, "fix", fix, "retry_in", wait)
		l.cfg.Health.Down(reason, fix)
		if !sleep(ctx, wait) {
			return nil
		}
		wait = min(2*wait, maxRetry)
	}
}

// onSocketEvent acknowledges an envelope at once (Slack redelivers what
// is not acknowledged within 3 s) and hands the work on; it reports true
// when the socket is connected.
func (l *Listener) onSocketEvent(ctx context.Context, sm *socketmode.Client, evt socketmode.Event) bool {
	switch evt.Type {
	case socketmode.EventTypeConnected:
		l.log.Info("slack connected", "team_id", l.teamID, "bot", l.botName, "mode", l.cfg.Mode)
		l.cfg.Health.Up()
		return true
	case socketmode.EventTypeEventsAPI:
		_ = sm.Ack(*evt.Request)
		if ev, ok := evt.Data.(slackevents.EventsAPIEvent); ok {
			l.onEventsAPI(ctx, ev)
		}
	case socketmode.EventTypeInteractive:
		cb, ok := evt.Data.(slackapi.InteractionCallback)
		if !ok {
			_ = sm.Ack(*evt.Request)
			return false
		}
		_ = sm.Ack(*evt.Request, l.onInteraction(ctx, cb))
	case socketmode.EventTypeSlashCommand:
		cmd, ok := evt.Data.(slackapi.SlashCommand)
		if !ok {
			_ = sm.Ack(*evt.Request)
			return false
		}
		_ = sm.Ack(*evt.Request, l.onCommand(ctx, cmd))
	case socketmode.EventTypeConnectionError:
		l.log.Warn("slack socket mode: connection error; reconnecting", "err", evt.Data)
		l.cfg.Health.Degraded(fmt.Sprintf("the Socket Mode connection failed (%v); reconnecting", evt.Data), "")
	}
	return false
}

// role is what the listener vouches for of a Slack user (Input.Grant):
// configured approvers approve in every conversation, unless its owner
// set their role there with /role; the rest take the session's own.
func (l *Listener) role(userID string) collaboration.Role {
	for _, a := range l.accessNow().Approvers {
		if a == userID {
			return collaboration.Approver
		}
	}
	return ""
}

// allowed is the allow lists (allowed_channels, allowed_users): who may
// talk to the bot at all, and where. Every inbound path asks it: messages,
// joins, commands, clicks, forms (submit asks it again for every input).
func (l *Listener) allowed(channel, user string) bool {
	ok := func(list []string, v string) bool {
		if len(list) == 0 {
			return true
		}
		for _, x := range list {
			if x == v {
				return true
			}
		}
		return false
	}
	acc := l.accessNow()
	return ok(acc.AllowedChannels, channel) && ok(acc.AllowedUsers, user)
}

// userCache remembers display names (users.info) for an hour.
type userCache struct {
	api *slackapi.Client
	mu  sync.Mutex
	m   map[string]cachedUser
}

type cachedUser struct {
	name  string
	isBot bool
	at    time.Time
}

func newUserCache(api *slackapi.Client) *userCache {
	return &userCache{api: api, m: map[string]cachedUser{}}
}

// author returns the Slack user as a session author, named as Slack shows
// them (display name, else real name, else user name).
func (c *userCache) author(ctx context.Context, id string) (switchboard.Author, bool) {
	c.mu.Lock()
	u, ok := c.m[id]
	c.mu.Unlock()
	if !ok || time.Since(u.at) > time.Hour {
		info, err := c.api.GetUserInfoContext(ctx, id)
		if err != nil {
			return switchboard.Author{Channel: Channel, ID: id}, false // shown by id; asked again next time
		}
		u = cachedUser{name: info.Profile.DisplayName, isBot: info.IsBot, at: time.Now()}
		if u.name == "" {
			u.name = info.RealName
		}
		if u.name == "" {
			u.name = info.Name
		}
		c.mu.Lock()
		if len(c.m) > 10_000 {
			clear(c.m) // bounded: forgetting costs one users.info each
		}
		c.m[id] = u
		c.mu.Unlock()
	}
	return switchboard.Author{Channel: Channel, ID: id, Name: u.name}, u.isBot
}
