// Package semantic is semantic recall: every person's and the assistant's
// message gets a vector from an embedding model (providers.Embedder), and
// a search merges the messages nearest its question in meaning with the
// full-text matches (storage.SearchHits) by reciprocal rank fusion, so
// recall finds what was said in other words. It is on only when an
// embedding provider is configured; without it recall is full-text alone.
//
// Recall answers what memory_search and memory.recall ask (Search), among
// the conversations the reader is a member of and no other, exactly as
// the full-text search does. Its indexer (Run) embeds stored messages in
// the background. The provider being down never fails a search: it goes
// on with full-text matches alone, and the indexer waits and tries again.
package semantic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// Store is what recall reads and writes; storage.DB implements it.
type Store interface {
	SearchHits(ctx context.Context, reader, query string, limit int) ([]switchboard.Hit, error)
	MemberSessions(ctx context.Context, reader string) ([]string, error)
	SessionVectors(ctx context.Context, space, sessionID string, dims int) ([]int64, []float32, error)
	Hits(ctx context.Context, reader string, ids []int64) ([]switchboard.Hit, error)
	Unembedded(ctx context.Context, space string, after int64, limit int) ([]switchboard.Unembedded, error)
	CountUnembedded(ctx context.Context, space string, after int64) (int64, error)
	SaveVectors(ctx context.Context, space string, vs []switchboard.Vector) error
}

// Config wires a Recall. Zero values take the defaults below.
type Config struct {
	Store    Store
	Embedder providers.Embedder
	// Provider names the embedding provider in the log
	// (embeddings.provider).
	Provider string
	// CacheBytes bounds the vectors held in memory between searches (see
	// index); 0 holds none: every search reads its conversations' vectors
	// from the database.
	CacheBytes int64
	// MinSimilarity is the cosine similarity a message needs to be
	// offered as near a question.
	MinSimilarity float32
	// Timeout bounds one embedding request (10s).
	Timeout time.Duration
	// Batch is how many messages the indexer embeds a call (100).
	Batch int
	// Poll is how often the indexer looks for new messages once it has
	// embedded every one (2s).
	Poll time.Duration
	// MaxQueries bounds the questions being embedded at once (32); a
	// search beyond it goes on with full-text matches alone.
	MaxQueries int
	Logger     *slog.Logger
}

// Defaults.
const (
	defaultTimeout    = 10 * time.Second
	defaultBatch      = 100
	defaultPoll       = 2 * time.Second
	defaultMaxQueries = 32
	// rrfK is reciprocal rank fusion's constant: a message's score is the
	// sum over the lists it is in of 1/(k + its rank). 60 is the value of
	// the paper that introduced it (Cormack et al., 2009) and of most
	// search engines since; it keeps one list's top from drowning the
	// other's.
	rrfK = 60
	// countEvery is how often the indexer counts what is left to embed
	// while it is behind (a read of every message not yet embedded).
	countEvery = 30 * time.Second
)

// Recall is semantic recall. It is safe for concurrent use.
type Recall struct {
	cfg     Config
	space   string
	log     *slog.Logger
	idx     *index
	health  health
	queries chan struct{} // a slot for each question being embedded

	indexed, failures, hybrid, textOnly, pending atomic.Int64

	// The indexer's own (Run's goroutine): the last message embedded,
	// and when what is left was last counted.
	after   int64
	counted time.Time
}

// New makes a Recall. Nothing is embedded until Run.
func New(cfg Config) *Recall {
	cfg.Timeout = cmp.Or(cfg.Timeout, defaultTimeout)
	cfg.Batch = cmp.Or(cfg.Batch, defaultBatch)
	cfg.Poll = cmp.Or(cfg.Poll, defaultPoll)
	cfg.MaxQueries = cmp.Or(cfg.MaxQueries, defaultMaxQueries)
	log := cmp.Or(cfg.Logger, slog.Default())
	r := &Recall{
		cfg:     cfg,
		space:   cfg.Embedder.Space(),
		log:     log.With("embeddings", cfg.Provider, "space", cfg.Embedder.Space()),
		idx:     newIndex(cfg.CacheBytes),
		queries: make(chan struct{}, cfg.MaxQueries),
	}
	r.health.timeout = cfg.Timeout
	r.pending.Store(-1) // not counted yet
	return r
}

