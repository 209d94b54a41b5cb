package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/places"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/telemetry"
)

// gatewayTelemetry is the gateway's tracing (docs/telemetry.md): nil
// when neither an OTLP endpoint nor the trace log is configured, and
// then nothing is traced.
type gatewayTelemetry struct {
	t *telemetry.Telemetry
}

// startTelemetry sets up the OpenTelemetry exporter and the trace log
// from the telemetry section and the OTEL_ variables, which win.
func startTelemetry(ctx context.Context, cfg config.Config, environ []string, mets *metrics.Metrics, log *slog.Logger) (gatewayTelemetry, error) {
	tc := cfg.Telemetry
	t, err := telemetry.Setup(ctx, telemetryConfig(cfg), envLookup(environ), log)
	if err != nil || t == nil {
		return gatewayTelemetry{}, err
	}
	mets.CounterFunc("switchboard_trace_export_errors_total", "Span batches the OTLP exporter could not send.", func() float64 { return float64(t.ExportErrors()) })
	mets.CounterFunc("switchboard_trace_log_dropped_total", "Trace log lines dropped because the writer could not keep up.", func() float64 { return float64(t.Dropped()) })
	mets.CounterFunc("switchboard_trace_log_write_errors_total", "Failed writes of the trace log.", func() float64 { return float64(t.LogErrors()) })
	if t.Exporting {
		log.Info("telemetry: exporting traces", "endpoint", t.Endpoint, "protocol", t.Protocol, "capture_content", tc.CaptureContent)
	}
	if tc.TraceLog.Path != "" {
		log.Info("telemetry: writing the trace log", "path", tc.TraceLog.Path)
	}
	return gatewayTelemetry{t}, nil
}

// tracer is the sessions' Tracer; nil (no interface value) when off.
func (g gatewayTelemetry) tracer() sessions.Tracer {
	if g.t == nil {
		return nil
	}
	return g.t
}

// places is the chat apps' telemetry; nil when off.
func (g gatewayTelemetry) places() places.Telemetry {
	if g.t == nil {
		return nil
	}
	return g.t
}

// shutdown exports what is queued and flushes the trace log, after the
// sessions have stopped (so their last spans are in).
func (g gatewayTelemetry) shutdown(log *slog.Logger) {
	if g.t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.t.Shutdown(ctx); err != nil {
		log.Error("telemetry: not every span or trace log line was written at shutdown", "err", err)
	}
}

// telemetryConfig is the telemetry package's view of the section.
func telemetryConfig(cfg config.Config) telemetry.Config {
	tc := cfg.Telemetry
	return telemetry.Config{
		Endpoint: tc.Endpoint, Protocol: tc.Protocol, Headers: tc.Headers, ServiceName: tc.ServiceName,
		Sampler: tc.Sampler, CaptureContent: tc.CaptureContent, Version: currentVersion().Version,
		TraceLog: telemetry.TraceLogConfig{Path: tc.TraceLog.Path, MaxBytes: int64(tc.TraceLog.MaxSizeMB) << 20, MaxFiles: tc.TraceLog.MaxFiles},
	}
}

// envLookup reads environ as os.Getenv reads the process's.
func envLookup(environ []string) func(string) string {
	return func(name string) string { v, _ := lookupEnv(environ, name); return v }
}

// checkTelemetry is the doctor's telemetry row: where spans go, whether
// something listens there, and whether the trace log can be written.
func (d *doctor) checkTelemetry(ctx context.Context) checkResult {
	tc := telemetryConfig(d.cfg)
	endpoint, protocol, fromEnv := telemetry.Target(tc, envLookup(d.environ))
	res := checkResult{Name: "telemetry"}
	if endpoint == "" && tc.TraceLog.Path == "" {
		res.Sev, res.Detail = sevInfo, "off: no OTLP endpoint (telemetry.endpoint, OTEL_EXPORTER_OTLP_ENDPOINT) and no telemetry.trace_log.path"
		return res
	}
	var found []string
	if endpoint != "" {
		source := "telemetry.endpoint"
		if fromEnv {
			source = "OTEL_EXPORTER_OTLP_ENDPOINT"
		}
		if protocol != "http/protobuf" && protocol != "grpc" {
			res.Sev = sevProblem
			res.Detail = fmt.Sprintf("the OTLP protocol %q cannot be used: the gateway will not start", protocol)
			res.Fix = "set OTEL_EXPORTER_OTLP_PROTOCOL (or telemetry.protocol) to http/protobuf or grpc"
			return res
		}
		addr, err := otlpAddr(endpoint, protocol)
		if err == nil {
			var conn net.Conn
			dctx, cancel := context.WithTimeout(ctx, d.timeout)
			conn, err = (&net.Dialer{}).DialContext(dctx, "tcp", addr)
			cancel()
			if conn != nil {
				conn.Close()
			}
		}
		if err != nil {
			res.Sev = sevWarn
			res.Detail = fmt.Sprintf("traces go to %s (%s, from %s), and nothing answers there: %s", endpoint, protocol, source, netCause(err))
			res.Fix = "start the collector (docs/telemetry.md), or fix " + source + "; meanwhile spans are dropped, turns are not slowed"
		} else {
			found = append(found, fmt.Sprintf("traces go to %s (%s, from %s), which accepts connections", endpoint, protocol, source))
		}
	}
	if path := tc.TraceLog.Path; path != "" {
		dir := filepath.Dir(path)
		_, err := os.Stat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			found = append(found, "the trace log's folder "+dir+" will be made at start")
		} else if err == nil {
			err = probeWritable(dir)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			res.Sev = sevProblem
			res.Detail = fmt.Sprintf("the trace log %s cannot be written: %v; the gateway will not start", path, err)
			res.Fix = "give the gateway's user write access to " + dir + ", or change telemetry.trace_log.path"
			return res
		} else if err == nil {
			found = append(found, "the trace log is written to "+path)
		}
	}
	if res.Sev == sevOK && d.cfg.Telemetry.CaptureContent {
		found = append(found, "with content (capture_content): messages, tool arguments and results are recorded")
	}
	if res.Detail == "" {
		res.Detail = strings.Join(found, "; ")
	} else if len(found) > 0 {
		res.Detail += "; " + strings.Join(found, "; ")
	}
	return res
}

// otlpAddr is the host:port an OTLP endpoint URL names, with the
// protocol's default port.
func otlpAddr(endpoint, protocol string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("not a URL: %q", endpoint)
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "https":
		port = "443"
	case protocol == "grpc":
		port = "4317"
	default:
		port = "4318"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}
