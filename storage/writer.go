package storage

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/internal/queue"
)

// writeReq is one item of the write queue: an event to store, a job (a
// caller's own writes, which it waits for), or a Flush marker, which the
// writer answers once everything queued before it is committed. Sharing one
// FIFO is what makes that ordering guarantee free.
type writeReq struct {
	ev        switchboard.Event
	published func([]switchboard.Event, error) // told when ev is stored, or is not
	job       *writeJob
	flush     chan error // set for a marker; buffered, so the writer never waits
	last      bool       // Close's marker: the writer exits once it is answered
}

// writeJob is a caller's writes, run inside the writer's batch transaction;
// if they fail, only they are undone (see writeBatch).
type writeJob struct {
	run func(ctx context.Context, tx *sql.Tx) error
	// durable: the commit waits for the disk (synchronous=FULL), so the
	// write survives a power cut and not only a crash of the process.
	durable bool
	// events are the events run stored, published after the commit.
	events    []switchboard.Event
	published func([]switchboard.Event, error)
	err       error
	done      chan error // buffered
	// session is the session a turn's write is for, if it is one: the
	// writer yields to let others join only when others write too.
	session string
}

// inBatch runs fn in the writer's next batch transaction and returns once
// that transaction is committed: group commit. Sessions writing at the same
// time share one commit instead of queueing for the write connection one
// transaction each. If fn errs, its writes are rolled back and the rest of
// the batch commits.
//
// Once queued, the job is waited for even if ctx ends: the writer always
// answers, and returning early would leave the caller unsure whether its
// writes landed.
func (db *DB) inBatch(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return db.runJob(ctx, &writeJob{run: fn})
}

// runJob queues j and waits for the writer's answer.
func (db *DB) runJob(ctx context.Context, j *writeJob) error {
	j.done = make(chan error, 1)
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return switchboard.ErrClosed
	}
	err := db.enqueue(ctx, writeReq{job: j})
	db.mu.RUnlock()
	if err != nil {
		return err
	}
	return <-j.done
}

// enqueue prefers the queue to ctx: a request that fits is queued even if
// ctx has just ended, so nothing is refused that need not be.
func (db *DB) enqueue(ctx context.Context, r writeReq) error {
	return queue.Send(ctx, db.queue, r)
}

// runWriter is the one goroutine that writes. It takes whatever is queued,
// up to a batch, and commits it in one transaction, so sessions writing at
// the same time share commits instead of queueing for the write lock one
// row at a time.
//
// A batch of events only, which nobody waits for, lingers up to
// db.linger for more to join it: a reply streamed as twenty deltas then
// costs one or two commits instead of twenty. Anything waited on (a job, a
// Flush, Close) ends the linger at once.
//
// A turn's write that finds nothing else queued yields the processor once
// before it is committed, when the last write was another session's:
// goroutines ready to run (sessions about to queue their writes) get to
// queue them and share the commit. Where a core is free for each, they
// have queued already and this costs little; on one core it is what lets
// commits be shared at all (make bench --procs at GOMAXPROCS=1: 975 →
// 2,050 turns/s). One session alone never waits for it.
func (db *DB) runWriter() {
	var unreported error
	var lastSession string
	batch := make([]writeReq, 0, db.batchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		batch = db.fill(append(batch[:0], <-db.queue))
		if j := batch[0].job; len(batch) == 1 && j != nil && j.session != "" {
			if lastSession != "" && j.session != lastSession {
				runtime.Gosched()
				batch = db.fill(batch)
			}
			lastSession = j.session
		}
		if db.linger > 0 && !waitedOn(batch) && len(batch) < db.batchSize {
			timer.Reset(db.linger)
		linger:
			for len(batch) < db.batchSize {
				select {
				case r := <-db.queue:
					batch = append(batch, r)
					if waitedOn(batch[len(batch)-1:]) {
						batch = db.fill(batch)
						break linger
					}
				case <-timer.C:
					break linger
				}
			}
			timer.Stop()
		}
		unreported = db.commit(batch, unreported)
		if batch[len(batch)-1].last {
			return
		}
	}
}

// waitedOn reports whether a caller is waiting on any request of batch.
func waitedOn(batch []writeReq) bool {
	for _, r := range batch {
		if r.job != nil || r.flush != nil {
			return true
		}
	}
	return false
}

