package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// replicas opens n stores on one database, replicas "r0", "r1", ...
func replicas(t *testing.T, n int, opts ...Option) []*DB {
	t.Helper()
	dsn := pg.NewDatabase(t)
	dbs := make([]*DB, n)
	for i := range dbs {
		dbs[i] = openOn(t, dsn, append([]Option{WithReplica(fmt.Sprintf("r%d", i))}, opts...)...)
	}
	return dbs
}

// expire moves a lease's expiry into the past, as time would.
func expire(t *testing.T, db *DB, name string) {
	t.Helper()
	sql(t, db, `UPDATE leases SET expires_at = `+nowMillis+` - 1 WHERE name = $1`, name)
}

func take(t *testing.T, db *DB, name string) Lease {
	t.Helper()
	l, err := db.AcquireLease(context.Background(), name, time.Minute)
	if err != nil {
		t.Fatalf("%s: acquire %s: %v", db.replica, name, err)
	}
	return l
}

// A lease is taken when free, expired or one's own; the epoch grows with
// every new holding, by another replica or by the same one after it
// expired or was released, and stays while one holds it.
func TestLeases(t *testing.T) {
	ctx := context.Background()
	dbs := replicas(t, 2)
	a, b := dbs[0], dbs[1]
	l := take(t, a, "session:x")
	if l.Holder != "r0" || l.Epoch != 1 || l.Name != "session:x" || time.Until(l.Expires) < 30*time.Second {
		t.Fatalf("first acquisition = %+v", l)
	}
	if l2 := take(t, a, "session:x"); l2.Epoch != 1 || l2.Expires.Before(l.Expires) {
		t.Errorf("acquiring one's own lease again = %+v, want epoch 1 and a later expiry", l2)
	}
	_, err := b.AcquireLease(ctx, "session:x", time.Minute)
	var held *LeaseHeldError
	if !errors.Is(err, ErrLeaseHeld) || !errors.As(err, &held) || held.Holder != "r0" || held.Expires.IsZero() || !strings.Contains(err.Error(), "r0") {
		t.Fatalf("acquiring another's lease = %v, want ErrLeaseHeld naming r0", err)
	}
	expire(t, a, "session:x")
	if l := take(t, b, "session:x"); l.Holder != "r1" || l.Epoch != 2 {
		t.Fatalf("taking over an expired lease = %+v, want r1 at epoch 2", l)
	}
	if ls, err := a.RenewLeases(ctx, time.Minute, []string{"session:x"}); err != nil || len(ls) != 0 {
		t.Errorf("r0 renews %+v, %v: it lost its only lease", ls, err)
	}
	if err := a.ReleaseLease(ctx, "session:x"); err != nil {
		t.Fatal(err)
	}
	if ls, _ := b.Leases(ctx, "session:"); len(ls) != 1 || ls[0].Holder != "r1" || time.Until(ls[0].Expires) < 30*time.Second {
		t.Errorf("r0 released r1's lease: %+v", ls)
	}
	// Released, the lease is free, and taken anew at the next epoch, even
	// by the replica that released it.
	if err := b.ReleaseLease(ctx, "session:x"); err != nil {
		t.Fatal(err)
	}
	if l := take(t, b, "session:x"); l.Epoch != 3 {
		t.Errorf("taking a released lease again = %+v, want epoch 3", l)
	}
	expire(t, b, "session:x")
	if l := take(t, b, "session:x"); l.Epoch != 4 {
		t.Errorf("the same holder after expiry = %+v, want epoch 4", l)
	}
	// Renewing keeps the epoch, expired or not, of every lease named.
	take(t, b, "session:y")
	expire(t, b, "session:y")
	ls, err := b.RenewLeases(ctx, time.Minute, []string{"session:x", "session:y"})
	if err != nil || len(ls) != 2 {
		t.Fatalf("RenewLeases = %+v, %v", ls, err)
	}
	for _, l := range ls {
		if time.Until(l.Expires) < 30*time.Second || (l.Name == "session:x" && l.Epoch != 4) || (l.Name == "session:y" && l.Epoch != 1) {
			t.Errorf("renewed %+v", l)
		}
	}
	// A lease held but not named is not renewed: it runs out (a
	// predecessor's under the same id, one a release failed to give up).
	expire(t, b, "session:y")
	if ls, err := b.RenewLeases(ctx, time.Minute, []string{"session:x"}); err != nil || len(ls) != 1 || ls[0].Name != "session:x" {
		t.Fatalf("RenewLeases(session:x) = %+v, %v, want session:x alone", ls, err)
	}
	if ls, _ := b.Leases(ctx, "session:y"); len(ls) != 1 || ls[0].Expires.After(time.Now()) {
		t.Errorf("session:y, not named, was renewed: %+v", ls)
	}
	if ls, err := b.RenewLeases(ctx, time.Minute, nil); err != nil || len(ls) != 0 {
		t.Errorf("RenewLeases(none) = %+v, %v", ls, err)
	}
	if ls, _ := a.Leases(ctx, "session:y"); len(ls) != 1 {
		t.Errorf("Leases(session:y) = %+v", ls)
	}
	single := open(t)
	if _, err := single.AcquireLease(ctx, "x", time.Minute); err == nil {
		t.Error("a store without WithReplica took a lease")
	}
}

