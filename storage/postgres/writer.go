package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/internal/queue"
)

// The write path.
//
// Ordering: one FIFO queue holds every write a conversation makes (its
// events, which AppendEvents queues without waiting, and its jobs: a
// turn's write, an accepted input, a progress mark), and one goroutine,
// the writer, takes them in queue order. So events queued before a job are
// stored before it, a session's events are stored and published in seq
// order, and Flush, a marker in the same queue, returns once everything
// queued before it is committed.
//
// Group commit: the writer takes whatever is queued, up to a batch, and
// commits it in one transaction on one connection; a batch of events only,
// which nobody waits for, lingers a little for more to join it. The whole
// transaction is sent as one pipeline (pgx.Batch): BEGIN, each part's
// statements, COMMIT, in one round trip when nothing fails, however many
// sessions share it.
//
// Failure: a batch is cut into parts (a job, or one session's events
// queued between two jobs), and each part runs inside a SAVEPOINT of its
// own. A part fails by a statement's error on the server: a constraint, or
// one of the checks the store's functions raise (switchboard_stored for a
// gap, switchboard_fence for a lost lease, switchboard_found for a missing
// row). The server then skips the rest of the pipeline; the writer rolls
// back to that part's savepoint, which undoes that part alone, and sends
// the parts after it again: a round trip or two more for each failed part. A failure of the transaction itself (the
// connection, the commit) is every part's.
//
// Back-pressure: the queue is bounded (WithQueueSize); when it is full,
// AppendEvents and the jobs wait for room, or for their ctx.
//
// Durability: a batch commits with synchronous_commit off, which survives
// a crash of a gateway but may lose the last commits to a crash of the
// database server, unless a job in it is durable (an accepted input, a
// TurnWrite with Durable), whose commit waits for the WAL flush as
// PostgreSQL's default does. This is the promise the SQLite store makes
// with synchronous=NORMAL and FULL.
//
// The queue, the linger and the split into parts are what the SQLite
// store's writer does too (storage/writer.go); what is truly the same (the
// queue's loop, splitting a batch into parts) could move to a shared
// package. How a batch is written is each database's own.

// request is one item of the write queue: an event, a job, or a Flush
// marker, which the writer answers once everything before it is committed.
type request struct {
	ev        switchboard.Event
	epoch     int64 // the fence the event was queued under (see Fence)
	published func([]switchboard.Event, error)
	job       *job
	flush     chan error // buffered: the writer never waits on it
	last      bool       // Close's marker: the writer exits once it is answered
}

// waited reports whether a caller waits for r.
func (r request) waited() bool { return r.job != nil || r.flush != nil }

// job is a caller's writes, run inside a savepoint of the writer's batch:
// stored whole, or (if a statement of it fails) not at all.
type job struct {
	// session is the conversation a fenced job writes into, under the
	// lease epoch it was queued with.
	session string
	fenced  bool
	epoch   int64
	// durable: the commit waits for the WAL flush.
	durable bool
	// build adds the job's statements; an error fails the job unsent.
	build func(s *steps) error
	// failed, when set, is told the error that undid the job and returns
	// what its caller gets (a duplicate input is no error to it).
	failed func(error) error
	// events are published once the job is committed.
	events    []switchboard.Event
	published func([]switchboard.Event, error)
	done      chan error // buffered
}

// step is one statement of a part, and what reads its result.
type step struct {
	sql  string
	args []any
	// read, when set, reads the statement's rows; otherwise its command
	// tag goes to tag, if set.
	read func(pgx.Rows) error
	tag  func(pgconn.CommandTag)
}

// steps collects a part's statements.
type steps struct{ list []step }

func (s *steps) exec(sql string, args ...any) { s.list = append(s.list, step{sql: sql, args: args}) }

// execTag runs sql and gives its command tag (rows affected) to tag.
func (s *steps) execTag(tag func(pgconn.CommandTag), sql string, args ...any) {
	s.list = append(s.list, step{sql: sql, args: args, tag: tag})
}

// queryRow runs sql and scans its one row into dest.
func (s *steps) queryRow(sql string, args []any, dest ...any) {
	s.list = append(s.list, step{sql: sql, args: args, read: func(rows pgx.Rows) error {
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return err
			}
			return pgx.ErrNoRows
		}
		return rows.Scan(dest...)
	}})
}