// fill adds to batch what the queue holds right now, up to the batch size.
func (db *DB) fill(batch []writeReq) []writeReq {
	for len(batch) < db.batchSize {
		select {
		case r := <-db.queue:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// part is a unit of a batch that is stored, or refused, whole: a job, or
// a session's events queued between two jobs. Parts are written in queue
// order, so events queued after a job's (a turn's) are written after it.
type part struct {
	job *writeJob
	// A session's events, in seq order, and who is told of them: one
	// publisher per session (see AppendEvents).
	evs       []switchboard.Event
	published func([]switchboard.Event, error)
	err       error
}

// splitBatch cuts the batch into parts, in queue order, and reports
// whether a job in it must wait for the disk.
func splitBatch(batch []writeReq) (parts []*part, durable bool) {
	var bySession map[string]*part
	for _, r := range batch {
		switch {
		case r.flush != nil:
		case r.job != nil:
			parts = append(parts, &part{job: r.job})
			durable = durable || r.job.durable
			bySession = nil // events queued after the job go after it
		default:
			if bySession == nil {
				bySession = map[string]*part{}
			}
			p := bySession[r.ev.Session]
			if p == nil {
				p = &part{}
				bySession[r.ev.Session] = p
				parts = append(parts, p)
			}
			p.evs = append(p.evs, r.ev)
			if p.published == nil {
				p.published = r.published
			}
		}
	}
	return parts, durable
}

// commit writes the batch in one transaction; then, in queue order, tells
// the publishers which events were stored and answers the jobs; then the
// Flush markers, which follow every request queued before them. It returns
// the event write error still to be reported to the next Flush.
func (db *DB) commit(batch []writeReq, unreported error) error {
	parts, durable := splitBatch(batch)
	if db.beforeBatch != nil {
		var evs []switchboard.Event
		for _, p := range parts {
			evs = append(evs, p.evs...)
		}
		if len(evs) > 0 {
			db.beforeBatch(evs)
		}
	}
	if len(parts) > 0 {
		db.writeBatch(parts, durable)
	}
	for _, p := range parts {
		if j := p.job; j != nil {
			j.err = p.err
			if j.err == nil && j.published != nil && len(j.events) > 0 {
				j.published(j.events, nil)
			}
			j.done <- j.err
			continue
		}
		if p.err != nil {
			db.log.Error("storage: events not written", "session", p.evs[0].Session,
				"first_seq", p.evs[0].Seq, "events", len(p.evs), "err", p.err)
			unreported = errors.Join(unreported, p.err)
		}
		if p.published != nil {
			p.published(p.evs, p.err)
		}
	}
	answered := false
	for _, r := range batch {
		if r.flush != nil {
			r.flush <- unreported
			answered = true
		}
	}
	if answered {
		return nil
	}
	return unreported
}

// writeBatch writes the parts in one transaction and records each part's
// error in it (a failed begin or commit is every part's).
//
// Parts fail rarely (a full disk, a gap in a session's events), so the
// batch is tried whole first, with nothing extra on the hot path; only if a
// part fails is it rolled back and every part written in a transaction of
// its own, so that one session's failure undoes only its own writes.
func (db *DB) writeBatch(parts []*part, durable bool) {
	// Not tied to any caller's context: the writes are already accepted,
	// and Close waits for this to finish.
	ctx := context.Background()
	run := make([]func(*sql.Tx) error, len(parts))
	for i, p := range parts {
		if j := p.job; j != nil {
			run[i] = func(tx *sql.Tx) error {
				j.events = nil // a retry of the part starts afresh
				return j.run(ctx, tx)
			}
		} else {
			run[i] = func(tx *sql.Tx) error { return db.insertEvents(ctx, tx, p.evs) }
		}
	}
	if err := db.setDurable(ctx, durable); err != nil {
		db.log.Warn("storage: synchronous mode not set", "full", durable, "err", err)
	}
	errs, err := db.writeParts(ctx, run)
	if err == nil && len(run) > 1 && errors.Join(errs...) != nil {
		for i := range run {
			perr, err := db.writeParts(ctx, run[i:i+1])
			errs[i] = errors.Join(perr[0], err)
		}
	}
	for i, p := range parts {
		p.err = damaged(cmp.Or(errs[i], err))
	}
}

// ErrDamaged is what a write that SQLite found the database damaged for
// wraps: the log says what to run.
var ErrDamaged = errors.New("the database file is damaged: stop the gateway and run gateway doctor, which says what to repair")

// damaged wraps a write's error with ErrDamaged when SQLite says the
// database is malformed (a damaged recall index fails every message
// write, for one).
func damaged(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CORRUPT {
		return fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	return err
}

// setDurable switches the write connection between synchronous=FULL,
// which makes a commit wait until the WAL is on disk, and NORMAL, which
// survives a crash of the process but may lose the last commits to a
// power cut or an OS crash. Only writes a user was promised (an accepted
// input) pay for FULL; see docs/architecture.md.
func (db *DB) setDurable(ctx context.Context, full bool) error {
	if db.memory || full == db.full {
		return nil
	}
	mode := "NORMAL"
	if full {
		mode = "FULL"
	}
	if _, err := db.write.ExecContext(ctx, "PRAGMA synchronous = "+mode); err != nil {
		return err
	}
	db.full = full
	return nil
}

// writeParts runs parts in one transaction and commits it if all of them
// succeed. It returns each part's error, and the transaction's own.
func (db *DB) writeParts(ctx context.Context, parts []func(*sql.Tx) error) ([]error, error) {
	errs := make([]error, len(parts))
	db.seqs.begin()
	clear(db.tallies)
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return errs, fmt.Errorf("storage: begin batch: %w", err)
	}
	failed := false
	for i, p := range parts {
		if errs[i] = p(tx); errs[i] != nil {
			failed = true
			break
		}
	}
	if failed {
		tx.Rollback()
		return errs, nil
	}
	if err := db.addTallies(ctx, tx); err != nil {
		tx.Rollback()
		return errs, err
	}
	if err := tx.Commit(); err != nil {
		tx.Rollback()
		return errs, fmt.Errorf("storage: commit batch: %w", err)
	}
	db.seqs.commit()
	return errs, nil
}

const (
	// No ON CONFLICT: a seq stored twice is an error, never a silent drop.
	insertEvent = `INSERT INTO events (session_id, seq, time, type, agent, data) VALUES (?, ?, ?, ?, ?, ?)`
	lastEvent   = `SELECT seq FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1`
)

// lastSeqs is the writer's memory of each session's last stored seq, so
// that checking an event's predecessor costs a map lookup instead of a
// query. A session's events are stored from 1 without a gap, so seq is
// stored if and only if seq <= its last. Only the writer goroutine
// touches it; what a transaction stores is noted in tx until it commits.
type lastSeqs struct {
	committed map[string]int64
	tx        map[string]int64
}

// maxRemembered bounds the memory: past it, the writer forgets and asks
// the database again (one indexed query a session).
const maxRemembered = 100_000

func (l *lastSeqs) begin() { clear(l.tx) }

func (l *lastSeqs) commit() {
	if len(l.committed)+len(l.tx) > maxRemembered {
		clear(l.committed)
	}
	for k, v := range l.tx {
		l.committed[k] = v
	}
	clear(l.tx)
}

// checkStored fails with switchboard.ErrGap unless the session's event
// seq is stored.
func (db *DB) checkStored(ctx context.Context, tx *sql.Tx, sessionID string, seq int64) error {
	last, ok := db.seqs.tx[sessionID]
	if !ok {
		last, ok = db.seqs.committed[sessionID]
	}
	if !ok {
		err := tx.StmtContext(ctx, db.stmts[lastEvent]).QueryRowContext(ctx, sessionID).Scan(&last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		db.seqs.tx[sessionID] = last // what the database says is true whatever this tx does
	}
	if seq > last {
		return fmt.Errorf("event %d is not stored (the last is %d): %w", seq, last, switchboard.ErrGap)
	}
	return nil
}

// insertEvents stores one session's events, which must continue its
// stored numbering without a gap.
func (db *DB) insertEvents(ctx context.Context, tx *sql.Tx, evs []switchboard.Event) error {
	if len(evs) == 0 {
		return nil
	}
	first := evs[0]
	for i, ev := range evs[1:] {
		if ev.Session != first.Session || ev.Seq != first.Seq+int64(i)+1 {
			return fmt.Errorf("storage: write events: %s/%d after %s/%d: %w", ev.Session, ev.Seq, first.Session, first.Seq+int64(i), switchboard.ErrGap)
		}
	}
	if first.Seq > 1 {
		if err := db.checkStored(ctx, tx, first.Session, first.Seq-1); err != nil {
			return fmt.Errorf("storage: write events: %s/%d: %w", first.Session, first.Seq, err)
		}
	}
	stmt, err := db.writeStmt(ctx, tx, insertEvent)
	if err != nil {
		return fmt.Errorf("storage: write events: %w", err)
	}
	for _, ev := range evs {
		if _, err := stmt.ExecContext(ctx, ev.Session, ev.Seq, ev.Time.UnixMilli(), string(ev.Type), ev.Agent, string(ev.Data)); err != nil {
			return fmt.Errorf("storage: write event %s/%d: %w", ev.Session, ev.Seq, err)
		}
	}
	db.seqs.tx[first.Session] = evs[len(evs)-1].Seq
	return nil
}
