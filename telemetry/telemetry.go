// Package telemetry owns the OpenTelemetry SDK of the gateway: the OTLP
// exporter (http/protobuf or grpc), the spans of each turn, the JSON-lines
// trace log, and the HTTP transport that traces the chat apps' API calls.
// The session core reports a turn's steps through its own small interface
// (sessions.Tracer), which Telemetry implements; no other package of the
// gateway imports the SDK (deps_test.go).
package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config is the telemetry section of the configuration (config.Telemetry).
type Config struct {
	// Endpoint is the OTLP endpoint's base URL, as
	// OTEL_EXPORTER_OTLP_ENDPOINT takes it; for http/protobuf the path
	// /v1/traces is added when it has none.
	Endpoint string
	// Protocol is "http/protobuf" (the default) or "grpc".
	Protocol       string
	Headers        map[string]string
	ServiceName    string  // default "switchboard"
	Sampler        float64 // share of traces sampled, 0 to 1
	CaptureContent bool
	// Version is the gateway's, the resource's service.version.
	Version  string
	TraceLog TraceLogConfig
}

// The environment variables read here; the SDK reads the rest of the
// OTEL_ family itself (OTEL_EXPORTER_OTLP_HEADERS, …_TIMEOUT,
// …_CERTIFICATE, …_COMPRESSION, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER and its _ARG).
const (
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envHeaders        = "OTEL_EXPORTER_OTLP_HEADERS"
	envTracesHeaders  = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	envSampler        = "OTEL_TRACES_SAMPLER"
	envDisabled       = "OTEL_SDK_DISABLED"
	envExporter       = "OTEL_TRACES_EXPORTER"
)

// Telemetry is the gateway's tracing: a sessions.Tracer for the turns and
// a Transport for the chat apps' clients. A nil *Telemetry traces nothing
// (Setup returns nil when nothing is configured).
type Telemetry struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	log      *traceLog // nil: no trace log
	content  bool
	// Exporting: spans leave the process (an endpoint is set).
	Exporting bool
	// Endpoint and Protocol say where they go, for the start-up log line.
	Endpoint, Protocol string
	exportErrs         atomic.Uint64
}

// Setup builds the telemetry the configuration and the environment ask
// for, or returns nil when they ask for none: no endpoint (neither
// telemetry.endpoint nor OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT) and no
// trace log; then nothing is traced and nothing costs.
//
// The OTEL_ variables win over the configuration, as they do for every
// OpenTelemetry SDK: a key of the telemetry section is used only where its
// variable is unset. getenv reads the environment the gateway was given;
// the SDK reads the variables it knows from the process's own.
func Setup(ctx context.Context, cfg Config, getenv func(string) string, log *slog.Logger) (*Telemetry, error) {
	if log == nil {
		log = slog.Default()
	}
	endpoint, protocol, fromEnv := Target(cfg, getenv)
	if endpoint == "" && cfg.TraceLog.Path == "" {
		return nil, nil
	}

	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", cmp.Or(cfg.ServiceName, "switchboard")),
			attribute.String("service.version", cfg.Version)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES: the rest of the resource
		// is still usable, and the error says which.
		log.Error("telemetry: the resource attributes are partly unreadable; fix OTEL_RESOURCE_ATTRIBUTES", "err", err)
	}
	t := &Telemetry{content: cfg.CaptureContent, Endpoint: endpoint, Protocol: protocol}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if endpoint != "" {
		exp, err := newExporter(ctx, protocol, endpoint, fromEnv, cfg.Headers, getenv)
		if err != nil {
			return nil, err
		}
		// Batched, off the turn's path: a full queue drops spans rather
		// than make a turn wait (the SDK's BatchSpanProcessor).
		opts = append(opts, sdktrace.WithBatcher(&countingExporter{SpanExporter: exp, errs: &t.exportErrs}))
		t.Exporting = true
		if getenv(envSampler) == "" {
			opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Sampler))))
		}
	} else {
		// The trace log alone: spans are not recorded, but have their ids,
		// which the log's lines carry.
		opts = append(opts, sdktrace.WithSampler(sdktrace.NeverSample()))
	}
	// The SDK tells its failures (an export that failed) to a handler
	// of the process: an ERROR line with the fix; ExportErrors counts them.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Error("telemetry: OpenTelemetry failed; if spans cannot be exported, check telemetry.endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT) and that the collector is up", "err", err)
	}))
	t.provider = sdktrace.NewTracerProvider(opts...)
	t.tracer = t.provider.Tracer("github.com/switchboard-gw/switchboard")
	if cfg.TraceLog.Path != "" {
		if t.log, err = openTraceLog(cfg.TraceLog, log); err != nil {
			_ = t.provider.Shutdown(ctx)
			return nil, err
		}
	}
	return t, nil
}

