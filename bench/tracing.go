package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/switchboard-gw/switchboard/telemetry/otlptest"
)

// The tracing rows: what OpenTelemetry costs a turn. The same gateway
// runs with tracing off (the default: no tracer at all), with every turn
// traced (OTEL_TRACES_SAMPLER=always_on) and exported over OTLP/HTTP to a
// receiver in the bench's process that decodes each request, and with the
// trace log written too.

type tracingRow struct {
	mode  string
	row   row
	spans int // received by the receiver
}

func (r tracingRow) spansPerTurn() float64 {
	if r.row.turns == 0 {
		return 0
	}
	return float64(r.spans) / float64(r.row.turns)
}

var tracingModes = []string{"off", "traced, exported", "traced, exported, trace log"}

func measureTracing(ctx context.Context, bin, dir, llmURL string, levels []int, warmup, d time.Duration) ([]tracingRow, error) {
	recv := otlptest.New(true)
	defer recv.Close()
	var out []tracingRow
	for _, n := range levels {
		for i, mode := range tracingModes {
			var env []string
			if i > 0 {
				env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.Endpoint, "OTEL_TRACES_SAMPLER=always_on"}
			}
			if i > 1 {
				env = append(env, "SWITCHBOARD_TELEMETRY__TRACE_LOG__PATH="+filepath.Join(dir, "trace-"+strconv.Itoa(n)+".jsonl"))
			}
			gw, err := startGatewayEnv(ctx, bin, dir, llmURL, env)
			if err != nil {
				return nil, err
			}
			before := recv.Count()
			r, err := measure(ctx, "gateway", gw, n, warmup, d)
			gw.stop() // exports what it holds on the way out
			if err != nil {
				return nil, fmt.Errorf("%s, %d sessions: %w", mode, n, err)
			}
			// The spans of the warm-up and of the turns cut at the end are
			// counted too: spans per turn is approximate.
			out = append(out, tracingRow{mode: mode, row: r, spans: recv.Count() - before})
		}
	}
	return out, nil
}

func (r report) tracingSection(p func(string, ...any)) {
	if len(r.tracing) == 0 {
		return
	}
	p("## Tracing\n\n")
	p("What OpenTelemetry costs ([telemetry.md](telemetry.md)): the turns of the first table with tracing off (no tracer: the default), " +
		"with every turn traced (`OTEL_TRACES_SAMPLER=always_on`) and exported over OTLP/HTTP (protobuf, batched) to a receiver on " +
		"loopback that decodes each request, and with the trace log (`telemetry.trace_log.path`) written as well. A turn here is " +
		"one `invoke_agent` span and one `chat` span; spans per turn counts those of the warm-up too. " +
		"Turns/s of one configuration moves by several per cent from run to run on a machine shared with other work: " +
		"CPU per turn is the steadier measure of what tracing adds.\n\n")
	p("| tracing | sessions | turns/s | p50 | p99 | CPU s / 1k turns | peak RSS | spans / turn | vs off |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var off tracingRow
	for _, t := range r.tracing {
		if t.mode == tracingModes[0] {
			off = t
		}
		vs := "—"
		if t.mode != tracingModes[0] && off.row.turnsPerSec() > 0 {
			vs = fmt.Sprintf("%+.1f %% turns/s, %+.2f s CPU / 1k turns", 100*(t.row.turnsPerSec()/off.row.turnsPerSec()-1), t.row.cpuPer1k-off.row.cpuPer1k)
		}
		p("| %s | %d | %.0f | %v | %v | %.2f | %d MiB | %.1f | %s |\n", t.mode, t.row.sessions, t.row.turnsPerSec(), t.row.p50(), t.row.p99(),
			t.row.cpuPer1k, t.row.peakKiB>>10, t.spansPerTurn(), vs)
	}
	p("\n")
}
