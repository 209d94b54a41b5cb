package providers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/anthropic"
	"github.com/switchboard-gw/switchboard/providers/gemini"
	"github.com/switchboard-gw/switchboard/providers/openai"
)

// The fault matrix: every adapter, through its real SDK, against a fake
// server on 127.0.0.1 that fails in each way a provider fails. The base URL
// carries credentials, and every error body is large and full of markers,
// so that anything leaking from them into what users see is caught.

const (
	proxyUser     = "proxyuser"
	proxyPassword = "proxyPASSWORD"
	bodyMarker    = "BODY-MARKER-internal-detail"
	requestID     = "req_REQUESTID0123"
)

type fault string

const (
	faultRateLimit  fault = "429"
	faultServer     fault = "500"
	faultOverloaded fault = "overloaded" // 503, or 529 for Anthropic
	faultCut        fault = "cut"
	faultMalformed  fault = "malformed"
	faultHang       fault = "hang"
	faultRefused    fault = "connection refused"
	faultAuth       fault = "401"
	faultForbidden  fault = "403"
	faultBadRequest fault = "400"
)

var faultKinds = []struct {
	fault fault
	kind  providers.Kind
}{
	{faultRateLimit, providers.KindRateLimited},
	{faultServer, providers.KindUnavailable},
	{faultOverloaded, providers.KindUnavailable},
	{faultCut, providers.KindBroken},
	{faultMalformed, providers.KindBroken},
	{faultHang, providers.KindTimeout},
	{faultRefused, providers.KindUnavailable},
	{faultAuth, providers.KindRefused},
	{faultForbidden, providers.KindRefused},
	{faultBadRequest, providers.KindRefused},
}

// vendor is one adapter and the wire its fake speaks.
type vendor struct {
	name string
	// base is the base_url for a server root (with credentials in it).
	base func(root string) string
	new  func(cfg providers.Config) (providers.Provider, error)
	// status is the HTTP status a fault answers with (0: none).
	overloaded int
	// errorBody is the vendor's error JSON.
	errorBody func(status int, msg string) string
	// firstText is the wire of a stream's start with the text "Hel".
	firstText string
	// malformed is a stream whose first event cannot be decoded.
	malformed string
}

var vendors = []vendor{
	{
		name: "openai",
		base: func(root string) string { return root + "/v1" },
		new: func(cfg providers.Config) (providers.Provider, error) {
			return openai.New(cfg)
		},
		overloaded: http.StatusServiceUnavailable,
		errorBody: func(status int, msg string) string {
			return fmt.Sprintf(`{"error":{"message":%q,"type":"server_error","code":null}}`, msg)
		},
		firstText: `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}` + "\n\n",
		malformed: "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\n\n",
	},
	{
		name: "anthropic",
		base: func(root string) string { return root },
		new: func(cfg providers.Config) (providers.Provider, error) {
			return anthropic.New(cfg)
		},
		overloaded: anthropic.StatusOverloaded,
		errorBody: func(status int, msg string) string {
			typ := map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
				429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}[status]
			return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q}}`, typ, msg)
		},
		firstText: "event: message_start\n" +
			`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}` + "\n\n" +
			"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}` + "\n\n",
		malformed: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\n\n",
	},
	{
		name: "gemini",
		base: func(root string) string { return root },
		new: func(cfg providers.Config) (providers.Provider, error) {
			return gemini.New(cfg)
		},
		overloaded: http.StatusServiceUnavailable,
		errorBody: func(status int, msg string) string {
			st := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
				429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}[status]
			return fmt.Sprintf(`{"error":{"code":%d,"message":%q,"status":%q,"details":[]}}`, status, msg, st)
		},
		firstText: `data: {"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"},"index":0}]}` + "\r\n\r\n",
		malformed: "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\r\n\r\n",
	},
}

