package main

// gateway doctor's embeddings row: one real embedding call through the
// embedder the gateway builds, and what is left to embed in the database.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/storage"
)

// checkEmbeddings is the embeddings row: INFO when semantic recall is
// off; else one embedding of a short question, with the model's vector
// length, and how many stored messages wait to be embedded (read from a
// database no gateway holds; a running gateway's /metrics says it).
func (d *doctor) checkEmbeddings(ctx context.Context) checkResult {
	res := checkResult{Name: "embeddings"}
	pc, i, ok := d.cfg.EmbeddingProvider()
	if !ok {
		res.Sev, res.Detail = sevInfo, "off (embeddings.provider is empty): recall is full-text alone"
		return res
	}
	e := d.cfg.Embeddings
	emb, err := buildEmbedder(d.cfg, d.environ, slog.New(slog.DiscardHandler))
	switch {
	case err != nil:
		res.Sev, res.Detail = sevProblem, err.Error()
		res.Fix = fmt.Sprintf("set the key of providers[%d], or name another provider in embeddings.provider", i)
		return res
	case emb == nil:
		res.Sev = sevWarn
		res.Detail = "off until the provider has a key: " + credentialHint(i, pc) + " is not set"
		res.Fix = "set it where the gateway runs: semantic recall starts with the gateway"
		return res
	}
	timeout := min(d.timeout, time.Duration(e.Timeout))
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	vecs, err := emb.Embed(callCtx, providers.EmbedQuery, []string{"Say ok."})
	if err != nil {
		base := cmp.Or(pc.BaseURL, defaultBaseURLs[pc.Kind])
		if u, perr := url.Parse(base); perr == nil {
			base = providers.RedactURL(u)
		}
		res.Sev = sevProblem
		res.Detail, res.Fix = explainProviderError(i, pc, e.Model, base, timeout, err)
		var pe *providers.Error
		if errors.As(err, &pe) && (pe.Status == http.StatusBadRequest || pe.Status == http.StatusNotFound || pe.Status == http.StatusUnprocessableEntity) {
			res.Fix = fmt.Sprintf("check embeddings.model (%s) and embeddings.dimensions (%d; a model that cannot shorten its vectors needs 0)", e.Model, e.Dimensions)
			if pc.Kind == config.KindOllama {
				res.Fix += "; ollama pull " + e.Model
			}
		}
		res.Detail += "\nsemantic recall is full-text alone until it answers; the gateway still starts"
		return res
	}
	res.Sev = sevOK
	res.Detail = fmt.Sprintf("%s of provider %s answered in %s: vectors of %d numbers (%s)",
		e.Model, pc.Name, time.Since(start).Round(time.Millisecond), len(vecs[0]), emb.Space())
	res.Detail += "\n" + d.embeddingBacklog(ctx, emb.Space())
	return res
}

// embeddingBacklog says how many stored messages wait to be embedded,
// read as checkDatabase reads: from a file no gateway holds, opened
// read-only and immutable; on PostgreSQL, beside the replicas.
func (d *doctor) embeddingBacklog(ctx context.Context, space string) string {
	dsn := d.cfg.Storage.DSN
	if config.IsPostgres(dsn) {
		return d.postgresBacklog(ctx, space)
	}
	if dsn == ":memory:" {
		return "the database is in memory: every message is embedded afresh at each start"
	}
	path := absPath(dsn)
	if _, held, _ := lockHolder(path + ".lock"); held {
		return "a gateway is using the database: its /metrics has switchboard_recall_vectors_pending"
	}
	if _, err := os.Stat(path); err != nil {
		return "no messages stored yet"
	}
	if v, err := schemaVersion(path); err == nil && v == 0 {
		return "no messages stored yet"
	}
	db, err := sql.Open("sqlite", "file:"+escapePath(path)+"?mode=ro&immutable=1")
	if err != nil {
		return fmt.Sprintf("what is left to embed could not be read: %v", err)
	}
	defer db.Close()
	pending, total, err := storage.CountUnembeddedIn(ctx, db, space)
	switch {
	case err != nil:
		return fmt.Sprintf("what is left to embed could not be read: %v", err)
	case pending == 0:
		return fmt.Sprintf("all %d stored messages are embedded", total)
	}
	return fmt.Sprintf("%d of %d stored messages wait to be embedded: the gateway embeds them in the background, 100 a call", pending, total)
}
