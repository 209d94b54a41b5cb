package providers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Kind is what kind of failure a user is told about. Each kind has one
// short, stable message (Describe); the detail goes to the log only.
type Kind string

const (
	// KindRateLimited: the provider answered 429 until retries ran out.
	KindRateLimited Kind = "rate_limited"
	// KindUnavailable: 5xx, overloaded (529), unreachable (connection
	// refused, reset, DNS), or a circuit that is open.
	KindUnavailable Kind = "unavailable"
	// KindTimeout: the model went silent (the idle timeout), or the
	// provider said it timed out (408, 504).
	KindTimeout Kind = "timeout"
	// KindBroken: the answer started but broke off or could not be read
	// (a cut or malformed stream).
	KindBroken Kind = "broken"
	// KindRefused: the provider refused the request itself (4xx such as
	// 400, 401, 403), or it could not be made as it is.
	KindRefused Kind = "refused"
)

// userMessages are what users are shown, one per kind. They say what
// happened and what to do, never how: no URL, status, body or attempt
// count, which are the operator's business (the log) and may be secret.
var userMessages = map[Kind]string{
	KindRateLimited: "The model provider is rate-limiting us and retries ran out. Your message is saved; try again in a minute.",
	KindUnavailable: "The model provider is unavailable right now. Your message is saved; try again in a few minutes.",
	KindTimeout:     "The model did not respond in time. Your message is saved; send another message to try again.",
	KindBroken:      "The model's answer broke off before it was complete. Your message is saved; send another message to try again.",
	KindRefused:     "The model provider rejected the request. Your message is saved; if rephrasing it does not help, tell the gateway's operator and quote the reference.",
}

// ErrBrokenStream marks a failure after the provider had started answering
// (HTTP 2xx): the stream was cut, or a chunk could not be read. Adapters
// wrap such errors in it.
var ErrBrokenStream = errors.New("the response stream broke off or could not be read")

// ErrCircuitOpen is the cause of a call that was not made because the
// provider's circuit is open: it failed too many turns in a row and is left
// alone until its cool-down has passed.
var ErrCircuitOpen = errors.New("circuit open: the provider failed too many turns in a row")

// Failure is the error a Resilient provider ends a failed call with. It
// carries the kind of failure and a short reference id, which is also in
// the log line that holds the detail, so a user quoting the reference can
// be matched to the cause. Its text is safe to log: the detail it wraps has
// credentials scrubbed and response bodies capped.
type Failure struct {
	Provider string
	Kind     Kind
	Ref      string
	Err      error
}

func (f *Failure) Error() string {
	return fmt.Sprintf("%s (%s, ref %s)", RedactText(f.Err.Error()), f.Kind, f.Ref)
}

func (f *Failure) Unwrap() error { return f.Err }

// Classify says what kind of failure err is.
func Classify(err error) Kind {
	var f *Failure
	if errors.As(err, &f) && f.Kind != "" {
		return f.Kind
	}
	switch {
	case errors.Is(err, ErrCircuitOpen):
		return KindUnavailable
	case errors.Is(err, ErrIdleTimeout):
		return KindTimeout
	}
	var pe *Error
	if !errors.As(err, &pe) {
		// Not a provider's answer: the request could not be made as it is
		// (no model configured, arguments that are not JSON, a prompt the
		// provider blocks).
		return KindRefused
	}
	switch s := pe.Status; {
	case s == http.StatusTooManyRequests:
		return KindRateLimited
	case s == http.StatusRequestTimeout, s == http.StatusGatewayTimeout:
		return KindTimeout
	case s >= 500, s == http.StatusConflict:
		return KindUnavailable
	case s >= 400:
		return KindRefused
	case errors.Is(err, ErrBrokenStream):
		return KindBroken
	case isTimeout(err):
		return KindTimeout
	}
	// No answer at all: connection refused or reset, DNS, TLS.
	return KindUnavailable
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Describe is what to tell a user about a failed call: its kind and one
// short, stable message for that kind, with the reference id when err
// carries one (every error a Resilient provider returns does).
func Describe(err error) (Kind, string) {
	kind := Classify(err)
	msg := userMessages[kind]
	if ref := RefOf(err); ref != "" {
		msg += " (ref " + ref + ")"
	}
	return kind, msg
}

// RefOf is the reference id err carries, or "".
func RefOf(err error) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Ref
	}
	return ""
}

