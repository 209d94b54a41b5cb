// Package cluster runs the gateway as one of several replicas on one
// PostgreSQL database (docs/architecture.md, "Replicas"). It implements
// sessions.Cluster on the store's leases and keeps them:
//
//   - Claim takes a conversation's lease ("session:<id>") and fences the
//     store's writes for it with the lease's epoch, so that once another
//     replica has taken it over, the database refuses this one's writes
//     whatever this one believes;
//   - Run renews the leases this replica holds every third of the lease
//     time, in one statement, and tells the sessions of each it lost;
//     looks, every quarter of it, for conversations with work left whose
//     lease ran out (a replica died) and takes them over; and passes on
//     the database's notifications: events stored (a mirror shows them),
//     input forwarded (the owner takes it up), and a resync after the
//     notifications' connection dropped;
//   - a singleton role (the Discord Gateway connection) is a lease too:
//     Leader.
//
// A replica that cannot reach the database cannot renew: once the lease
// time has passed since its last renewal, it stops running every session
// (the others take them over), as it would be told anyway by the first
// write the database refuses.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/storage/postgres"
)

// Store is what the cluster needs of the database; *postgres.DB opened
// WithReplica implements it.
type Store interface {
	AcquireLease(ctx context.Context, name string, ttl time.Duration) (postgres.Lease, error)
	RenewLeases(ctx context.Context, ttl time.Duration, names []string) ([]postgres.Lease, error)
	ReleaseLease(ctx context.Context, name string) error
	Fence(sessionID string, epoch int64)
	Unfence(sessionID string)
	Listen(ctx context.Context, fn func(postgres.Note)) error
	Orphans(ctx context.Context) ([]string, error)
	Heartbeat(ctx context.Context) error
}

// Sessions is what the cluster tells; *sessions.Manager implements it.
type Sessions interface {
	StoredElsewhere(sessionID string)
	InputElsewhere(sessionID string)
	BoundElsewhere(sessionID string)
	MembersElsewhere(sessionID string)
	Lost(sessionID string)
	TakeOver(ctx context.Context, sessionID string) (bool, error)
	Resync()
}

// Metrics is what the cluster counts; nil counts nothing.
type Metrics interface {
	// LeasesLost counts conversations this replica stopped running
	// because another took them over.
	LeasesLost(n int)
	// TakenOver counts conversations taken over from a replica gone.
	TakenOver(n int)
}

// Config wires a Cluster.
type Config struct {
	Store Store
	// Lease is how long a lease lasts unrenewed (storage.lease).
	Lease   time.Duration
	Logger  *slog.Logger
	Metrics Metrics
	// Down and Up report the database's reachability for leases to the
	// gateway's health (/readyz); nil: not reported.
	Down func(reason, fix string)
	Up   func()
}

// LiveWithin is how recently a replica must have been heard of (its
// heartbeat, stored with every renewal, every third of the lease time) to
// count as live: three lease times, so nine heartbeats missed in a row.
// gateway doctor and switchboard_replicas_live count by it.
func LiveWithin(lease time.Duration) time.Duration { return 3 * lease }

// Cluster keeps this replica's leases. It is safe for concurrent use.
type Cluster struct {
	cfg Config

	mu sync.Mutex
	// held: the sessions this replica runs, each with the number of its
	// claim, so that a renewal judges only the claims it asked the
	// database about: one made while the renewal was under way is not
	// among the leases it renewed, and is not lost for that.
	held   map[string]uint64
	claims uint64
	// renewed is when the leases were last renewed; failed, when a
	// renewal last failed and was logged as an ERROR (zero: the last one
	// worked). While the database is down the ERROR is repeated once a
	// minute, not at every renewal.
	renewed time.Time
	failed  time.Time
}

// New returns a Cluster; Run keeps its leases.
func New(cfg Config) *Cluster {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Cluster{cfg: cfg, held: map[string]uint64{}, renewed: time.Now()}
}

// Claim takes session id's lease for this replica (sessions.Cluster).
func (c *Cluster) Claim(ctx context.Context, sessionID string) error {
	l, err := c.cfg.Store.AcquireLease(ctx, postgres.SessionLease(sessionID), c.cfg.Lease)
	switch {
	case errors.Is(err, postgres.ErrLeaseHeld):
		return fmt.Errorf("%w: %w", sessions.ErrElsewhere, err)
	case err != nil:
		return fmt.Errorf("cluster: claim %s: %w", sessionID, err)
	}
	c.cfg.Store.Fence(sessionID, l.Epoch)
	c.mu.Lock()
	c.claims++
	c.held[sessionID] = c.claims
	c.mu.Unlock()
	return nil
}

