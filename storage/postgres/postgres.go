// Package postgres is the gateway's store on PostgreSQL: the same
// sessions, members, numbered event log, context messages, open turns,
// inbox, bindings, invites, memories, recall and vectors as the SQLite
// store (package storage), with the same methods and the same guarantees,
// so that several gateways (replicas) can share one database.
//
// Reads go straight to a pgxpool. Writes a conversation makes as it runs
// (events, a turn's writes, accepted inputs, progress marks) go through one
// queue to one writer goroutine, which commits what is queued in batches
// (writer.go): group commit, as in the SQLite store, since one commit
// costs a round trip and a WAL flush however little it holds.
//
// For several replicas the store adds what SQLite never needed
// (leases.go, notify.go, replicas.go): leases with epochs that fence a
// conversation's writes, so that a replica that lost a conversation cannot
// write into it any more; notifications of stored events and accepted
// inputs; and a table of the replicas alive.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Defaults for the writer, as the SQLite store's.
const (
	defaultQueueSize = 8192
	defaultBatchSize = 512
	defaultLinger    = 2 * time.Millisecond
	// defaultWriteTimeout bounds one batch's transaction: a database that
	// stops answering fails the batch's writes instead of holding the
	// writer, and every caller behind it, for ever.
	defaultWriteTimeout = time.Minute
)

type options struct {
	queueSize    int
	batchSize    int
	linger       time.Duration
	writeTimeout time.Duration
	logger       *slog.Logger
	replica      string
	// beforeCommit, when set, is called by the writer once a transaction's
	// writes are sent and before it commits. Tests use it to hold a write
	// in flight.
	beforeCommit func()
}

// Option configures Open.
type Option func(*options)

// WithQueueSize bounds the write queue (default 8192). When it is full,
// AppendEvents waits: back-pressure rather than unbounded memory.
func WithQueueSize(n int) Option { return func(o *options) { o.queueSize = n } }

// WithBatchSize caps how many queued writes one batch takes (default 512).
func WithBatchSize(n int) Option { return func(o *options) { o.batchSize = n } }

// WithLinger sets how long a batch of events, which nobody waits for,
// waits for more to join it before it is committed (default 2ms; 0 commits
// at once). Writes a caller waits for are never held back.
func WithLinger(d time.Duration) Option { return func(o *options) { o.linger = d } }

// WithWriteTimeout bounds one batch's transaction (default one minute).
func WithWriteTimeout(d time.Duration) Option { return func(o *options) { o.writeTimeout = d } }

// WithLogger sets where background write errors are logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithReplica names this gateway among the replicas sharing the database
// (a short id, unique among them: the host name and a random suffix). It
// takes leases under that name, registers in the replicas table, and
// fences its conversations' writes (see Fence). Without it the store is a
// single gateway's and nothing is fenced.
func WithReplica(id string) Option { return func(o *options) { o.replica = id } }

// DB is the store. It is safe for concurrent use.
type DB struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	replica      string
	batchSize    int
	linger       time.Duration
	writeTimeout time.Duration
	beforeCommit func()
	queue        chan request
	writerDone   chan struct{}

	// fences: the conversation leases this replica holds (see Fence).
	fenceMu sync.Mutex
	fences  map[string]int64

	// mu guards closed. Senders to queue hold it for reading, so Close,
	// which takes it for writing, knows no send is in flight once it has it.
	mu        sync.RWMutex
	closed    bool
	closing   chan struct{} // closed by Close: Listen returns
	closeOnce sync.Once
	closeErr  error
}