// part is a unit of a batch that is stored, or refused, whole: a job, or
// one session's events queued between two jobs under one fence epoch.
type part struct {
	job       *job
	session   string
	epoch     int64
	evs       []switchboard.Event
	published func([]switchboard.Event, error)
	steps     []step
	err       error
}

// maxPartsPerTx caps the savepoints of one transaction: PostgreSQL keeps
// a backend's first 64 subtransactions in shared memory, and past them
// every other session's snapshots must look subtransactions up on disk
// (the "subxid overflow"). A larger batch is committed in several
// transactions, in order.
const maxPartsPerTx = 64

// runJob queues j and waits for the writer's answer. Once queued, the job
// is waited for even if ctx ends: the writer always answers, and
// returning early would leave the caller unsure whether its writes landed.
func (db *DB) runJob(ctx context.Context, j *job) error {
	j.done = make(chan error, 1)
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return ErrClosed
	}
	err := db.enqueue(ctx, request{job: j})
	db.mu.RUnlock()
	if err != nil {
		return err
	}
	return <-j.done
}

// inBatch runs the statements build adds in the writer's next batch and
// returns once they are committed.
func (db *DB) inBatch(ctx context.Context, build func(s *steps) error) error {
	return db.runJob(ctx, &job{build: build})
}

// enqueue prefers the queue to ctx: a request that fits is queued even if
// ctx has just ended, so nothing is refused that need not be.
func (db *DB) enqueue(ctx context.Context, r request) error {
	return queue.Send(ctx, db.queue, r)
}

// runWriter is the one goroutine that writes: it gathers a batch and
// commits it, until Close's marker.
func (db *DB) runWriter() {
	defer close(db.writerDone)
	var unreported error
	batch := make([]request, 0, db.batchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		batch = db.gather(batch[:0], timer)
		unreported = db.commit(batch, unreported)
		if batch[len(batch)-1].last {
			return
		}
	}
}

// gather waits for a request, then takes what is queued, up to a batch. A
// batch that nobody waits for (events only) lingers up to db.linger for
// more: a reply streamed as twenty deltas costs a commit or two, not
// twenty. A request someone waits for ends the linger at once.
func (db *DB) gather(batch []request, timer *time.Timer) []request {
	batch = append(batch, <-db.queue)
	waited := batch[0].waited()
	lingering := false
	defer timer.Stop()
	for len(batch) < db.batchSize {
		select {
		case r := <-db.queue:
			batch = append(batch, r)
			waited = waited || r.waited()
			continue
		default:
		}
		if waited || db.linger == 0 {
			return batch
		}
		if !lingering {
			timer.Reset(db.linger)
			lingering = true
		}
		select {
		case r := <-db.queue:
			batch = append(batch, r)
			waited = waited || r.waited()
		case <-timer.C:
			return batch
		}
	}
	return batch
}

// split cuts a batch into parts in queue order: each job is one, and the
// events between two jobs make one part per session (and fence epoch), so
// events queued after a job are written after it.
func split(batch []request) []*part {
	var parts []*part
	var bySession map[string]*part
	for _, r := range batch {
		switch {
		case r.flush != nil:
		case r.job != nil:
			parts = append(parts, &part{job: r.job, session: r.job.session, epoch: r.job.epoch})
			bySession = nil
		default:
			if bySession == nil {
				bySession = map[string]*part{}
			}
			p := bySession[r.ev.Session]
			if p == nil || p.epoch != r.epoch {
				p = &part{session: r.ev.Session, epoch: r.epoch, published: r.published}
				bySession[r.ev.Session] = p
				parts = append(parts, p)
			}
			p.evs = append(p.evs, r.ev)
		}
	}
	return parts
}

