package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// CheckTimeout bounds Check when its context has no earlier deadline: a
// server that has not answered the handshake and listed its tools by then
// is a problem, and a stdio server's process is stopped.
const CheckTimeout = 10 * time.Second

const (
	// checkGrace is a checked stdio server's time to exit once its stdin
	// is closed, and again after SIGTERM, before SIGKILL.
	checkGrace = time.Second
	// stderrTail is how many of a failed stdio server's last stderr lines
	// its Problem quotes, each cut at stderrWidth.
	stderrTail  = 5
	stderrWidth = 300
)

// Report is what Check found of a server that answered.
type Report struct {
	Transport string // "stdio" or "http"
	// Program is a stdio server's command line as run: the program as
	// found on PATH, then its arguments.
	Program string
	// URL is a Streamable HTTP server's endpoint.
	URL string
	// Server is its name and version, as it gave them in the handshake.
	Server string
	// Protocol is the MCP version agreed in the handshake.
	Protocol string
	// Tools is how many of the tools it lists the gateway offers.
	Tools int
	// LeftOut are the tools it lists that the gateway leaves out, each
	// "name: why".
	LeftOut []string
	// Took is from the start (of the process) to the list of tools.
	Took time.Duration
}

// Summary is the report in a line: "12 tools over stdio (/usr/bin/npx -y
// @modelcontextprotocol/server-github)".
func (r Report) Summary() string {
	over := "stdio (" + r.Program + ")"
	if r.Transport == "http" {
		over = "Streamable HTTP (" + r.URL + ")"
	}
	return fmt.Sprintf("%s over %s", countOf(r.Tools, "tool"), over)
}

// Details are the report's further lines: who answered, how fast, and
// each tool left out.
func (r Report) Details() []string {
	out := []string{fmt.Sprintf("server %s, protocol %s, tools listed in %s", r.Server, r.Protocol, shortDuration(r.Took))}
	for _, l := range r.LeftOut {
		out = append(out, "left out: "+l)
	}
	return out
}

// Problem is why a server cannot serve, and what to do about it.
type Problem struct {
	// Reason may span lines: a stdio server's last stderr lines follow it.
	Reason string
	Fix    string
}

func (p *Problem) Error() string { return p.Reason }

// Check tries one server as the gateway would use it, without a Manager
// and without disturbing one that runs: its ${VAR}s must be set; a stdio
// server's program must be on the PATH of environ (the gateway's
// environment) and is started, with the environment the gateway would give
// it; a Streamable HTTP server is sent the configured headers. Then the
// MCP handshake (initialize) and the list of tools. A stdio server is
// stopped at the end, as the gateway stops one.
//
// Check takes at most CheckTimeout (or until ctx ends, if sooner). It
// returns what answered, or a *Problem: a variable not set (which stops
// the gateway's start), a program not found, a process that exited (with
// the last lines of its stderr), an HTTP status or network error, no
// answer in time. Values of the server's ${VAR}s and headers are replaced
// by [secret] in what it returns.
func Check(ctx context.Context, c ServerConfig, environ []string) (Report, error) {
	rep := Report{Transport: "http", URL: c.URL}
	if len(c.Command) > 0 {
		rep.Transport, rep.URL = "stdio", ""
	}
	ch := &checker{cfg: c, environ: environ, key: "tools.mcp[" + c.Name + "]"}
	if err := c.Validate(); err != nil {
		return rep, &Problem{Reason: err.Error(), Fix: "correct " + ch.key + " in the configuration (docs/mcp.md)"}
	}
	if p := ch.unset(); p != nil {
		return rep, p
	}
	ch.secrets = secretsOf(c, environ)
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	dl, _ := ctx.Deadline()
	ch.bound = ceilTenth(time.Until(dl))
	var err error
	if rep.Transport == "stdio" {
		rep, err = ch.stdio(ctx, rep)
	} else {
		rep, err = ch.http(ctx, rep)
	}
	if p, ok := errors.AsType[*Problem](err); ok {
		p.Reason, p.Fix = ch.scrub(p.Reason), ch.scrub(p.Fix)
	}
	rep.Program, rep.Server = ch.scrub(rep.Program), ch.scrub(rep.Server)
	for i, l := range rep.LeftOut {
		rep.LeftOut[i] = ch.scrub(l)
	}
	return rep, err
}

