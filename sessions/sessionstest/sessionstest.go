// Package sessionstest runs a session manager wired the way the gateway
// wires it — real SQLite, the project's guides, the built-in tools, and the
// OpenAI adapter talking to a scripted chat-completions server on loopback —
// for the tests of listeners, which then drive it over their own wire.
package sessionstest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/storage"
	"github.com/switchboard-gw/switchboard/tools"
)

// Gateway is a running manager and what it talks to.
type Gateway struct {
	Manager *sessions.Manager
	DB      *storage.DB
	// LLM is the model: push replies to it, read the requests it got.
	LLM *openaitest.Server
	// Metrics are the manager's (sessions live and working, refusals).
	Metrics *metrics.Metrics

	t    testing.TB
	path string
	cfg  sessions.Config
	stop context.CancelFunc
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
	catalog, err := guides.LoadDir(guidesDir)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tools.Builtins(time.Now)...)
	if err != nil {
		t.Fatal(err)
	}
	llm := openaitest.New()
	p, err := openai.New(providers.Config{Name: "main", Kind: "openai", BaseURL: llm.BaseURL(), APIKey: "test", Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	mets := metrics.New()
	cfg := sessions.Config{
		Store: db, Guides: catalog, DefaultGuide: "assistant", Tools: reg, Metrics: mets,
		Providers:       map[string]*providers.Resilient{"main": {Name: "main", Provider: p, Policy: providers.Policy{MaxRetries: 0}}},
		DefaultProvider: "main", Logger: log,
	}
	if tune != nil {
		tune(&cfg)
	}
	g := &Gateway{DB: db, LLM: llm, Metrics: mets, t: t, path: path, cfg: cfg}
	g.start()
	t.Cleanup(func() {
		g.halt()
		llm.Close()
	})
	return g
}

func (g *Gateway) start() {
	g.cfg.Store = g.DB
	if g.Manager != nil { // a restart: a new process has new metrics
		g.Metrics = metrics.New()
		g.cfg.Metrics = g.Metrics
	}
	ctx, stop := context.WithCancel(context.Background())
	g.Manager, g.stop = sessions.NewManager(ctx, g.cfg), stop
}

func (g *Gateway) halt() {
	if g.stop == nil {
		return
	}
	g.stop()
	g.Manager.Wait()
	g.DB.Close()
	g.stop = nil
}

// Restart stops the manager and the store, as a gateway that is stopped,
// and starts them again on the same database file; before calls to
// Recover, the caller registers what must be (listeners' followers), then
// calls Recover itself. The model server stays.
func (g *Gateway) Restart() {
	g.t.Helper()
	g.halt()
	db, err := storage.Open(context.Background(), g.path)
	if err != nil {
		g.t.Fatal(err)
	}
	g.DB = db
	g.start()
}
