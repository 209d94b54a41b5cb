package main

// Semantic recall's search (package semantic): brute force over the
// vectors of a reader's conversations held in memory, and what a
// conversation not held costs to read from SQLite.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime/debug"
	"slices"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/semantic"
	"github.com/switchboard-gw/switchboard/storage"
)

// vectorResult is semantic recall at one size.
type vectorResult struct {
	vectors, dims int
	// Recall.Search over vectors held in memory: the reader is in
	// vectorConvs conversations sharing them; the question's embedding
	// and the full-text part are faked to cost nothing.
	median, p99 time.Duration
	heldMiB     float64
	// Reading one conversation of coldVectors vectors from SQLite
	// (storage.SessionVectors), what a search pays once for a
	// conversation not held in memory.
	coldVectors         int
	coldMedian, coldP99 time.Duration
}

// The bench's shape: the reader's conversations, and how many searches
// and cold reads are timed.
const (
	vectorConvs    = 100
	vectorSearches = 50
	coldReads      = 20
	maxColdVectors = 10_000
)

// measureVectors times semantic recall's search at n vectors for each
// length of dims.
func measureVectors(ctx context.Context, dir string, n int, dims []int) ([]vectorResult, error) {
	var out []vectorResult
	for _, d := range dims {
		res, err := measureVectorSearch(ctx, n, d)
		if err != nil {
			return nil, err
		}
		cold := min(n, maxColdVectors)
		res.coldVectors = cold
		res.coldMedian, res.coldP99, err = measureColdRead(ctx, filepath.Join(dir, fmt.Sprintf("vectors-%d.db", d)), cold, d)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// randomUnit is a random vector of unit length.
func randomUnit(r *rand.Rand, dst []float32) {
	var sum float64
	for i := range dst {
		x := r.NormFloat64()
		dst[i] = float32(x)
		sum += x * x
	}
	n := float32(math.Sqrt(sum))
	for i := range dst {
		dst[i] /= n
	}
}

// measureVectorSearch fills a Recall's memory with n random vectors of
// dims numbers over vectorConvs conversations of one reader, then times
// Recall.Search.
func measureVectorSearch(ctx context.Context, n, dims int) (vectorResult, error) {
	r := rand.New(rand.NewPCG(1, uint64(dims)))
	store := &memStore{vectors: map[string][]float32{}, ids: map[string][]int64{}}
	per := (n + vectorConvs - 1) / vectorConvs
	id := int64(0)
	for c := 0; id < int64(n); c++ {
		s := fmt.Sprintf("s_%03d", c)
		store.sessions = append(store.sessions, s)
		flat := make([]float32, 0, per*dims)
		for range per {
			if id == int64(n) {
				break
			}
			id++
			flat = flat[:len(flat)+dims]
			randomUnit(r, flat[len(flat)-dims:])
			store.ids[s] = append(store.ids[s], id)
		}
		store.vectors[s] = flat
	}
	rec := semantic.New(semantic.Config{
		Store: store, Embedder: &randomEmbedder{dims: dims, r: r}, Provider: "bench",
		CacheBytes: int64(n)*int64(dims)*4 + 64<<20, MinSimilarity: -1,
	})
	// The first search reads every conversation into memory.
	if _, err := rec.Search(ctx, "bench:reader", "what did we say about it?", 20); err != nil {
		return vectorResult{}, err
	}
	st := rec.Stats()
	if st.Cached != len(store.sessions) {
		return vectorResult{}, fmt.Errorf("%d of %d conversations held in memory", st.Cached, len(store.sessions))
	}
	// The last size's vectors and this one's making are garbage: collect
	// them now rather than while searches are timed.
	debug.FreeOSMemory()
	times := make([]time.Duration, 0, vectorSearches)
	for range vectorSearches {
		start := time.Now()
		found, err := rec.Search(ctx, "bench:reader", "what did we say about it?", 20)
		times = append(times, time.Since(start))
		if err != nil {
			return vectorResult{}, err
		}
		if len(found) != 20 {
			return vectorResult{}, fmt.Errorf("a search found %d messages, want 20", len(found))
		}
	}
	slices.Sort(times)
	return vectorResult{vectors: n, dims: dims, median: percentile(times, 50), p99: percentile(times, 99),
		heldMiB: float64(st.CacheBytes) / (1 << 20)}, nil
}

// measureColdRead stores a conversation of n messages with vectors of dims
// numbers in a fresh SQLite file and times reading its vectors back.
func measureColdRead(ctx context.Context, path string, n, dims int) (median, p99 time.Duration, err error) {
	db, err := storage.Open(ctx, path)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	const session = "s_cold"
	if err := db.CreateSession(ctx, switchboard.Session{ID: session, Guide: "bench"}); err != nil {
		return 0, 0, err
	}
	msgs := make([]switchboard.Message, n)
	for i := range msgs {
		msgs[i] = switchboard.Message{Role: switchboard.RoleUser, Content: fmt.Sprintf("message %d", i)}
	}
	if err := db.AppendMessages(ctx, session, msgs, false); err != nil {
		return 0, 0, err
	}
	r := rand.New(rand.NewPCG(2, uint64(dims)))
	const space = "bench:cold"
	for {
		page, err := db.Unembedded(ctx, space, 0, 1000)
		if err != nil {
			return 0, 0, err
		}
		if len(page) == 0 {
			break
		}
		vs := make([]switchboard.Vector, len(page))
		for i, m := range page {
			v := make([]float32, dims)
			randomUnit(r, v)
			vs[i] = switchboard.Vector{MessageID: m.ID, Values: v}
		}
		if err := db.SaveVectors(ctx, space, vs); err != nil {
			return 0, 0, err
		}
	}
	times := make([]time.Duration, 0, coldReads)
	for range coldReads {
		start := time.Now()
		ids, _, err := db.SessionVectors(ctx, space, session, dims)
		times = append(times, time.Since(start))
		if err != nil {
			return 0, 0, err
		}
		if len(ids) != n {
			return 0, 0, fmt.Errorf("read %d vectors, want %d", len(ids), n)
		}
	}
	slices.Sort(times)
	return percentile(times, 50), percentile(times, 99), nil
}

// memStore is semantic.Store over vectors in memory, with no full-text
// matches: the bench times the vector search alone.
type memStore struct {
	sessions []string
	ids      map[string][]int64
	vectors  map[string][]float32
}

func (m *memStore) SearchHits(context.Context, string, string, int) ([]switchboard.Hit, error) {
	return nil, nil
}

func (m *memStore) MemberSessions(context.Context, string) ([]string, error) { return m.sessions, nil }

func (m *memStore) SessionVectors(_ context.Context, _, session string, _ int) ([]int64, []float32, error) {
	return m.ids[session], m.vectors[session], nil
}

func (m *memStore) Hits(_ context.Context, _ string, ids []int64) ([]switchboard.Hit, error) {
	out := make([]switchboard.Hit, len(ids))
	for i, id := range ids {
		out[i] = switchboard.Hit{ID: id, Found: switchboard.Found{SessionID: "s", Message: switchboard.Message{Role: switchboard.RoleUser, Content: "found"}}}
	}
	return out, nil
}

func (m *memStore) Unembedded(context.Context, string, int64, int) ([]switchboard.Unembedded, error) {
	return nil, nil
}

func (m *memStore) CountUnembedded(context.Context, string, int64) (int64, error) { return 0, nil }

func (m *memStore) SaveVectors(context.Context, string, []switchboard.Vector) error { return nil }

// randomEmbedder embeds every question as a random unit vector.
type randomEmbedder struct {
	dims int
	r    *rand.Rand
}

func (e *randomEmbedder) Space() string { return fmt.Sprintf("bench:%d", e.dims) }

func (e *randomEmbedder) Embed(_ context.Context, _ providers.EmbedUse, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = make([]float32, e.dims)
		randomUnit(e.r, out[i])
	}
	return out, nil
}

// vectorsSection is the report's semantic recall section.
func (r report) vectorsSection(p func(format string, args ...any)) {
	p("## Semantic recall\n\n")
	p("What a search of semantic recall (`embeddings`, package `semantic`) costs beyond the full-text search above: "+
		"the question's vector against every vector of the reader's conversations held in memory, by brute force "+
		"(a cosine is the dot product of two unit vectors; one goroutine), the best 20 kept and merged with the full-text matches. "+
		"The reader is in %d conversations sharing the vectors; embedding the question (a call to the provider, tens of "+
		"milliseconds to OpenAI or Gemini) and the full-text part are faked to cost nothing. Median and p99 of %d searches.\n\n",
		vectorConvs, vectorSearches)
	p("*Cold read* is reading one conversation's vectors from SQLite (`storage.SessionVectors`): what a search pays once " +
		"for a conversation not held in memory (`embeddings.cache_mb` bounds what is held).\n\n")
	p("| vectors | dimensions | memory held | search median | search p99 | cold read of | cold median | cold p99 |\n")
	p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, v := range r.vectors {
		p("| %d | %d | %.0f MiB | %v | %v | %d vectors | %v | %v |\n", v.vectors, v.dims, v.heldMiB,
			v.median.Round(10*time.Microsecond), v.p99.Round(10*time.Microsecond), v.coldVectors,
			v.coldMedian.Round(10*time.Microsecond), v.coldP99.Round(10*time.Microsecond))
	}
	p("\n")
}