type checker struct {
	cfg     ServerConfig
	environ []string
	key     string        // "tools.mcp[name]"
	bound   time.Duration // the time the check has
	secrets []string
}

// unset reports every ${VAR} of the server's env and headers that is not
// set, on which the gateway refuses to start.
func (ch *checker) unset() *Problem {
	var refs, names []string
	for _, f := range []struct {
		field string
		m     map[string]string
	}{{"env", ch.cfg.Env}, {"headers", ch.cfg.Headers}} {
		for _, k := range slices.Sorted(maps.Keys(f.m)) {
			for _, name := range varRefs(f.m[k]) {
				if getenv(ch.environ, name) == "" {
					refs = append(refs, fmt.Sprintf("${%s} (%s.%s)", name, f.field, k))
					if !slices.Contains(names, name) {
						names = append(names, name)
					}
				}
			}
		}
	}
	switch len(refs) {
	case 0:
		return nil
	case 1:
		return &Problem{
			Reason: refs[0] + " is not set in the gateway's environment, so the gateway will not start",
			Fix:    fmt.Sprintf("export %s=… where the gateway runs, or take it out of %s", names[0], ch.key),
		}
	}
	return &Problem{
		Reason: strings.Join(refs, ", ") + " are not set in the gateway's environment, so the gateway will not start",
		Fix:    fmt.Sprintf("export %s=… where the gateway runs, or take them out of %s", strings.Join(names, "=… "), ch.key),
	}
}

// varRefs are the names s refers to as ${NAME}.
func varRefs(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			return out
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return out // expand says what is wrong
		}
		out = append(out, s[i+2:i+j])
		s = s[i+j+1:]
	}
}

// secretsOf are the values Check must not show: those of the variables
// the server's env and headers name, and its headers' values.
func secretsOf(c ServerConfig, environ []string) []string {
	var out []string
	for _, m := range []map[string]string{c.Env, c.Headers} {
		for _, v := range m {
			for _, name := range varRefs(v) {
				out = append(out, getenv(environ, name))
			}
		}
	}
	for _, v := range c.Headers {
		if x, err := expand(v, environ); err == nil {
			out = append(out, x)
		}
	}
	// The longest first, so that a value holding another is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

func (ch *checker) scrub(s string) string {
	for _, v := range ch.secrets {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[secret]")
		}
	}
	return s
}

func checkClient() *sdk.Client {
	return sdk.NewClient(&sdk.Implementation{Name: "switchboard", Version: version()}, &sdk.ClientOptions{
		Logger:       slog.New(slog.DiscardHandler),
		Capabilities: &sdk.ClientCapabilities{},
	})
}

// The steps of a check, as a Problem names them.
const (
	stepHandshake = "the MCP handshake (initialize)"
	stepList      = "the list of tools (tools/list)"
)