// Release gives session id's lease up (sessions.Cluster).
func (c *Cluster) Release(ctx context.Context, sessionID string) {
	c.mu.Lock()
	_, ok := c.held[sessionID]
	delete(c.held, sessionID)
	c.mu.Unlock()
	if !ok {
		return
	}
	c.cfg.Store.Unfence(sessionID)
	if err := c.cfg.Store.ReleaseLease(ctx, postgres.SessionLease(sessionID)); err != nil {
		// It runs out by itself: the others wait a lease time longer.
		c.cfg.Logger.Warn("cluster: lease not given up; it runs out by itself", "session", sessionID, "err", err)
	}
}

// TookOver counts a conversation whose work another replica left, taken
// up here (sessions.Cluster).
func (c *Cluster) TookOver(sessionID string) {
	c.cfg.Logger.Info("cluster: conversation taken over from another replica", "session", sessionID)
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.TakenOver(1)
	}
}

// Held is how many conversations this replica runs.
func (c *Cluster) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

// Run keeps the leases, takes over what replicas gone left, and passes the
// database's notifications to s, until ctx ends.
func (c *Cluster) Run(ctx context.Context, s Sessions) {
	var wg sync.WaitGroup
	wg.Go(func() { c.listen(ctx, s) })
	wg.Go(func() { c.keep(ctx, s) })
	wg.Go(func() { c.adopt(ctx, s) })
	wg.Wait()
}

// listen passes notifications on; Listen reconnects by itself.
func (c *Cluster) listen(ctx context.Context, s Sessions) {
	err := c.cfg.Store.Listen(ctx, func(n postgres.Note) {
		switch n.Kind {
		case postgres.NoteEvents:
			s.StoredElsewhere(n.Session)
		case postgres.NoteInput:
			s.InputElsewhere(n.Session)
		case postgres.NoteBound:
			s.BoundElsewhere(n.Session)
		case postgres.NoteMembers:
			s.MembersElsewhere(n.Session)
		case postgres.NoteResync:
			s.Resync()
		}
	})
	if err != nil && ctx.Err() == nil {
		c.cfg.Logger.Error("cluster: notifications stopped: mirrors show other replicas' events only when a person acts", "err", err)
	}
}

// keep renews the leases every third of the lease time and tells s of
// those lost.
func (c *Cluster) keep(ctx context.Context, s Sessions) {
	t := time.NewTicker(c.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.renew(ctx, s)
	}
}

// renew renews every lease held and lets go of those not renewed.
func (c *Cluster) renew(ctx context.Context, s Sessions) {
	// Only the leases of the sessions run here: a lease the database
	// says is this replica's id's but that no session here runs (a
	// predecessor's under the same id, one not given up) must run out,
	// or nobody would ever take its conversation over.
	c.mu.Lock()
	asked := maps.Clone(c.held)
	c.mu.Unlock()
	names := make([]string, 0, len(asked))
	for id := range asked {
		names = append(names, postgres.SessionLease(id))
	}
	if err := c.cfg.Store.Heartbeat(ctx); err != nil && ctx.Err() == nil {
		c.cfg.Logger.Warn("cluster: heartbeat not stored", "err", err)
	}
	leases, err := c.cfg.Store.RenewLeases(ctx, c.cfg.Lease, names)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		since := time.Since(c.renewed)
		c.mu.Unlock()
		c.cfg.Logger.Log(ctx, c.downLevel(), "cluster: leases not renewed: is the database reachable? The conversations this replica runs move to the others once the lease runs out",
			"err", err, "since_last_renewal", since.Round(time.Millisecond), "lease", c.cfg.Lease)
		if c.cfg.Down != nil {
			c.cfg.Down("the leases of its conversations cannot be renewed: "+err.Error(), "check that PostgreSQL (storage.dsn) is up and reachable from this machine")
		}
		if since >= c.cfg.Lease {
			c.loseOf(s, asked, nil)
		}
		return
	}
	if c.cfg.Up != nil {
		c.cfg.Up()
	}
	c.mu.Lock()
	if !c.failed.IsZero() {
		c.cfg.Logger.Info("cluster: leases renewed again", "down_for", time.Since(c.renewed).Round(time.Millisecond))
		c.failed = time.Time{}
	}
	c.mu.Unlock()
	kept := make(map[string]bool, len(leases))
	for _, l := range leases {
		if id, ok := strings.CutPrefix(l.Name, postgres.SessionLease("")); ok {
			kept[id] = true
		}
	}
	c.mu.Lock()
	c.renewed = time.Now()
	c.mu.Unlock()
	c.loseOf(s, asked, kept)
}

