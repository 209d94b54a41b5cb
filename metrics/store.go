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

// storeReadTimeout bounds one reading of the store's sizes, made during a
// scrape.
const storeReadTimeout = 10 * time.Second

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
	m.reg.MustRegister(&storeCollector{
		every: every,
		read:  read,
		memories: prometheus.NewDesc("switchboard_memories_stored",
			"Memories people asked the assistant to keep (remember), everyone's; /forget deletes one. "+fresh, nil, nil),
		summaries: prometheus.NewDesc("switchboard_summaries_stored",
			"Summaries of compacted conversations (memory.policy compact): one for each compacted session. "+fresh, nil, nil),
		indexed: prometheus.NewDesc("switchboard_recall_indexed_messages",
			"Messages in the recall index (SQLite FTS5): people's and the assistant's with text. "+fresh, nil, nil),
		indexBytes: prometheus.NewDesc("switchboard_recall_index_bytes",
			"The recall index on disk: FTS5's tables, its copy of the messages' text among them. "+fresh, nil, nil),
	})
}

// storeCollector is StoreSizes' collector: it reads the sizes when a
// scrape finds its last reading older than every.
type storeCollector struct {
	every                                    time.Duration
	read                                     func(context.Context) (StoreSizes, error)
	memories, summaries, indexed, indexBytes *prometheus.Desc

	// mu is held for a reading, so concurrent scrapes read once.
	mu    sync.Mutex
	tried time.Time // the last reading, successful or not
	last  StoreSizes
	ok    bool // last holds a successful reading
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.memories
	ch <- c.summaries
	ch <- c.indexed
	ch <- c.indexBytes
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tried.IsZero() || time.Since(c.tried) >= c.every {
		c.tried = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), storeReadTimeout)
		s, err := c.read(ctx)
		cancel()
		if err == nil {
			c.last, c.ok = s, true
		}
	}
	if !c.ok {
		return
	}
	for _, g := range []struct {
		desc *prometheus.Desc
		v    int64
	}{{c.memories, c.last.Memories}, {c.summaries, c.last.Summaries}, {c.indexed, c.last.IndexedMessages}, {c.indexBytes, c.last.IndexBytes}} {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(g.v))
	}
}
