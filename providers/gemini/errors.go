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
// the server sent mid-stream; 0 for transport faults and cancellation. A
// failure without a status after a 2xx answer is a broken stream.
//
// The error's text is written here rather than taken from the SDK (whose
// text quotes a chunk it could not read whole, and every detail of an API
// error): the server's message and the rest are capped.
func (p *Provider) streamError(ctx context.Context, ex *exchange, err error) error {
	return callError(ctx, p.name, "stream", ex, err)
}

// callError is streamError for any call: what names the call in the
// error's text ("stream", "embeddings").
func callError(ctx context.Context, name, what string, ex *exchange, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		// Make the cause visible to errors.Is (Retryable checks for
		// context.Canceled) whatever the transport made of it.
		err = fmt.Errorf("%w: %w", ctxErr, err)
	}
	pe := &providers.Error{Provider: name}
	var apiErr genai.APIError
	isAPI := errors.As(err, &apiErr)
	if isAPI {
		pe.Status = apiErr.Code
		pe.RetryAfter = retryInfo(apiErr.Details)
	}
	answered := ex.status >= 200 && ex.status <= 299
	if ex.status != 0 && !answered {
		pe.Status = ex.status
		if d := providers.RetryAfter(ex.header, time.Now()); d > 0 {
			pe.RetryAfter = d
		}
	}
	switch {
	case isAPI:
		detail := fmt.Sprintf("%d %s: %s", apiErr.Code, apiErr.Status, providers.Truncate(apiErr.Message, providers.MaxErrorBody))
		if answered {
			detail = what + ": error: " + detail
		}
		switch {
		case pe.Status == 0:
			pe.Err = providers.Redacted(fmt.Errorf("%w: %w", providers.ErrBrokenStream, err), detail)
		case providers.ContextTooLong(pe.Status, apiErr.Message):
			// "The input token count (…) exceeds the maximum number of tokens allowed (…)."
			pe.Err = providers.Redacted(fmt.Errorf("%w: %w", providers.ErrContextTooLong, err), detail)
		default:
			pe.Err = providers.Redacted(err, detail)
		}
	case pe.Status == 0 && answered && ctx.Err() == nil:
		pe.Err = providers.Redacted(fmt.Errorf("%w: %w", providers.ErrBrokenStream, err), what+" broken: "+providers.Truncate(err.Error(), providers.MaxErrorBody))
	default:
		pe.Err = providers.Redacted(err, providers.Truncate(err.Error(), providers.MaxErrorBody))
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
