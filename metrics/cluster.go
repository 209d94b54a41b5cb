package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Cluster registers what a replica on PostgreSQL shows (docs/operating.md,
// "Replicas"): switchboard_replicas_live, read by live during a scrape at
// most once per every (it asks the database); switchboard_leases_held,
// read from held at each scrape; and the counters LeasesLost and
// TakenOver add to, switchboard_leases_lost_total and
// switchboard_sessions_taken_over_total. Without it (SQLite: one gateway)
// none of them is served.
func (m *Metrics) Cluster(every time.Duration, live func(context.Context) (int, error), held func() int) {
	if m == nil {
		return
	}
	m.reg.MustRegister(
		&sampled{
			every: every,
			read: func(ctx context.Context) ([]float64, error) {
				n, err := live(ctx)
				return []float64{float64(n)}, err
			},
			descs: []*prometheus.Desc{prometheus.NewDesc("switchboard_replicas_live",
				"Replicas of the gateway on this database heard from within three lease times (storage.lease), this one among them. Read at most every "+every.String()+".",
				nil, nil)},
		},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchboard_leases_held",
			Help: "Conversations this replica runs: the leases it holds and renews.",
		}, func() float64 { return float64(held()) }),
		m.leasesLost, m.takenOver,
	)
}

// LeasesLost counts conversations this replica stopped running because
// another took them over (cluster.Metrics).
func (m *Metrics) LeasesLost(n int) {
	if m == nil {
		return
	}
	m.leasesLost.Add(float64(n))
}

// TakenOver counts conversations taken over from a replica gone
// (cluster.Metrics).
func (m *Metrics) TakenOver(n int) {
	if m == nil {
		return
	}
	m.takenOver.Add(float64(n))
}
