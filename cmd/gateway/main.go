// Command gateway runs Switchboard: the session manager, the listeners and
// the HTTP server, wired from the configuration.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/health"
	"github.com/switchboard-gw/switchboard/listeners/discord"
	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/listeners/stdin"
	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/places"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/anthropic"
	"github.com/switchboard-gw/switchboard/providers/demo"
	"github.com/switchboard-gw/switchboard/providers/gemini"
	"github.com/switchboard-gw/switchboard/providers/openai"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/web"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
	if errors.Is(err, flag.ErrHelp) { // usage printed; asking for it is no failure
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

// startCPUProfile profiles until the returned func is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// writeHeapProfile writes the live heap, after a collection, to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// run is main with its dependencies passed in, so tests drive the real
// wiring with pipes.
func run(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer, environ []string) error {
	// gateway's own flags come first; parsing stops at a command's name
	// (cli.go), which gets --config and --set from here too.
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(errOut)
	configFile := fs.String("config", "config.yaml", "configuration file (YAML); relative paths in it are taken from its folder")
	var sets stringList
	fs.Var(&sets, "set", "override a config key, e.g. --set http.addr=127.0.0.1:9000 (repeatable)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to this file until the gateway stops (for go tool pprof)")
	memProfile := fs.String("memprofile", "", "write a heap profile to this file when the gateway is told to stop, before its connections close (for go tool pprof)")
	session := fs.String("session", "", "the conversation the terminal chat continues: a session id, or "+stdin.SessionTerminal+
		" for the terminal's own; without it, piped input starts a new conversation each run")
	fs.Bool("version", false, "print the version and build, as gateway version does")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage:
  gateway [flags]               run the gateway
  gateway doctor [flags]        check the config, guides, providers, database and listeners
  gateway healthcheck [flags]   exit 0 when a running gateway answers /healthz (for containers)
  gateway status [flags]        what each listener, provider and MCP server of a running gateway says (/readyz)
  gateway usage [flags]         tokens and cost of the turns since a time (--since 7d), by person, guide, model or channel (--by)
  gateway version               print the version and build (or gateway --version)
  gateway help [command]        this text, or a command's flags

--config and --set go before or after the command: gateway --config x.yaml doctor
is gateway doctor --config x.yaml. A command's other flags go after it.
Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagError(err, args)
	}
	if fs.NArg() > 0 || fs.Lookup("version").Value.String() == "true" {
		return runCommand(ctx, fs, out, errOut, environ)
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	cfg, err := config.Load(*configFile, sets, environ)
	if err != nil {
		return err
	}
	log := newLogger(cfg, errOut)
	// While a person chats in the terminal, the log goes to a file and
	// only warnings and errors show in the chat, on lines of their own.
	termName, _ := lookupEnv(environ, "TERM")
	chat := useStdin(cfg.Listeners.Stdin.Enabled, in) && isTerminal(in)
	var notices *stdin.Notices
	logNote := ""
	if chat {
		notices = &stdin.Notices{Fallback: errOut, Styled: isTerminal(errOut) && termName != "dumb"}
		var closeLog func()
		log, logNote, closeLog = chatLogger(cfg, notices)
		defer closeLog()
		defer useDefaultLogger(log)()
	}
	if *session != "" && !useStdin(cfg.Listeners.Stdin.Enabled, in) {
		return fmt.Errorf("--session %s: there is no terminal chat to continue it in (standard input is not a terminal, a pipe or a file, or listeners.stdin.enabled is false)", *session)
	}

	// SIGHUP reloads (reload.go), heard from now on so that one sent while
	// the gateway starts waits for it rather than ending it; not while a
	// person chats in this terminal: closing it sends SIGHUP, which must
	// still end the gateway.
	hup := make(chan os.Signal, 1)
	if !chat {
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	mets := metrics.New()
	parts := newHealth(mets) // health.go: /readyz, switchboard_component_up
	// Traces and the trace log (telemetry.go); off unless configured.
	tel, err := startTelemetry(ctx, cfg, environ, mets, log)
	if err != nil {
		return err
	}
	defer tel.shutdown(log) // after the sessions stopped: their last spans go too
	dbase, err := openDatabase(ctx, cfg, log, mets, parts)
	if err != nil {
		return err
	}
	db := dbase.store
	defer db.Close()
	if dbase.replica != "" {
		// Every line says which replica wrote it: their logs interleave.
		log = log.With("replica", dbase.replica)
	}
	// Semantic recall, when embeddings are configured (embeddings.go).
	recall, err := buildRecall(cfg, environ, db, log)
	if err != nil {
		return err
	}
	var store sessions.Store = db
	if recall != nil {
		store = recallStore{db, recall}
	}

	catalog, err := guides.LoadDir(cfg.Guides.Dir)
	if err != nil {
		return err
	}
	tb, err := buildTools(cfg, environ, db, store, log)
	if err != nil {
		return err
	}
	defer tb.close()
	if err := tb.openWorkspaces(cfg); err != nil {
		return err
	}
	registry := tb.registry
	provs, defaultProvider, err := buildProviders(cfg, environ, log)
	if err != nil {
		return err
	}
	if err := catalog.Check(slices.Sorted(maps.Keys(provs)), registry.Names(), tb.groups()); err != nil {
		return err
	}
	if _, ok := catalog.Get(cfg.Guides.Default); !ok {
		return fmt.Errorf("guides.default: no guide %q in %s (have: %s)", cfg.Guides.Default, cfg.Guides.Dir, strings.Join(catalog.Names(), ", "))
	}
	if _, err := routingTable(cfg, catalog, nil); err != nil { // routing.go
		return err
	}

	if err := checkWebSocket(cfg, environ); err != nil {
		return err
	}
	if err := checkOpenAI(cfg, environ, catalog); err != nil {
		return err
	}
	if recall != nil {
		// Its indexer starts once the configuration is known to be
		// good, and stops before the store closes.
		recall.Register(mets)
		defer runIndexer(ctx, recall, dbase.cluster)()
	}
	// Memories, summaries and the recall index grow with use: their sizes
	// are read during a scrape, at most once a minute (the index's bytes
	// walk its pages: ~60 ms for a million messages).
	mets.StoreSizes(time.Minute, func(ctx context.Context) (metrics.StoreSizes, error) {
		f, err := db.Footprint(ctx)
		if err != nil {
			log.Warn("the store's sizes are not read for /metrics", "err", err)
			return metrics.StoreSizes{}, err
		}
		return metrics.StoreSizes{Memories: f.Memories, Summaries: f.Summaries, IndexedMessages: f.IndexedMessages, IndexBytes: f.IndexBytes}, nil
	})
	for _, p := range provs {
		superviseProvider(p, parts, mets)
	}

	// The HTTP port is bound before the sessions start: a port in use
	// fails start-up at once, and invite links carry the port really
	// bound (127.0.0.1:0 in tests).
	// Metrics have a listener of their own: whoever may chat from beyond
	// this machine may not read them. It is bound first, so its address is
	// logged before http's.
	msrv := listenMetrics(cfg, mets, log)
	ln, err := listenHTTP(cfg, log)
	if err != nil {
		if msrv != nil {
			msrv.ln.Close()
		}
		return err
	}
	defer ln.Close()
	inviteHTTP := cfg.HTTP
	inviteHTTP.Addr = ln.Addr().String()

	sessionsCtx, stopSessions := context.WithCancel(context.Background())
	manager := sessions.NewManager(sessionsCtx, sessions.Config{
		Metrics: mets,
		Store:   store, Guides: catalog, DefaultGuide: cfg.Guides.Default,
		Providers: provs, DefaultProvider: defaultProvider, Tools: registry,
		QueueSize: cfg.Sessions.QueueSize, SubscriberBuffer: cfg.Sessions.SubscriberBuffer,
		IdleTimeout: time.Duration(cfg.Sessions.IdleTimeout), ApprovalTimeout: time.Duration(cfg.Sessions.ApprovalTimeout),
		ToolTimeout: time.Duration(cfg.Sessions.ToolTimeout), Logger: log,
		MaxLive: cfg.Sessions.MaxLive, NewPerMinute: cfg.Sessions.NewPerMinute, DeltaInterval: time.Duration(cfg.Sessions.DeltaInterval),
		Retention: time.Duration(cfg.Storage.Retention), MaxBindings: cfg.Sessions.MaxBindings,
		Cluster:   dbase.sessionsCluster(),
		PublicURL: inviteHTTP.InviteBase(),
		Spending:  spendingOf(cfg), // usage.go; a reload swaps it with manager.SetSpending
		Tracer:    tel.tracer(),
		Uploads:   tb.uploads(), UploadLimits: uploadLimits(cfg.Uploads),
		Files: tb.files, Forget: func(ids []string) {
			tb.forget(ids)
			if recall != nil {
				recall.Forget(ids)
			}
		},
	})
	if err := startRouting(cfg, catalog, manager); err != nil { // routing.go
		stopSessions()
		return err
	}
	// Sessions stop after the listeners, so a turn in flight can still be
	// stored; then the store flushes on Close.
	defer func() {
		stopSessions()
		manager.Wait()
	}()
	// Listeners that render bound sessions register with the manager
	// before Recover, so the turns it resumes reach their threads.
	defaultGuide, _ := catalog.Get(cfg.Guides.Default)
	slackListener, err := newSlack(cfg, environ, manager, defaultGuide, parts, tel.places(), log)
	if err != nil {
		return err
	}
	var leader func(context.Context, string, func(context.Context)) // one gateway: always
	if dbase.cluster != nil {
		leader = dbase.cluster.Lead // replicas: whichever holds the role
	}
	discordListener, err := newDiscord(cfg, environ, manager, leader, parts, tel.places(), log)
	if err != nil {
		return err
	}

	// The sandbox is checked and MCP servers listed before the turns a
	// restart resumes may call them.
	tb.start(ctx)
	if tb.mcp != nil {
		go followMCP(ctx, tb.mcp, parts)
	}
	// Guides reload when their files change; config.yaml and the guides
	// on SIGHUP (reload.go).
	rl := newReloader(*configFile, sets, environ, cfg, catalog, tb, manager, provs, parts, mets, log)
	rl.handle(listenerAccess(slackListener, discordListener))
	rl.handle(routingReload(catalog, manager)) // routing.go
	rl.follow(ctx, hup)

	// What a crash or the last shutdown left under way goes on now.
	if err := manager.Recover(ctx); err != nil {
		log.Error("some sessions could not be resumed", "err", err)
	}
	if dbase.cluster != nil {
		// Leases kept, conversations of replicas gone taken over, other
		// replicas' events and inputs heard, until the sessions stop.
		go dbase.cluster.Run(sessionsCtx, manager)
	}

	// Listeners outlive ctx: on shutdown they keep serving while the
	// turns under way finish (Drain), then stop.
	listenCtx, stopListeners := context.WithCancel(context.Background())
	defer stopListeners()
	errc := make(chan error, 5)
	running := 0

	if msrv != nil {
		running++
		go func() { errc <- serveHTTP(listenCtx, msrv, log) }()
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", readyz(parts))
	// On a loopback http.addr only this machine reaches it, so /metrics is
	// served there too, as the contract's make run promises; a gateway
	// bound beyond loopback serves metrics on metrics.addr alone.
	if host, _, _ := net.SplitHostPort(cfg.HTTP.Addr); isLoopbackHost(host) {
		mux.Handle("GET /metrics", mets.Handler())
	}
	if cfg.Listeners.WebSocket.Enabled {
		wsc := cfg.Listeners.WebSocket
		mux.Handle("GET /ws", websocket.New(listenCtx, websocket.Config{
			AllowedOrigins: wsc.AllowedOrigins, ReadLimit: wsc.ReadLimit, SendBuffer: wsc.SendBuffer,
			SendBufferBytes: wsc.SendBufferBytes, ImageHosts: wsc.ImageHosts,
			MaxConnsPerIP: wsc.MaxConnsPerIP, NewSessionsPerIP: wsc.NewSessionsPerIP,
			PublicURL: cfg.HTTP.PublicURL, Addr: cfg.HTTP.Addr,
			Auth: websocketAuth(wsc.Auth, environ), Metrics: mets,
		}, manager, log))
		mux.Handle("/", web.HandlerWith(web.Options{ImageHosts: wsc.ImageHosts}))
	}
	var handler http.Handler = mux
	if !cfg.Listeners.WebSocket.Enabled || cfg.Listeners.WebSocket.Auth.Mode == config.AuthNone {
		// Without authentication only the Host tells this gateway's pages
		// from a page on a name rebound to this machine.
		handler = web.HostGuard(cfg.HTTP.PublicURL, mux)
	}
	// Slack's and Discord's requests are authenticated by their
	// signatures, and come through whatever name the proxy in front has:
	// outside the Host guard.
	if slackHTTP, discordHTTP := slackListener != nil && cfg.Listeners.Slack.Mode == config.SlackHTTP,
		discordListener != nil && cfg.Listeners.Discord.PublicKey != ""; slackHTTP || discordHTTP {
		outer := http.NewServeMux()
		if slackHTTP {
			outer.Handle("/slack/", slackListener.Handler())
		}
		if discordHTTP {
			outer.Handle(discord.InteractionsPath, discordListener.Handler())
		}
		outer.Handle("/", handler)
		handler = outer
	}
	handler = mountOpenAI(listenCtx, cfg, environ, handler, manager, catalog, log)
	srv := newHTTPServer(cfg, ln, handler)
	running++
	go func() { errc <- serveHTTP(listenCtx, srv, log) }()
	if cfg.Listeners.WebSocket.Enabled {
		parts.Add("websocket", "listener", true).Up() // its port is bound: it serves
	}
	if cfg.Listeners.OpenAI.Enabled {
		parts.Add("openai", "listener", true).Up()
	}

	if slackListener != nil {
		running++
		go func() { errc <- slackListener.Run(listenCtx) }()
	}
	if discordListener != nil {
		running++
		go func() { errc <- discordListener.Run(listenCtx) }()
	}

	if useStdin(cfg.Listeners.Stdin.Enabled, in) {
		interactive := chat
		// Styles (bold, italics, dim; no colours) and redrawing the
		// prompt only for a person's terminal that shows them.
		l := &stdin.Listener{
			In: in, Out: out, Interactive: interactive, Author: localUser(environ),
			Styled:   interactive && isTerminal(out) && termName != "dumb",
			Sessions: manager, Logger: log, // no guide: routing's, else guides.default
			ImageDir: dataDir(cfg, "images"),
			Session:  *session, Notices: notices, LogNote: logNote,
		}
		running++
		go func() {
			err := l.Run(listenCtx)
			if errors.Is(err, stdin.ErrNoInput) {
				// An empty pipe or file (a service's standard input):
				// nothing to answer, so the gateway goes on serving.
				log.Info("standard input ended before its first line: no terminal chat, serving HTTP")
				errc <- nil
				return
			}
			// Input is over: in a pipe that is the end of the run; in a
			// terminal it is Ctrl-D or /quit. Either way, stop the gateway.
			cancel()
			errc <- err
		}()
	} else if cfg.Listeners.Stdin.Enabled == config.StdinAuto {
		log.Info("no terminal chat: standard input is not a terminal, a pipe or a file")
	}

	var firstErr error
	for running > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case err := <-errc:
			running--
			if err != nil {
				firstErr = err
				cancel()
			}
		}
	}
	if *memProfile != "" {
		// What the gateway holds while it serves: its connections and
		// sessions are all still there.
		if err := writeHeapProfile(*memProfile); err != nil {
			log.Warn("heap profile not written", "err", err)
		}
	}
	// A signal, the end of stdin or a listener's failure: finish the
	// turns under way, for up to the grace period, then stop listening.
	grace := time.Duration(cfg.Sessions.ShutdownGrace)
	log.Info("shutting down: finishing the turns under way", "grace", grace)
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), grace)
	manager.Drain(drainCtx)
	cancelDrain()
	stopListeners()
	for ; running > 0; running-- {
		if err := <-errc; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// checkWebSocket refuses to serve /ws without authentication beyond this
// machine unless the operator said so (anyone who can reach it could talk
// to the model on the operator's account), and refuses secrets named by an
// environment variable that is not set (an empty JWT secret would accept
// tokens anyone can sign).
func checkWebSocket(cfg config.Config, environ []string) error {
	ws := cfg.Listeners.WebSocket
	if !ws.Enabled {
		return nil
	}
	switch ws.Auth.Mode {
	case config.AuthJWT:
		switch secret := ws.Auth.Secret(environ); {
		case secret == "":
			return fmt.Errorf("listeners.websocket.auth.jwt_secret_env: the environment variable %s is not set", ws.Auth.JWTSecretEnv)
		case len(secret) < config.MinJWTSecret:
			return fmt.Errorf("listeners.websocket.auth.jwt_secret_env: the secret in %s must be at least %d bytes; e.g. openssl rand -hex 32", ws.Auth.JWTSecretEnv, config.MinJWTSecret)
		}
		return nil
	case config.AuthToken:
		for i, t := range ws.Auth.Tokens {
			if t.Secret(environ) == "" {
				return fmt.Errorf("listeners.websocket.auth.tokens[%d].token_env: the environment variable %s is not set", i, t.TokenEnv)
			}
		}
		return nil
	}
	if ws.Auth.AllowUnauthenticated {
		return nil
	}
	if host, _, _ := net.SplitHostPort(cfg.HTTP.Addr); isLoopbackHost(host) {
		return nil
	}
	return fmt.Errorf("http.addr %s is not a loopback address and listeners.websocket.auth.mode is none: "+
		"anyone who reaches it could use your model. Set auth.mode to token or jwt (see docs/websocket.md), "+
		"or set listeners.websocket.auth.allow_unauthenticated: true if a proxy in front authenticates", cfg.HTTP.Addr)
}

// newDiscord builds the Discord listener when it is enabled (nil
// otherwise), refusing a token variable that is not set. leader, for a
// replica, runs the Gateway connection while this one holds the role.
func newDiscord(cfg config.Config, environ []string, mgr *sessions.Manager, leader func(context.Context, string, func(context.Context)), parts *health.Registry, tm places.Telemetry, log *slog.Logger) (*discord.Listener, error) {
	dc := cfg.Listeners.Discord
	if !dc.Enabled {
		return nil, nil
	}
	token := dc.BotToken(environ)
	if token == "" {
		return nil, fmt.Errorf("listeners.discord.token_env: the environment variable %s is not set", dc.TokenEnv)
	}
	return discord.New(discord.Config{
		Token: token, ApplicationID: dc.ApplicationID, PublicKey: dc.PublicKey, APIURL: dc.APIURL, GuildID: dc.GuildID,
		AllowedGuilds: dc.AllowedGuilds, AllowedChannels: dc.AllowedChannels, Approvers: dc.Approvers,
		DownloadTimeout: time.Duration(dc.DownloadTimeout),
		Health:          parts.Add(discord.Channel, "listener", true),
		TokenFrom:       secretSource(dc.Token, dc.TokenEnv, "listeners.discord.token"),
		Leader:          leader, // the bot's Gateway connection: one replica's
		Telemetry:       tm,
	}, mgr, log)
}

// secretSource says where a secret came from, for an error that tells
// the operator what to change: the key itself when it holds the value,
// else the variable its _env key names.
func secretSource(value, env, key string) string {
	if value != "" || env == "" {
		return key
	}
	return "the environment variable " + env + " (" + key + "_env)"
}

// newSlack builds the Slack listener when it is enabled (nil otherwise),
// refusing a token variable that is not set.
func newSlack(cfg config.Config, environ []string, mgr *sessions.Manager, guide guides.Guide, parts *health.Registry, tm places.Telemetry, log *slog.Logger) (*slack.Listener, error) {
	sc := cfg.Listeners.Slack
	if !sc.Enabled {
		return nil, nil
	}
	bot, app, signing := sc.Secrets(environ)
	switch {
	case bot == "":
		return nil, fmt.Errorf("listeners.slack.bot_token_env: the environment variable %s is not set", sc.BotTokenEnv)
	case sc.Mode == config.SlackSocket && app == "":
		return nil, fmt.Errorf("listeners.slack.app_token_env: the environment variable %s is not set", sc.AppTokenEnv)
	case sc.Mode == config.SlackHTTP && signing == "":
		return nil, fmt.Errorf("listeners.slack.signing_secret_env: the environment variable %s is not set", sc.SigningSecretEnv)
	}
	return slack.New(slack.Config{
		Mode: sc.Mode, BotToken: bot, AppToken: app, SigningSecret: signing, APIURL: sc.APIURL,
		AllowedChannels: sc.AllowedChannels, AllowedUsers: sc.AllowedUsers, Approvers: sc.Approvers,
		Greeting: guide.Greeting, Suggestions: guide.Suggestions, DownloadTimeout: time.Duration(sc.DownloadTimeout),
		AppTokenFrom: secretSource(sc.AppToken, sc.AppTokenEnv, "listeners.slack.app_token"),
		BotTokenFrom: secretSource(sc.BotToken, sc.BotTokenEnv, "listeners.slack.bot_token"),
		Health:       parts.Add(slack.Channel, "listener", true),
		Telemetry:    tm,
	}, mgr, log)
}

// websocketAuth resolves the configured secrets.
func websocketAuth(a config.WebSocketAuth, environ []string) websocket.Auth {
	out := websocket.Auth{Mode: a.Mode, JWTSecret: []byte(a.Secret(environ))}
	for _, t := range a.Tokens {
		out.Tokens = append(out.Tokens, websocket.StaticToken{Token: t.Secret(environ), UserID: t.User, Name: t.Name, Role: t.Role})
	}
	return out
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	return slog.New(logHandler(cfg, w))
}

// logLevel is log.level's (info if it does not parse).
func logLevel(cfg config.Config) slog.Level {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Log.Level)); err != nil {
		level = slog.LevelInfo
	}
	return level
}

