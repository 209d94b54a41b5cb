// Package storage is the gateway's SQLite store: sessions, members, the
// numbered event log, the model's context messages, suspended turns and
// input de-duplication.
//
// SQLite allows one writer at a time, so the store has exactly one: a
// single-connection *sql.DB through which every write goes, and a separate
// pool for reads (WAL lets those run while the writer commits). One
// background goroutine commits what is queued in batches (writer.go):
// events, which their producers do not wait for, and the hot writes of a
// turn (messages, input ids, usage), whose callers wait for the batch's
// commit. Many sessions thus share one transaction instead of queueing for
// the write lock one each.
package storage

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/switchboard-gw/switchboard"
)

// ErrNotFound is returned (wrapped) for a missing record. It is the domain's
// sentinel, so callers may test for either name.
var ErrNotFound = switchboard.ErrNotFound

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Defaults for the event writer.
const (
	defaultQueueSize = 8192
	defaultBatchSize = 512
	defaultLinger    = 2 * time.Millisecond
)

type options struct {
	queueSize int
	batchSize int
	readConns int
	linger    time.Duration
	logger    *slog.Logger
	// beforeBatch, when set, is called by the event writer with each batch
	// before it is written. Tests use it to hold the writer still.
	beforeBatch func([]switchboard.Event)
}

// Option configures Open.
type Option func(*options)

// WithQueueSize bounds the event queue (default 8192). When it is full,
// AppendEvents waits: back-pressure rather than unbounded memory.
func WithQueueSize(n int) Option { return func(o *options) { o.queueSize = n } }

// WithBatchSize caps how many events one commit takes (default 512).
func WithBatchSize(n int) Option { return func(o *options) { o.batchSize = n } }

// WithLinger sets how long a batch of events, which nobody waits for,
// waits for more to join it before it is committed (default 2ms; 0 commits
// at once). Writes a caller waits for are never held back.
func WithLinger(d time.Duration) Option { return func(o *options) { o.linger = d } }

// WithReadConns sets the size of the read pool (default 2×CPUs, at least 4).
func WithReadConns(n int) Option { return func(o *options) { o.readConns = n } }

