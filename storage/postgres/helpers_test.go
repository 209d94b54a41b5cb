package postgres

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-gw/switchboard/internal/pgtest"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

var pg *pgtest.Server

// TestMain runs the tests against a real PostgreSQL server (pgtest), and
// fails the package when a goroutine a test started is still running once
// every test is done. (pgtest.Main, with the leak check between the tests
// and the server's stop.)
func TestMain(m *testing.M) {
	srv, err := pgtest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		os.Exit(1)
	}
	pg = srv
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	if err := srv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// open opens a store on a fresh database, closed when the test ends.
func open(t testing.TB, opts ...Option) *DB {
	t.Helper()
	return openOn(t, pg.NewDatabase(t), opts...)
}

// openOn opens a store on the database dsn, closed when the test ends.
func openOn(t testing.TB, dsn string, opts ...Option) *DB {
	t.Helper()
	db, err := Open(context.Background(), dsn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

// sql runs a statement straight on the store's database.
func sql(t testing.TB, db *DB, query string, args ...any) {
	t.Helper()
	if _, err := db.pool.Exec(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// count is a query's one number.
func count(t testing.TB, db *DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Helpers of the store test suite, which this package's own tests share.
var (
	ev         = storetest.Event
	newSession = func(t testing.TB, db *DB, id, key string) { storetest.NewSession(t, db, id, key) }
)

type recorder = storetest.Recorder

func flush(t testing.TB, db *DB) {
	t.Helper()
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// holdCommit holds the writer's first transaction before its commit
// until release: what is queued meanwhile makes the next batch.
func holdCommit() (opt Option, entered chan struct{}, release func()) {
	entered, released := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	opt = func(o *options) {
		o.beforeCommit = func() {
			once.Do(func() {
				close(entered)
				<-released
			})
		}
	}
	return opt, entered, func() { releaseOnce.Do(func() { close(released) }) }
}

// seqsOf reads a session's stored seqs and data.
func stored(t testing.TB, db *DB, session string) map[int64]string {
	t.Helper()
	evs, err := db.EventsAfter(context.Background(), session, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	for _, e := range evs {
		out[e.Seq] = string(e.Data)
	}
	return out
}
