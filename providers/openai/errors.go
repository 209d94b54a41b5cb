package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/switchboard-gw/switchboard/providers"
)

// streamError turns a failure of the SDK stream into a *providers.Error.
// Status is the HTTP status of a refused request, the status an error chunk
// sent mid-stream names (vLLM sends one), or 0 for transport faults,
// cancellation and error chunks that name none. answered says the server
// had answered 2xx, so a failure without a status is a broken stream.
//
// The error's text is written here rather than taken from the SDK: it names
// the URL without credentials and only the start of the body.
func (p *Provider) streamError(ctx context.Context, answered bool, err error) error {
	return callError(ctx, p.name, "stream", answered, err)
}

// callError is streamError for any call: what names the call in the
// error's text ("stream", "embeddings").
func callError(ctx context.Context, name, what string, answered bool, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		// Make the cause visible to errors.Is (Retryable checks for
		// context.Canceled) whatever the transport made of it.
		err = fmt.Errorf("%w: %w", ctxErr, err)
	}
	pe := &providers.Error{Provider: name}
	var (
		apiErr    *sdk.Error
		streamErr *ssestream.StreamError
	)
	switch {
	case errors.As(err, &apiErr):
		pe.Status = apiErr.StatusCode
		if apiErr.Response != nil {
			pe.RetryAfter = providers.RetryAfter(apiErr.Response.Header, time.Now())
		}
		said := apiErr.Message + " " + apiErr.RawJSON()
		if apiErr.Code == "" && apiErr.Message == "" {
			// An OpenAI-compatible server's own shape (vLLM: a top-level
			// "message"), which the SDK does not read: its body.
			said += " " + string(apiErr.DumpResponse(true))
		}
		cause := err
		if apiErr.Code == "context_length_exceeded" || providers.ContextTooLong(apiErr.StatusCode, said) {
			cause = fmt.Errorf("%w: %w", providers.ErrContextTooLong, err)
		}
		pe.Err = providers.Redacted(cause, providers.HTTPDetail(apiErr.Request, apiErr.StatusCode, apiErr.RawJSON()))
	case errors.As(err, &streamErr):
		pe.Status = chunkStatus(streamErr.Event.Data)
		detail := what + ": error chunk: " + providers.Truncate(string(streamErr.Event.Data), providers.MaxErrorBody)
		if pe.Status == 0 {
			pe.Err = providers.Redacted(fmt.Errorf("%w: %w", providers.ErrBrokenStream, err), detail)
		} else {
			pe.Err = providers.Redacted(err, detail)
		}
	case answered && ctx.Err() == nil:
		pe.Err = providers.Redacted(fmt.Errorf("%w: %w", providers.ErrBrokenStream, err), what+" broken: "+err.Error())
	default:
		pe.Err = providers.Redacted(err, what+": "+err.Error())
	}
	return pe
}

// chunkStatus reads the HTTP status an error chunk gives as its numeric
// code, as vLLM does ({"error": {"code": 400, ...}}); OpenAI's own codes
// are strings, which say nothing about retrying.
func chunkStatus(data []byte) int {
	var chunk struct {
		Error struct {
			Code json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &chunk) != nil {
		return 0
	}
	var code int
	if json.Unmarshal(chunk.Error.Code, &code) != nil || code < 400 || code > 599 {
		return 0
	}
	return code
}

// doneMarkers are the line that ends a chat completions stream, with and
// without the optional space; the leading newline anchors it to a line
// start, which JSON (escaping its newlines) can never fake.
var doneMarkers = [][]byte{[]byte("\ndata: [DONE]"), []byte("\ndata:[DONE]")}

// terminator notes whether the response body carried data: [DONE]. The SDK
// stream ends the same way at [DONE] and at a body that simply stops, and
// only the former is a complete answer.
type terminator struct {
	body *doneReader
}

// watch is an SDK middleware that puts a doneReader around the body.
func (t *terminator) watch(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if res != nil && res.Body != nil {
		t.body = &doneReader{ReadCloser: res.Body, tail: []byte("\n")}
		res.Body = t.body
	}
	return res, err
}

func (t *terminator) seen() bool { return t.body != nil && t.body.done }

// doneReader looks for the done marker in what passes through it. It keeps
// the end of the previous read, so a marker split across reads is found.
type doneReader struct {
	io.ReadCloser
	tail []byte
	done bool
}

func (r *doneReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 && !r.done {
		window := append(r.tail, p[:n]...)
		for _, m := range doneMarkers {
			if bytes.Contains(window, m) {
				r.done = true
			}
		}
		keep := len(doneMarkers[0]) - 1
		if len(window) > keep {
			window = window[len(window)-keep:]
		}
		r.tail = append(r.tail[:0], window...)
	}
	return n, err
}