// logHandler writes log.level and above to w in log.format.
func logHandler(cfg config.Config, w io.Writer) slog.Handler {
	opts := &slog.HandlerOptions{Level: logLevel(cfg)}
	if cfg.Log.Format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// logFileName is the terminal chat's log file, beside the database.
const logFileName = "gateway.log"

// chatLogger is the log while a person chats in the terminal: all of it
// (log.level, log.format) is appended to gateway.log beside the database,
// never printed into the conversation, and the warnings and errors are
// also shown in the chat, apart from it (notices). note says where the log
// goes, for the start of the chat. A file that cannot be opened leaves the
// warnings and errors alone, and note says why.
func chatLogger(cfg config.Config, notices *stdin.Notices) (log *slog.Logger, note string, closeLog func()) {
	shown := notices.Handler(max(logLevel(cfg), slog.LevelWarn))
	f, err := openLogFile(cfg)
	if err != nil {
		return slog.New(shown), fmt.Sprintf("The log cannot be written to a file (%v): only its warnings and errors are shown, here.", err), func() {}
	}
	note = "The log goes to " + f.Name() + "; warnings and errors are shown here too."
	return slog.New(slog.NewMultiHandler(logHandler(cfg, f), shown)), note, func() { f.Close() }
}

// openLogFile opens the chat's log file for appending; with the database
// in memory, a new file in the temporary directory.
func openLogFile(cfg config.Config) (*os.File, error) {
	dsn := cfg.Storage.DSN
	if dsn == ":memory:" || strings.HasPrefix(dsn, "file::memory:") {
		return os.CreateTemp("", "switchboard-*.log")
	}
	path := dataDir(cfg, logFileName)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
}

// useDefaultLogger makes log the default of slog and of the log package
// (what a library logs on its own, such as net/http's errors) until the
// returned func puts the previous ones back.
func useDefaultLogger(log *slog.Logger) (restore func()) {
	prev, w, flags := slog.Default(), stdlog.Writer(), stdlog.Flags()
	slog.SetDefault(log)
	return func() {
		slog.SetDefault(prev)
		stdlog.SetOutput(w)
		stdlog.SetFlags(flags)
	}
}

// buildProviders makes one resilient provider per configured entry. With no
// usable credentials anywhere, every name answers with the demo model, and
// the log says which variable would enable a real one.
func buildProviders(cfg config.Config, environ []string, log *slog.Logger) (map[string]*providers.Resilient, string, error) {
	provs := map[string]*providers.Resilient{}
	var missing []string
	for i, pc := range cfg.Providers {
		key, _ := pc.Key(environ)
		pcfg := providers.Config{Name: pc.Name, Kind: pc.Kind, BaseURL: pc.BaseURL, APIKey: key, Model: pc.Model, HTTPClient: providerClient()}
		var (
			p   providers.Provider
			err error
		)
		switch {
		case pc.Kind == "demo":
			p = &demo.Provider{}
		case key == "" && needsKey(pc) && pc.Fallback == config.FallbackDemo:
			missing = append(missing, credentialHint(i, pc))
			continue
		case key == "" && needsKey(pc):
			return nil, "", fmt.Errorf("providers[%d] (%s): no API key: set %s, or add fallback: demo to this provider "+
				"to answer with the offline demo model until it is set", i, pc.Name, credentialHint(i, pc))
		case pc.Kind == "openai":
			p, err = openai.New(pcfg)
		case pc.Kind == "ollama":
			p, err = openai.NewOllama(pcfg)
		case pc.Kind == "anthropic":
			p, err = anthropic.New(pcfg)
		case pc.Kind == "gemini":
			p, err = gemini.New(pcfg)
		default:
			err = fmt.Errorf("unknown kind %q", pc.Kind)
		}
		if err != nil {
			return nil, "", fmt.Errorf("providers[%d] (%s): %w", i, pc.Name, err)
		}
		provs[pc.Name] = &providers.Resilient{
			Name: pc.Name, Kind: pc.Kind, Model: pc.Model, Provider: p, Logger: log.With("provider", pc.Name),
			Policy:        providers.Policy{MaxRetries: pc.MaxRetries, IdleTimeout: time.Duration(pc.Timeout)},
			ContextWindow: cmp.Or(pc.ContextWindow, providers.ContextWindow(pc.Model)),
			NoVision:      !pc.Vision,
		}
	}
	hint := "Set " + strings.Join(missing, ", or ") + " to use a real model."
	if len(missing) == 0 {
		hint = "Add a provider with credentials to config.yaml to use a real model."
	}
	if len(provs) == 0 {
		log.Warn("no model provider credentials found: answering with the offline demo model. " + hint)
	} else if len(missing) > 0 {
		log.Warn("some providers have no credentials and answer with the offline demo model. " + hint)
	}
	demoModel := &providers.Resilient{Name: "demo", Kind: "demo", Provider: &demo.Provider{Hint: hint}, Logger: log}
	for _, pc := range cfg.Providers {
		if _, ok := provs[pc.Name]; !ok {
			provs[pc.Name] = demoModel
		}
	}
	def := "demo"
	if len(cfg.Providers) > 0 {
		def = cfg.Providers[0].Name
	} else {
		provs[def] = demoModel
	}
	return provs, def, nil
}

// providerClient is one provider's connection pool. Go's default keeps two
// idle connections per host, so with many sessions streaming at once every
// other request would open a new connection (a TLS handshake to a hosted
// API, a TIME_WAIT socket each); this keeps enough for the concurrency a
// gateway sees. Timeouts stay with providers.Resilient.
func providerClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 512
	return &http.Client{Transport: t}
}

