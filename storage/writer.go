package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// writeReq is one item of the write queue: an event to store, a job (a
// caller's own writes, which it waits for), or a Flush marker, which the
// writer answers once everything queued before it is committed. Sharing one
// FIFO is what makes that ordering guarantee free.
type writeReq struct {
	ev    switchboard.Event
	job   *writeJob
	flush chan error // set for a marker; buffered, so the writer never waits
	last  bool       // Close's marker: the writer exits once it is answered
}

// writeJob is a caller's writes, run inside the writer's batch transaction;
// if they fail, only they are undone (see writeBatch).
type writeJob struct {
	run  func(ctx context.Context, tx *sql.Tx) error
	err  error
	done chan error // buffered
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
	j := &writeJob{run: fn, done: make(chan error, 1)}
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return ErrClosed
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
	select {
	case db.queue <- r:
		return nil
	default:
	}
	select {
	case db.queue <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
func (db *DB) runWriter() {
	var unreported error
	batch := make([]writeReq, 0, db.batchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		batch = db.fill(append(batch[:0], <-db.queue))
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

// commit writes the batch's events and jobs in one transaction, then
// answers the jobs and the Flush markers, which all follow the requests
// queued before them. It returns the event write error still to be
// reported to the next Flush.
func (db *DB) commit(batch []writeReq, unreported error) error {
	var evs []switchboard.Event
	var jobs []*writeJob
	for _, r := range batch {
		switch {
		case r.job != nil:
			jobs = append(jobs, r.job)
		case r.flush == nil:
			evs = append(evs, r.ev)
		}
	}
	if len(evs) > 0 && db.beforeBatch != nil {
		db.beforeBatch(evs)
	}
	if len(evs) > 0 || len(jobs) > 0 {
		evErr, err := db.writeBatch(evs, jobs)
		if evErr == nil && len(evs) > 0 {
			evErr = err
		}
		if evErr != nil {
			db.log.Error("storage: event batch not written", "events", len(evs), "err", evErr)
			unreported = errors.Join(unreported, evErr)
		}
		for _, j := range jobs {
			if j.err == nil {
				j.err = err
			}
			j.done <- j.err
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

// writeBatch writes the events and jobs in one transaction, recording each
// job's error in the job, and returns the events' error and the
// transaction's (begin or commit), which is every part's.
//
// Parts fail rarely (a foreign key: a bug somewhere), so the batch is tried
// whole first, with nothing extra on the hot path; only if a part fails is
// it rolled back and every part written in a transaction of its own, so
// that one part's failure undoes only its own writes.
func (db *DB) writeBatch(evs []switchboard.Event, jobs []*writeJob) (evErr, txErr error) {
	// Not tied to any caller's context: the writes are already accepted,
	// and Close waits for this to finish.
	ctx := context.Background()
	parts := make([]func(*sql.Tx) error, 0, 1+len(jobs))
	if len(evs) > 0 {
		parts = append(parts, func(tx *sql.Tx) error { return db.insertEvents(ctx, tx, evs) })
	}
	for _, j := range jobs {
		parts = append(parts, func(tx *sql.Tx) error { return j.run(ctx, tx) })
	}
	errs, err := db.writeParts(ctx, parts)
	if err == nil && len(parts) > 1 && errors.Join(errs...) != nil {
		for i := range parts {
			perr, err := db.writeParts(ctx, parts[i:i+1])
			errs[i] = errors.Join(perr[0], err)
		}
	}
	if len(evs) > 0 {
		evErr, errs = errs[0], errs[1:]
	}
	for i, j := range jobs {
		j.err = errs[i]
	}
	return evErr, err
}

// writeParts runs parts in one transaction and commits it if all of them
// succeed. It returns each part's error, and the transaction's own.
func (db *DB) writeParts(ctx context.Context, parts []func(*sql.Tx) error) ([]error, error) {
	errs := make([]error, len(parts))
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
	if err := tx.Commit(); err != nil {
		tx.Rollback()
		return errs, fmt.Errorf("storage: commit batch: %w", err)
	}
	return errs, nil
}

const insertEvent = `INSERT INTO events (session_id, seq, time, type, agent, data)
	VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, seq) DO NOTHING`

func (db *DB) insertEvents(ctx context.Context, tx *sql.Tx, evs []switchboard.Event) error {
	stmt, err := db.writeStmt(ctx, tx, insertEvent)
	if err != nil {
		return fmt.Errorf("storage: write events: %w", err)
	}
	for _, ev := range evs {
		if _, err := stmt.ExecContext(ctx, ev.Session, ev.Seq, ev.Time.UnixMilli(), string(ev.Type), ev.Agent, string(ev.Data)); err != nil {
			return fmt.Errorf("storage: write event %s/%d: %w", ev.Session, ev.Seq, err)
		}
	}
	return nil
}
