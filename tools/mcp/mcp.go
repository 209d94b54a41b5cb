// Package mcp makes the tools of MCP (Model Context Protocol) servers
// tools of the gateway. A stdio server runs as a child process, restarted
// with backoff when it dies and stopped with the gateway; a Streamable HTTP
// server is reached at its URL. Each server's tools are listed when it
// connects and again when it says its list changed; they appear to the
// model as server__tool (see ToolName) with the server's JSON Schema, and a
// call goes to the server with the caller's context, so the gateway's tool
// timeout applies. A server that is down answers its tools at once with an
// error the model can read. Each message a server sends is bounded before
// it is read (ServerConfig.MaxResponseMB): a call whose answer is larger
// fails with an error telling the model to ask for less.
//
// The package is built on the official SDK,
// github.com/modelcontextprotocol/go-sdk.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gw/switchboard/tools"
)

// ServerConfig is one MCP server, an entry of tools.mcp in config.yaml.
// Exactly one of Command (a stdio server) and URL (a Streamable HTTP
// server) is set.
type ServerConfig struct {
	// Name namespaces the server's tools: guides say name.tool or name.*.
	Name string `koanf:"name"`
	// Command is the program and its arguments, run without a shell.
	Command []string `koanf:"command"`
	// Env is the child's environment besides PATH and HOME: nothing else
	// of the gateway's environment reaches it. A value may name the
	// gateway's variables as ${VAR}.
	Env map[string]string `koanf:"env"`
	// URL is the Streamable HTTP endpoint (http or https).
	URL string `koanf:"url"`
	// Headers are sent with every request to URL (not to a host it
	// redirects to); a value may name the gateway's variables as ${VAR}:
	// Authorization: "Bearer ${GITHUB_TOKEN}".
	Headers map[string]string `koanf:"headers"`
	// MaxResponseMB bounds each message the server sends, in MiB: an
	// answer, an event of its event stream, a message (a line) of a stdio
	// server (1-64; 0 is 8). A call whose answer is larger fails with an error
	// the model reads; a stdio server is then restarted.
	MaxResponseMB int `koanf:"max_response_mb"`
}

// maxResponse is the bound on each message of the server, in bytes.
func (c ServerConfig) maxResponse() int {
	if c.MaxResponseMB == 0 {
		return defaultMaxResponseMB << 20
	}
	return c.MaxResponseMB << 20
}

// Validate checks the entry's shape; it does not look at the environment.
func (c ServerConfig) Validate() error {
	if err := validServerName(c.Name); err != nil {
		return fmt.Errorf("tools.mcp: %w", err)
	}
	where := "tools.mcp[" + c.Name + "]"
	switch {
	case len(c.Command) > 0 && c.URL != "":
		return fmt.Errorf("%s: set command (a stdio server) or url (a Streamable HTTP server), not both", where)
	case len(c.Command) == 0 && c.URL == "":
		return fmt.Errorf("%s: set command (a stdio server) or url (a Streamable HTTP server)", where)
	case len(c.Command) > 0:
		if strings.TrimSpace(c.Command[0]) == "" {
			return fmt.Errorf("%s: command: the program is empty", where)
		}
		if len(c.Headers) > 0 {
			return fmt.Errorf("%s: headers are for url servers; give a stdio server its secrets in env", where)
		}
	default:
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s: url %q: want an http:// or https:// URL", where, c.URL)
		}
		if len(c.Env) > 0 {
			return fmt.Errorf("%s: env is for command servers; send a url server its secrets in headers", where)
		}
		for k := range c.Headers {
			if !validHeaderName(k) {
				return fmt.Errorf("%s: headers: %q is not a header name", where, k)
			}
		}
	}
	if c.MaxResponseMB < 0 || c.MaxResponseMB > maxMaxResponseMB {
		return fmt.Errorf("%s: max_response_mb: want 1 to %d (MiB), or 0 for the default %d", where, maxMaxResponseMB, defaultMaxResponseMB)
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%s: env: %q is not a variable name", where, k)
		}
	}
	return nil
}

