package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/switchboard-gw/switchboard/providers"
)

// StatusOverloaded is the HTTP status Anthropic answers when its servers are
// overloaded; like other 5xx it is worth retrying.
const StatusOverloaded = 529

// streamError turns a failure of the SDK stream into a *providers.Error.
// Status is the HTTP status of a refused request, the status Anthropic gives
// the type of an `error` event sent mid-stream, or 0 for transport faults
// and cancellation. answered says the server had answered 2xx, so a failure
// without a status is a broken stream.
//
// The error's text is written here rather than taken from the SDK, whose
// text has the request URL as configured (credentials and all) and the
// whole body: here the URL loses its credentials and the body is capped.
func (p *Provider) streamError(ctx context.Context, answered bool, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		// Make the cause visible to errors.Is (Retryable checks for
		// context.Canceled) whatever the transport made of it.
		err = fmt.Errorf("%w: %w", ctxErr, err)
	}
	pe := &providers.Error{Provider: p.name}
	var apiErr *sdk.Error
	switch {
	case !errors.As(err, &apiErr) && answered && ctx.Err() == nil:
		pe.Err = providers.Redacted(fmt.Errorf("%w: %w", providers.ErrBrokenStream, err), "stream broken: "+err.Error())
	case apiErr == nil:
		pe.Err = providers.Redacted(err, "stream: "+err.Error())
	case apiErr.StatusCode >= 200 && apiErr.StatusCode <= 299:
		// An `error` event inside a stream that had started well: the
		// response's own status says nothing about it.
		pe.Status = errorTypeStatus(apiErr.Type())
		detail := fmt.Sprintf("stream: error event %s: %s", apiErr.Type(), providers.Truncate(apiErr.RawJSON(), providers.MaxErrorBody))
		if pe.Status == 0 {
			pe.Err = providers.Redacted(fmt.Errorf("%w: %w", providers.ErrBrokenStream, err), detail)
		} else {
			pe.Err = providers.Redacted(err, detail)
		}
	default:
		pe.Status = apiErr.StatusCode
		if apiErr.Response != nil {
			pe.RetryAfter = providers.RetryAfter(apiErr.Response.Header, time.Now())
		}
		detail := providers.HTTPDetail(apiErr.Request, apiErr.StatusCode, apiErr.RawJSON())
		if apiErr.RequestID != "" {
			detail += " (request-id " + apiErr.RequestID + ")"
		}
		cause := err
		if providers.ContextTooLong(apiErr.StatusCode, apiErr.RawJSON()) {
			cause = fmt.Errorf("%w: %w", providers.ErrContextTooLong, err) // "prompt is too long: … tokens > … maximum"
		}
		pe.Err = providers.Redacted(cause, detail)
	}
	return pe
}

// errorTypeStatus is the HTTP status Anthropic documents for each error type,
// so that an error event mid-stream is as retryable as the same error sent
// as a response. Unknown types get 0, a transport-like fault.
func errorTypeStatus(t sdk.ErrorType) int {
	switch t {
	case sdk.ErrorTypeInvalidRequestError:
		return http.StatusBadRequest
	case sdk.ErrorTypeAuthenticationError:
		return http.StatusUnauthorized
	case sdk.ErrorTypeBillingError:
		return http.StatusPaymentRequired
	case sdk.ErrorTypePermissionError:
		return http.StatusForbidden
	case sdk.ErrorTypeNotFoundError:
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case sdk.ErrorTypeRateLimitError:
		return http.StatusTooManyRequests
	case sdk.ErrorTypeAPIError:
		return http.StatusInternalServerError
	case sdk.ErrorTypeTimeoutError:
		return http.StatusGatewayTimeout
	case sdk.ErrorTypeOverloadedError:
		return StatusOverloaded
	}
	return 0
}