// Search finds the messages that best match query among the conversations
// reader (an author key) is a member of: the full-text matches
// (storage.SearchHits) and the messages nearest the query in meaning,
// merged by reciprocal rank fusion, best first, at most limit. When the
// query cannot be embedded (the provider is down, slow or busy), it is
// the full-text matches alone; only the database failing fails it.
func (r *Recall) Search(ctx context.Context, reader, query string, limit int) ([]switchboard.Found, error) {
	if limit <= 0 {
		return nil, nil
	}
	pool := max(4*limit, 20) // each list's candidates for the fusion
	text, err := r.cfg.Store.SearchHits(ctx, reader, query, pool)
	if err != nil {
		return nil, err
	}
	near, ok := r.nearest(ctx, reader, query, pool)
	if !ok {
		r.textOnly.Add(1)
		return found(text[:min(limit, len(text))]), nil
	}
	r.hybrid.Add(1)
	byID := make(map[int64]switchboard.Hit, len(text))
	textIDs := make([]int64, len(text))
	for i, h := range text {
		byID[h.ID] = h
		textIDs[i] = h.ID
	}
	nearIDs := make([]int64, len(near))
	for i, n := range near {
		nearIDs[i] = n.id
	}
	ids := fuse(textIDs, nearIDs)
	ids = ids[:min(limit, len(ids))]
	var fetch []int64
	for _, id := range ids {
		if _, ok := byID[id]; !ok {
			fetch = append(fetch, id)
		}
	}
	// The messages only the vectors found are read with the reader's
	// membership checked again: a conversation they left (or that was
	// deleted) since is not theirs to see.
	more, err := r.cfg.Store.Hits(ctx, reader, fetch)
	if err != nil {
		return nil, err
	}
	for _, h := range more {
		byID[h.ID] = h
	}
	out := make([]switchboard.Found, 0, len(ids))
	for _, id := range ids {
		if h, ok := byID[id]; ok {
			out = append(out, h.Found)
		}
	}
	return out, nil
}

func found(hits []switchboard.Hit) []switchboard.Found {
	if len(hits) == 0 {
		return nil
	}
	out := make([]switchboard.Found, len(hits))
	for i, h := range hits {
		out[i] = h.Found
	}
	return out
}

// nearest embeds the query and returns up to k of the reader's messages
// nearest it, best first; ok is false when the query could not be
// embedded or the vectors read, and the search is full-text alone.
func (r *Recall) nearest(ctx context.Context, reader, query string, k int) (near []scored, ok bool) {
	if strings.TrimSpace(query) == "" {
		return nil, false
	}
	select {
	case r.queries <- struct{}{}:
		defer func() { <-r.queries }()
	default:
		r.log.Debug("semantic recall: too many questions being embedded; this search is full-text alone", "max", r.cfg.MaxQueries)
		return nil, false
	}
	vecs, err := r.embed(ctx, providers.EmbedQuery, []string{query})
	if err != nil { // embed logged a failure of the provider's
		r.log.Debug("semantic recall: the question was not embedded; this search is full-text alone", "err", err)
		return nil, false
	}
	q := unit(vecs[0])
	if len(q) == 0 {
		return nil, false
	}
	sessions, err := r.cfg.Store.MemberSessions(ctx, reader)
	if err != nil {
		r.log.Warn("semantic recall: a search went on full-text alone", "err", err)
		return nil, false
	}
	segs := make([]segment, 0, len(sessions))
	for _, s := range sessions {
		ids, flat, held := r.idx.get(s, len(q))
		if !held {
			gen := r.idx.generation()
			ids, flat, err = r.cfg.Store.SessionVectors(ctx, r.space, s, len(q))
			if err != nil {
				r.log.Warn("semantic recall: a search went on full-text alone", "err", err)
				return nil, false
			}
			r.idx.put(s, len(q), ids, flat, gen)
		}
		if len(ids) > 0 {
			segs = append(segs, segment{ids, flat})
		}
	}
	return scanAll(q, segs, k, r.cfg.MinSimilarity, runtime.GOMAXPROCS(0)), true
}