// Open connects to the database at dsn (a PostgreSQL URL or key=value
// string, with pgxpool's pool_* settings if wanted) and applies the
// migrations it has not seen yet. Any number of replicas may open one
// database at once: each migration is applied once, under a lock.
func Open(ctx context.Context, dsn string, opts ...Option) (*DB, error) {
	o := options{
		queueSize:    defaultQueueSize,
		batchSize:    defaultBatchSize,
		linger:       defaultLinger,
		writeTimeout: defaultWriteTimeout,
		logger:       slog.Default(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	o.queueSize = max(o.queueSize, 1)
	o.batchSize = max(o.batchSize, 1)
	if o.writeTimeout <= 0 {
		o.writeTimeout = defaultWriteTimeout
	}
	if dsn == "" {
		return nil, errors.New("postgres: open: empty dsn")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: cannot reach the database (check storage.dsn, that the server runs and accepts this user): %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	db := &DB{
		pool:         pool,
		log:          o.logger,
		replica:      o.replica,
		batchSize:    o.batchSize,
		linger:       max(o.linger, 0),
		writeTimeout: o.writeTimeout,
		beforeCommit: o.beforeCommit,
		queue:        make(chan request, o.queueSize),
		writerDone:   make(chan struct{}),
		fences:       map[string]int64{},
		closing:      make(chan struct{}),
	}
	if db.replica != "" {
		if err := db.register(ctx); err != nil {
			pool.Close()
			return nil, err
		}
	}
	go db.runWriter()
	return db, nil
}

// migrationLock is the advisory lock every replica takes to migrate.
const migrationLock int64 = 0x7377626d69677261 // "swbmigra"

// migrate applies, in order and each in its own transaction, the embedded
// migrations schema_migrations does not list yet. Each transaction first
// takes migrationLock, so replicas starting at once wait for one another
// and apply each migration once.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	files, err := fs.ReadDir(migrationFiles, "migrations") // sorted by name
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	last := 0
	for _, f := range files {
		// NNNN_description.sql: zero-padded, so the names' order is the
		// versions', and each version comes once.
		var version int
		if _, err := fmt.Sscanf(f.Name(), "%04d_", &version); err != nil || version <= last || !strings.HasSuffix(f.Name(), ".sql") {
			return fmt.Errorf("postgres: migrate: %s: name must be NNNN_description.sql, its version above the one before", f.Name())
		}
		last = version
		if err := applyMigration(ctx, pool, version, f.Name()); err != nil {
			return fmt.Errorf("postgres: migrate %s: %w", f.Name(), err)
		}
	}
	return nil
}

func applyMigration(ctx context.Context, pool *pgxpool.Pool, version int, name string) error {
	body, err := migrationFiles.ReadFile("migrations/" + name)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return err
		}
		// Under the lock: CREATE TABLE IF NOT EXISTS run by two sessions at
		// once can still fail in one of them.
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    bigint PRIMARY KEY,
			name       text   NOT NULL,
			applied_at bigint NOT NULL
		)`); err != nil {
			return err
		}
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, version).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		// No arguments: the simple protocol, which runs a file of statements.
		if _, err := tx.Exec(ctx, string(body)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, `+nowMillis+`)`,
			version, name)
		return err
	})
}

// nowMillis is the database's clock in Unix milliseconds: leases and
// heartbeats use it, never a replica's, so the replicas' clocks need not
// agree.
const nowMillis = `(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint`

// Close commits every queued write, then forgets this replica (see
// WithReplica), releasing the leases it holds, and closes the pool. It returns any write error the writer
// has not reported yet.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.mu.Lock()
		db.closed = true
		db.mu.Unlock()
		close(db.closing)
		// The last request ever queued: the writer commits everything
		// ahead of it, answers it and exits.
		done := make(chan error, 1)
		db.queue <- request{flush: done, last: true}
		errs := []error{<-done}
		<-db.writerDone
		if db.replica != "" {
			errs = append(errs, db.forget())
		}
		db.pool.Close()
		if err := errors.Join(errs...); err != nil {
			db.closeErr = fmt.Errorf("postgres: close: %w", err)
		}
	})
	return db.closeErr
}

// SQLSTATEs the store's functions raise (migrations/0002_replicas.sql).
const (
	codeLeaseLost = "SB001"
	codeGap       = "SB002"
	codeNotFound  = "SB003"
	codeUnique    = "23505"
)

// pgCode is err's SQLSTATE and constraint, "" when it is not the server's.
func pgCode(err error) (code, constraint string) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code, pe.ConstraintName
	}
	return "", ""
}

// sentinel wraps the errors the store's functions raise with the sentinel
// callers test for, keeping the server's message.
func sentinel(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case codeLeaseLost:
		return fmt.Errorf("%s: %w", pe.Message, ErrLeaseLost)
	case codeGap:
		return fmt.Errorf("%s: %w", pe.Message, ErrGap)
	case codeNotFound:
		return fmt.Errorf("%s: %w", pe.Message, ErrNotFound)
	}
	return err
}

// fromMillis is the inverse of time.Time.UnixMilli, in UTC.
func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// unixMilli is t in Unix milliseconds, 0 for the zero time.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// hostname is this machine's name for the replicas table, "" if unknown.
func hostname() string {
	h, _ := os.Hostname()
	return h
}

// texts reads a query's one text column.
func (db *DB) texts(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := db.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
