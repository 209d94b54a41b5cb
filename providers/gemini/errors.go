package gemini

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/switchboard-gw/switchboard/providers"
)

// exchange is the HTTP response of one Stream call, as far as error
// reporting needs it. genai.APIError carries neither the response headers
// (Retry-After) nor, reliably, the HTTP status (its Code is read from the
// error body), so the transport notes them here.
//
// Each Stream call has its own exchange, reached through the request's
// context. RoundTrip writes it before http.Client.Do returns and Stream reads
// it after, on the same goroutine, so it needs no lock.
type exchange struct {
	status int
	header http.Header
}

type exchangeKey struct{}

// recorder is the SDK's transport: it notes each response's status and
// headers in the calling Stream's exchange, if there is one.
type recorder struct{ next http.RoundTripper }

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if ex, ok := req.Context().Value(exchangeKey{}).(*exchange); ok && resp != nil {
		ex.status, ex.header = resp.StatusCode, resp.Header
	}
	return resp, err
}

// streamError turns a failure of the SDK stream into a *providers.Error.
// Status is the HTTP status of a refused request, or the code of an error
// the server sent mid-stream; 0 for transport faults and cancellation.
func (p *Provider) streamError(ctx context.Context, ex *exchange, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		// Make the cause visible to errors.Is (Retryable checks for
		// context.Canceled) whatever the transport made of it.
		err = fmt.Errorf("%w: %w", ctxErr, err)
	}
	pe := &providers.Error{Provider: p.name, Err: err}
	var apiErr genai.APIError
	if errors.As(err, &apiErr) {
		pe.Status = apiErr.Code
		pe.RetryAfter = retryInfo(apiErr.Details)
	}
	if ex.status != 0 && (ex.status < 200 || ex.status > 299) {
		pe.Status = ex.status
		if d := providers.RetryAfter(ex.header, time.Now()); d > 0 {
			pe.RetryAfter = d
		}
	}
	return pe
}

// retryInfo reads the google.rpc.RetryInfo detail Gemini puts in the body of
// a 429 ({"@type": ".../google.rpc.RetryInfo", "retryDelay": "37s"}), its
// usual way of saying when to come back. A Retry-After header wins over it.
func retryInfo(details []map[string]any) time.Duration {
	for _, d := range details {
		if t, _ := d["@type"].(string); !strings.HasSuffix(t, "google.rpc.RetryInfo") {
			continue
		}
		s, _ := d["retryDelay"].(string)
		if v, err := time.ParseDuration(s); err == nil && v > 0 {
			return v
		}
	}
	return 0
}