// Status is what the gateway knows of one server right now.
type Status struct {
	Name      string
	Transport string // "stdio" or "http"
	// State is "starting" (first connection under way), "running",
	// "restarting" (down, the next attempt is scheduled) or "stopped".
	State     string
	Tools     int
	Restarts  int    // connections lost or failed since the start
	LastError string // why it last went down; empty if it never did
}

// Server states.
const (
	StateStarting   = "starting"
	StateRunning    = "running"
	StateRestarting = "restarting"
	StateStopped    = "stopped"
)

// Manager runs the configured MCP servers and offers their tools.
type Manager struct {
	log *slog.Logger
	// servers is the list in force, in configuration order: never changed
	// in place, Prepare's apply swaps in another.
	servers atomic.Pointer[[]*server]
	changed chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	started bool
	closed  bool
	// watch is closed and replaced whenever a server's state or tools
	// change, for whoever waits on a condition (the tests).
	watch chan struct{}

	// Knobs the tests turn; New sets the production values.
	backoffMin, backoffMax time.Duration
	connectTimeout         time.Duration
	grace                  time.Duration // a stdio child's time to exit after stdin closes, and after SIGTERM
}

// New checks the servers and resolves the ${VAR} references in their Env
// and Headers from environ (the gateway's environment); it starts nothing.
// A reference to a variable that is not set is an error, as a key missing
// from the server would only show up as failing calls later.
func New(servers []ServerConfig, environ []string, logger *slog.Logger) (*Manager, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		log:     logger,
		changed: make(chan struct{}, 1),
		ctx:     ctx, cancel: cancel,
		watch:          make(chan struct{}),
		backoffMin:     time.Second,
		backoffMax:     time.Minute,
		connectTimeout: 30 * time.Second,
		grace:          3 * time.Second,
	}
	list, err := m.build(servers, environ, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	m.servers.Store(&list)
	return m, nil
}

// list is the servers in force.
func (m *Manager) list() []*server { return *m.servers.Load() }

// build checks the configurations and makes their servers, keeping from
// keep those whose configuration is the same.
func (m *Manager) build(servers []ServerConfig, environ []string, keep []*server) ([]*server, error) {
	seen := map[string]bool{}
	var out []*server
	for _, c := range servers {
		if err := c.Validate(); err != nil {
			return nil, err
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("tools.mcp: server %q is configured twice", c.Name)
		}
		seen[c.Name] = true
		if i := slices.IndexFunc(keep, func(s *server) bool { return reflect.DeepEqual(s.cfg, c) }); i >= 0 {
			out = append(out, keep[i])
			continue
		}
		s, err := newServer(m, c, environ)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Changes are what a Prepare's apply did: the servers added, removed and
// replaced (their settings changed), by name.
type Changes struct {
	Added, Removed, Replaced []string
}

// Prepare checks a new list of servers and makes those it adds or whose
// settings changed, resolving their ${VAR}s from environ, without
// starting or stopping any: an error changes nothing. apply puts the list
// in force: servers no longer listed, and the old versions of those
// replaced, are stopped as Close stops them (their calls under way fail);
// the new ones are started, if the Manager is (not waited for: their
// tools appear once they are listed, Changed is signalled). Servers
// whose settings are the same run on untouched. apply must be called at
// most once, and not after Close.
func (m *Manager) Prepare(servers []ServerConfig, environ []string) (apply func() Changes, err error) {
	old := m.list()
	next, err := m.build(servers, environ, old)
	if err != nil {
		return nil, err
	}
	return func() Changes {
		var ch Changes
		names := map[string]bool{}
		for _, s := range next {
			names[s.cfg.Name] = true
		}
		var stop []*server
		for _, s := range old {
			if slices.Contains(next, s) {
				continue
			}
			stop = append(stop, s)
			if names[s.cfg.Name] {
				ch.Replaced = append(ch.Replaced, s.cfg.Name)
			} else {
				ch.Removed = append(ch.Removed, s.cfg.Name)
			}
		}
		for _, s := range next {
			if !slices.Contains(old, s) && !slices.Contains(ch.Replaced, s.cfg.Name) {
				ch.Added = append(ch.Added, s.cfg.Name)
			}
		}
		m.mu.Lock()
		m.servers.Store(&next)
		started := m.started && !m.closed
		m.mu.Unlock()
		for _, s := range stop {
			s.halt()
		}
		if started {
			for _, s := range next {
				if !slices.Contains(old, s) {
					m.launch(s)
				}
			}
		}
		m.notifyChanged()
		m.bump()
		return ch
	}, nil
}

// launch runs s until the Manager closes or s is halted.
func (m *Manager) launch(s *server) {
	ctx, cancel := context.WithCancel(m.ctx)
	s.cancel = cancel
	s.stopped = make(chan struct{})
	m.wg.Go(func() {
		defer close(s.stopped)
		s.run(ctx)
	})
}

// Start connects every server and waits until each has been listed or has
// failed once, or ctx ends: a server that fails is logged and tried again
// with backoff (1s doubling to 1m) in the background, its tools appearing
// when it comes up. Start returns an error only when called twice or after
// Close.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started || m.closed {
		m.mu.Unlock()
		return errors.New("mcp: Start called twice or after Close")
	}
	m.started = true
	list := m.list()
	m.mu.Unlock()
	for _, s := range list {
		m.launch(s)
	}
	for _, s := range list {
		select {
		case <-s.firstDone:
		case <-ctx.Done():
			m.log.Warn("mcp: server still starting; its tools appear once it is up", "server", s.cfg.Name)
		}
	}
	return nil
}

