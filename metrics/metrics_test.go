package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/metrics"
)

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestCountersAppearInTheScrape(t *testing.T) {
	m := metrics.New()
	m.Event("delta")
	m.Event("delta")
	m.TurnEnded("answered", 20*time.Millisecond)
	closed := m.Connected()
	m.Frame("input")
	live := 3.0
	m.GaugeFunc("switchboard_sessions_live", "Sessions in memory.", func() float64 { return live })
	m.CounterFunc("switchboard_things_total", "Things.", func() float64 { return 7 })

	body := scrape(t, m)
	for _, want := range []string{
		`switchboard_events_total{type="delta"} 2`,
		`switchboard_turns_total{outcome="answered"} 1`,
		`switchboard_turn_duration_seconds_count 1`,
		`switchboard_websocket_connections 1`,
		`switchboard_websocket_frames_received_total{type="input"} 1`,
		`switchboard_sessions_live 3`,
		`switchboard_things_total 7`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}

	closed("client_gone")
	body = scrape(t, m)
	for _, want := range []string{
		`switchboard_websocket_connections 0`,
		`switchboard_websocket_closed_total{reason="client_gone"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("after close, scrape lacks %q", want)
		}
	}
}

// Packages and tests that do not care about metrics pass nil.
func TestNilMetricsIsANoOp(t *testing.T) {
	var m *metrics.Metrics
	m.Event("delta")
	m.TurnEnded("answered", time.Second)
	m.Frame("input")
	m.GaugeFunc("x", "y", func() float64 { return 1 })
	m.CounterFunc("x", "y", func() float64 { return 1 })
	m.Connected()("done")
	m.ProviderCircuit("main", true)
	m.StoreSizes(time.Minute, func(context.Context) (metrics.StoreSizes, error) { return metrics.StoreSizes{}, nil })
	m.Cluster(time.Minute, func(context.Context) (int, error) { return 1, nil }, func() int { return 1 })
	m.LeasesLost(1)
	m.TakenOver(1)
}

// A replica's metrics appear once Cluster registers them (on PostgreSQL
// alone): the replicas live read at most once per interval, the leases
// held at each scrape, the counters as the cluster counts.
func TestClusterMetrics(t *testing.T) {
	m := metrics.New()
	m.LeasesLost(1) // counted before registration: kept
	if body := scrape(t, m); strings.Contains(body, "switchboard_replicas_live") || strings.Contains(body, "switchboard_leases") {
		t.Fatalf("a replica's metrics before Cluster:\n%s", body)
	}
	live, reads, held := 3, 0, 2
	m.Cluster(time.Hour, func(ctx context.Context) (int, error) {
		reads++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the reading has no deadline")
		}
		return live, nil
	}, func() int { return held })
	m.LeasesLost(2)
	m.TakenOver(4)
	body := scrape(t, m)
	live, held = 5, 7
	body2 := scrape(t, m)
	for _, want := range []string{
		"switchboard_replicas_live 3\n",
		"switchboard_leases_held 2\n",
		"switchboard_leases_lost_total 3\n",
		"switchboard_sessions_taken_over_total 4\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q:\n%s", want, body)
		}
	}
	if !strings.Contains(body2, "switchboard_replicas_live 3\n") || !strings.Contains(body2, "switchboard_leases_held 7\n") || reads != 1 {
		t.Errorf("second scrape (%d readings of the replicas live): want them read once an hour, the leases at each scrape:\n%s", reads, body2)
	}
}

func TestProviderCircuitGauge(t *testing.T) {
	m := metrics.New()
	m.ProviderCircuit("main", false)
	m.ProviderCircuit("backup", true)
	body := scrape(t, m)
	for _, want := range []string{
		`switchboard_provider_circuit_open{provider="main"} 0`,
		`switchboard_provider_circuit_open{provider="backup"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	m.ProviderCircuit("backup", false)
	if body := scrape(t, m); !strings.Contains(body, `switchboard_provider_circuit_open{provider="backup"} 0`) {
		t.Errorf("a closed circuit still shows open:\n%s", body)
	}
}

// The store's sizes are read during a scrape, once per interval however
// many scrapes come; a failed reading keeps the last values, and none are
// shown before the first success.
func TestStoreSizesAreReadOncePerInterval(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every time.Duration
		reads int // after three scrapes
	}{{"cached", time.Hour, 1}, {"fresh", 0, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New()
			reads := 0
			m.StoreSizes(tc.every, func(ctx context.Context) (metrics.StoreSizes, error) {
				reads++
				if _, ok := ctx.Deadline(); !ok {
					t.Error("the reading has no deadline")
				}
				return metrics.StoreSizes{Memories: 3, Summaries: 2, IndexedMessages: int64(1000 * reads), IndexBytes: 1 << 20}, nil
			})
			var body string
			for range 3 {
				body = scrape(t, m)
			}
			if reads != tc.reads {
				t.Fatalf("%d readings for 3 scrapes, want %d", reads, tc.reads)
			}
			for _, want := range []string{
				"switchboard_memories_stored 3\n",
				"switchboard_summaries_stored 2\n",
				fmt.Sprintf("switchboard_recall_indexed_messages %d\n", 1000*tc.reads),
				"switchboard_recall_index_bytes 1.048576e+06\n",
			} {
				if !strings.Contains(body, want) {
					t.Errorf("scrape lacks %q", want)
				}
			}
		})
	}

	m := metrics.New()
	var fail bool
	reads := 0
	m.StoreSizes(0, func(context.Context) (metrics.StoreSizes, error) {
		reads++
		if fail {
			return metrics.StoreSizes{}, errors.New("database is locked")
		}
		return metrics.StoreSizes{IndexedMessages: 7}, nil
	})
	fail = true
	if body := scrape(t, m); strings.Contains(body, "switchboard_recall_indexed_messages") {
		t.Fatalf("a gauge shown before any reading succeeded:\n%s", body)
	}
	fail = false
	scrape(t, m)
	fail = true
	if body := scrape(t, m); !strings.Contains(body, "switchboard_recall_indexed_messages 7\n") || reads != 3 {
		t.Fatalf("after a failed reading (%d readings), the last values are not kept:\n%s", reads, body)
	}
}