// commit writes the batch, at most maxPartsPerTx parts a transaction; after
// each transaction it tells, in queue order, the publishers what was
// stored and the jobs their answer; then it answers the Flush markers,
// which follow every request queued before them. It returns the event
// write errors still to be reported to the next Flush.
func (db *DB) commit(batch []request, unreported error) error {
	parts := split(batch)
	for len(parts) > 0 {
		n := min(len(parts), maxPartsPerTx)
		chunk := parts[:n]
		parts = parts[n:]
		db.writeParts(chunk)
		for _, p := range chunk {
			unreported = db.answer(p, unreported)
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

// answer tells a part's caller or publisher how it went.
func (db *DB) answer(p *part, unreported error) error {
	if j := p.job; j != nil {
		err := sentinel(p.err)
		if err != nil && j.failed != nil {
			err = j.failed(err)
		}
		if p.err == nil && j.published != nil && len(j.events) > 0 {
			j.published(j.events, nil)
		}
		j.done <- err
		return unreported
	}
	err := sentinel(p.err)
	if err != nil {
		err = fmt.Errorf("postgres: write events %s/%d-%d: %w", p.session, p.evs[0].Seq, p.evs[len(p.evs)-1].Seq, err)
		db.log.Error("postgres: events not written", "session", p.session,
			"first_seq", p.evs[0].Seq, "events", len(p.evs), "err", err)
		unreported = errors.Join(unreported, err)
	}
	if p.published != nil {
		p.published(p.evs, err)
	}
	return unreported
}

// prepare builds a part's statements, or fails it before anything is sent.
func (db *DB) prepare(p *part) {
	var s steps
	if db.replica != "" && (p.job == nil || p.job.fenced) {
		if p.epoch == 0 {
			p.err = fmt.Errorf("conversation %s: this replica (%s) holds no lease on it: %w", p.session, db.replica, ErrLeaseLost)
			return
		}
		s.exec(`SELECT switchboard_fence($1, $2, $3)`, SessionLease(p.session), db.replica, p.epoch)
	}
	var err error
	if p.job != nil {
		err = p.job.build(&s)
	} else {
		err = eventSteps(&s, p.evs)
	}
	if err != nil {
		p.err = err
		return
	}
	p.steps = s.list
}

// writeParts writes parts in one transaction and records each part's
// error in it.
func (db *DB) writeParts(parts []*part) {
	live := make([]*part, 0, len(parts))
	durable := false
	for _, p := range parts {
		if db.prepare(p); p.err == nil {
			live = append(live, p)
			durable = durable || (p.job != nil && p.job.durable)
		}
	}
	if len(live) == 0 {
		return
	}
	// Not tied to any caller's context: the writes are accepted already,
	// and Close waits for them.
	ctx, cancel := context.WithTimeout(context.Background(), db.writeTimeout)
	defer cancel()
	conn, err := db.pool.Acquire(ctx)
	if err == nil {
		err = db.pipeline(ctx, conn.Conn(), live, durable)
		conn.Release() // a connection left in a transaction is closed, not reused
	}
	if err != nil {
		err = fmt.Errorf("postgres: write batch: %w", err)
		for _, p := range live {
			if p.err == nil {
				p.err = err
			}
		}
	}
}

// pipeline runs parts in one transaction: BEGIN, every part in a savepoint
// of its own, COMMIT, sent together. When a part fails, the server skips
// the rest; the writer rolls back to that part's savepoint and sends the
// parts after it again. The error returned is the transaction's
// own (every part without an error of its own failed with it; a lost
// connection may have lost a COMMIT that was carried out, so "failed"
// then means "unknown").
func (db *DB) pipeline(ctx context.Context, conn *pgx.Conn, parts []*part, durable bool) error {
	head := []step{{sql: "BEGIN"}}
	if !durable {
		head = append(head, step{sql: "SET LOCAL synchronous_commit = off"})
	}
	if names := db.fenced(parts); len(names) > 0 {
		head = append(head, step{sql: lockFences, args: []any{names, db.replica}})
	}
	commit := db.beforeCommit == nil // a test holds the commit: sent alone
	for {
		b := &pgx.Batch{}
		for _, h := range head {
			b.Queue(h.sql, h.args...)
		}
		for _, p := range parts {
			b.Queue("SAVEPOINT part")
			for _, s := range p.steps {
				b.Queue(s.sql, s.args...)
			}
			b.Queue("RELEASE SAVEPOINT part")
		}
		if commit {
			b.Queue("COMMIT")
		}
		br := conn.SendBatch(ctx, b)
		failed, err := readPipeline(br, len(head), parts, commit)
		err = errors.Join(err, ignoreServerError(br.Close()))
		if err != nil {
			return err
		}
		if failed < 0 {
			break
		}
		// Alone, not at the head of the next pipeline: pgx prepares a
		// pipeline's new statements before sending it, which an aborted
		// transaction refuses.
		if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT part; RELEASE SAVEPOINT part"); err != nil {
			return err
		}
		parts = parts[failed+1:]
		head = nil
	}
	if !commit {
		db.beforeCommit()
		tag, err := conn.Exec(ctx, "COMMIT")
		if err != nil {
			return err
		}
		return committed(tag)
	}
	return nil
}

// lockFences takes, first thing in a batch's transaction, the share locks
// its parts' fences take (switchboard_fence), on the rows this replica
// holds, in the order of their names. The renewal locks its rows in the
// same order (RenewLeases), so the two never wait for each other in a
// cycle: taken in the parts' order instead, a batch holding one row and
// waiting for another deadlocked with a renewal holding the second and
// waiting for the first, and PostgreSQL failed one of them.
const lockFences = `SELECT count(*) FROM (SELECT 1 FROM leases WHERE name = ANY($1) AND holder = $2
	ORDER BY name FOR SHARE) l`

// fenced is the sorted names of the leases the fenced parts write under.
func (db *DB) fenced(parts []*part) []string {
	if db.replica == "" {
		return nil
	}
	var names []string
	for _, p := range parts {
		if p.job == nil || p.job.fenced {
			names = append(names, SessionLease(p.session))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// readPipeline reads a pipeline's results in order: head statements, each
// part's savepoint, statements and release, and the commit. It returns the
// index of the part that failed (its err set), or -1; and the error that
// failed the transaction itself.
func readPipeline(br pgx.BatchResults, head int, parts []*part, commit bool) (int, error) {
	for range head {
		if _, err := br.Exec(); err != nil {
			return -1, err
		}
	}
	for k, p := range parts {
		if _, err := br.Exec(); err != nil { // SAVEPOINT
			return -1, err
		}
		for _, s := range p.steps {
			err := s.run(br)
			if code, _ := pgCode(err); code != "" {
				p.err = err
				return k, nil
			}
			if err != nil {
				return -1, err
			}
		}
		if _, err := br.Exec(); err != nil { // RELEASE
			return -1, err
		}
	}
	if commit {
		tag, err := br.Exec()
		if err != nil {
			return -1, err
		}
		return -1, committed(tag)
	}
	return -1, nil
}

// run reads the step's result from br.
func (s step) run(br pgx.BatchResults) error {
	if s.read == nil {
		tag, err := br.Exec()
		if err == nil && s.tag != nil {
			s.tag(tag)
		}
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	err = s.read(rows)
	rows.Close()
	return errors.Join(err, rows.Err())
}

// committed fails a COMMIT that rolled back: PostgreSQL answers COMMIT of
// a failed transaction with ROLLBACK, not with an error.
func committed(tag pgconn.CommandTag) error {
	if tag.String() != "COMMIT" {
		return fmt.Errorf("the transaction was rolled back (%s)", tag)
	}
	return nil
}

// ignoreServerError drops a server's error from closing a pipeline: it is
// the failed part's, already read.
func ignoreServerError(err error) error {
	if code, _ := pgCode(err); code != "" {
		return nil
	}
	return err
}

// Statements of a session's events.
const (
	// No ON CONFLICT: a seq stored twice is an error, never a silent drop.
	insertEvents = `INSERT INTO events (session_id, seq, time, type, agent, data)
		SELECT $1, * FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[])`
	checkStored = `SELECT switchboard_stored($1, $2)`
	notify      = `SELECT pg_notify('switchboard', $1)`
)

// eventSteps stores one session's events, which must continue its stored
// numbering without a gap, and notifies the other replicas.
func eventSteps(s *steps, evs []switchboard.Event) error {
	if len(evs) == 0 {
		return nil
	}
	first := evs[0]
	n := len(evs)
	seqs, times := make([]int64, n), make([]int64, n)
	types, agents, data := make([]string, n), make([]string, n), make([]string, n)
	for i, ev := range evs {
		if ev.Session != first.Session || ev.Seq != first.Seq+int64(i) {
			return fmt.Errorf("event %s/%d after %s/%d: %w", ev.Session, ev.Seq, first.Session, first.Seq+int64(i)-1, ErrGap)
		}
		seqs[i], times[i] = ev.Seq, ev.Time.UnixMilli()
		types[i], agents[i], data[i] = string(ev.Type), ev.Agent, string(ev.Data)
	}
	if first.Seq > 1 {
		s.exec(checkStored, first.Session, first.Seq-1)
	}
	s.exec(insertEvents, first.Session, seqs, times, types, agents, data)
	s.exec(notify, payload(Note{Kind: NoteEvents, Session: first.Session, Seq: evs[n-1].Seq}))
	return nil
}
