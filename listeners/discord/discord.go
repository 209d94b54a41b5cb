// Package discord is the Discord listener: the Gateway (or signed HTTP
// interactions) in, messages with embeds and components out. A mention in
// a channel opens a thread from the message, and the thread is a session;
// so is a DM. The session stays bound to its thread (sessions' bindings),
// and every event of it is rendered there, whoever caused it.
//
// The package reads as lifecycle (this file: configuration, the Gateway,
// application commands), inbound (inbound.go, http.go: messages,
// interactions and commands into session inputs) and render (follow.go,
// render.go, markdown.go: session events into Discord messages). What
// every chat app does the same way with a place — its queue, following its
// session, /reset and /leave, joins, who may act — is the place layer's
// (places); follow.go is this app's places.Room.
package discord

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/health"
	"github.com/switchboard-gw/switchboard/places"
)

// Channel is the name of this listener in bindings and author keys.
const Channel = "discord"

// Config is the listener's part of the configuration.
type Config struct {
	// Telemetry, when set, traces the REST calls and the inputs.
	Telemetry     places.Telemetry
	Token         string // the bot token (without "Bot ")
	ApplicationID string // from READY when empty
	// PublicKey (hex Ed25519) turns on HTTP interactions at
	// /discord/interactions, each request's signature verified.
	PublicKey string
	// APIURL is Discord's REST base ("https://discord.com/api/v10/"); tests
	// point it at a fake (see reroute).
	APIURL string
	// GuildID registers /switchboard in that server only (for
	// development); empty registers it globally.
	GuildID string
	// AllowedGuilds and AllowedChannels limit where the bot answers (empty:
	// everywhere it is); Approvers (user or role ids) approve everywhere.
	AllowedGuilds   []string
	AllowedChannels []string
	Approvers       []string
	// Health is told whether the listener is up (READY from the Gateway)
	// or down and why. May be nil.
	Health *health.Reporter
	// TokenFrom says where the token came from ("the environment variable
	// DISCORD_BOT_TOKEN (listeners.discord.token_env)"), for the ERROR
	// that tells an operator what to change.
	TokenFrom string
	// EditInterval is the least time between two edits of a streamed
	// reply (1s).
	EditInterval time.Duration
	// DownloadTimeout gives up a file a person attached whose download
	// brings nothing for this long (30s): the sender is told to send it
	// again.
	DownloadTimeout time.Duration
	// Leader runs lead while this gateway holds role (Role) among several
	// replicas on one database, and ends lead's context when it loses it
	// (cluster.Cluster.Lead): Discord wants one Gateway connection for
	// the bot, and sends every event to each connection it has. The
	// listener opens the bot's Gateway connection only under lead; REST
	// (rendering the conversations this replica runs) and HTTP
	// interactions work on every replica. Nil: this gateway holds the
	// connection whenever it runs (a single gateway).
	Leader func(ctx context.Context, role string, lead func(ctx context.Context))
}

// Role is the role whose holder opens the bot's Gateway connection, among
// replicas (Config.Leader).
const Role = "discord"

// standby is what a replica that does not hold the Gateway connection
// says of itself: up, doing the rest.
const standby = "standby: another replica holds Discord's Gateway connection (the role discord); this one posts the conversations it runs and answers HTTP interactions, and takes the connection over if that replica stops"

func (c Config) withDefaults() Config {
	if c.APIURL == "" {
		c.APIURL = "https://discord.com/api/v10/"
	}
	if !strings.HasSuffix(c.APIURL, "/") {
		c.APIURL += "/"
	}
	if c.EditInterval <= 0 {
		c.EditInterval = time.Second
	}
	if c.TokenFrom == "" {
		c.TokenFrom = "listeners.discord.token"
	}
	return c
}

