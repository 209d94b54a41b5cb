package sessionstest

// Replicas: several gateways on one PostgreSQL database, in one test
// process, as cluster's own tests run them (docs/architecture.md,
// "Replicas"). Each has its own store (postgres.Open WithReplica), its own
// cluster (leases, notifications, takeovers) and its own manager; they
// share one scripted model. A crash stops a replica at once without giving
// anything up; RunOut then runs its leases out through SQL, as the lease
// time would, so that no test waits on the lease clock.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-gw/switchboard/cluster"
	"github.com/switchboard-gw/switchboard/internal/pgtest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/storage/postgres"
)

// Lease is the replicas' lease time: long enough that a replica slowed by
// the race detector keeps its leases, short enough that one looks for
// conversations (and roles) to take over every second.
const Lease = 4 * time.Second

// Replicas are gateways sharing one PostgreSQL database and one model.
type Replicas struct {
	// DSN is the database's.
	DSN string
	// LLM is the model every replica asks.
	LLM *openaitest.Server

	t         testing.TB
	guidesDir string
	log       *slog.Logger
	tune      func(*sessions.Config)
}

// NewReplicas makes an empty database (NewDatabase) and a model for
// replicas to share; Start starts each. tune changes every replica's
// manager configuration, as New's does.
func NewReplicas(t testing.TB, guidesDir string, log *slog.Logger, tune func(*sessions.Config)) *Replicas {
	t.Helper()
	rs := &Replicas{DSN: NewDatabase(t), LLM: openaitest.New(), t: t, guidesDir: guidesDir, log: log, tune: tune}
	t.Cleanup(rs.LLM.Close)
	return rs
}

// Start starts replica id: its store, its cluster and its manager. It
// stops when the test ends (its store closed, its leases given up).
func (rs *Replicas) Start(id string) *Gateway {
	rs.t.Helper()
	log := rs.log.With("replica", id)
	cfg, mets := managerConfig(rs.t, rs.guidesDir, log, rs.LLM, rs.tune)
	g := &Gateway{LLM: rs.LLM, Metrics: mets, Replica: id, t: rs.t, path: rs.DSN, cfg: cfg}
	g.openReplica()
	g.start()
	rs.t.Cleanup(g.halt)
	return g
}

// openReplica opens a replica's store and makes its cluster.
func (g *Gateway) openReplica() {
	g.t.Helper()
	log := g.cfg.Logger
	db, err := postgres.Open(context.Background(), g.path, postgres.WithReplica(g.Replica), postgres.WithLogger(log))
	if err != nil {
		g.t.Fatal(err)
	}
	g.PG = db
	g.Cluster = cluster.New(cluster.Config{Store: db, Lease: Lease, Logger: log})
}

// Crash stops a replica at once, as kill -9 does: its manager, its
// cluster and what runs under its Context end, nothing is given up, its
// leases stay as they were, unrenewed (RunOut runs them out). Its store's
// connections stay open until the test ends, unused.
func (g *Gateway) Crash() {
	if g.stop != nil {
		g.stopRunning() // halt, when the test ends, closes the store
	}
}

// RunOut runs out the leases replica holder holds (its conversations and
// its roles), as time would once it stopped renewing them.
func (rs *Replicas) RunOut(holder string) {
	rs.t.Helper()
	rs.exec(`UPDATE leases SET expires_at = 0 WHERE holder = $1`, holder)
}

// Holder is the replica that holds lease name ("session:<id>",
// "role:discord") unexpired, "" for none.
func (rs *Replicas) Holder(name string) string {
	rs.t.Helper()
	var h string
	err := rs.query(func(conn *pgx.Conn) error {
		return conn.QueryRow(context.Background(), `SELECT holder FROM leases WHERE name = $1
			AND expires_at > (extract(epoch from clock_timestamp()) * 1000)::bigint`, name).Scan(&h)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	if err != nil {
		rs.t.Fatal(err)
	}
	return h
}

func (rs *Replicas) exec(sql string, args ...any) {
	rs.t.Helper()
	if err := rs.query(func(conn *pgx.Conn) error {
		_, err := conn.Exec(context.Background(), sql, args...)
		return err
	}); err != nil {
		rs.t.Fatal(err)
	}
}

func (rs *Replicas) query(f func(*pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, rs.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return f(conn)
}

// The PostgreSQL server the test binary's replicas use: started the first
// time a test asks for a database, stopped by WithPostgreSQL's Run.
var (
	pgOnce   sync.Once
	pgServer *pgtest.Server
	pgErr    error
)

// NewDatabase returns the DSN of an empty database for t, dropped when t
// ends, on a real PostgreSQL server (internal/pgtest) started the first
// time one is asked for; the package's TestMain must run its tests
// through WithPostgreSQL, which stops it.
func NewDatabase(t testing.TB) string {
	t.Helper()
	pgOnce.Do(func() { pgServer, pgErr = pgtest.Start() })
	if pgErr != nil {
		t.Fatalf("sessionstest: PostgreSQL: %v", pgErr)
	}
	return pgServer.NewDatabase(t)
}

// TestingM is what a TestMain runs: *testing.M.
type TestingM interface{ Run() int }

// WithPostgreSQL is m whose Run stops, after the tests, the PostgreSQL
// server NewDatabase started (if any): a package whose tests use replicas
// runs them as goleak.VerifyTestMain(sessionstest.WithPostgreSQL(m)).
func WithPostgreSQL(m TestingM) TestingM { return withPostgreSQL{m} }

type withPostgreSQL struct{ m TestingM }

func (w withPostgreSQL) Run() int {
	code := w.m.Run()
	if pgServer != nil {
		if err := pgServer.Stop(); err != nil {
			slog.Error("sessionstest: stopping PostgreSQL", "err", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}
