package postgres

// Leases and fencing: which replica runs which conversation, and the
// guarantee that a replica that lost a conversation cannot write into it.
//
// A lease is a row of the leases table: a name ("session:"+id for a
// conversation), its holder (a replica id, see WithReplica), an epoch and
// an expiry in the database's clock. A replica takes a lease that is free,
// expired, or its own (AcquireLease), renews what it holds well before the
// ttl runs out (RenewLeases), and gives up what it stops running
// (ReleaseLease).
//
// The epoch numbers the holdings of a lease: it grows by one whenever the
// lease is taken anew, by another replica or by the same one after its
// holding expired or was released. A fresh acquisition by the same holder
// counts as a new holding because the holder cannot know what its earlier
// holding still has in flight: a runner that stalled past the ttl (a long
// pause, a partition) may still be writing, and only a new epoch fences it
// out. Renewing, or acquiring a lease one holds unexpired, keeps the
// epoch.
//
// Fencing: Fence records, in this process, the epoch under which it runs a
// conversation. Every write the conversation's runner makes (AppendEvents'
// events, WriteTurn) carries that epoch, and the transaction that stores
// it first checks, with switchboard_fence, that the lease row still has
// this holder and epoch, locking the row FOR SHARE. So:
//
//   - a write queued before a takeover and committed after it is refused
//     with ErrLeaseLost, and nothing of it is stored;
//   - a takeover (which updates the row) waits for a write in flight to
//     commit, so the new holder, once it has the lease, reads everything
//     the old one stored;
//   - the check is the row's holder and epoch, not its expiry: a lease
//     that expired but that nobody took is still the holder's (nobody else
//     can have written), and renewing it is safe.
//
// The clock: expiry is computed and compared in SQL with the database's
// clock only, so replicas' clocks may disagree.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-gw/switchboard"
)

// ErrLeaseHeld is returned (wrapped, in a *LeaseHeldError) by
// AcquireLease when another replica holds the lease unexpired.
var ErrLeaseHeld = errors.New("the lease is held by another replica")

// ErrLeaseLost is returned (wrapped) for a fenced write whose lease this
// replica no longer holds at the epoch it was made under, or never held:
// nothing of it is stored. It is the domain's, which the sessions test for.
var ErrLeaseLost = switchboard.ErrLeaseLost

// LeaseHeldError says who holds a lease and until when.
type LeaseHeldError struct {
	Name    string
	Holder  string
	Expires time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("lease %s is held by %s until %s", e.Name, e.Holder, e.Expires.Format(time.RFC3339Nano))
}

// Unwrap makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// Lease is a lease as the database has it.
type Lease struct {
	Name    string
	Holder  string
	Epoch   int64
	Expires time.Time // in the database's clock
}

// SessionLease is the name of the lease on a conversation, the one its
// writes are fenced with.
func SessionLease(sessionID string) string { return "session:" + sessionID }

// errNoReplica is what the lease calls of a store without WithReplica get.
var errNoReplica = errors.New("the store was opened without WithReplica: it holds no leases")

func ttlMillis(ttl time.Duration) int64 { return max(ttl.Milliseconds(), 1) }

// acquire takes the lease in one statement: a new row at epoch 1, or the
// row if it is ours or expired; the epoch stays only for a holding of ours
// that has not expired.
const acquire = `WITH now AS (SELECT ` + nowMillis + ` AS ms)
	INSERT INTO leases AS l (name, holder, epoch, expires_at)
	SELECT $1, $2, 1, now.ms + $3 FROM now
	ON CONFLICT (name) DO UPDATE SET
		holder = excluded.holder,
		epoch = CASE WHEN l.holder = excluded.holder AND l.expires_at > excluded.expires_at - $3
			THEN l.epoch ELSE l.epoch + 1 END,
		expires_at = excluded.expires_at
	WHERE l.holder = excluded.holder OR l.expires_at <= excluded.expires_at - $3
	RETURNING name, holder, epoch, expires_at`

// AcquireLease takes the lease name for this replica for ttl if it is
// free, expired, or already this replica's (then it is renewed, keeping
// its epoch unless it had expired). When another replica holds it
// unexpired, the error is a *LeaseHeldError (errors.Is ErrLeaseHeld). It
// waits for a fenced write in flight under the lease to commit.
func (db *DB) AcquireLease(ctx context.Context, name string, ttl time.Duration) (Lease, error) {
	if db.replica == "" {
		return Lease{}, fmt.Errorf("postgres: acquire lease %s: %w", name, errNoReplica)
	}
	for range 3 {
		l, err := scanLease(db.pool.QueryRow(ctx, acquire, name, db.replica, ttlMillis(ttl)))
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Lease{}, fmt.Errorf("postgres: acquire lease %s: %w", name, err)
		}
		// Held by another: say by whom. It may have been released since,
		// which is worth another try.
		var (
			held    LeaseHeldError
			expires int64
			free    bool
		)
		err = db.pool.QueryRow(ctx, `SELECT holder, expires_at, expires_at <= `+nowMillis+` FROM leases WHERE name = $1`, name).
			Scan(&held.Holder, &expires, &free)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return Lease{}, fmt.Errorf("postgres: acquire lease %s: %w", name, err)
		}
		if err == nil && !free {
			held.Name, held.Expires = name, fromMillis(expires)
			return Lease{}, fmt.Errorf("postgres: acquire lease: %w", &held)
		}
	}
	return Lease{}, fmt.Errorf("postgres: acquire lease %s: it changed hands three times while asked for", name)
}