// WithLogger sets where background write errors are logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// DB is the store. It is safe for concurrent use.
type DB struct {
	write *sql.DB // one connection: the only writer
	read  *sql.DB // the read pool; the same as write for ":memory:"
	log   *slog.Logger

	beforeBatch func([]switchboard.Event)
	batchSize   int
	linger      time.Duration
	queue       chan writeReq

	// stmts are the writer's hot statements, prepared at Open on its one
	// connection and only read after that (see writeStmt).
	stmts map[string]*sql.Stmt
	// memory: an in-memory database, which has no disk to sync. full is
	// the write connection's synchronous mode (see setDurable); both are
	// the writer goroutine's.
	memory bool
	full   bool
	// lock holds the database file for this process (see lockFile).
	lock *os.File
	// seqs: each session's last stored seq, as the writer knows it.
	seqs lastSeqs
	// tallies: what the charges of the batch under way add to their
	// running totals (spend.go).
	tallies batchTallies
	// mems: people's memories as read (see Memories).
	mems memoryCache

	// mu guards closed. Senders to queue hold it for reading, so Close,
	// which takes it for writing, knows no send is in flight once it has it.
	mu        sync.RWMutex
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the database at dsn, a file path or
// ":memory:", and applies any migrations it has not seen yet.
func Open(ctx context.Context, dsn string, opts ...Option) (*DB, error) {
	o := options{
		queueSize: defaultQueueSize,
		batchSize: defaultBatchSize,
		linger:    defaultLinger,
		readConns: max(4, 2*runtime.NumCPU()),
		logger:    slog.Default(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	o.queueSize = max(o.queueSize, 1)
	o.batchSize = max(o.batchSize, 1)
	o.readConns = max(o.readConns, 1)

	writeDSN, readDSN, memory, err := dsns(dsn)
	if err != nil {
		return nil, err
	}
	var lock *os.File
	if !memory {
		if lock, err = lockFile(dsn); err != nil {
			return nil, err
		}
	}
	// Until the store is built, a failure gives the lock back.
	built := false
	defer func() {
		if !built && lock != nil {
			lock.Close()
		}
	}()
	write, err := sql.Open("sqlite", writeDSN)
	if err != nil {
		return nil, fmt.Errorf("storage: open: %w", err)
	}
	write.SetMaxOpenConns(1)
	// An in-memory database lives as long as a connection to it does, so
	// the one connection must never be retired.
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)

	if err := migrate(ctx, write); err != nil {
		write.Close()
		if !memory {
			return nil, explainOpen(dsn, err)
		}
		return nil, err
	}
	stmts, err := prepareWrites(ctx, write)
	if err != nil {
		write.Close()
		return nil, err
	}

	read := write
	if !memory {
		read, err = sql.Open("sqlite", readDSN)
		if err != nil {
			write.Close()
			return nil, fmt.Errorf("storage: open: %w", err)
		}
		read.SetMaxOpenConns(o.readConns)
		read.SetMaxIdleConns(o.readConns)
		if err := read.PingContext(ctx); err != nil {
			read.Close()
			write.Close()
			return nil, fmt.Errorf("storage: open: %w", err)
		}
	}

	db := &DB{
		write:       write,
		read:        read,
		log:         o.logger,
		beforeBatch: o.beforeBatch,
		batchSize:   o.batchSize,
		linger:      max(o.linger, 0),
		queue:       make(chan writeReq, o.queueSize),
		stmts:       stmts,
		memory:      memory,
		lock:        lock,
		seqs:        lastSeqs{committed: map[string]int64{}, tx: map[string]int64{}},
		tallies:     batchTallies{},
	}
	built = true
	go db.runWriter()
	return db, nil
}

// dsns builds the driver DSNs for the writer and the readers. Pragmas go in
// the DSN so that every connection the pools open gets them.
// explainOpen turns SQLite's "unable to open database file (14)" into
// what the operator can act on: the path and the system's reason. SQLite
// needs to write the file and to create its -wal and -shm files beside it.
func explainOpen(dsn string, err error) error {
	f, ferr := os.OpenFile(dsn, os.O_RDWR|os.O_CREATE, 0o644)
	if ferr != nil {
		return fmt.Errorf("storage: cannot open the database %s: %w (check storage.dsn and the file's owner and permissions)", dsn, errors.Unwrap(ferr))
	}
	f.Close()
	dir := filepath.Dir(dsn)
	probe, derr := os.CreateTemp(dir, ".switchboard-probe-*")
	if derr != nil {
		return fmt.Errorf("storage: cannot write in %s, where the database keeps its -wal and -shm files: %w (check the directory's owner and permissions)", dir, errors.Unwrap(derr))
	}
	probe.Close()
	os.Remove(probe.Name())
	return err
}

func dsns(dsn string) (write, read string, memory bool, err error) {
	// temp_store(MEMORY): statement journals and temporary tables stay in
	// memory instead of temporary files.
	params := []string{"_pragma=busy_timeout(5000)", "_pragma=synchronous(NORMAL)", "_pragma=foreign_keys(1)", "_pragma=temp_store(MEMORY)"}
	var base string
	switch {
	case dsn == "":
		return "", "", false, errors.New("storage: open: empty dsn")
	case dsn == ":memory:":
		// A named shared-cache database, unique per Open so two stores in
		// one process never share state by accident.
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", "", false, fmt.Errorf("storage: open: %w", err)
		}
		base = "file:memdb" + hex.EncodeToString(b[:]) + "?mode=memory&cache=shared&"
		memory = true
	default:
		if err := os.MkdirAll(filepath.Dir(dsn), 0o755); err != nil {
			return "", "", false, fmt.Errorf("storage: open: %w", err)
		}
		base = "file:" + escapePath(dsn) + "?"
		// Checkpoint every ~16 MiB of WAL instead of SQLite's 4 MiB: each
		// session's newest pages are rewritten turn after turn, and a
		// checkpoint copies a page back once however often it changed, so
		// fewer checkpoints write far less (make bench: ~8 % more turns/s).
		params = append(params, "_pragma=journal_mode(WAL)", "_pragma=wal_autocheckpoint(4000)")
	}
	base += strings.Join(params, "&")
	// The writer begins IMMEDIATE so a transaction takes the write lock up
	// front instead of failing to upgrade a read lock halfway through.
	return base + "&_txlock=immediate", base + "&_query_only=1", memory, nil
}

// escapePath makes a file path safe inside an SQLite URI, where '?' and
// '#' end the path and '%' starts an escape.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

// migrate applies, in order and each in its own transaction, the embedded
// migrations schema_migrations does not list yet.
func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("storage: migrate: %w", err)
	}
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("storage: migrate: %w", err)
	}
	type migration struct {
		version int
		name    string
	}
	var ms []migration
	seen := map[int]string{}
	for _, n := range names {
		base := filepath.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return fmt.Errorf("storage: migrate: %s: name must be NNNN_description.sql", base)
		}
		if prev, dup := seen[v]; dup {
			return fmt.Errorf("storage: migrate: %s and %s share version %d", prev, base, v)
		}
		seen[v] = base
		ms = append(ms, migration{v, n})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })

	for _, m := range ms {
		if err := applyMigration(ctx, db, m.version, m.name); err != nil {
			return fmt.Errorf("storage: migrate %s: %w", filepath.Base(m.name), err)
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, version int, name string) error {
	body, err := migrationFiles.ReadFile(name)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Checked inside the transaction, which holds the write lock, so two
	// processes opening one file cannot both apply it.
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		version, filepath.Base(name), time.Now().UnixMilli()); err != nil {
		return err
	}
	return tx.Commit()
}