func (ch *checker) stdio(ctx context.Context, rep Report) (Report, error) {
	c := ch.cfg
	prog, p := ch.findProgram(c.Command[0])
	if p != nil {
		return rep, p
	}
	rep.Program = commandLine(prog, c.Command[1:])
	env, err := childEnv(c, ch.environ)
	if err != nil {
		return rep, &Problem{Reason: err.Error(), Fix: "correct " + ch.key + ".env"}
	}
	run := c
	run.Command = append([]string{prog}, c.Command[1:]...)
	stderr := &lineLogger{log: slog.New(slog.DiscardHandler), server: c.Name, keep: stderrTail}
	cmd := stdioCommand(run, env, stderr)
	tt := &trackedTransport{Transport: &stdioTransport{cmd: cmd, grace: checkGrace, max: c.maxResponse()}}
	start := time.Now()
	var cs *sdk.ClientSession
	// As the gateway stops a server: stdin closed, then SIGTERM and
	// SIGKILL a grace apart, the child reaped; then what it started.
	stop := func() {
		if tt.conn != nil {
			_ = tt.conn.Close()
		}
		if cs != nil {
			_ = cs.Close()
		}
		if cmd.Process != nil {
			killGroup(cmd)
		}
	}
	cs, err = checkClient().Connect(ctx, tt, nil)
	if err != nil {
		timedOut := ctx.Err() != nil
		stop()
		if cmd.Process == nil {
			return rep, &Problem{
				Reason: fmt.Sprintf("%s cannot be started: %v", prog, unwrapAll(err)),
				Fix:    "check the program in " + ch.key + ".command: it must be an executable for this machine",
			}
		}
		return rep, ch.stdioFailure(rep.Program, cmd, stderr.tail(), stepHandshake, err, timedOut)
	}
	rep.Server, rep.Protocol = serverInfo(cs)
	rep.Tools, rep.LeftOut, err = ch.list(ctx, cs)
	if err != nil {
		timedOut := ctx.Err() != nil
		stop()
		return rep, ch.stdioFailure(rep.Program, cmd, stderr.tail(), stepList, err, timedOut)
	}
	rep.Took = time.Since(start)
	stop()
	return rep, nil
}

// stdioFailure says why a stdio server failed at step: it did not answer
// in time (and was stopped), it exited, or it answered wrongly; then the
// last lines of its stderr. The process has been stopped.
func (ch *checker) stdioFailure(program string, cmd *exec.Cmd, tail []string, step string, err error, timedOut bool) *Problem {
	var p Problem
	exited := cmd.ProcessState != nil && connectionEnded(err)
	switch {
	case timedOut:
		p.Reason = fmt.Sprintf("no answer to %s within %s, so the process was stopped", step, shortDuration(ch.bound))
		p.Fix = "check that the command runs an MCP server on stdin/stdout (a server that serves over HTTP needs url: instead); " +
			"a server fetched at its first start (npx -y, uvx) may need longer once: run the command by hand"
	case exited:
		p.Reason = fmt.Sprintf("the process exited during %s (%s)", step, cmd.ProcessState)
		p.Fix = "run it by hand to see why: " + program + " (the gateway gives it PATH, HOME and " + ch.key + ".env, nothing else of its environment)"
	default:
		p.Reason = fmt.Sprintf("%s failed: %s", step, sdkReason(err))
		p.Fix = "check that the command runs an MCP server on stdin/stdout, which must carry nothing but MCP messages (logs go to stderr)"
	}
	if len(tail) == 0 {
		p.Reason += "; it wrote nothing on stderr"
		return &p
	}
	p.Reason += "; its stderr ends:"
	for _, l := range tail {
		p.Reason += "\n  " + cutAt(strings.ToValidUTF8(l, "?"), stderrWidth)
	}
	return &p
}

// connectionEnded tells an error of the server's pipes ending under the
// handshake (the process exited: its stdout ended, or its stdin did
// before the request was written) from an answer the SDK refused. The SDK
// keeps only the text of the cause ("connection closed: calling
// "initialize": client is closing: EOF").
func connectionEnded(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed) {
		return true
	}
	msg := err.Error()
	return strings.HasSuffix(msg, "EOF") || strings.HasSuffix(msg, syscall.EPIPE.Error()) || strings.HasSuffix(msg, os.ErrClosed.Error())
}

// sdkReason is the cause of a failed request without the SDK's layers of
// context; stdout that is not JSON is told as such.
func sdkReason(err error) string {
	msg := err.Error()
	if _, cause, ok := strings.Cut(msg, "client is closing: "); ok {
		msg = cause
	}
	if strings.Contains(msg, "invalid character") || strings.Contains(msg, "looking for beginning of value") {
		return "its stdout carried something other than MCP messages (" + msg + ")"
	}
	return msg
}

