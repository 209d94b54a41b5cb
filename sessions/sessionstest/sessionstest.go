// Package sessionstest runs a session manager wired the way the gateway
// wires it — real SQLite, the project's guides, the built-in tools, and the
// OpenAI adapter talking to a scripted chat-completions server on loopback —
// for the tests of listeners, which then drive it over their own wire.
// Replicas (replicas.go) runs several of them on one PostgreSQL database,
// as several gateways do.
package sessionstest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/cluster"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/storage"
	"github.com/switchboard-gw/switchboard/storage/postgres"
	"github.com/switchboard-gw/switchboard/tools"
)

// Gateway is a running manager and what it talks to.
type Gateway struct {
	Manager *sessions.Manager
	// DB is the SQLite store (nil for a replica: PG).
	DB *storage.DB
	// LLM is the model: push replies to it, read the requests it got.
	LLM *openaitest.Server
	// Metrics are the manager's (sessions live and working, refusals).
	Metrics *metrics.Metrics

	// A replica's (Replicas.Start): its id, its store on PostgreSQL and
	// its cluster.
	Replica string
	PG      *postgres.DB
	Cluster *cluster.Cluster

	t    testing.TB
	path string // the SQLite file, or the PostgreSQL database's DSN
	cfg  sessions.Config
	ctx  context.Context
	stop context.CancelFunc
	// ran is closed once a replica's cluster has stopped running.
	ran chan struct{}
}

// New starts a manager with guidesDir's guides ("assistant" is the
// default) and no retries, logging to log. It stops when the test ends,
// after the cleanups the test registers later (its servers) have run.
func New(t testing.TB, guidesDir string, log *slog.Logger) *Gateway {
	t.Helper()
	return NewTuned(t, guidesDir, log, nil)
}

// NewTuned is New with the manager's configuration changed by tune (idle
// timeouts, limits) before it starts.
func NewTuned(t testing.TB, guidesDir string, log *slog.Logger, tune func(*sessions.Config)) *Gateway {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gateway.db")
	db, err := storage.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	llm := openaitest.New()
	cfg, mets := managerConfig(t, guidesDir, log, llm, tune)
	g := &Gateway{DB: db, LLM: llm, Metrics: mets, t: t, path: path, cfg: cfg}
	g.start()
	t.Cleanup(func() {
		g.halt()
		llm.Close()
	})
	return g
}

// managerConfig is the manager's configuration: guidesDir's guides, the
// built-in tools, llm as the model "main" with no retries, new metrics;
// then tune's changes. The store is the caller's to set.
func managerConfig(t testing.TB, guidesDir string, log *slog.Logger, llm *openaitest.Server, tune func(*sessions.Config)) (sessions.Config, *metrics.Metrics) {
	t.Helper()
	catalog, err := guides.LoadDir(guidesDir)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tools.Builtins(time.Now)...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := openai.New(providers.Config{Name: "main", Kind: "openai", BaseURL: llm.BaseURL(), APIKey: "test", Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	mets := metrics.New()
	cfg := sessions.Config{
		Guides: catalog, DefaultGuide: "assistant", Tools: reg, Metrics: mets,
		Providers:       map[string]*providers.Resilient{"main": {Name: "main", Provider: p, Policy: providers.Policy{MaxRetries: 0}}},
		DefaultProvider: "main", Logger: log,
	}
	if tune != nil {
		tune(&cfg)
	}
	return cfg, mets
}

func (g *Gateway) start() {
	if g.Manager != nil { // a restart: a new process has new metrics
		g.Metrics = metrics.New()
		g.cfg.Metrics = g.Metrics
	}
	ctx, stop := context.WithCancel(context.Background())
	g.ctx, g.stop = ctx, stop
	if g.Replica == "" {
		g.cfg.Store = g.DB
		g.Manager = sessions.NewManager(ctx, g.cfg)
		return
	}
	g.cfg.Store, g.cfg.Cluster = g.PG, g.Cluster
	g.Manager = sessions.NewManager(ctx, g.cfg)
	g.ran = make(chan struct{})
	go func(c *cluster.Cluster, m *sessions.Manager, ran chan struct{}) {
		defer close(ran)
		c.Run(ctx, m)
	}(g.Cluster, g.Manager, g.ran)
}

// Context is the gateway's life: it ends when the gateway stops, or
// crashes (Crash). A listener a test runs on the gateway runs under it,
// so that it stops with its process.
func (g *Gateway) Context() context.Context { return g.ctx }

func (g *Gateway) halt() {
	if g.stop == nil {
		return
	}
	g.stopRunning()
	if g.PG != nil {
		g.PG.Close()
	} else {
		g.DB.Close()
	}
	g.stop = nil
}

// stopRunning stops the manager and a replica's cluster, and waits for
// them.
func (g *Gateway) stopRunning() {
	g.stop()
	g.Manager.Wait()
	if g.ran != nil {
		<-g.ran
	}
}

// Restart stops the manager and the store, as a gateway that is stopped,
// and starts them again on the same database file; before calls to
// Recover, the caller registers what must be (listeners' followers), then
// calls Recover itself. The model server stays.
func (g *Gateway) Restart() {
	g.t.Helper()
	g.halt()
	if g.Replica != "" {
		g.openReplica()
	} else {
		db, err := storage.Open(context.Background(), g.path)
		if err != nil {
			g.t.Fatal(err)
		}
		g.DB = db
	}
	g.start()
}
