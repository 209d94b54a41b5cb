package main

import (
	"context"
	"log/slog"
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
	t, err := telemetry.Setup(ctx, telemetry.Config{
		Endpoint: tc.Endpoint, Protocol: tc.Protocol, Headers: tc.Headers, ServiceName: tc.ServiceName,
		Sampler: tc.Sampler, CaptureContent: tc.CaptureContent, Version: currentVersion().Version,
		TraceLog: telemetry.TraceLogConfig{Path: tc.TraceLog.Path, MaxBytes: int64(tc.TraceLog.MaxSizeMB) << 20, MaxFiles: tc.TraceLog.MaxFiles},
	}, func(name string) string { v, _ := lookupEnv(environ, name); return v }, log)
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
