package telemetry

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport wraps next, the transport of a chat app's API client, so each
// call is a client span named after the API's method: "POST
// chat.postMessage" for Slack's Web API, "PATCH channels/{id}/messages/{id}"
// for Discord's REST API (ids become {id}). Its parent is the span the
// request's context carries; the URL's query and the request's headers
// and body (tokens, messages) are never recorded. On a nil Telemetry it
// returns next.
func (t *Telemetry) Transport(channel string, next http.RoundTripper) http.RoundTripper {
	if t == nil {
		return next
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{t: t.tracer, channel: channel, next: next}
}

type transport struct {
	t       trace.Tracer
	channel string
	next    http.RoundTripper
}

func (x *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tmpl := template(req.URL.Path)
	ctx, span := x.t.Start(req.Context(), req.Method+" "+tmpl, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("http.request.method", req.Method),
		attribute.String("server.address", req.URL.Hostname()),
		attribute.String("url.template", tmpl),
		attribute.String("switchboard.channel", x.channel)))
	defer span.End()
	resp, err := x.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		span.SetAttributes(attribute.String("error.type", errorType(err)))
		span.SetStatus(codes.Error, errorType(err))
		return resp, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetAttributes(attribute.String("error.type", strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, resp.Status)
	}
	return resp, nil
}

// errorType names a transport failure without its text (which may hold
// the URL).
func errorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "transport"
}

// template is an API path with its ids and tokens replaced: the chat
// apps' API prefixes (/api/, /api/v10/) dropped, digit runs made {id},
// and the secret a path can carry made {token}: Discord's interaction and
// webhook tokens (the segment after interactions/{id}/ or webhooks/{id}/),
// and any segment of 32 characters or more.
func template(path string) string {
	path = strings.TrimPrefix(path, "/")
	if rest, ok := strings.CutPrefix(path, "api/"); ok {
		path = rest
		if v, rest, ok := strings.Cut(path, "/"); ok && len(v) > 1 && v[0] == 'v' && isDigits(v[1:]) {
			path = rest
		}
	}
	parts := strings.Split(path, "/")
	for i, p := range parts {
		switch {
		case isDigits(p):
			parts[i] = "{id}"
		case len(p) >= 32, i >= 2 && parts[i-1] == "{id}" && (parts[i-2] == "interactions" || parts[i-2] == "webhooks"):
			parts[i] = "{token}"
		}
	}
	return strings.Join(parts, "/")
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Inbound starts the span of an input a chat app hands to its session
// (places.Layer.Submit): a consumer span "<channel> receive <kind>",
// and its W3C traceparent, which the input carries to the turn it starts
// (linked to it); end ends it, with the error that refused the input, if
// any.
func (t *Telemetry) Inbound(ctx context.Context, channel, kind, session string) (context.Context, string, func(error)) {
	if t == nil {
		return ctx, "", func(error) {}
	}
	ctx, span := t.tracer.Start(ctx, channel+" receive "+kind, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("switchboard.channel", channel), attribute.String("switchboard.input.kind", kind),
		attribute.String("gen_ai.conversation.id", session)))
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return ctx, carrier.Get("traceparent"), func(err error) {
		if err != nil {
			span.SetAttributes(attribute.String("error.type", "refused"))
			span.SetStatus(codes.Error, "the input was not taken")
		}
		span.End()
	}
}