// Listener is the Discord listener. Create it with New, start it with Run.
type Listener struct {
	cfg       Config
	access    atomic.Pointer[Access] // Config's lists, as SetAccess changes them
	places    *places.Layer
	log       *slog.Logger
	dg        *discordgo.Session
	files     *http.Client // people's attachments, from Discord's CDN (files.go)
	publicKey ed25519.PublicKey

	botUserID string
	appID     string

	names *nameCache

	// tokens are the latest interaction of each person in each place
	// ("channel/user"), valid 15 minutes: what a notice meant for them
	// alone is sent with (an ephemeral follow-up).
	tokensMu sync.Mutex
	tokens   map[string]interactionToken

	// wg are Run's goroutines besides the place layer's; ready is closed
	// once Discord said who the bot is. Interactions over HTTP are
	// answered once the places are followed (places.Layer.Live).
	wg    sync.WaitGroup
	ready chan struct{}
	// leading: this listener holds the bot's Gateway connection now
	// (gateway runs). A connection discordgo's reconnecting brings back
	// after this replica gave the role up is closed again, and what it
	// delivers meanwhile is left to the replica that holds the role.
	leading atomic.Bool

	// noV2: Discord refused a Components V2 message; plans are shown as
	// embeds until a restart (plan.go).
	noV2 atomic.Bool
}

type interactionToken struct {
	i  *discordgo.Interaction
	at time.Time
}

// New checks the configuration and returns a listener registered with s as the follower of Discord places
// (so turns resumed at start-up reach their threads); nothing is contacted
// until Run.
func New(cfg Config, s places.Sessions, log *slog.Logger) (*Listener, error) {
	if log == nil {
		log = slog.Default()
	}
	l, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	l.log = log.With("listener", Channel)
	l.places = places.New(places.Config{
		Channel: Channel, Sessions: s, Log: l.log, NewRoom: l.newRoom, Interval: l.cfg.EditInterval, Gate: l.gate, FileStall: l.cfg.DownloadTimeout,
		Telemetry: l.cfg.Telemetry,
		Words: places.Words{Escape: mdEscape, Strong: func(s string) string { return "**" + mdEscape(s) + "**" },
			JoinHint: "Mention me with /join CODE in a channel (a new thread opens from your message), or use it in a DM with me."},
	})
	return l, nil
}

// newClient is a listener with its configuration and its Discord client,
// not yet tied to the sessions: what New and Check share.
func newClient(cfg Config) (*Listener, error) {
	cfg = cfg.withDefaults()
	if cfg.Token == "" {
		return nil, errors.New("discord: no bot token (listeners.discord.token)")
	}
	var pub ed25519.PublicKey
	if cfg.PublicKey != "" {
		k, err := hex.DecodeString(cfg.PublicKey)
		if err != nil || len(k) != ed25519.PublicKeySize {
			return nil, errors.New("discord: listeners.discord.public_key: want 64 hex characters")
		}
		pub = k
	}
	apiVersion.Do(func() { discordgo.APIVersion = "10" })
	dg, err := discordgo.New("Bot " + cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	// Only what the listener reads: messages in servers and DMs, and their
	// text (a privileged intent, turned on in the developer portal).
	dg.Identify.Intents = discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent
	dg.StateEnabled = false
	dg.ShouldRetryOnRateLimit = true
	// Keep connections to Discord open for reuse (the default transport
	// keeps two, so a busy gateway would open one for most calls).
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	var rest http.RoundTripper = &globalLimit{next: transport}
	if cfg.Telemetry != nil {
		rest = cfg.Telemetry.Transport(Channel, rest) // the rerouted URL, the wait for the limit included
	}
	dg.Client = &http.Client{Timeout: 20 * time.Second,
		Transport: &reroute{from: discordgo.EndpointAPI, to: cfg.APIURL, next: rest}}
	l := &Listener{
		cfg: cfg, log: slog.New(slog.DiscardHandler), dg: dg, files: newFilesClient(transport), publicKey: pub,
		names: newNameCache(), tokens: map[string]interactionToken{}, ready: make(chan struct{}),
	}
	l.SetAccess(Access{AllowedGuilds: cfg.AllowedGuilds, AllowedChannels: cfg.AllowedChannels, Approvers: cfg.Approvers})
	return l, nil
}

// discordgo keeps its REST endpoints and its API version in package
// variables, made at init for v9 at discord.com. The listener never
// changes the endpoints: its client sends discordgo's requests to api_url
// (reroute), v10 at Discord by default, a fake in tests. Only APIVersion,
// which discordgo puts in the Gateway URL, is set to "10", once per
// process and before the first session (apiVersion), so no session ever
// reads it while it changes.
var apiVersion sync.Once

// messageContent are the application flags that say Discord lets the bot
// read messages' text (GATEWAY_MESSAGE_CONTENT, or _LIMITED for a bot in
// fewer than 100 servers).
const messageContent = 1<<18 | 1<<19

// intentFix is what an operator does when Discord refuses the Message
// Content intent.
const intentFix = "Discord Developer Portal → your application → Bot → Privileged Gateway Intents → turn on Message Content Intent, then save; the listener connects at its next try"

// checkIntents reads the application's flags and says, as an ERROR and
// in the listener's health, when Discord does not let the bot read
// messages' text: the Gateway then closes with 4014 Disallowed intent(s)
// and would otherwise only retry in silence.
func (l *Listener) checkIntents(ctx context.Context) {
	app, err := application(ctx, l.dg)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("discord: the application's flags could not be read", "err", err)
		}
		return
	}
	if app.Flags&messageContent == 0 {
		reason := "Discord does not let the bot read messages: the Message Content intent is off (the Gateway closes with 4014 Disallowed intent(s))"
		l.log.Error("discord: "+reason, "fix", intentFix)
		l.cfg.Health.Down(reason, intentFix)
	}
}

