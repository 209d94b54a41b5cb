package otlptest

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/telemetry"
)

// Traced is the gateway's telemetry exporting every span over OTLP/HTTP
// to a receiver of its own, for a test.
type Traced struct {
	*Receiver
	Telemetry *telemetry.Telemetry
}

// StartTraced sets telemetry up with cfg (every span sampled unless cfg
// says otherwise), exporting to a new receiver; the environment is not
// read.
func StartTraced(t testing.TB, cfg telemetry.Config) *Traced {
	t.Helper()
	r := Start(t)
	cfg.Endpoint, cfg.Protocol = r.Endpoint, "http/protobuf"
	tel, err := telemetry.Setup(context.Background(), cfg, func(string) string { return "" }, nil)
	if err != nil || tel == nil {
		t.Fatalf("telemetry.Setup = %v, %v", tel, err)
	}
	return &Traced{Receiver: r, Telemetry: tel}
}

// Flush exports what is queued, writes the trace log, and returns every
// span received.
func (tr *Traced) Flush(t testing.TB) []Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Telemetry.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return tr.Spans()
}