// needsKey: hosted APIs need a key; a local OpenAI-compatible server
// (a base_url on loopback, or kind ollama) usually does not.
func needsKey(pc config.Provider) bool {
	if pc.Kind == "ollama" {
		return false
	}
	return pc.BaseURL == "" || !strings.Contains(pc.BaseURL, "127.0.0.1") && !strings.Contains(pc.BaseURL, "localhost")
}

func credentialHint(i int, pc config.Provider) string {
	if pc.APIKeyEnv != "" {
		return fmt.Sprintf("the environment variable %s (providers[%d].api_key_env)", pc.APIKeyEnv, i)
	}
	return fmt.Sprintf("providers[%d].api_key (or api_key_env) in the config", i)
}

func lookupEnv(environ []string, name string) (string, bool) {
	if name == "" {
		return "", false
	}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, v != ""
		}
	}
	return "", false
}

// useStdin decides whether the terminal listener runs. auto means what a
// person running the gateway means: a terminal, a pipe or a file they
// redirected are input to answer; /dev/null, a closed standard input (Go
// opens /dev/null in its place) or another device is what a service gets
// from systemd or docker, and is not.
func useStdin(mode string, in io.Reader) bool {
	switch mode {
	case "true":
		return true
	case "false":
		return false
	}
	if in == nil {
		return false
	}
	f, ok := in.(*os.File)
	if !ok {
		return true // a reader handed in: lines to answer
	}
	if isTerminal(f) {
		return true
	}
	st, err := f.Stat()
	if err != nil {
		return false // closed or invalid
	}
	m := st.Mode()
	// A socket is a pipe too for some parents (Node's child_process, ssh).
	return m.IsRegular() || m&os.ModeNamedPipe != 0 || m&os.ModeSocket != 0
}