// A lease with a short ttl expires by the database's clock.
func TestLeaseExpiresByTheDatabasesClock(t *testing.T) {
	ctx := context.Background()
	dbs := replicas(t, 2)
	if _, err := dbs[0].AcquireLease(ctx, "job", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := dbs[1].AcquireLease(ctx, "job", time.Minute); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("before expiry: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := dbs[1].AcquireLease(ctx, "job", time.Minute)
		if err == nil {
			if l.Epoch != 2 || l.Holder != "r1" {
				t.Errorf("after expiry = %+v", l)
			}
			return
		}
		if !errors.Is(err, ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("after the ttl: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Of replicas asking at once, one gets the lease.
func TestOneOfManyGetsTheLease(t *testing.T) {
	dbs := replicas(t, 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for _, db := range dbs {
		wg.Go(func() {
			_, err := db.AcquireLease(context.Background(), "session:s", time.Minute)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrLeaseHeld):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Errorf("%d replicas got the lease, want 1", won)
	}
}

// snapshot is what a session holds.
func snapshot(t *testing.T, db *DB, session string) string {
	t.Helper()
	return fmt.Sprintf("events %v, messages %d, seen %d, pending %d", stored(t, db, session),
		count(t, db, `SELECT count(*) FROM messages WHERE session_id = $1`, session),
		count(t, db, `SELECT count(*) FROM seen_inputs WHERE session_id = $1`, session),
		count(t, db, `SELECT count(*) FROM pending_turns WHERE session_id = $1`, session))
}

// A replica that lost a conversation's lease writes nothing more into it:
// its events and its turn's writes are refused with ErrLeaseLost, and
// nothing of them is stored; the new holder's are.
func TestStaleHolderIsFencedOut(t *testing.T) {
	ctx := context.Background()
	dbs := replicas(t, 2)
	a, b := dbs[0], dbs[1]
	newSession(t, a, "s", "")
	la := take(t, a, SessionLease("s"))
	a.Fence("s", la.Epoch)
	var pub recorder
	if _, err := a.WriteTurn(ctx, "s", switchboard.TurnWrite{Messages: []switchboard.Message{user("hi")}, Turn: []byte("open"),
		Events: []switchboard.Event{ev("s", 1, switchboard.EventMessage, `{}`)}, Published: pub.Published}); err != nil {
		t.Fatal(err)
	}
	if err := a.AppendEvents(ctx, pub.Published, ev("s", 2, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, a)
	before := snapshot(t, a, "s")

	expire(t, b, SessionLease("s"))
	lb := take(t, b, SessionLease("s"))
	b.Fence("s", lb.Epoch)

	// r0 still believes it runs s.
	if err := a.AppendEvents(ctx, pub.Published, ev("s", 3, switchboard.EventDelta, `{"stale":true}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Flush after a stale event = %v, want ErrLeaseLost", err)
	}
	if refused := pub.Calls(); len(refused) != 3 || !errors.Is(refused[2].Err, ErrLeaseLost) {
		t.Errorf("the stale event's publisher was told %+v, want ErrLeaseLost", refused)
	}
	_, err := a.WriteTurn(ctx, "s", switchboard.TurnWrite{ClientID: "c", Messages: []switchboard.Message{user("stale")},
		Events: []switchboard.Event{ev("s", 3, switchboard.EventMessage, `{}`)}, EndTurn: true, Usage: switchboard.Usage{TotalTokens: 5}})
	if !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a stale WriteTurn = %v, want ErrLeaseLost", err)
	}
	if after := snapshot(t, a, "s"); after != before {
		t.Errorf("the stale holder's writes were stored:\nbefore %s\nafter  %s", before, after)
	}
	// Writes any replica may make are not fenced.
	if _, _, err := a.AcceptInput(ctx, "s", "k", switchboard.Input{Text: "for whoever runs s"}); err != nil {
		t.Errorf("AcceptInput on the replica without the lease: %v", err)
	}
	// The new holder goes on where r0's stored history ends.
	if _, err := b.WriteTurn(ctx, "s", switchboard.TurnWrite{Messages: []switchboard.Message{user("new")},
		Events: []switchboard.Event{ev("s", 3, switchboard.EventMessage, `{"new":true}`)}, EndTurn: true}); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	if got := stored(t, b, "s"); got[3] != `{"new":true}` {
		t.Errorf("events %v", got)
	}
	// Unfenced, or never fenced: refused the same way.
	b.Unfence("s")
	if _, err := b.WriteTurn(ctx, "s", switchboard.TurnWrite{Messages: []switchboard.Message{user("x")}}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a write after Unfence = %v, want ErrLeaseLost", err)
	}
	newSession(t, a, "other", "")
	if _, err := a.WriteTurn(ctx, "other", switchboard.TurnWrite{Messages: []switchboard.Message{user("x")}}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a write never fenced = %v, want ErrLeaseLost", err)
	}
	// A single gateway fences nothing.
	single := openOn(t, pg.DSN(dbName(t, a)))
	if _, err := single.WriteTurn(ctx, "other", switchboard.TurnWrite{Messages: []switchboard.Message{user("x")}}); err != nil {
		t.Errorf("a write without WithReplica: %v", err)
	}
}

// dbName is the name of the database db is on.
func dbName(t *testing.T, db *DB) string {
	t.Helper()
	return db.pool.Config().ConnConfig.Database
}

// A fenced write in flight holds its lease's row: a takeover waits for
// it to commit, and what the write stored is there for the new holder.
func TestTakeoverWaitsForTheWriteInFlight(t *testing.T) {
	ctx := context.Background()
	dsn := pg.NewDatabase(t)
	hold, entered, release := holdCommit()
	t.Cleanup(release)
	a := openOn(t, dsn, WithReplica("r0"), hold)
	b := openOn(t, dsn, WithReplica("r1"))
	la := take(t, a, SessionLease("s"))
	a.Fence("s", la.Epoch)
	// Expired already (nobody took it: still r0's), so that r1 may take it.
	expire(t, a, SessionLease("s"))
	var pub recorder
	if err := a.AppendEvents(ctx, pub.Published, ev("s", 1, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	<-entered // r0's write is in flight: fenced, stored, not committed
	taken := make(chan Lease, 1)
	go func() {
		l, err := b.AcquireLease(ctx, SessionLease("s"), time.Minute)
		if err != nil {
			t.Error(err)
		}
		taken <- l
	}()
	// Wait until the takeover waits on the row's lock.
	deadline := time.Now().Add(10 * time.Second)
	for count(t, b, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO leases%'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the takeover never waited for the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case l := <-taken:
		t.Fatalf("the takeover did not wait for the write in flight: %+v", l)
	default:
	}
	release()
	l := <-taken
	if l.Holder != "r1" || l.Epoch != 2 {
		t.Fatalf("takeover = %+v", l)
	}
	flush(t, a)
	if got := pub.Seqs(true); fmt.Sprint(got) != "[1]" {
		t.Errorf("the write in flight: published %v, refused %v; want it stored", got, pub.Calls())
	}
	if last, _ := b.LastSeq(ctx, "s"); last != 1 {
		t.Errorf("the new holder sees LastSeq %d, want 1", last)
	}
	// r0's next write is after the takeover: refused.
	if err := a.AppendEvents(ctx, pub.Published, ev("s", 2, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("r0's write after the takeover: %v, want ErrLeaseLost", err)
	}
}

// notes collects what Listen delivers.
type notes struct {
	mu  sync.Mutex
	got []Note
	ch  chan struct{}
}

func (n *notes) add(note Note) {
	n.mu.Lock()
	n.got = append(n.got, note)
	n.mu.Unlock()
	select {
	case n.ch <- struct{}{}:
	default:
	}
}

// wait waits until a note that match accepts has come, and returns the
// notes so far.
func (n *notes) wait(t *testing.T, what string, match func(Note) bool) []Note {
	t.Helper()
	return n.waitN(t, what, 1, match)
}

// waitN waits until k notes that match accepts have come, and returns the
// notes so far.
func (n *notes) waitN(t *testing.T, what string, k int, match func(Note) bool) []Note {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		n.mu.Lock()
		got := append([]Note(nil), n.got...)
		n.mu.Unlock()
		matched := 0
		for _, note := range got {
			if match(note) {
				matched++
			}
		}
		if matched >= k {
			return got
		}
		select {
		case <-n.ch:
		case <-deadline:
			t.Fatalf("no %s among %+v", what, got)
		}
	}
}

// listening waits until a connection listens on the database.
func listening(t *testing.T, db *DB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for count(t, db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN switchboard' AND state = 'idle'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("nobody listens")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Another replica hears of stored events and accepted inputs; after its
// listening connection is killed it reconnects, says "resync", and hears
// what comes next.
func TestListenHearsOtherReplicasAndResyncs(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), nil))
	dsn := pg.NewDatabase(t)
	a := openOn(t, dsn, WithReplica("r0"))
	b := openOn(t, dsn, WithReplica("r1"), WithLogger(logger))
	newSession(t, a, "s", "")
	la := take(t, a, SessionLease("s"))
	a.Fence("s", la.Epoch)

	got := &notes{ch: make(chan struct{}, 1)}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Listen(lctx, got.add) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Listen = %v when its ctx ended, want nil", err)
		}
	}()
	listening(t, b)
	// Once listening, a resync first: what was committed before LISTEN
	// took effect was heard by no one.
	if first := got.wait(t, "the resync on listening", func(n Note) bool { return n.Kind == NoteResync }); first[0].Kind != NoteResync {
		t.Errorf("notes %+v: want a resync first", first)
	}

	if err := a.AppendEvents(ctx, nil, ev("s", 1, switchboard.EventDelta, `{}`), ev("s", 2, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, a)
	got.wait(t, "events of s through 2", func(n Note) bool { return n == Note{Kind: NoteEvents, Session: "s", Seq: 2} })
	id, _, err := a.AcceptInput(ctx, "s", "", switchboard.Input{Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	got.wait(t, "the input", func(n Note) bool { return n == Note{Kind: NoteInput, Session: "s", InboxID: id} })
	// A refused write notifies nobody.
	if err := a.AppendEvents(ctx, nil, ev("s", 9, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	_ = a.Flush(ctx)

	sql(t, a, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN switchboard'`)
	all := got.waitN(t, "a resync after the reconnection", 2, func(n Note) bool { return n.Kind == NoteResync })
	for _, n := range all {
		if n.Seq == 9 {
			t.Errorf("a refused write was notified: %+v", n)
		}
	}
	listening(t, b)
	if err := a.AppendEvents(ctx, nil, ev("s", 3, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, a)
	all = got.wait(t, "events of s through 3", func(n Note) bool { return n == Note{Kind: NoteEvents, Session: "s", Seq: 3} })
	if last := all[len(all)-1]; last.Seq != 3 || all[len(all)-2].Kind != NoteResync {
		t.Errorf("notes %+v: want the resync, then s through 3", all)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "check that the database server runs") {
		t.Errorf("the lost connection was not logged as an ERROR with what to check:\n%s", logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Listen ends with ErrClosed when the store is closed.
func TestListenEndsWhenTheStoreCloses(t *testing.T) {
	db, err := Open(context.Background(), pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- db.Listen(context.Background(), func(Note) {}) }()
	listening(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Listen after Close = %v, want ErrClosed", err)
	}
}

// Payloads stay far below PostgreSQL's 8000 bytes; one that would not is
// sent as a resync.
func TestPayloadSizes(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef" // the gateway's ids are shorter
	for _, n := range []Note{
		{Kind: NoteEvents, Session: id, Seq: 1<<63 - 1},
		{Kind: NoteInput, Session: id, InboxID: 1<<63 - 1},
	} {
		p := payload(n)
		if len(p) > 120 {
			t.Errorf("payload %s is %d bytes", p, len(p))
		}
		if got := parseNote(p); got != n {
			t.Errorf("%+v read back as %+v", n, got)
		}
	}
	head := inputPayloadHead(id)
	if p := head + "9223372036854775807" + inputPayloadTail; len(p) > 120 ||
		parseNote(p) != (Note{Kind: NoteInput, Session: id, InboxID: 1<<63 - 1}) {
		t.Errorf("input payload %s", p)
	}
	long := strings.Repeat("x", 8000)
	if p := payload(Note{Kind: NoteEvents, Session: long, Seq: 1}); len(p) > maxPayload || parseNote(p).Kind != NoteResync {
		t.Errorf("an oversized payload: %d bytes, %+v", len(p), parseNote(p))
	}
	if p := inputPayloadHead(long) + "1" + inputPayloadTail; len(p) > maxPayload || parseNote(p).Kind != NoteResync {
		t.Errorf("an oversized input payload: %d bytes", len(p))
	}
	if parseNote("garbage").Kind != NoteResync {
		t.Error("a payload that is not a note is not a resync")
	}
}

// Replicas lists those whose heartbeat is recent; Close forgets one and
// gives up its leases.
func TestHeartbeatAndReplicas(t *testing.T) {
	ctx := context.Background()
	dsn := pg.NewDatabase(t)
	a := openOn(t, dsn, WithReplica("r0"))
	b, err := Open(ctx, dsn, WithReplica("r1"))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(within time.Duration) string {
		t.Helper()
		rs, err := a.Replicas(ctx, within)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			if r.Host == "" || r.Started.IsZero() || r.Seen.Before(r.Started) {
				t.Errorf("replica %+v", r)
			}
			out = append(out, r.ID)
		}
		return fmt.Sprint(out)
	}
	if got := ids(time.Minute); got != "[r0 r1]" {
		t.Errorf("Replicas = %s", got)
	}
	sql(t, a, `UPDATE replicas SET seen_at = seen_at - 120000 WHERE id = 'r1'`)
	if got := ids(time.Minute); got != "[r0]" {
		t.Errorf("Replicas with r1 silent for two minutes = %s", got)
	}
	if err := b.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(time.Minute); got != "[r0 r1]" {
		t.Errorf("Replicas after r1's heartbeat = %s", got)
	}
	if _, err := b.AcquireLease(ctx, "session:s", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ids(time.Hour); got != "[r0]" {
		t.Errorf("Replicas after r1 closed = %s", got)
	}
	// r1's leases went with it: taken over at once, at a new epoch.
	if l, err := a.AcquireLease(ctx, "session:s", time.Minute); err != nil || l.Epoch != 2 {
		t.Errorf("r1's lease after it closed: %+v, %v", l, err)
	}
}

// Orphans are the unfinished sessions nobody holds.
func TestOrphans(t *testing.T) {
	ctx := context.Background()
	dbs := replicas(t, 2)
	a := dbs[0]
	for _, id := range []string{"held", "free", "expired", "done"} {
		newSession(t, a, id, "")
	}
	for _, id := range []string{"held", "free", "expired"} {
		if _, _, err := a.AcceptInput(ctx, id, "", switchboard.Input{Text: "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	take(t, a, SessionLease("held"))
	take(t, a, SessionLease("expired"))
	take(t, a, SessionLease("done"))
	expire(t, a, SessionLease("expired"))
	got, err := dbs[1].Orphans(ctx)
	if err != nil || fmt.Sprint(got) != "[expired free]" {
		t.Errorf("Orphans = %v, %v; want [expired free]", got, err)
	}
}

// A batch of writes and a renewal lock the lease rows they need in the
// order of their names, each before it locks any other: neither holds a
// row while it waits for one the other holds, so they never deadlock.
// (They did: a batch locked its fences in the order of its parts, and a
// replica busy writing had its renewals failed by PostgreSQL's deadlock
// detection within seconds, and now and then a batch of its writes.)
func TestWritesAndRenewalsLockInOrder(t *testing.T) {
	ctx := context.Background()
	db := replicas(t, 1)[0]
	// b is created first: a scan in the table's order meets it first.
	for _, id := range []string{"b", "a"} {
		l := take(t, db, SessionLease(id))
		db.Fence(id, l.Epoch)
	}
	blocker, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx)
	if _, err := blocker.Exec(ctx, `SELECT 1 FROM leases WHERE name = 'session:a' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// Whoever waits for session:a (the waiting'th to) must not hold
	// session:b meanwhile.
	waitsHoldingNothing := func(what string, waiting int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for count(t, db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) < waiting {
			if time.Now().After(deadline) {
				t.Fatalf("%s never waited for the lock on session:a", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
		tx, err := db.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SELECT 1 FROM leases WHERE name = 'session:b' FOR UPDATE NOWAIT`); err != nil {
			t.Errorf("%s holds session:b while it waits for session:a: %v", what, err)
		}
	}

	// A batch with b's events queued before a's.
	if err := db.AppendEvents(ctx, nil, ev("b", 1, switchboard.EventDelta, `{}`), ev("a", 1, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- db.Flush(ctx) }()
	waitsHoldingNothing("a batch of writes", 1)

	renewed := make(chan error, 1)
	go func() {
		_, err := db.RenewLeases(ctx, time.Minute, []string{SessionLease("b"), SessionLease("a")})
		renewed <- err
	}()
	waitsHoldingNothing("a renewal", 2)

	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-flushed; err != nil {
		t.Errorf("the batch: %v", err)
	}
	if err := <-renewed; err != nil {
		t.Errorf("the renewal: %v", err)
	}

	// And under load: writes to many conversations in every order, and
	// renewals of them all, side by side.
	var ids, names []string
	for i := range 30 {
		id := fmt.Sprintf("s%02d", i)
		l := take(t, db, SessionLease(id))
		db.Fence(id, l.Epoch)
		ids, names = append(ids, id), append(names, SessionLease(id))
	}
	stop := make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		seq := map[string]int64{}
		for k := 0; ; k++ {
			select {
			case <-stop:
				wrote <- nil
				return
			default:
			}
			for j := range ids {
				id := ids[(j*7+k)%len(ids)]
				seq[id]++
				if err := db.AppendEvents(ctx, nil, ev(id, seq[id], switchboard.EventDelta, `{}`)); err != nil {
					wrote <- err
					return
				}
			}
			if err := db.Flush(ctx); err != nil {
				wrote <- err
				return
			}
		}
	}()
	deadline := time.Now().Add(time.Second)
	for n := 0; n < 200 && time.Now().Before(deadline); n++ {
		if _, err := db.RenewLeases(ctx, time.Minute, names); err != nil {
			t.Errorf("renewal %d during the writes: %v", n+1, err)
			break
		}
	}
	close(stop)
	if err := <-wrote; err != nil {
		t.Errorf("the writes during the renewals: %v", err)
	}
}

// Replicas add to the running totals in rows of their own (a shard each,
// by their id), so that they never wait for each other's commits to add
// to the overall totals every turn adds to; a total read on any replica
// sums them all.
func TestReplicasAddToTheirOwnTallyRows(t *testing.T) {
	dbs := replicas(t, 3)
	shards := map[int16]bool{}
	for _, db := range dbs {
		shards[tallyShard(db.replica)] = true
	}
	if len(shards) < 2 {
		t.Fatalf("replicas r0, r1 and r2 all in one shard: pick other ids")
	}
	ctx := context.Background()
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for i, db := range dbs {
		id := fmt.Sprintf("s%d", i)
		newSession(t, db, id, "")
		db.Fence(id, take(t, db, SessionLease(id)).Epoch)
		c := &switchboard.Charge{Guide: "support", Model: "m", Person: "web:ann", Channel: "web", At: at,
			Usage: switchboard.Usage{PromptTokens: 100, CompletionTokens: 100 * i, TotalTokens: 100 + 100*i}, CostUSD: 0.25, Priced: true}
		if _, err := db.WriteTurn(ctx, id, switchboard.TurnWrite{EndTurn: true, Usage: c.Usage, Charge: c}); err != nil {
			t.Fatal(err)
		}
	}
	var rows int
	if err := dbs[0].pool.QueryRow(ctx, `SELECT count(*) FROM tallies WHERE scope = 'overall' AND period = 'all'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != len(shards) {
		t.Errorf("the all-time total is kept in %d rows, want one a shard written to (%d)", rows, len(shards))
	}
	for _, db := range dbs {
		got, err := db.Tally(ctx, switchboard.TallyKey{Scope: switchboard.ScopePerson, Key: "web:ann", Period: switchboard.PeriodOf(switchboard.PeriodDay, at)})
		if err != nil {
			t.Fatal(err)
		}
		if got.Tokens != 100+200+300 || got.CostUSD != 0.75 {
			t.Errorf("read on %s: %+v, want 600 tokens and $0.75", db.replica, got)
		}
	}
}