// Refer returns err with a reference id. An error that has one (every
// error a Resilient provider returns) is returned as it is; any other is
// given a new reference and logged with it, to logger (slog.Default() when
// nil), so that the reference a user is shown leads to the detail.
func Refer(err error, logger *slog.Logger) error {
	if err == nil || RefOf(err) != "" {
		return err
	}
	if logger == nil {
		logger = slog.Default()
	}
	f := &Failure{Kind: Classify(err), Ref: NewRef(), Err: err}
	logger.Warn("model call failed", "kind", f.Kind, "ref", f.Ref, "err", RedactText(err.Error()))
	return f
}

// NewRef makes a short reference id, such as 7f3a9c.
func NewRef() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// MaxErrorBody is how much of a response body an error's text carries.
const MaxErrorBody = 512

// maxErrorText bounds the whole text of an Error.
const maxErrorText = 2048

var (
	// userinfo in any URL in a text: scheme://user:pass@ or scheme://token@.
	userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#\s"'@<>]*)@`)
	// credentials passed as query parameters.
	queryKeyRE = regexp.MustCompile(`(?i)([?&](?:key|api[_-]?key|access_token|token|sig|signature)=)[^&\s"'#]+`)
)

// RedactText scrubs credentials from an error text: the user and password
// of any URL in it (as url.URL.Redacted does, and a lone user, which may be
// a token, too) and keys passed in a query string.
func RedactText(s string) string {
	if strings.Contains(s, "@") {
		s = userinfoRE.ReplaceAllStringFunc(s, func(m string) string {
			sub := userinfoRE.FindStringSubmatch(m)
			user, _, hasPass := strings.Cut(sub[2], ":")
			if hasPass && user != "" {
				return sub[1] + user + ":xxxxx@"
			}
			return sub[1] + "xxxxx@"
		})
	}
	if strings.Contains(s, "=") {
		s = queryKeyRE.ReplaceAllString(s, "${1}xxxxx")
	}
	return s
}

// RedactURL is u for a log: its password (or a user without one, which may
// be a token) replaced by xxxxx.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	if u.User == nil {
		return RedactText(u.String())
	}
	if _, ok := u.User.Password(); ok {
		return RedactText(u.Redacted())
	}
	c := *u
	c.User = url.User("xxxxx")
	return RedactText(c.String())
}

// Truncate caps s at n bytes (on a character boundary), saying how much
// was left out.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
}

// HTTPDetail describes a refused request for the log: the method, the URL
// without credentials, the status and the start of the body.
func HTTPDetail(req *http.Request, status int, body string) string {
	var b strings.Builder
	if req != nil {
		fmt.Fprintf(&b, "%s %s: ", req.Method, RedactURL(req.URL))
	}
	fmt.Fprintf(&b, "%d", status)
	if text := http.StatusText(status); text != "" {
		b.WriteString(" " + text)
	}
	if body = strings.TrimSpace(body); body != "" {
		b.WriteString(": ")
		b.WriteString(Truncate(body, MaxErrorBody))
	}
	return b.String()
}

// Redacted is err with the given text (scrubbed and capped) as its Error()
// string. errors.Is and errors.As still see err, so nothing is lost to the
// code that inspects it; only what gets printed changes. Adapters use it to
// keep an SDK's own formatting (URLs with credentials, whole bodies) out of
// logs and messages.
func Redacted(err error, text string) error {
	return &redacted{text: Truncate(RedactText(text), maxErrorText), err: err}
}

type redacted struct {
	text string
	err  error
}

func (r *redacted) Error() string { return r.text }
func (r *redacted) Unwrap() error { return r.err }
