package mcp

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// expand replaces each ${VAR} in s with the variable from environ. Only
// the braced form is read, so a value with a bare $ (a password) stays as
// it is. A variable that is not set, or set empty, is an error naming it.
func expand(s string, environ []string) (string, error) {
	var sb strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			sb.WriteString(s)
			return sb.String(), nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unclosed ${ in %q", redact(s))
		}
		name := s[i+2 : i+j]
		v := getenv(environ, name)
		if v == "" {
			return "", fmt.Errorf("${%s} is not set in the gateway's environment", name)
		}
		sb.WriteString(s[:i])
		sb.WriteString(v)
		s = s[i+j+1:]
	}
}

// redact keeps a message about a malformed value from quoting a secret.
func redact(s string) string {
	if len(s) > 12 {
		return s[:6] + "…"
	}
	return s
}

func getenv(environ []string, name string) string {
	for _, kv := range slices.Backward(environ) {
		// The last one wins, as with os.Getenv on a duplicated variable.
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// childEnv is a stdio server's whole environment: PATH and HOME from the
// gateway (to find its interpreter and its caches), then what its Env
// names. The gateway's own keys are not inherited: a third-party server
// sees only what the operator gives it.
func childEnv(c ServerConfig, environ []string) ([]string, error) {
	var env []string
	for _, k := range []string{"PATH", "HOME"} {
		if _, set := c.Env[k]; !set {
			if v := getenv(environ, k); v != "" {
				env = append(env, k+"="+v)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		v, err := expand(c.Env[k], environ)
		if err != nil {
			return nil, fmt.Errorf("tools.mcp[%s]: env.%s: %w", c.Name, k, err)
		}
		env = append(env, k+"="+v)
	}
	return env, nil
}

// headers resolves a Streamable HTTP server's Headers.
func headers(c ServerConfig, environ []string) (http.Header, error) {
	h := http.Header{}
	for _, k := range slices.Sorted(maps.Keys(c.Headers)) {
		v, err := expand(c.Headers[k], environ)
		if err != nil {
			return nil, fmt.Errorf("tools.mcp[%s]: headers.%s: %w", c.Name, k, err)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("tools.mcp[%s]: headers.%s: the value has a line break or NUL", c.Name, k)
		}
		h.Set(k, v)
	}
	return h, nil
}

// validHeaderName reports whether k is an HTTP token (RFC 9110 5.1).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// headerTransport adds the configured headers to requests for the
// server's own host only, so a redirect elsewhere does not carry the
// server's key along.
type headerTransport struct {
	host   string
	header http.Header
	base   http.RoundTripper
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) == 0 || req.URL.Host != t.host {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range t.header {
		req.Header[k] = slices.Clone(v)
	}
	return t.base.RoundTrip(req)
}

// httpTransport is the SDK transport for a Streamable HTTP server. Its
// client has no overall timeout: the server's event stream stays open for
// the session; each call is bounded by its own context instead, and each
// answer by limitTransport.
func httpTransport(c ServerConfig, h http.Header, log *slog.Logger) sdk.Transport {
	u, _ := url.Parse(c.URL) // Validate parsed it
	if len(h) > 0 && u.Scheme == "http" && !loopback(u.Hostname()) {
		log.Warn("mcp: headers go to the server over plain http; use https beyond this machine", "server", c.Name, "url", c.URL)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	limit := c.maxResponse()
	return &sdk.StreamableClientTransport{
		Endpoint: c.URL,
		HTTPClient: &http.Client{Transport: &limitTransport{
			base: &headerTransport{host: u.Host, header: h, base: base},
			max:  limit, log: log, server: c.Name,
		}},
		// The SDK's own bound on an event (none unless set: v1.8.0 does
		// not apply its documented default) fails the whole session;
		// limitTransport's, which counts at least as much, comes first.
		MaxEventSize: limit,
	}
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// stdioCommand builds a stdio server's process: no shell, its own
// environment, its stderr logged, and (where the system has them) its own
// process group, so stopping it also stops what it started.
func stdioCommand(c ServerConfig, env []string, stderr *lineLogger) *exec.Cmd {
	cmd := exec.Command(c.Command[0], c.Command[1:]...)
	cmd.Env = env
	cmd.Stderr = stderr
	ownGroup(cmd)
	return cmd
}

// maxStderrLine cuts a stderr line (a dumped blob) so one line cannot fill
// the log.
const maxStderrLine = 4096

// lineLogger logs a child's stderr at debug, one record per line, and
// keeps the last keep lines (Check quotes them).
type lineLogger struct {
	log    *slog.Logger
	server string
	keep   int
	mu     sync.Mutex
	buf    []byte
	last   []string
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	rest := l.buf
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		l.emit(rest[:i])
		rest = rest[i+1:]
	}
	if len(rest) > maxStderrLine {
		l.emit(rest)
		rest = nil
	}
	// Keep what is left at the front, so the buffer does not creep.
	l.buf = l.buf[:copy(l.buf, rest)]
	return len(p), nil
}

// flush logs an unfinished last line.
func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = nil
	}
}

func (l *lineLogger) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) > maxStderrLine {
		line = append(line[:maxStderrLine:maxStderrLine], "…"...)
	}
	l.log.Debug("mcp: server stderr", "server", l.server, "line", string(line))
	if l.keep > 0 {
		if len(l.last) == l.keep {
			l.last = append(l.last[:0], l.last[1:]...)
		}
		l.last = append(l.last, string(line))
	}
}

// tail returns the last lines kept, the unfinished one too.
func (l *lineLogger) tail() []string {
	l.flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.last)
}