// Target is where spans go, after the environment's say: the endpoint
// ("" when nothing exports), the protocol, and whether the endpoint came
// from the environment (then the SDK reads it itself).
func Target(cfg Config, getenv func(string) string) (endpoint, protocol string, fromEnv bool) {
	endpoint = cmp.Or(getenv(envTracesEndpoint), getenv(envEndpoint))
	fromEnv = endpoint != ""
	if !fromEnv {
		endpoint = cfg.Endpoint
	}
	if strings.EqualFold(getenv(envDisabled), "true") || getenv(envExporter) == "none" {
		endpoint = ""
	}
	return endpoint, cmp.Or(getenv(envTracesProtocol), getenv(envProtocol), cfg.Protocol, "http/protobuf"), fromEnv
}

func newExporter(ctx context.Context, protocol, endpoint string, fromEnv bool, headers map[string]string, getenv func(string) string) (sdktrace.SpanExporter, error) {
	// Headers from the configuration only where the environment has none
	// (the SDK reads OTEL_EXPORTER_OTLP_HEADERS itself).
	useHeaders := len(headers) > 0 && getenv(envHeaders) == "" && getenv(envTracesHeaders) == ""
	switch protocol {
	case "http/protobuf":
		var opts []otlptracehttp.Option
		if !fromEnv {
			u, err := url.Parse(endpoint)
			if err != nil {
				return nil, fmt.Errorf("telemetry.endpoint %q: %w", endpoint, err)
			}
			if u.Path == "" || u.Path == "/" {
				u.Path = "/v1/traces"
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
		}
		if useHeaders {
			opts = append(opts, otlptracehttp.WithHeaders(headers))
		}
		return otlptracehttp.New(ctx, opts...)
	case "grpc":
		var opts []otlptracegrpc.Option
		if !fromEnv {
			opts = append(opts, otlptracegrpc.WithEndpointURL(endpoint))
		}
		if useHeaders {
			opts = append(opts, otlptracegrpc.WithHeaders(headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	case "http/json":
		return nil, errors.New("telemetry: the OTLP protocol http/json is not supported by the Go SDK: use http/protobuf or grpc")
	default:
		return nil, fmt.Errorf("telemetry: unknown OTLP protocol %q: use http/protobuf or grpc", protocol)
	}
}

// countingExporter counts the exports that failed, for /metrics (the SDK
// reports each to the OpenTelemetry error handler too).
type countingExporter struct {
	sdktrace.SpanExporter
	errs *atomic.Uint64
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		c.errs.Add(1)
	}
	return err
}

// ExportErrors counts the span batches that could not be exported.
func (t *Telemetry) ExportErrors() uint64 {
	if t == nil {
		return 0
	}
	return t.exportErrs.Load()
}

// Dropped counts the trace log's lines dropped because its buffer was full.
func (t *Telemetry) Dropped() uint64 {
	if t == nil || t.log == nil {
		return 0
	}
	return t.log.dropped.Load()
}

// LogErrors counts the trace log's failed writes.
func (t *Telemetry) LogErrors() uint64 {
	if t == nil || t.log == nil {
		return 0
	}
	return t.log.errs.Load()
}

// Shutdown exports the spans still queued and flushes the trace log, for
// as long as ctx allows. Call it after the sessions have drained.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	err := t.provider.Shutdown(ctx)
	if t.log != nil {
		err = errors.Join(err, t.log.close(ctx))
	}
	return err
}

// Tracer is the OpenTelemetry tracer, for the transport's spans; a no-op
// one on a nil Telemetry.
func (t *Telemetry) Tracer() trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer("")
	}
	return t.tracer
}