// open connects to the Gateway, trying again with backoff (2s doubling to
// 5m) while it cannot; once open, discordgo resumes or reconnects by
// itself. Each failure is an ERROR and the listener is down meanwhile.
func (l *Listener) open(ctx context.Context) {
	for wait := 2 * time.Second; ; wait = min(2*wait, 5*time.Minute) {
		err := l.dg.Open()
		if err == nil || errors.Is(err, discordgo.ErrWSAlreadyOpen) {
			return
		}
		reason := "Discord's Gateway could not be reached: " + err.Error()
		fix := "check this machine's network (outgoing HTTPS and WSS to discord.com and gateway.discord.gg)"
		var re *discordgo.RESTError
		var ce *websocket.CloseError
		switch {
		case errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized,
			errors.As(err, &ce) && ce.Code == 4004:
			reason, fix = "Discord refused the bot token in "+l.cfg.TokenFrom, tokenFix
		case errors.As(err, &ce) && ce.Code == 4014:
			reason, fix = "Discord does not let the bot read messages: the Message Content intent is off (4014 Disallowed intent(s))", intentFix
		}
		l.log.Error("discord: "+reason, "fix", fix, "retry_in", wait)
		l.cfg.Health.Down(reason, fix)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// reroute sends the requests discordgo makes for its built-in REST base
// (from) to the configured one (to), path and query kept.
type reroute struct {
	from, to string
	next     http.RoundTripper
}

func (r *reroute) RoundTrip(req *http.Request) (*http.Response, error) {
	rest, ok := strings.CutPrefix(req.URL.String(), r.from)
	if !ok || r.from == r.to {
		return r.next.RoundTrip(req)
	}
	u, err := url.Parse(r.to + rest)
	if err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	req = req.Clone(req.Context()) // a RoundTripper leaves its request as it was
	req.URL, req.Host = u, u.Host
	return r.next.RoundTrip(req)
}

// Run connects to the Gateway, registers /switchboard, and serves until
// ctx ends; discordgo resumes or reconnects when the socket drops. With
// Config.Leader, the Gateway connection is held only while this replica
// holds the role, and the rest (following its places, HTTP interactions)
// runs from the start.
func (l *Listener) Run(ctx context.Context) error {
	l.places.Start(ctx)
	defer l.places.Wait()
	readyOnce := sync.Once{}
	l.dg.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) {
		readyOnce.Do(func() {
			l.botUserID = r.User.ID
			l.appID = l.cfg.ApplicationID
			if l.appID == "" && r.Application != nil {
				l.appID = r.Application.ID
			}
			close(l.ready)
		})
	})
	// Handlers run on the Gateway's reading goroutine (SyncEvents), one
	// event after the other: a thread's messages reach its worker in the
	// order Discord sent them. onMessage only queues; an interaction,
	// acknowledged by a REST call of its own, goes on a goroutine so that
	// one slow answer holds no message back.
	l.dg.SyncEvents = true
	l.dg.AddHandler(func(_ *discordgo.Session, _ *discordgo.Ready) {
		if !l.leading.Load() {
			// Reconnected by discordgo after this replica gave the
			// connection up: close it again (not here: Open holds the
			// session's lock while it runs the handlers of READY).
			l.wg.Go(func() { _ = l.dg.Close() })
			return
		}
		l.log.Info("discord connected", "bot", l.botUserID)
		l.cfg.Health.Up()
	})
	l.dg.AddHandler(func(_ *discordgo.Session, _ *discordgo.Disconnect) {
		if !l.leading.Load() {
			return // given up: not this replica's to hold
		}
		l.cfg.Health.Degraded("disconnected from Discord's Gateway; reconnecting", "")
		l.wg.Go(func() { l.checkIntents(ctx) }) // a refused intent closes it too (4014)
	})
	l.dg.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
		if l.leading.Load() {
			l.onMessage(ctx, m.Message)
		}
	})
	l.dg.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) {
		if l.leading.Load() {
			l.wg.Go(func() { l.onInteraction(ctx, i.Interaction, nil) })
		}
	})
	if l.cfg.Leader == nil {
		l.gateway(ctx, l.places.Resume)
	} else {
		// Posting needs no Gateway connection: this replica renders the
		// conversations it runs from now on, whichever holds it.
		l.places.Resume()
		l.cfg.Health.Standby(standby)
		l.cfg.Leader(ctx, Role, func(lead context.Context) {
			l.log.Info("discord: this replica holds the bot's Gateway connection now")
			l.gateway(lead, nil)
			if ctx.Err() == nil {
				l.log.Info("discord: this replica gave the bot's Gateway connection up (another replica holds the role)")
				l.cfg.Health.Standby(standby)
			}
		})
	}
	<-ctx.Done()
	l.wg.Wait()
	return nil
}

