package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-gw/switchboard/tools"
)

// Bounds on what one server may offer: each tool's name, schema and
// description go to the model with every request.
const (
	maxTools       = 128
	maxSchemaBytes = 32 << 10
	maxDescription = 2048
)

// server is one configured MCP server and the goroutine keeping it
// connected.
type server struct {
	m      *Manager
	cfg    ServerConfig
	log    *slog.Logger
	env    []string    // a stdio server's environment
	header http.Header // a Streamable HTTP server's headers
	client *sdk.Client
	// relist is signalled when the server says its tool list changed; the
	// run loop lists again (not the SDK's notification handler, which must
	// not wait on a request of the same connection).
	relist chan struct{}
	// drop is signalled by a call that found the connection broken.
	drop      chan struct{}
	firstDone chan struct{}
	firstOnce sync.Once
	// cancel ends run, and stopped is closed once it has (launch).
	cancel  context.CancelFunc
	stopped chan struct{}

	mu       sync.Mutex
	state    string
	lastErr  string
	restarts int
	cs       *sdk.ClientSession // nil while down
	broken   error              // why a call gave up on cs, if one did
	tools    []entry
}

// entry is one listed tool.
type entry struct {
	mcpName string
	sig     string // what the model sees of it, to tell a changed list
	tool    tools.Tool
}

func newServer(m *Manager, c ServerConfig, environ []string) (*server, error) {
	s := &server{
		m: m, cfg: c, log: m.log,
		relist:    make(chan struct{}, 1),
		drop:      make(chan struct{}, 1),
		firstDone: make(chan struct{}),
		state:     StateStarting,
	}
	var err error
	if len(c.Command) > 0 {
		s.env, err = childEnv(c, environ)
	} else {
		s.header, err = headers(c, environ)
	}
	if err != nil {
		return nil, err
	}
	s.client = sdk.NewClient(&sdk.Implementation{Name: "switchboard", Version: version()}, &sdk.ClientOptions{
		Logger: m.log.With("server", c.Name),
		// No roots, sampling or elicitation: the gateway offers the
		// server nothing but calls.
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.relist <- struct{}{}:
			default:
			}
		},
	})
	return s, nil
}

// halt stops a server a reload took out, as Close stops every server, and
// waits for it; one never launched is only marked stopped.
func (s *server) halt() {
	if s.cancel == nil {
		s.set(func() { s.state = StateStopped })
		return
	}
	s.cancel()
	<-s.stopped
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}