// downLevel is the level of a line saying the database failed this
// replica again: ERROR once a minute while it stays down, DEBUG between,
// so that an outage pages once a minute and not at every try.
func (c *Cluster) downLevel() slog.Level {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed.IsZero() || time.Since(c.failed) >= time.Minute {
		c.failed = time.Now()
		return slog.LevelError
	}
	return slog.LevelDebug
}

// loseOf lets go of the sessions a renewal asked for (with their claims)
// that it did not keep, unless claimed again since.
func (c *Cluster) loseOf(s Sessions, asked map[string]uint64, kept map[string]bool) {
	c.mu.Lock()
	var lost []string
	for id, claim := range asked {
		if held, ok := c.held[id]; ok && held == claim && !kept[id] {
			lost = append(lost, id)
			delete(c.held, id)
		}
	}
	c.mu.Unlock()
	c.lose(s, lost)
}

func (c *Cluster) lose(s Sessions, lost []string) {
	if len(lost) == 0 {
		return
	}
	c.cfg.Logger.Warn("cluster: conversations taken over by other replicas", "sessions", len(lost))
	for _, id := range lost {
		c.cfg.Store.Unfence(id)
		s.Lost(id)
	}
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.LeasesLost(len(lost))
	}
}

// adopt takes over, every quarter of the lease time, the conversations
// with work left whose replica is gone.
func (c *Cluster) adopt(ctx context.Context, s Sessions) {
	t := time.NewTicker(c.cfg.Lease / 4)
	defer t.Stop()
	for {
		ids, err := c.cfg.Store.Orphans(ctx)
		if err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("cluster: conversations left by replicas gone not listed", "err", err)
		}
		taken := 0
		for _, id := range ids {
			ok, err := s.TakeOver(ctx, id)
			if err != nil {
				if ctx.Err() == nil {
					c.cfg.Logger.Error("cluster: conversation left by a replica gone not taken over", "session", id, "err", err)
				}
				continue
			}
			if ok {
				taken++
			}
		}
		if taken > 0 {
			c.cfg.Logger.Info("cluster: conversations taken over from replicas gone", "sessions", taken)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Lead runs lead while this replica holds the lease of a role only one
// replica may have at a time (the Discord bot's Gateway connection:
// "discord"), until ctx ends. The replica that holds it renews it every
// third of the lease time; lead's context ends when it is lost (the
// database unreachable for a lease time, or this replica paused), and the
// replica tries again. A replica that does not hold it tries every
// quarter of the lease time, so a dead leader's role moves within about
// a lease time and a quarter.
func (c *Cluster) Lead(ctx context.Context, role string, lead func(ctx context.Context)) {
	name := "role:" + role
	try := time.NewTicker(c.cfg.Lease / 4)
	defer try.Stop()
	for {
		l, err := c.cfg.Store.AcquireLease(ctx, name, c.cfg.Lease)
		switch {
		case err == nil:
			c.cfg.Logger.Info("cluster: this replica holds the role", "role", role, "epoch", l.Epoch)
			c.hold(ctx, name, l, lead)
			c.cfg.Logger.Info("cluster: this replica gave the role up", "role", role)
			if ctx.Err() == nil {
				release, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = c.cfg.Store.ReleaseLease(release, name)
				cancel()
			}
		case errors.Is(err, postgres.ErrLeaseHeld):
		case ctx.Err() == nil:
			c.cfg.Logger.Log(ctx, c.downLevel(), "cluster: role's lease not read: is the database reachable?", "role", role, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-try.C:
		}
	}
}

// hold runs lead while the lease l stays this replica's.
func (c *Cluster) hold(ctx context.Context, name string, l postgres.Lease, lead func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(ctx)
	}()
	t := time.NewTicker(c.cfg.Lease / 3)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			<-done
			return
		case <-t.C:
		}
		got, err := c.cfg.Store.AcquireLease(ctx, name, c.cfg.Lease)
		switch {
		case err == nil && got.Epoch == l.Epoch:
			renewed = time.Now()
			continue
		case err == nil || errors.Is(err, postgres.ErrLeaseHeld):
			c.cfg.Logger.Warn("cluster: another replica took the role over", "role", name)
		case time.Since(renewed) < c.cfg.Lease:
			c.cfg.Logger.Log(ctx, c.downLevel(), "cluster: role's lease not renewed: is the database reachable?", "role", name, "err", err)
			continue
		default:
			c.cfg.Logger.Error("cluster: role's lease ran out unrenewed: giving the role up", "role", name, "err", err)
		}
		cancel()
		<-done
		return
	}
}