// faultServer answers every request with the fault.
func newFaultServer(t *testing.T, v vendor, f fault) (root string) {
	t.Helper()
	release := make(chan struct{})
	// A large body: the error text must carry only its start.
	msg := bodyMarker + " " + strings.Repeat("x", 8<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse := func(status int) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("request-id", requestID)
			w.Header().Set("x-request-id", requestID)
			w.WriteHeader(status)
			fmt.Fprint(w, v.errorBody(status, msg))
		}
		stream := func(s string) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, s)
			w.(http.Flusher).Flush()
		}
		switch f {
		case faultRateLimit:
			refuse(http.StatusTooManyRequests)
		case faultServer:
			refuse(http.StatusInternalServerError)
		case faultOverloaded:
			refuse(v.overloaded)
		case faultAuth:
			refuse(http.StatusUnauthorized)
		case faultForbidden:
			refuse(http.StatusForbidden)
		case faultBadRequest:
			refuse(http.StatusBadRequest)
		case faultCut:
			stream(v.firstText)
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close() // mid chunked body
			}
		case faultMalformed:
			stream(v.malformed)
		case faultHang:
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before Close
	u, _ := url.Parse(srv.URL)
	if f == faultRefused {
		srv.Close() // nothing listens there any more
	}
	u.User = url.UserPassword(proxyUser, proxyPassword)
	return u.String()
}

// syncBuffer is a log destination the test reads after the calls.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var refRE = regexp.MustCompile(` \(ref ([0-9a-f]{6})\)$`)

func TestFaultMatrixUserMessages(t *testing.T) {
	// One message per kind, whichever vendor failed and how.
	byKind := map[providers.Kind]string{}
	var mu sync.Mutex
	for _, v := range vendors {
		for _, fk := range faultKinds {
			t.Run(v.name+"/"+string(fk.fault), func(t *testing.T) {
				root := newFaultServer(t, v, fk.fault)
				base := v.base(root)
				p, err := v.new(providers.Config{Name: v.name, Kind: v.name, BaseURL: base, APIKey: "sk-test", Model: "m"})
				if err != nil {
					t.Fatal(err)
				}
				var logs syncBuffer
				r := &providers.Resilient{
					Name: v.name, Provider: p,
					Policy: providers.Policy{MaxRetries: 1, IdleTimeout: 300 * time.Millisecond},
					Sleep:  func(context.Context, time.Duration) error { return nil },
					Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				}
				_, err = collect(t, r)
				if err == nil {
					t.Fatal("the call succeeded")
				}

				kind, msg := providers.Describe(err)
				if kind != fk.kind {
					t.Errorf("kind = %q, want %q (err: %v)", kind, fk.kind, err)
				}
				m := refRE.FindStringSubmatch(msg)
				if m == nil {
					t.Fatalf("message %q has no (ref xxxxxx) at its end", msg)
				}
				ref := m[1]
				if providers.RefOf(err) != ref {
					t.Errorf("message ref %s, error ref %s", ref, providers.RefOf(err))
				}
				host := strings.TrimPrefix(strings.TrimPrefix(root, "http://"), proxyUser+":"+proxyPassword+"@")
				for _, leak := range []string{
					base, root, host, proxyUser, proxyPassword, "Request-ID", "request-id", requestID,
					"{", bodyMarker, "dial tcp", "connection refused", "attempt", "HTTP", "Error 5", "Status:",
					"iterateResponseStream", "unmarshal", "xxxxx",
				} {
					if strings.Contains(msg, leak) {
						t.Errorf("user message %q contains %q", msg, leak)
					}
				}

				// The error (logged by sessions as it is) and the log
				// never carry the password, nor a whole body.
				text := err.Error()
				t.Logf("user: %s\nerror: %s", msg, providers.Truncate(text, 300))
				for what, s := range map[string]string{"error": text, "log": logs.String()} {
					if strings.Contains(s, proxyPassword) {
						t.Errorf("%s has the password: %s", what, s)
					}
				}
				if len(text) > 2500 {
					t.Errorf("error text is %d bytes: the body is not capped", len(text))
				}
				if !strings.Contains(text, "ref "+ref) {
					t.Errorf("error %q lacks its reference %s", text, ref)
				}
				if !strings.Contains(logs.String(), "ref="+ref) {
					t.Errorf("no log line has ref=%s:\n%s", ref, logs.String())
				}

				mu.Lock()
				defer mu.Unlock()
				stable := strings.TrimSuffix(msg, m[0])
				if prev, ok := byKind[kind]; ok && prev != stable {
					t.Errorf("kind %s has two messages: %q and %q", kind, prev, stable)
				}
				byKind[kind] = stable
			})
		}
	}
}

