package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StoreSizes is the size of what the store holds that grows with use
// besides the conversations themselves (issue 24).
type StoreSizes struct {
	Memories        int64 // memories people asked the assistant to keep
	Summaries       int64 // compacted sessions' summaries
	IndexedMessages int64 // messages in the recall index
	IndexBytes      int64 // the recall index on disk
}

// sampleTimeout bounds one reading of sampled gauges (the store's sizes,
// the replicas live), made during a scrape.
const sampleTimeout = 10 * time.Second

// StoreSizes registers the gauges switchboard_memories_stored,
// switchboard_summaries_stored, switchboard_recall_indexed_messages and
// switchboard_recall_index_bytes, read together by read during a scrape,
// at most once per every: a scrape in between is given the last reading,
// so a reading that walks a large index is paid once per every however
// often /metrics is scraped, and nothing at all while nobody scrapes. A
// failed reading keeps the last values (none before the first success)
// and is tried again after every; read reports its own errors.
func (m *Metrics) StoreSizes(every time.Duration, read func(context.Context) (StoreSizes, error)) {
	if m == nil {
		return
	}
	fresh := "Read at most every " + every.String() + "."
	m.reg.MustRegister(&sampled{
		every: every,
		read: func(ctx context.Context) ([]float64, error) {
			s, err := read(ctx)
			return []float64{float64(s.Memories), float64(s.Summaries), float64(s.IndexedMessages), float64(s.IndexBytes)}, err
		},
		descs: []*prometheus.Desc{
			prometheus.NewDesc("switchboard_memories_stored",
				"Memories people asked the assistant to keep (remember), everyone's; /forget deletes one. "+fresh, nil, nil),
			prometheus.NewDesc("switchboard_summaries_stored",
				"Summaries of compacted conversations (memory.policy compact): one for each compacted session. "+fresh, nil, nil),
			prometheus.NewDesc("switchboard_recall_indexed_messages",
				"Messages in the recall index (SQLite FTS5): people's and the assistant's with text. "+fresh, nil, nil),
			prometheus.NewDesc("switchboard_recall_index_bytes",
				"The recall index on disk: FTS5's tables, its copy of the messages' text among them. "+fresh, nil, nil),
		},
	})
}

// sampled is a collector of gauges that read gives together, one value
// for each of descs, in their order: it reads them during a scrape that
// finds its last reading older than every.
type sampled struct {
	every time.Duration
	read  func(context.Context) ([]float64, error)
	descs []*prometheus.Desc

	// mu is held for a reading, so concurrent scrapes read once.
	mu    sync.Mutex
	tried time.Time // the last reading, successful or not
	last  []float64 // the last successful reading; nil before one
}

func (c *sampled) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *sampled) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tried.IsZero() || time.Since(c.tried) >= c.every {
		c.tried = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), sampleTimeout)
		vs, err := c.read(ctx)
		cancel()
		if err == nil && len(vs) == len(c.descs) {
			c.last = vs
		}
	}
	for i, v := range c.last {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.GaugeValue, v)
	}
}