// errDown is the cause of a call not made: the provider failed and its
// backoff has not passed.
var errDown = errors.New("the embedding provider is down; waiting before trying again")

// embed makes one embedding call, unless the provider is down and its
// backoff has not passed (errDown), noting in health how it went.
func (r *Recall) embed(ctx context.Context, use providers.EmbedUse, texts []string) ([][]float32, error) {
	if ok, _ := r.health.try(time.Now()); !ok {
		return nil, errDown
	}
	vecs, err := r.call(ctx, use, texts)
	return vecs, r.note(ctx, err)
}

// call makes one embedding call within the timeout.
func (r *Recall) call(ctx context.Context, use providers.EmbedUse, texts []string) ([][]float32, error) {
	callCtx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	vecs, err := r.cfg.Embedder.Embed(callCtx, use, texts)
	if err == nil && len(vecs) != len(texts) {
		err = fmt.Errorf("%d vectors for %d texts", len(vecs), len(texts))
	}
	return vecs, err
}

// note records in health how a call went and returns its error. A
// failure is logged at ERROR with what to fix; a call its caller gave up
// says nothing of the provider.
func (r *Recall) note(ctx context.Context, err error) error {
	switch {
	case err == nil:
		if r.health.ok() {
			r.log.Info("semantic recall: the embedding provider answers again")
		}
		return nil
	case ctx.Err() != nil:
		r.health.cancelled()
		return err
	}
	r.failures.Add(1)
	wait := r.health.failed(err, time.Now())
	r.log.Error("semantic recall: the embedding provider failed; recall is full-text alone until it answers",
		"err", err, "fix", advice(err), "retry_in", wait.Round(time.Second))
	return err
}

// unit is v scaled to length 1, so that a dot product is a cosine; an
// empty or all-zero vector (a text with nothing to embed) is empty.
func unit(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 || math.IsNaN(sum) || math.IsInf(sum, 0) {
		return []float32{}
	}
	n := math.Sqrt(sum)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

// fuse merges ranked lists of message ids by reciprocal rank fusion: a
// message scores 1/(rrfK + rank) for each list it is in (rank from 1),
// and the highest scores come first; on a tie, the one ranked higher in
// some list, then the newer message.
func fuse(lists ...[]int64) []int64 {
	score := map[int64]float64{}
	best := map[int64]int{}
	var ids []int64
	for _, l := range lists {
		for rank, id := range l {
			if _, seen := score[id]; !seen {
				ids = append(ids, id)
				best[id] = rank
			}
			score[id] += 1 / float64(rrfK+rank+1)
			best[id] = min(best[id], rank)
		}
	}
	slices.SortFunc(ids, func(a, b int64) int {
		return cmp.Or(cmp.Compare(score[b], score[a]), cmp.Compare(best[a], best[b]), cmp.Compare(b, a))
	})
	return ids
}

// Forget drops from memory the vectors of conversations deleted (by
// retention); the database deleted theirs with their messages.
func (r *Recall) Forget(sessionIDs []string) { r.idx.forget(sessionIDs) }

// Stats is how semantic recall is doing, for metrics.
type Stats struct {
	Up       bool  // the last embedding call succeeded (or none was made)
	Indexed  int64 // messages embedded since start
	Failures int64 // failed embedding calls since start
	// Pending is how many stored messages wait to be embedded, as last
	// counted (-1: not counted yet).
	Pending int64
	// CacheBytes and CacheLimit: the vectors held in memory, and the
	// bound; Cached, the conversations they are of.
	CacheBytes, CacheLimit int64
	Cached                 int
	// Hybrid and TextOnly count searches: with the nearest messages, or
	// full-text alone (the question could not be embedded).
	Hybrid, TextOnly int64
}

// Stats says how semantic recall is doing.
func (r *Recall) Stats() Stats {
	bytes, sessions := r.idx.held()
	return Stats{
		Up: r.health.up(), Indexed: r.indexed.Load(), Failures: r.failures.Load(), Pending: r.pending.Load(),
		CacheBytes: bytes, CacheLimit: r.idx.limit, Cached: sessions,
		Hybrid: r.hybrid.Load(), TextOnly: r.textOnly.Load(),
	}
}
