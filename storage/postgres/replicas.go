package postgres

// The replicas table: which gateways share the database and when each was
// last heard of, in the database's clock.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Replica is a gateway sharing the database, as its heartbeats say.
type Replica struct {
	ID      string
	Host    string
	Started time.Time // when it opened the store
	Seen    time.Time // its last heartbeat
}

// register records this replica as started now (Open, WithReplica).
func (db *DB) register(ctx context.Context) error {
	_, err := db.pool.Exec(ctx, `INSERT INTO replicas (id, host, started_at, seen_at)
		SELECT $1, $2, ms, ms FROM (SELECT `+nowMillis+` AS ms) now
		ON CONFLICT (id) DO UPDATE SET host = excluded.host, started_at = excluded.started_at, seen_at = excluded.seen_at`,
		db.replica, hostname())
	if err != nil {
		return fmt.Errorf("postgres: register replica %s: %w", db.replica, err)
	}
	return nil
}

// Heartbeat records that this replica is alive, at the database's now.
func (db *DB) Heartbeat(ctx context.Context) error {
	if db.replica == "" {
		return fmt.Errorf("postgres: heartbeat: %w", errNoReplica)
	}
	_, err := db.pool.Exec(ctx, `INSERT INTO replicas (id, host, started_at, seen_at)
		SELECT $1, $2, ms, ms FROM (SELECT `+nowMillis+` AS ms) now
		ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at`, db.replica, hostname())
	if err != nil {
		return fmt.Errorf("postgres: heartbeat: %w", err)
	}
	return nil
}

// Replicas lists the replicas whose last heartbeat is within the given
// time of the database's now, by id.
func (db *DB) Replicas(ctx context.Context, within time.Duration) ([]Replica, error) {
	return readReplicas(ctx, db.pool, within)
}

// readReplicas is Replicas on pool (a store's, or an Inspector's).
func readReplicas(ctx context.Context, pool *pgxpool.Pool, within time.Duration) ([]Replica, error) {
	rows, err := pool.Query(ctx, `SELECT id, host, started_at, seen_at FROM replicas
		WHERE seen_at >= `+nowMillis+` - $1 ORDER BY id COLLATE "C"`, within.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("postgres: replicas: %w", err)
	}
	rs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Replica, error) {
		var (
			r             Replica
			started, seen int64
		)
		err := row.Scan(&r.ID, &r.Host, &started, &seen)
		r.Started, r.Seen = fromMillis(started), fromMillis(seen)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: replicas: %w", err)
	}
	return rs, nil
}

// forget removes this replica from the table and gives up every lease it
// holds, so that the others take its conversations over at once rather
// than when the leases expire (Close, once the writer has stopped: nothing
// of this replica's can be written after it).
func (db *DB) forget() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM replicas WHERE id = $1`, db.replica)
	b.Queue(`UPDATE leases SET expires_at = 0 WHERE holder = $1`, db.replica)
	if err := db.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("forget replica %s: %w", db.replica, err)
	}
	return nil
}

// Orphans returns the sessions with unfinished work (see Unfinished) whose
// conversation lease is missing or expired: what a replica should take
// over. A replica takes one with AcquireLease, which only one of them
// gets, then reads its state; one whose lease is held unexpired is being
// run.
func (db *DB) Orphans(ctx context.Context) ([]string, error) {
	ids, err := db.texts(ctx, `SELECT u.session_id FROM (`+unfinished+`) u
		LEFT JOIN leases l ON l.name = 'session:' || u.session_id
		WHERE l.name IS NULL OR l.expires_at <= `+nowMillis+`
		ORDER BY u.session_id COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("postgres: orphans: %w", err)
	}
	return ids, nil
}