// isTerminal reports whether a standard stream (an *os.File) is a terminal.
func isTerminal(stream any) bool {
	f, ok := stream.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

func localUser(environ []string) switchboard.Author {
	name, _ := lookupEnv(environ, "USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "local"
	}
	return switchboard.Author{Channel: "stdin", ID: name, Name: name}
}

// dataDir is a folder in storage.data_dir, or beside the database, for
// what the gateway keeps in files (the terminal's images); in the
// temporary directory when the database is in memory, in ./data with
// PostgreSQL.
func dataDir(cfg config.Config, name string) string {
	if d := cfg.Storage.DataDir; d != "" {
		return filepath.Join(d, name)
	}
	dsn := cfg.Storage.DSN
	if config.IsPostgres(dsn) {
		return filepath.Join("data", name)
	}
	if dsn == ":memory:" || strings.HasPrefix(dsn, "file::memory:") {
		return filepath.Join(os.TempDir(), "switchboard-"+name)
	}
	dsn, _, _ = strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	return filepath.Join(filepath.Dir(dsn), name)
}

// listenHTTP binds the HTTP address now, so a port in use fails start-up
// with a clear error instead of later in a goroutine.
func listenHTTP(cfg config.Config, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return nil, fmt.Errorf("http.addr %s: %w", cfg.HTTP.Addr, err)
	}
	log.Info("http listening", "addr", ln.Addr().String())
	return ln, nil
}