// run keeps the server connected until ctx ends: connect, list, serve until
// the connection is lost, wait out the backoff, again.
func (s *server) run(ctx context.Context) {
	// Start waits for firstDone, and then reads the state: it is set first.
	defer s.markFirst()
	defer s.set(func() { s.state = StateStopped })
	failures := 0
	var warned time.Time // when a failure was last logged as a warning
	for {
		began := time.Now()
		err := s.connectAndServe(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > s.m.backoffMax {
			// It ran a good while: this is a new failure, not the same
			// one again.
			failures = 0
		}
		delay := backoff(s.m.backoffMin, s.m.backoffMax, failures)
		failures++
		s.set(func() {
			s.state = StateRestarting
			s.lastErr = err.Error()
			s.restarts++
		})
		s.markFirst()
		// A server that keeps failing is told once, then once per backoff
		// ceiling; each attempt in between at debug.
		switch {
		case failures == 1:
			warned = time.Now()
			s.log.Warn("mcp: server down; starting it again", "server", s.cfg.Name, "err", err, "in", delay)
		case time.Since(warned) >= s.m.backoffMax:
			warned = time.Now()
			s.log.Warn("mcp: server still down; starting it again", "server", s.cfg.Name, "err", err, "failures", failures, "in", delay)
		default:
			s.log.Debug("mcp: server down again; starting it again", "server", s.cfg.Name, "err", err, "failures", failures, "in", delay)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// backoff doubles from min for each failure in a row, up to max.
func backoff(min, max time.Duration, failures int) time.Duration {
	d := min
	for range failures {
		if d >= max/2 {
			return max
		}
		d *= 2
	}
	return d
}

// connectAndServe connects once and serves until the connection is lost
// or ctx ends, and says why it ended.
func (s *server) connectAndServe(ctx context.Context) error {
	var (
		transport sdk.Transport
		cmd       *exec.Cmd
		stderr    *lineLogger
	)
	if len(s.cfg.Command) > 0 {
		stderr = &lineLogger{log: s.log, server: s.cfg.Name}
		cmd = stdioCommand(s.cfg, s.env, stderr)
		transport = &stdioTransport{cmd: cmd, grace: s.m.grace, max: s.cfg.maxResponse()}
	} else {
		transport = httpTransport(s.cfg, s.header, s.log)
	}
	tt := &trackedTransport{Transport: transport}
	var cs *sdk.ClientSession
	defer func() {
		s.set(func() { s.cs, s.broken = nil, nil })
		// The transport's connection first: for a stdio server, stdin
		// closed, then SIGTERM and SIGKILL a grace apart, the child
		// reaped; calls under way fail as it goes. Only then the session,
		// whose Close waits for the calls under way. A failed handshake
		// does not always close what it opened, so this runs then too.
		if tt.conn != nil {
			_ = tt.conn.Close()
		}
		if cs != nil {
			_ = cs.Close()
		}
		if cmd != nil {
			killGroup(cmd)
			stderr.flush()
		}
	}()

	cctx, cancel := context.WithTimeout(ctx, s.m.connectTimeout)
	cs, err := s.client.Connect(cctx, tt, nil)
	cancel()
	if err != nil {
		if tt.conn != nil {
			_ = tt.conn.Close() // to read the exit status
		}
		return fmt.Errorf("connect: %w", s.exitReason(cmd, err))
	}
	lost := make(chan struct{})
	var lostErr error // why, once lost is closed
	go func() {
		lostErr = cs.Wait()
		close(lost)
	}()
	// A drop asked of an earlier connection is no reason to end this one.
	select {
	case <-s.drop:
	default:
	}
	s.set(func() {
		s.cs = cs
		s.state = StateRunning
	})
	s.log.Info("mcp: server connected", "server", s.cfg.Name, "protocol", cs.InitializeResult().ProtocolVersion)

	if err := s.list(ctx, cs); err != nil {
		return err
	}
	s.markFirst()
	for {
		select {
		case <-s.relist:
			if err := s.list(ctx, cs); err != nil {
				return err
			}
		case <-lost:
			_ = tt.conn.Close() // to read the exit status
			why := errors.New("the connection closed")
			if errors.As(lostErr, new(tooLargeError)) {
				why = lostErr
			}
			return s.exitReason(cmd, why)
		case <-s.drop:
			var why error
			s.set(func() { why = s.broken })
			_ = tt.conn.Close()
			return s.exitReason(cmd, fmt.Errorf("a call failed: %w", why))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// trackedTransport keeps the connection its transport made, so that it
// can be closed even when the SDK's handshake fails without closing it.
type trackedTransport struct {
	sdk.Transport
	conn sdk.Connection
}

func (t *trackedTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	t.conn = conn
	return conn, err
}

// transportCode tells the SDK's codes for a request that failed on the
// way (not reaching the server, the connection closing) from an error the
// server sent.
func transportCode(code int64) bool {
	switch code {
	case codeRejectedByTransport, codeClientClosing, codeServerClosing:
		return true
	}
	return false
}

// The SDK's jsonrpc2 codes for failures of the connection itself.
const (
	codeClientClosing       = -32003
	codeServerClosing       = -32004
	codeRejectedByTransport = -32005
)

// exitReason prefers a child's exit status to the transport's view of it,
// but for a message over the bound, for which the gateway stopped it.
func (s *server) exitReason(cmd *exec.Cmd, err error) error {
	if errors.As(err, new(tooLargeError)) {
		return err
	}
	if cmd != nil && cmd.ProcessState != nil {
		return fmt.Errorf("the process ended: %s", cmd.ProcessState)
	}
	return err
}

func (s *server) markFirst() { s.firstOnce.Do(func() { close(s.firstDone) }) }

// set changes the server's state under its lock and wakes the watchers.
func (s *server) set(f func()) {
	s.mu.Lock()
	f()
	s.mu.Unlock()
	s.m.bump()
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{
		Name: s.cfg.Name, Transport: "http", State: s.state,
		Tools: len(s.tools), Restarts: s.restarts, LastError: s.lastErr,
	}
	if len(s.cfg.Command) > 0 {
		st.Transport = "stdio"
	}
	return st
}

// list fetches the server's tools and publishes them if they changed. A
// failure to list ends the connection, to be made again.
func (s *server) list(ctx context.Context, cs *sdk.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, s.m.connectTimeout)
	defer cancel()
	var got []*sdk.Tool
	for t, err := range cs.Tools(lctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		if len(got) == maxTools {
			s.log.Warn("mcp: server offers too many tools; the rest are left out", "server", s.cfg.Name, "max", maxTools)
			break
		}
		got = append(got, t)
	}
	entries := s.entries(got)
	s.mu.Lock()
	changed := !slices.EqualFunc(s.tools, entries, func(a, b entry) bool { return a.sig == b.sig })
	s.tools = entries
	s.mu.Unlock()
	s.m.bump()
	if changed {
		s.log.Info("mcp: server tools listed", "server", s.cfg.Name, "tools", len(entries))
		s.m.notifyChanged()
	}
	return nil
}

// entries turns listed tools into the gateway's, sorted by name, leaving
// out with a warning each tool the model could not be offered.
func (s *server) entries(got []*sdk.Tool) []entry {
	var out []entry
	seen := map[string]string{}
	for _, t := range got {
		if t == nil {
			continue
		}
		e, err := s.entry(t)
		if err != nil {
			s.log.Warn("mcp: tool skipped", "server", s.cfg.Name, "tool", t.Name, "err", err)
			continue
		}
		// Both of its names must be its own.
		gw := GatewayName(s.cfg.Name, t.Name)
		if other, dup := seen[e.tool.Name]; dup {
			s.log.Warn("mcp: tool skipped: its name is taken", "server", s.cfg.Name, "tool", t.Name, "other", other, "name", e.tool.Name)
			continue
		}
		if other, dup := seen[gw]; dup {
			s.log.Warn("mcp: tool skipped: its name is taken", "server", s.cfg.Name, "tool", t.Name, "other", other, "name", gw)
			continue
		}
		seen[e.tool.Name], seen[gw] = t.Name, t.Name
		if gw != s.cfg.Name+patternSep+t.Name {
			s.log.Info("mcp: tool renamed: guides name it so", "server", s.cfg.Name, "tool", t.Name, "name", gw)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.tool.Name, b.tool.Name) })
	return out
}

func (s *server) entry(t *sdk.Tool) (entry, error) {
	if t.Name == "" || len(t.Name) > maxToolName {
		return entry{}, fmt.Errorf("the name must be 1-%d characters", maxToolName)
	}
	if t.InputSchema == nil {
		return entry{}, errors.New("no inputSchema")
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return entry{}, fmt.Errorf("inputSchema: %w", err)
	}
	if len(schema) > maxSchemaBytes {
		return entry{}, fmt.Errorf("inputSchema is %s, more than the %s a tool may take", size(len(schema)), size(maxSchemaBytes))
	}
	var top struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(schema, &top); err != nil || top.Type != "object" {
		return entry{}, errors.New(`inputSchema is not a JSON Schema of "type": "object"`)
	}
	mcpName := t.Name
	tool := tools.Tool{
		Name:            ToolName(s.cfg.Name, mcpName),
		Description:     description(t),
		Parameters:      schema,
		SecurityWarning: securityWarning(s.cfg.Name, t),
		Execute: func(ctx context.Context, args json.RawMessage) (tools.Result, error) {
			return s.call(ctx, mcpName, args)
		},
	}
	// The registry's own check, so that a tool offered here is one the
	// registry takes.
	if _, err := tools.NewRegistry(tool); err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return entry{}, fmt.Errorf("inputSchema is not valid JSON Schema: %w", err)
	}
	sig := strings.Join([]string{tool.Name, tool.Description, string(schema), tool.SecurityWarning}, "\x00")
	return entry{mcpName: mcpName, sig: sig, tool: tool}, nil
}

func description(t *sdk.Tool) string {
	d := strings.TrimSpace(t.Description)
	if d == "" {
		d = t.Title
	}
	if d == "" && t.Annotations != nil {
		d = t.Annotations.Title
	}
	if len(d) > maxDescription {
		d = cutAt(d, maxDescription) + "…"
	}
	return d
}

// securityWarning goes with every approval prompt for the tool: it is
// someone else's code, and what it says of itself is a hint.
func securityWarning(server string, t *sdk.Tool) string {
	w := fmt.Sprintf("%s.%s is a tool of the MCP server %q, not of the gateway: check the arguments before approving.", server, t.Name, server)
	if a := t.Annotations; a != nil && !a.ReadOnlyHint && a.DestructiveHint != nil && *a.DestructiveHint {
		w += " The server says it may change or delete data."
	}
	return w
}

// call runs the tool on the server. A server that is down answers at once;
// a call cut by the connection's end says the action may or may not have
// happened, since the server may have done it before dying. An answer over
// the server's bound (max_response_mb) fails the call, telling the model
// to ask for less; over HTTP the session goes on, a stdio server is
// restarted.
func (s *server) call(ctx context.Context, tool string, args json.RawMessage) (tools.Result, error) {
	s.mu.Lock()
	cs, state := s.cs, s.state
	s.mu.Unlock()
	if cs == nil {
		switch state {
		case StateStopped:
			return tools.Result{}, fmt.Errorf("MCP server %s is stopped", s.cfg.Name)
		case StateStarting:
			return tools.Result{}, fmt.Errorf("MCP server %s is still starting; try again in a moment", s.cfg.Name)
		}
		// Why it went down is for the operator (the log, Status); the
		// model can only wait.
		return tools.Result{}, fmt.Errorf("MCP server %s is not running (restarting); try again later", s.cfg.Name)
	}
	// Close ends the calls under way too: a call over HTTP waits on a
	// request of its own, which closing the connection does not end.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.m.ctx, cancel)()
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if s.m.ctx.Err() != nil {
			return tools.Result{}, fmt.Errorf("MCP server %s was stopped during the call (the gateway is shutting down), so it may or may not have taken effect", s.cfg.Name)
		}
		if ctx.Err() != nil {
			return tools.Result{}, fmt.Errorf("MCP server %s: %w", s.cfg.Name, ctx.Err())
		}
		limit := s.cfg.maxResponse()
		if answeredTooLarge(err, limit) {
			// limitTransport answered for the server; the session goes on.
			s.log.Warn("mcp: answer too large; dropped", "server", s.cfg.Name, "tool", tool, "limit", size(limit))
			return tools.Result{}, fmt.Errorf("MCP server %s: the answer was larger than %s, the gateway's limit, and was dropped; the call itself may have taken effect. %s", s.cfg.Name, size(limit), askLess)
		}
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && !transportCode(werr.Code) {
			// The server answered with a protocol error (an unknown tool,
			// arguments it refused): it is up, the call was wrong.
			return tools.Result{}, fmt.Errorf("MCP server %s refused the call: %s", s.cfg.Name, capText(werr.Message))
		}
		// The connection failed under the call: the run loop drops it and
		// makes a new one, while this call answers at once (closing here
		// would wait for the other calls on it).
		s.log.Warn("mcp: call failed; reconnecting", "server", s.cfg.Name, "tool", tool, "err", err)
		s.lose(cs, err)
		if errors.As(err, new(tooLargeError)) {
			// A stdio server's message over the bound: any call under way
			// on the connection ends so, though most likely it was this
			// one's answer.
			return tools.Result{}, fmt.Errorf("MCP server %s sent a message larger than %s, the gateway's limit, during the call (most likely the answer), so it is being restarted and the call may or may not have taken effect. %s", s.cfg.Name, size(limit), askLess)
		}
		again := "restarted"
		if len(s.cfg.Command) == 0 {
			again = "reconnected"
		}
		return tools.Result{}, fmt.Errorf("MCP server %s stopped answering during the call, so it may or may not have taken effect; it is being %s, try again later", s.cfg.Name, again)
	}
	return toResult(s.cfg.Name, tool, r)
}

// askLess ends the error of a call whose answer was too large.
const askLess = "Ask the tool for less: a narrower query, fewer items, a smaller page."

// lose gives up on cs after a call found it broken: the run loop closes
// it and connects again.
func (s *server) lose(cs *sdk.ClientSession, err error) {
	s.set(func() {
		if s.cs == cs {
			s.cs, s.broken = nil, err
			select {
			case s.drop <- struct{}{}:
			default:
			}
		}
	})
}