// Tools returns the tools of every server, sorted by name: the last list
// each server gave, also while it is down (its tools then answer that it is
// not running). A tool whose schema is not valid JSON Schema is left out
// (with a warning naming it when the server is listed).
func (m *Manager) Tools() []tools.Tool {
	var out []tools.Tool
	for _, s := range m.list() {
		s.mu.Lock()
		for _, e := range s.tools {
			out = append(out, e.tool)
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b tools.Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Group returns the tools of one server named by GatewayName
// ("github.create_issue"), sorted, for tools.Registry.SetGroup; none for a
// server that is not configured or never listed.
func (m *Manager) Group(server string) []tools.Tool {
	var out []tools.Tool
	for _, s := range m.list() {
		if s.cfg.Name != server {
			continue
		}
		s.mu.Lock()
		for _, e := range s.tools {
			t := e.tool
			t.Name = GatewayName(server, e.mcpName)
			out = append(out, t)
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b tools.Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Changed receives a value after the tool list changed (a server came up,
// said its list changed, or listed differently after a restart); then call
// Tools again. Signals coalesce: one receiver, and one value may stand for
// several changes.
func (m *Manager) Changed() <-chan struct{} { return m.changed }

// Servers returns the configured server names, in configuration order.
func (m *Manager) Servers() []string {
	list := m.list()
	names := make([]string, len(list))
	for i, s := range list {
		names[i] = s.cfg.Name
	}
	return names
}

// Status returns each server's state, in configuration order.
func (m *Manager) Status() []Status {
	list := m.list()
	out := make([]Status, len(list))
	for i, s := range list {
		out[i] = s.status()
	}
	return out
}

// Close stops every server: a stdio child gets its stdin closed, then
// SIGTERM, then SIGKILL, a grace period apart; calls under way fail. Close
// waits for that and is safe to call more than once.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	started := m.started
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	if !started {
		for _, s := range m.list() {
			s.set(func() { s.state = StateStopped })
		}
	}
	return nil
}

// notifyChanged signals Changed without blocking: a signal already waiting
// covers this change too.
func (m *Manager) notifyChanged() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// bump wakes whoever waits for a state change.
func (m *Manager) bump() {
	m.mu.Lock()
	close(m.watch)
	m.watch = make(chan struct{})
	m.mu.Unlock()
}

// Watch returns a channel that the next change of a server's state or
// tools closes: read Status then, and Watch again.
func (m *Manager) Watch() <-chan struct{} { return m.watching() }

// watching returns the channel the next state change closes.
func (m *Manager) watching() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.watch
}