// RenewLeases extends, in one statement, the leases named that this
// replica holds to ttl from now, and returns them: a lease named but
// missing from the list is lost (taken by another replica, or deleted
// with its conversation). It renews an expired lease that nobody took,
// which is still this replica's (see the fencing rules above), keeping its
// epoch. A lease this replica's id holds but that is not named is left to
// run out: one a process before it held under the same id (a replica
// restarted with storage.replica set), or one it failed to release, is
// not run here, and the others take it over once it has expired. With no
// names it still asks the database: a replica running nothing learns as
// well that it is unreachable (its readiness).
func (db *DB) RenewLeases(ctx context.Context, ttl time.Duration, names []string) ([]Lease, error) {
	if db.replica == "" {
		return nil, fmt.Errorf("postgres: renew leases: %w", errNoReplica)
	}
	// The rows are locked in the order of their names, as a batch of
	// writes locks its fences (lockFences), so that the two never
	// deadlock.
	return db.leases(ctx, "renew leases", `UPDATE leases l SET expires_at = `+nowMillis+` + $2
		FROM (SELECT name FROM leases WHERE holder = $1 AND name = ANY($3) ORDER BY name FOR UPDATE) mine
		WHERE l.name = mine.name RETURNING l.name, l.holder, l.epoch, l.expires_at`, db.replica, ttlMillis(ttl), names)
}

// ReleaseLease gives up the lease name if this replica holds it (a lease
// held by another is not touched). The row stays, expired, with its
// holder and epoch: the next acquisition, whoever makes it, starts a new
// epoch, so no write of this holding can be taken for one of a later one.
// Unfence the conversation before releasing its lease.
func (db *DB) ReleaseLease(ctx context.Context, name string) error {
	if db.replica == "" {
		return fmt.Errorf("postgres: release lease %s: %w", name, errNoReplica)
	}
	if _, err := db.pool.Exec(ctx, `UPDATE leases SET expires_at = 0 WHERE name = $1 AND holder = $2`, name, db.replica); err != nil {
		return fmt.Errorf("postgres: release lease %s: %w", name, err)
	}
	return nil
}

// Leases lists the leases whose names start with prefix, by name, whoever
// holds them and expired or not: for gateway doctor and tests.
func (db *DB) Leases(ctx context.Context, prefix string) ([]Lease, error) {
	return db.leases(ctx, "leases", `SELECT name, holder, epoch, expires_at FROM leases
		WHERE starts_with(name, $1) ORDER BY name COLLATE "C"`, prefix)
}

// leases reads the leases query returns (name, holder, epoch, expires_at).
func (db *DB) leases(ctx context.Context, op, query string, args ...any) ([]Lease, error) {
	rows, err := db.pool.Query(ctx, query, args...)
	var ls []Lease
	if err == nil {
		ls, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Lease, error) { return scanLease(row) })
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	return ls, nil
}

func scanLease(row pgx.Row) (Lease, error) {
	var (
		l       Lease
		expires int64
	)
	err := row.Scan(&l.Name, &l.Holder, &l.Epoch, &expires)
	l.Expires = fromMillis(expires)
	return l, err
}

// Fence records that this replica runs the conversation sessionID under
// its lease's epoch: the conversation's writes from now on carry it (see
// above). Call it once AcquireLease has returned the lease, before the
// runner writes. Without WithReplica it does nothing.
func (db *DB) Fence(sessionID string, epoch int64) {
	if db.replica == "" {
		return
	}
	db.fenceMu.Lock()
	defer db.fenceMu.Unlock()
	db.fences[sessionID] = epoch
}

// Unfence forgets the conversation's lease: its writes from now on are
// refused (ErrLeaseLost) until it is fenced again.
func (db *DB) Unfence(sessionID string) {
	db.fenceMu.Lock()
	defer db.fenceMu.Unlock()
	delete(db.fences, sessionID)
}

// fenceOf is the epoch a write of sessionID is made under now, 0 for none.
func (db *DB) fenceOf(sessionID string) int64 {
	if db.replica == "" {
		return 0
	}
	db.fenceMu.Lock()
	defer db.fenceMu.Unlock()
	return db.fences[sessionID]
}
