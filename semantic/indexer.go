package semantic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// Run embeds the stored messages that have no vector of the embedder's
// space, oldest first, Batch at a time, until ctx ends; then it returns.
// Once every message is embedded it looks for new ones every Poll.
//
// What is left to embed is the database's to say (storage's
// Unembedded), so a restart takes up where the last run stopped, and a
// change of model (a new space) embeds every message again, replacing the
// old vectors one by one; searches use the new model's vectors as they
// come. One call is under way at a time, so the provider sees at most
// one request from the indexer at once.
//
// When the provider fails, the indexer logs an ERROR with what to fix,
// waits (doubling from 2s up to 5 minutes, or the provider's Retry-After)
// and tries the same messages again. A message the provider refuses on
// its own (while a probe of a plain text passes) is stored with an empty
// vector and logged, so it does not stop the rest.
func (r *Recall) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if wait := r.health.wait(time.Now()); wait > 0 {
			if !sleep(ctx, wait) {
				return
			}
			continue
		}
		n, err := r.step(ctx)
		switch {
		case ctx.Err() != nil || errors.Is(err, switchboard.ErrClosed):
			return
		case errors.Is(err, errEmbed):
			// Logged; the loop's wait waits out the backoff.
		case err != nil:
			r.log.Error("semantic recall: the indexer cannot read or store vectors; it tries again", "err", err)
			if !sleep(ctx, r.cfg.Poll) {
				return
			}
		case n == 0:
			if !sleep(ctx, r.cfg.Poll) {
				return
			}
		}
	}
}

// errEmbed marks a step that failed in the embedding call (logged there).
var errEmbed = errors.New("embedding failed")

// step embeds and stores the next batch of messages without a vector,
// and returns how many it stored (0: every message is embedded). Only the
// indexer's goroutine calls it: r.after is its own.
func (r *Recall) step(ctx context.Context) (int, error) {
	batch, err := r.cfg.Store.Unembedded(ctx, r.space, r.after, r.cfg.Batch)
	if err != nil {
		return 0, err
	}
	if len(batch) == 0 {
		r.pending.Store(0)
		return 0, nil
	}
	if now := time.Now(); now.Sub(r.counted) >= countEvery {
		if n, err := r.cfg.Store.CountUnembedded(ctx, r.space, r.after); err == nil {
			r.pending.Store(n)
		}
		r.counted = now
	}
	vecs, err := r.embedBatch(ctx, batch)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errEmbed, err)
	}
	vs := make([]switchboard.Vector, len(batch))
	for i, m := range batch {
		vs[i] = switchboard.Vector{MessageID: m.ID, Values: unit(vecs[i])}
	}
	if err := r.cfg.Store.SaveVectors(ctx, r.space, vs); err != nil {
		return 0, err
	}
	for i, m := range batch {
		if len(vs[i].Values) > 0 {
			r.idx.add(m.SessionID, m.ID, vs[i].Values)
		}
	}
	r.indexed.Add(int64(len(batch)))
	if p := r.pending.Load(); p > 0 {
		r.pending.Store(max(p-int64(len(batch)), 0))
	}
	r.after = batch[len(batch)-1].ID
	return len(batch), nil
}

// probeText is embedded to tell a refused request from a refused text.
const probeText = "hello"

// embedBatch embeds a batch of messages. When the provider refuses it
// (400 and the like), a probe tells whether the request itself is wrong
// (the model, the key, the dimensions: the error is returned and the
// indexer waits) or one of the messages is: then each is embedded alone,
// and one refused alone gets an empty vector, logged with its id.
func (r *Recall) embedBatch(ctx context.Context, batch []switchboard.Unembedded) ([][]float32, error) {
	texts := make([]string, len(batch))
	for i, m := range batch {
		texts[i] = m.Text
	}
	if ok, _ := r.health.try(time.Now()); !ok {
		return nil, errDown
	}
	vecs, err := r.call(ctx, providers.EmbedDocument, texts)
	if err == nil || providers.Classify(err) != providers.KindRefused || ctx.Err() != nil {
		return vecs, r.note(ctx, err)
	}
	if _, perr := r.call(ctx, providers.EmbedDocument, []string{probeText}); perr != nil {
		return nil, r.note(ctx, err) // the request is refused, whatever it holds
	}
	out := make([][]float32, len(batch))
	for i, m := range batch {
		v, err := r.call(ctx, providers.EmbedDocument, texts[i:i+1])
		switch {
		case err == nil:
			out[i] = v[0]
		case providers.Classify(err) == providers.KindRefused && ctx.Err() == nil:
			r.log.Warn("semantic recall: the provider refused to embed a message; semantic recall leaves it out (full-text recall still finds it)",
				"message", m.ID, "session", m.SessionID, "err", err)
			out[i] = []float32{}
		default:
			return nil, r.note(ctx, err)
		}
	}
	return out, r.note(ctx, nil)
}

// sleep waits d, or until ctx ends: it reports false then.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
