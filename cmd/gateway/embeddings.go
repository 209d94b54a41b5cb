package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/cluster"
	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/gemini"
	"github.com/switchboard-gw/switchboard/providers/openai"
	"github.com/switchboard-gw/switchboard/semantic"
)

// buildEmbedder is the embedder the embeddings section configures, at its
// provider's endpoint with its key, through the provider's SDK; nil when
// semantic recall is off: no embeddings.provider, or one whose key is not
// set while it falls back to the demo model (logged, naming the variable;
// without the fallback buildProviders has refused to start already).
func buildEmbedder(cfg config.Config, environ []string, log *slog.Logger) (providers.Embedder, error) {
	pc, i, ok := cfg.EmbeddingProvider()
	if !ok {
		return nil, nil
	}
	key, _ := pc.Key(environ)
	if key == "" && needsKey(pc) {
		if pc.Fallback == config.FallbackDemo {
			log.Warn("semantic recall is off until the embeddings provider has a key: set "+credentialHint(i, pc), "provider", pc.Name)
			return nil, nil
		}
		return nil, fmt.Errorf("embeddings.provider %s: no API key: set %s", pc.Name, credentialHint(i, pc))
	}
	pcfg := providers.Config{Name: pc.Name, Kind: pc.Kind, BaseURL: pc.BaseURL, APIKey: key, Model: cfg.Embeddings.Model, HTTPClient: providerClient()}
	dims := cfg.Embeddings.Dimensions
	var (
		e   providers.Embedder
		err error
	)
	switch pc.Kind {
	case config.KindOpenAI, config.KindOllama:
		if pc.Kind == config.KindOllama {
			pcfg.BaseURL = cmp.Or(pcfg.BaseURL, openai.DefaultOllamaBaseURL)
		}
		var oe *openai.Embedder
		if oe, err = openai.NewEmbedder(pcfg, dims); err == nil {
			e = oe
		}
	case config.KindGemini:
		var ge *gemini.Embedder
		if ge, err = gemini.NewEmbedder(pcfg, dims); err == nil {
			e = ge
		}
	default: // config refuses the others
		err = fmt.Errorf("kind %s makes no embeddings", pc.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("embeddings.provider %s (providers[%d]): %w", pc.Name, i, err)
	}
	return e, nil
}

// buildRecall is semantic recall over db, when embeddings are configured
// and can be made (nil otherwise: recall is full-text alone).
func buildRecall(cfg config.Config, environ []string, db semantic.Store, log *slog.Logger) (*semantic.Recall, error) {
	emb, err := buildEmbedder(cfg, environ, log)
	if err != nil || emb == nil {
		return nil, err
	}
	e := cfg.Embeddings
	log.Info("semantic recall on: messages are embedded in the background", "provider", e.Provider, "space", emb.Space(),
		"cache_mb", e.CacheMB, "min_similarity", e.MinSimilarity)
	return semantic.New(semantic.Config{
		Store: db, Embedder: emb, Provider: e.Provider,
		CacheBytes: int64(e.CacheMB) << 20, MinSimilarity: float32(e.MinSimilarity),
		Timeout: time.Duration(e.Timeout), Logger: log,
	}), nil
}

// runIndexer embeds stored messages in the background until the returned
// func is called, which waits for it to stop (before the store closes).
//
// With replicas (c not nil), one indexer runs among them: the replica
// holding the "indexer" role; another takes it over when it dies. Two
// would embed the same messages and pay for them twice.
func runIndexer(ctx context.Context, r *semantic.Recall, c *cluster.Cluster) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if c != nil {
			c.Lead(ctx, "indexer", r.Run)
			return
		}
		r.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// recallStore is the store the sessions use when semantic recall is on:
// memory.recall searches through it.
type recallStore struct {
	gatewayStore
	recall *semantic.Recall
}

func (s recallStore) Search(ctx context.Context, reader, query string, limit int) ([]switchboard.Found, error) {
	return s.recall.Search(ctx, reader, query, limit)
}