// newHTTPServer is the server that will serve mux on ln.
func newHTTPServer(cfg config.Config, ln net.Listener, mux http.Handler) *httpServer {
	return &httpServer{ln: ln, srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// A whole request; an upgraded WebSocket sets its own deadlines.
		ReadTimeout:    time.Duration(cfg.HTTP.ReadTimeout),
		IdleTimeout:    time.Duration(cfg.HTTP.IdleTimeout),
		MaxHeaderBytes: 64 << 10,
	}}
}

// listenMetrics binds metrics.addr, or returns nil when it is empty or
// cannot be bound: the gateway serves its users without metrics rather
// than not at all, and says so.
func listenMetrics(cfg config.Config, mets *metrics.Metrics, log *slog.Logger) *httpServer {
	addr := cfg.Metrics.Addr
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Warn("metrics are not served: metrics.addr cannot be bound", "addr", addr, "err", err)
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", mets.Handler())
	var handler http.Handler = mux
	if host, _, _ := net.SplitHostPort(addr); isLoopbackHost(host) {
		handler = web.HostGuard("", mux) // reached by loopback names only
	}
	log.Info("metrics listening", "addr", ln.Addr().String())
	return &httpServer{ln: ln, srv: &http.Server{
		Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: time.Duration(cfg.HTTP.IdleTimeout), MaxHeaderBytes: 64 << 10,
	}}
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type httpServer struct {
	ln  net.Listener
	srv *http.Server
}

func serveHTTP(ctx context.Context, h *httpServer, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- h.srv.Serve(h.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("http shutdown", "err", err)
	}
	return nil
}
