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
	db, err := storage.Open(context.Background(), filepath.Join(t.TempDir(), "gateway.db"))
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
	ctx, stop := context.WithCancel(context.Background())
	mgr := sessions.NewManager(ctx, cfg)
	t.Cleanup(func() {
		stop()
		mgr.Wait()
		llm.Close()
		db.Close()
	})
	return &Gateway{Manager: mgr, DB: db, LLM: llm, Metrics: mets}
}