// The error a 401 from a base URL with credentials ends with, as it is
// logged ("turn failed", "err", err), names neither the password nor the
// body; the log still has the status and the URL with the password masked.
func TestUnauthorizedErrorHasNoPassword(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			root := newFaultServer(t, v, faultAuth)
			p, err := v.new(providers.Config{Name: v.name, Kind: v.name, BaseURL: v.base(root), APIKey: "sk-test", Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			r := &providers.Resilient{Name: v.name, Provider: p, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			_, err = collect(t, r)
			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Status != http.StatusUnauthorized {
				t.Fatalf("err = %v, want a 401 *providers.Error", err)
			}
			for what, s := range map[string]string{"err.Error()": err.Error(), "fmt %+v": fmt.Sprintf("%+v", err), "log": logs.String()} {
				if strings.Contains(s, proxyPassword) {
					t.Errorf("%s has the password: %s", what, s)
				}
				if strings.Contains(s, strings.Repeat("x", MaxBodyProbe)) {
					t.Errorf("%s carries the whole body", what)
				}
			}
			if !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), bodyMarker) {
				t.Errorf("error %q lost the status or the start of the body, which the log needs", err)
			}
			if v.name != "gemini" && !strings.Contains(err.Error(), proxyUser+":xxxxx@") {
				t.Errorf("error %q does not name the URL with its password masked", err)
			}
		})
	}
}

// MaxBodyProbe is longer than any body excerpt an error may carry.
const MaxBodyProbe = providers.MaxErrorBody + 1

func TestRedactText(t *testing.T) {
	for in, want := range map[string]string{
		`Post "http://proxyuser:proxyPASSWORD@127.0.0.1:1/v1/messages": EOF`: `Post "http://proxyuser:xxxxx@127.0.0.1:1/v1/messages": EOF`,
		`Post "http://proxyuser:***@127.0.0.1:1/v1": dial tcp`:               `Post "http://proxyuser:xxxxx@127.0.0.1:1/v1": dial tcp`,
		`GET https://ghp_TOKEN@example.com/x`:                                `GET https://xxxxx@example.com/x`,
		`GET https://example.com/v1?alt=sse&key=AIzaSECRET&x=1`:              `GET https://example.com/v1?alt=sse&key=xxxxx&x=1`,
		`mail bob@example.com about it`:                                      `mail bob@example.com about it`,
	} {
		if got := providers.RedactText(in); got != want {
			t.Errorf("RedactText(%q) = %q, want %q", in, got, want)
		}
	}
}

// Errors that no Resilient provider returned get a reference of their own
// and are logged with it.
func TestReferUnreferencedErrors(t *testing.T) {
	var logs syncBuffer
	err := providers.Refer(errors.New("gemini: prompt blocked: PROHIBITED_CONTENT"), slog.New(slog.NewTextHandler(&logs, nil)))
	kind, msg := providers.Describe(err)
	m := refRE.FindStringSubmatch(msg)
	if kind != providers.KindRefused || m == nil || !strings.Contains(logs.String(), "ref="+m[1]) {
		t.Fatalf("kind %s, message %q, log %q", kind, msg, logs.String())
	}
	if again := providers.Refer(err, nil); providers.RefOf(again) != m[1] {
		t.Errorf("a referenced error got a new reference")
	}
}