// gateway holds the bot's Gateway connection until ctx ends: it opens it
// (trying again while it cannot), registers /switchboard once Discord
// said who the bot is, then calls live (if any); it closes the connection
// as it returns.
func (l *Listener) gateway(ctx context.Context, live func()) {
	l.leading.Store(true)
	defer func() {
		l.leading.Store(false)
		_ = l.dg.Close()
	}()
	l.checkIntents(ctx)
	l.open(ctx)
	select {
	case <-l.ready:
	case <-ctx.Done():
		return
	}
	if err := l.registerCommands(ctx); err != nil {
		l.log.Error("discord: registering /switchboard", "err", err)
	}
	if live != nil {
		live()
	}
	<-ctx.Done()
}

// registerCommands puts /switchboard in place by bulk overwrite, once per
// start: in one server when GuildID is set (instant), else globally.
func (l *Listener) registerCommands(ctx context.Context) error {
	_, err := l.dg.ApplicationCommandBulkOverwrite(l.appID, l.cfg.GuildID, []*discordgo.ApplicationCommand{switchboardCommand()}, discordgo.WithContext(ctx))
	return err
}

// switchboardCommand is /switchboard: a subcommand for each session
// command that makes sense in Discord (Discord allows 25, descriptions of
// up to 100 characters), with choices where the session takes a few words.
func switchboardCommand() *discordgo.ApplicationCommand {
	sub := func(name, desc string, opts ...*discordgo.ApplicationCommandOption) *discordgo.ApplicationCommandOption {
		return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionSubCommand, Name: name, Description: desc, Options: opts}
	}
	str := func(name, desc string, required bool) *discordgo.ApplicationCommandOption {
		return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: name, Description: desc, Required: required}
	}
	roles := func(desc string, required bool) *discordgo.ApplicationCommandOption {
		o := str("role", desc, required)
		for _, r := range []collaboration.Role{collaboration.Viewer, collaboration.Member, collaboration.Approver} {
			o.Choices = append(o.Choices, &discordgo.ApplicationCommandOptionChoice{Name: string(r), Value: string(r)})
		}
		return o
	}
	one := 1.0
	return &discordgo.ApplicationCommand{
		Name: "switchboard", Description: "The assistant of this thread",
		Options: []*discordgo.ApplicationCommandOption{
			sub("help", "What the assistant can do here"),
			sub("guide", "Show the guide, or switch to another", str("name", "The guide to switch to", false)),
			sub("tools", "The tools and who must approve them"),
			sub("usage", "Tokens used in this conversation"),
			sub("stop", "Stop the answer under way"),
			sub("reset", "Start a new conversation in this thread"),
			sub("join", "Show a shared conversation here, with its invite code", str("code", "The invite code", true)),
			sub("share", "An invite code for others to join this conversation, shown to you alone",
				roles("What they may do (default: member)", false),
				&discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionInteger, Name: "uses",
					Description: "How many people may join with it (default 10)", MinValue: &one, MaxValue: 1000},
				str("expires", "How long it works, such as 2h or 30m (default 24h)", false)),
			sub("unshare", "Withdraw the open invite codes of this conversation"),
			sub("who", "The people in this conversation, their roles and where they are, to you alone"),
			sub("role", "Give someone in this conversation another role (owner)",
				str("name", "Their name, as /switchboard who shows it", true), roles("Their new role", true)),
			sub("leave", "Stop showing this conversation in this thread or DM"),
			sub("approvals", "The last tool calls approved or denied, by whom and from where, to you alone"),
			sub("memory", "What the assistant remembers about you, to you alone"),
			sub("forget", "Delete one of your memories for good", str("id", "The memory's id, as /switchboard memory lists it", true)),
		},
	}
}

