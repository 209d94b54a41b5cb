package cluster

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/storage/postgres"
)

// withMetrics gives the replica's cluster m, with the gauges the gateway
// registers on it (cmd/gateway: storage.dsn on PostgreSQL).
func withMetrics(m *metrics.Metrics, db func() *postgres.DB, held func() int) func(*Config) {
	m.Cluster(0, func(ctx context.Context) (int, error) {
		rs, err := db().Replicas(ctx, LiveWithin(lease))
		return len(rs), err
	}, held)
	return func(c *Config) { c.Metrics = m }
}

// metricsOf starts replica id with metrics of its own.
func metricsOf(t *testing.T, dsn, id string, llm *openaitest.Server) (*replica, *metrics.Metrics) {
	t.Helper()
	m := metrics.New()
	var r *replica
	r = startReplica(t, dsn, id, llm, withMetrics(m, func() *postgres.DB { return r.db }, func() int { return r.c.Held() }))
	return r, m
}

// scrapeUntil scrapes m until its exposition has every line of want, and
// fails with the last scrape at the deadline.
func scrapeUntil(t *testing.T, m *metrics.Metrics, what string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		missing := ""
		for _, w := range want {
			if !strings.Contains(string(body), "\n"+w+"\n") {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the scrape lacks %q:\n%s", what, missing, grep(string(body), "switchboard_"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func grep(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A replica killed mid-turn: the survivor's metrics count the
// conversation it took over and hold its lease, and the replicas live
// drop to one once the dead one is no longer heard from.
func TestMetricsAfterATakeover(t *testing.T) {
	dsn := pg.NewDatabase(t)
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	a, ma := metricsOf(t, dsn, "a", llm)
	b, mb := metricsOf(t, dsn, "b", llm)

	onA := watch(t, a, sessions.AttachOptions{Key: "web:m1", Author: alice, AfterSeq: 0})
	id := onA.sub.Ready.Session
	onB := watch(t, b, sessions.AttachOptions{SessionID: id, Author: alice, AfterSeq: 0}) // a mirror
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	llm.Push(openaitest.Reply{Text: []string{"Cut ", "short"}, Gate: gate}, openaitest.Reply{Text: []string{"Whole answer."}})
	submit(t, a, id, text("a long question", "c1"))
	onA.until("the streamed start on a", func(ev switchboard.Event) bool { return ev.Type == switchboard.EventDelta })
	scrapeUntil(t, ma, "a runs the conversation", "switchboard_leases_held 1", "switchboard_replicas_live 2")
	scrapeUntil(t, mb, "b runs none", "switchboard_leases_held 0", "switchboard_sessions_taken_over_total 0")

	a.crash()
	runOut(t, dsn, "a")
	onB.until("the answer run again on b", answer("Whole answer."))
	scrapeUntil(t, mb, "b took it over", "switchboard_sessions_taken_over_total 1", "switchboard_leases_held 1", "switchboard_leases_lost_total 0")
	forget(t, dsn, "a")
	scrapeUntil(t, mb, "a no longer heard from", "switchboard_replicas_live 1")
}

// A replica whose lease ran out while it paused, and which another took
// over: its metrics count the conversation lost and hold none.
func TestMetricsAfterALoss(t *testing.T) {
	dsn := pg.NewDatabase(t)
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	a, ma := metricsOf(t, dsn, "a", llm)
	b, _ := metricsOf(t, dsn, "b", llm)

	onA := watch(t, a, sessions.AttachOptions{Key: "web:m2", Author: alice, AfterSeq: 0})
	id := onA.sub.Ready.Session
	llm.Push(openaitest.Reply{Text: []string{"One."}})
	submit(t, a, id, text("one", "c1"))
	onA.until("the first answer", answer("One."))
	scrapeUntil(t, ma, "a runs the conversation", "switchboard_leases_held 1", "switchboard_leases_lost_total 0")

	runOut(t, dsn, "a")
	onB := watch(t, b, sessions.AttachOptions{SessionID: id, Author: alice, AfterSeq: 0})
	llm.Push(openaitest.Reply{Text: []string{"Two, from b."}})
	submit(t, b, id, text("two", "c2"))
	onB.until("b's answer", answer("Two, from b."))
	scrapeUntil(t, ma, "a lost it", "switchboard_leases_lost_total 1", "switchboard_leases_held 0")
}

// forget makes replica id unheard of, as time would once it is dead.
func forget(t *testing.T, dsn, id string) {
	t.Helper()
	if _, err := connect(t, dsn).Exec(context.Background(), `UPDATE replicas SET seen_at = 0 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
}