// findProgram finds the program as exec.LookPath would, but on the PATH
// of the gateway's environment.
func (ch *checker) findProgram(name string) (string, *Problem) {
	if strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator) {
		st, err := os.Stat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", &Problem{Reason: fmt.Sprintf("the program %s does not exist", name), Fix: "correct the program in " + ch.key + ".command"}
		case err != nil:
			return "", &Problem{Reason: fmt.Sprintf("the program %s cannot be read: %v", name, unwrapAll(err)), Fix: "correct the program in " + ch.key + ".command"}
		case st.IsDir():
			return "", &Problem{Reason: fmt.Sprintf("the program %s is a folder", name), Fix: "correct the program in " + ch.key + ".command"}
		case st.Mode()&0o111 == 0:
			return "", &Problem{Reason: fmt.Sprintf("the program %s is not executable", name), Fix: "chmod +x " + name + ", or name its interpreter first in " + ch.key + ".command"}
		}
		return name, nil
	}
	pathEnv := getenv(ch.environ, "PATH")
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // as exec.Command, which refuses a program found relative to the working directory
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	fix := "install it, or give its full path in " + ch.key + ".command"
	if what, ok := providedBy[name]; ok {
		fix = "install " + what + ", or give the full path of " + name + " in " + ch.key + ".command"
	}
	return "", &Problem{Reason: fmt.Sprintf("the command %s is not on the gateway's PATH (%s)", name, cutAt(pathEnv, 200)), Fix: fix}
}

// providedBy names what installs the launchers MCP servers are run with.
var providedBy = map[string]string{
	"npx": "Node.js (npx comes with npm)", "node": "Node.js", "npm": "Node.js",
	"uvx": "uv (docs.astral.sh/uv)", "uv": "uv (docs.astral.sh/uv)",
	"python3": "Python 3", "python": "Python 3", "docker": "Docker", "deno": "Deno", "bunx": "Bun", "bun": "Bun",
}

// commandLine is a command line to show, an argument with spaces quoted.
func commandLine(prog string, args []string) string {
	parts := []string{prog}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			a = fmt.Sprintf("%q", a)
		}
		parts = append(parts, a)
	}
	s := strings.Join(parts, " ")
	if len(s) > 160 {
		s = cutAt(s, 160) + "…"
	}
	return s
}

