package semantic

// Metrics is where Register puts semantic recall's metrics; metrics.Metrics
// implements it (the gateway wires it; this package links no metrics
// library).
type Metrics interface {
	GaugeFunc(name, help string, f func() float64)
	CounterFunc(name, help string, f func() float64)
}

// Register adds semantic recall's metrics to m, read at scrape time.
func (r *Recall) Register(m Metrics) {
	stat := func(f func(Stats) float64) func() float64 { return func() float64 { return f(r.Stats()) } }
	m.GaugeFunc("switchboard_recall_embedder_up",
		"1 while the embedding provider answers (or was not called yet), 0 after it failed: recall is full-text alone until it answers again; the ERROR lines of the log say why.",
		stat(func(s Stats) float64 {
			if s.Up {
				return 1
			}
			return 0
		}))
	m.GaugeFunc("switchboard_recall_vectors_pending", "Stored messages waiting to be embedded, as last counted (-1: not yet).",
		stat(func(s Stats) float64 { return float64(s.Pending) }))
	m.CounterFunc("switchboard_recall_vectors_indexed_total", "Messages embedded and stored by the indexer.",
		stat(func(s Stats) float64 { return float64(s.Indexed) }))
	m.CounterFunc("switchboard_recall_embed_failures_total", "Embedding calls that failed (the provider down, refusing or too slow).",
		stat(func(s Stats) float64 { return float64(s.Failures) }))
	m.GaugeFunc("switchboard_recall_vector_cache_bytes", "Bytes of vectors held in memory between searches (embeddings.cache_mb bounds them).",
		stat(func(s Stats) float64 { return float64(s.CacheBytes) }))
	m.GaugeFunc("switchboard_recall_vector_cache_limit_bytes", "The bound on the vectors held in memory (embeddings.cache_mb).",
		stat(func(s Stats) float64 { return float64(s.CacheLimit) }))
	m.GaugeFunc("switchboard_recall_vector_cache_conversations", "Conversations whose vectors are held in memory.",
		stat(func(s Stats) float64 { return float64(s.Cached) }))
	m.CounterFunc("switchboard_recall_searches_total", "Recall searches with semantic recall on (memory_search, memory.recall).",
		stat(func(s Stats) float64 { return float64(s.Hybrid + s.TextOnly) }))
	m.CounterFunc("switchboard_recall_searches_text_only_total", "Recall searches that went on full-text alone: the question could not be embedded (provider down or slow, too many at once).",
		stat(func(s Stats) float64 { return float64(s.TextOnly) }))
}