// role is what the listener vouches for of a Discord user (Input.Grant):
// configured approvers (by user id or one of their roles) approve in every
// conversation, unless its owner set their role there with /role.
func (l *Listener) role(userID string, roles []string) collaboration.Role {
	for _, a := range l.accessNow().Approvers {
		if a == userID || slices.Contains(roles, a) {
			return collaboration.Approver
		}
	}
	return ""
}

func (l *Listener) allowed(guildID, channelID, parentID string) bool {
	acc := l.accessNow()
	if guildID != "" && len(acc.AllowedGuilds) > 0 && !slices.Contains(acc.AllowedGuilds, guildID) {
		return false
	}
	if guildID != "" && len(acc.AllowedChannels) > 0 &&
		!slices.Contains(acc.AllowedChannels, channelID) && !slices.Contains(acc.AllowedChannels, parentID) {
		return false
	}
	return true
}

// nameCache remembers channels' kinds (thread or not, and the parent),
// which decide whether a mention opens a thread.
type nameCache struct {
	mu sync.Mutex
	ch map[string]*discordgo.Channel
}

func newNameCache() *nameCache { return &nameCache{ch: map[string]*discordgo.Channel{}} }

func (l *Listener) channel(ctx context.Context, id string) (*discordgo.Channel, error) {
	l.names.mu.Lock()
	c, ok := l.names.ch[id]
	l.names.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := l.dg.Channel(id, discordgo.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	l.names.mu.Lock()
	if len(l.names.ch) > 10_000 {
		clear(l.names.ch)
	}
	l.names.ch[id] = c
	l.names.mu.Unlock()
	return c, nil
}

// authorOf is a Discord user as a session author, named as the server
// shows them: the member's nick, else their global name, else username.
func authorOf(u *discordgo.User, m *discordgo.Member) switchboard.Author {
	name := u.Username
	if u.GlobalName != "" {
		name = u.GlobalName
	}
	if m != nil && m.Nick != "" {
		name = m.Nick
	}
	return switchboard.Author{Channel: Channel, ID: u.ID, Name: name}
}

// globalLimit holds every request back after a global 429 until Discord's
// Retry-After has passed. discordgo waits out a 429 for the request that
// got it, and blocks all routes only when the answer also carries
// X-RateLimit-Reset-After, which a global limit need not.
type globalLimit struct {
	next  http.RoundTripper
	mu    sync.Mutex
	until time.Time
}

func (g *globalLimit) RoundTrip(r *http.Request) (*http.Response, error) {
	g.mu.Lock()
	wait := time.Until(g.until)
	g.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return nil, r.Context().Err()
		}
	}
	resp, err := g.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("X-RateLimit-Global") != "" {
		if secs, perr := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64); perr == nil && secs > 0 {
			g.mu.Lock()
			if until := time.Now().Add(time.Duration(secs * float64(time.Second))); until.After(g.until) {
				g.until = until
			}
			g.mu.Unlock()
		}
	}
	return resp, err
}
