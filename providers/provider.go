// Package providers is the gateway's small, typed view of an LLM: a request
// built from the context window, and a stream of events coming back. The
// adapters in the sub-packages translate it to each vendor's wire through the
// vendor's official SDK; this package adds what all of them share: retries
// with backoff, an idle timeout, and falling back to another provider.
package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// Provider streams one model response.
//
// The sequence yields TextDelta, ToolCall and Usage events in the order the
// model produced them and ends with one Done event, or with a non-nil error
// (after which nothing else is yielded). A ToolCall is yielded whole, once
// its arguments have fully arrived.
type Provider interface {
	Stream(ctx context.Context, req Request) iter.Seq2[Event, error]
}

// Request is one call to the model.
type Request struct {
	Model       string
	System      string
	Messages    []switchboard.Message
	Tools       []ToolSpec
	Temperature *float64
	MaxTokens   int
	// Images are pictures the model is shown with the messages' Files, by
	// the file's Path: an adapter puts each beside the text of the user
	// message that has the file. A file without one here is known to the
	// model by the message's text alone.
	Images map[string]Image
}

// Image is a picture as a model takes it: PNG, JPEG, GIF or WebP within
// the vendors' limits (images.Fit).
type Image struct {
	Type string // "image/png"
	Data []byte
}

// ToolSpec describes a tool to the model. Parameters is a JSON Schema object.
type ToolSpec struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// EventKind says which field of an Event is set.
type EventKind int

const (
	EventTextDelta EventKind = iota + 1
	EventToolCall
	EventUsage
	EventDone
)

// Event is one item of a response stream.
type Event struct {
	Kind     EventKind
	Text     string               // EventTextDelta
	ToolCall switchboard.ToolCall // EventToolCall
	Usage    switchboard.Usage    // EventUsage
	// StopReason is the provider's own word for why it stopped (EventDone).
	StopReason string
	// Model is the model that answered, when the provider says (EventDone).
	Model string
}

// Error is a failed call with what retrying needs to know. Adapters wrap the
// SDK's error in it; Status is 0 when no HTTP response arrived (connection
// refused, reset, timeout) or the stream broke after a 2xx (then Err wraps
// ErrBrokenStream).
type Error struct {
	Provider   string
	Status     int
	RetryAfter time.Duration
	Err        error
}

// Error is safe to log: whatever the wrapped error says, credentials in
// URLs are scrubbed and the text is capped (see RedactText).
func (e *Error) Error() string {
	var s string
	if e.Status != 0 {
		s = fmt.Sprintf("%s: HTTP %d: %v", e.Provider, e.Status, e.Err)
	} else {
		s = fmt.Sprintf("%s: %v", e.Provider, e.Err)
	}
	return Truncate(RedactText(s), maxErrorText)
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether trying the same request again may succeed:
// rate limits, server errors, Anthropic's 529 overload, and transport faults.
// Other 4xx answers mean the request itself is wrong.
func (e *Error) Retryable() bool {
	switch {
	case e.Status == 0:
		return !errors.Is(e.Err, context.Canceled)
	case e.Status == http.StatusTooManyRequests, e.Status == http.StatusRequestTimeout,
		e.Status == http.StatusConflict, e.Status >= 500:
		return true
	}
	return false
}

// RetryAfter reads a Retry-After (seconds or HTTP date) or the
// retry-after-ms header some vendors send. It returns 0 when there is none.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if ms := h.Get("Retry-After-Ms"); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v > 0 {
			return time.Duration(v * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Config is what every adapter is built from; the gateway fills it from the
// `providers` list of the configuration.
type Config struct {
	Name    string
	Kind    string
	BaseURL string
	APIKey  string
	Model   string
	// HTTPClient lets tests and operators shape transport; nil means a
	// default client. Timeouts are applied by the Retrying wrapper, not here.
	HTTPClient *http.Client
}