func (ch *checker) http(ctx context.Context, rep Report) (Report, error) {
	c := ch.cfg
	h, err := headers(c, ch.environ)
	if err != nil {
		return rep, &Problem{Reason: err.Error(), Fix: "correct " + ch.key + ".headers"}
	}
	if u, err := url.Parse(c.URL); err == nil {
		rep.URL = u.Redacted()
	}
	st := httpTransport(c, h, slog.New(slog.DiscardHandler)).(*sdk.StreamableClientTransport)
	rec := &statusRecorder{base: st.HTTPClient.Transport}
	st.HTTPClient = &http.Client{Transport: rec}
	tt := &trackedTransport{Transport: st}
	start := time.Now()
	cs, err := checkClient().Connect(ctx, tt, nil)
	if err != nil {
		timedOut := ctx.Err() != nil
		if tt.conn != nil {
			_ = tt.conn.Close() // a failed handshake does not always close it
		}
		return rep, ch.httpFailure(rep.URL, rec, stepHandshake, err, timedOut)
	}
	defer cs.Close()
	rep.Server, rep.Protocol = serverInfo(cs)
	rep.Tools, rep.LeftOut, err = ch.list(ctx, cs)
	if err != nil {
		return rep, ch.httpFailure(rep.URL, rec, stepList, err, ctx.Err() != nil)
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// httpFailure says why a Streamable HTTP server failed at step: the HTTP
// status it answered (and the start of its body), no answer in time, the
// network's error, or an answer the SDK refused.
func (ch *checker) httpFailure(endpoint string, rec *statusRecorder, step string, err error, timedOut bool) *Problem {
	code, status, body := rec.refusal()
	if code != 0 {
		p := &Problem{Reason: fmt.Sprintf("POST %s answered %s to %s", endpoint, status, step)}
		if line, _, _ := strings.Cut(strings.TrimSpace(body), "\n"); line != "" {
			p.Reason += "\n  " + cutAt(strings.ToValidUTF8(line, "?"), 200)
		}
		switch {
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			p.Fix = "the server refuses the credentials: check " + ch.key + ".headers (e.g. Authorization: \"Bearer ${TOKEN}\") and the variable's value"
		case code == http.StatusNotFound:
			p.Fix = "nothing is served there: check the path of " + ch.key + ".url (a Streamable HTTP endpoint is often …/mcp)"
		case code == http.StatusMethodNotAllowed || code == http.StatusUnsupportedMediaType || code == http.StatusNotAcceptable:
			p.Fix = "this is not a Streamable HTTP endpoint: check " + ch.key + ".url (a server with only the older SSE transport is not supported)"
		case code >= 500:
			p.Fix = "the server failed: see its own logs (the gateway keeps trying it meanwhile, with backoff)"
		default:
			p.Fix = "check " + ch.key + ".url and .headers"
		}
		return p
	}
	if timedOut {
		return &Problem{
			Reason: fmt.Sprintf("no answer from %s to %s within %s", endpoint, step, shortDuration(ch.bound)),
			Fix:    "check that the server is up and that " + ch.key + ".url is its MCP endpoint",
		}
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return &Problem{
			Reason: fmt.Sprintf("%s cannot be reached: %v", endpoint, ue.Err),
			Fix:    "check that the server is running and " + ch.key + ".url (host, port, http or https)",
		}
	}
	return &Problem{
		Reason: fmt.Sprintf("%s failed: %v", step, err),
		Fix:    "check that " + ch.key + ".url is a Streamable HTTP MCP endpoint",
	}
}

// statusRecorder keeps the first refusal (a status other than 2xx) of a
// POST, the messages of the session, and the start of its body.
type statusRecorder struct {
	base   http.RoundTripper
	mu     sync.Mutex
	code   int
	status string
	body   string
}

func (r *statusRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost || resp.StatusCode/100 == 2 {
		return resp, err
	}
	peek, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(peek), resp.Body), resp.Body}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.code == 0 {
		r.code, r.status, r.body = resp.StatusCode, resp.Status, string(peek)
	}
	return resp, nil
}

func (r *statusRecorder) refusal() (int, string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.code, r.status, r.body
}

func serverInfo(cs *sdk.ClientSession) (server, protocol string) {
	ir := cs.InitializeResult()
	if ir == nil {
		return "", ""
	}
	server = "(no name)"
	if si := ir.ServerInfo; si != nil && si.Name != "" {
		server = strings.TrimSpace(si.Name + " " + si.Version)
	}
	return cutAt(server, 100), ir.ProtocolVersion
}

// list counts the tools the gateway would offer of those the server
// lists, and says why it would leave out the others.
func (ch *checker) list(ctx context.Context, cs *sdk.ClientSession) (offered int, leftOut []string, err error) {
	s := &server{cfg: ch.cfg, log: slog.New(slog.DiscardHandler)}
	listed, beyond := 0, 0
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return 0, nil, err
		}
		if t == nil {
			continue
		}
		if listed == maxTools {
			beyond++
			continue
		}
		listed++
		if _, err := s.entry(t); err != nil {
			leftOut = append(leftOut, cutAt(t.Name, maxToolName)+": "+err.Error())
			continue
		}
		offered++
	}
	if beyond > 0 {
		leftOut = append(leftOut, fmt.Sprintf("%d more: only the first %d tools of a server are offered", beyond, maxTools))
	}
	return offered, leftOut, nil
}

// unwrapAll is the innermost error: "permission denied" rather than the
// SDK's and exec's wrapping of it.
func unwrapAll(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func countOf(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// ceilTenth rounds the time a check had up to a tenth of a second. It is
// measured after the caller's deadline was set, so a doctor run with
// --timeout 1s has a little less than 1s left here; the sentence says 1s.
func ceilTenth(d time.Duration) time.Duration {
	const tenth = 100 * time.Millisecond
	return (d + tenth - 1) / tenth * tenth
}

func shortDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