// Close commits every queued event, then closes the database. It returns
// any write error the background writer has not reported yet.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.mu.Lock()
		db.closed = true
		db.mu.Unlock()
		// The last request ever queued: the writer commits everything
		// ahead of it, answers it and exits.
		done := make(chan error, 1)
		db.queue <- writeReq{flush: done, last: true}
		errs := []error{<-done}
		for _, st := range db.stmts {
			errs = append(errs, st.Close())
		}
		if db.read != db.write {
			errs = append(errs, db.read.Close())
		}
		errs = append(errs, db.write.Close())
		if db.lock != nil {
			errs = append(errs, db.lock.Close())
		}
		if err := errors.Join(errs...); err != nil {
			db.closeErr = fmt.Errorf("storage: close: %w", err)
		}
	})
	return db.closeErr
}

// prepareWrites prepares the statements every turn writes with on the
// writer's connection, once: parsing the same INSERT for every batch was
// 7 % of the gateway's CPU at one session. It must run before the writer
// starts: while a transaction holds the one connection, nothing else can
// be prepared on it.
func prepareWrites(ctx context.Context, write *sql.DB) (map[string]*sql.Stmt, error) {
	hot := []string{insertEvent, lastEvent, insertMessage, insertSeenInput, deleteSeenInput, endTurn, insertInbox,
		savePending, deletePending, deleteInbox, insertCharge, addTally}
	stmts := make(map[string]*sql.Stmt, len(hot))
	for _, q := range hot {
		st, err := write.PrepareContext(ctx, q)
		if err != nil {
			for _, st := range stmts {
				st.Close()
			}
			return nil, fmt.Errorf("storage: prepare %q: %w", q, err)
		}
		stmts[q] = st
	}
	return stmts, nil
}

// writeStmt returns the statement for query inside tx: the one prepared
// at Open if query is a hot write (with one connection, tx reuses it), or
// one prepared for tx alone.
func (db *DB) writeStmt(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	if st, ok := db.stmts[query]; ok {
		return tx.StmtContext(ctx, st), nil
	}
	return tx.PrepareContext(ctx, query)
}

// execWrite runs one of the writer's statements inside tx.
func (db *DB) execWrite(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	st, err := db.writeStmt(ctx, tx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// isUnique reports whether err is a violated UNIQUE or PRIMARY KEY constraint.
func isUnique(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// nullable stores an empty string as NULL.
func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// fromMillis is the inverse of time.Time.UnixMilli, in UTC.
func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// LimitSize makes the database refuse to grow past about maxBytes, as a
// full disk would (SQLITE_FULL: "database or disk is full"); 0 lifts the
// limit. The gateway must lose nothing when its disk fills, and this is how
// its tests fill it; an operator may use it to cap the file.
func (db *DB) LimitSize(ctx context.Context, maxBytes int64) error {
	return db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var pageSize int64
		if err := tx.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
			return fmt.Errorf("storage: limit size: %w", err)
		}
		pages := int64(4294967294) // SQLite's own ceiling
		if maxBytes > 0 {
			pages = max(maxBytes/pageSize, 1)
		}
		var got int64
		if err := tx.QueryRowContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)).Scan(&got); err != nil {
			return fmt.Errorf("storage: limit size: %w", err)
		}
		return nil
	})
}
