// Package sessions is the gateway's core: a Manager that owns every live
// session, gives each one an ordered input queue and its own goroutine, and
// fans the session's events out to the listeners attached to it.
//
// The agent loop — model call, tool calls, approvals, results fed back —
// is in agent.go, and reads top to bottom.
package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/tools"
)

// Store is what the sessions need from persistence; storage.DB implements it.
type Store interface {
	CreateSession(ctx context.Context, s switchboard.Session) error
	Session(ctx context.Context, id string) (switchboard.Session, error)
	SessionByKey(ctx context.Context, key string) (switchboard.Session, error)
	ClearSessionKey(ctx context.Context, id string) error
	SetSessionGuide(ctx context.Context, id, guide string) error

	SetMember(ctx context.Context, sessionID string, m switchboard.Member) error
	RemoveMember(ctx context.Context, sessionID, authorKey string) error
	SeenMembers(ctx context.Context, sessionID string, seen map[string]time.Time) error
	Members(ctx context.Context, sessionID string) ([]switchboard.Member, error)
	SessionsOf(ctx context.Context, authorKey string, limit int) ([]switchboard.MemberSession, error)
	Decisions(ctx context.Context, sessionID string, n int) ([]switchboard.Decision, error)
	Invite(ctx context.Context, codeHash string) (switchboard.Invite, error)

	// AppendEvents queues events; published is told once they are stored.
	AppendEvents(ctx context.Context, published func([]switchboard.Event, error), evs ...switchboard.Event) error
	Flush(ctx context.Context) error
	EventsAfter(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]switchboard.Event, error)
	RecentMessages(ctx context.Context, sessionID string, n int, throughSeq int64) ([]switchboard.Event, error)
	LastSeq(ctx context.Context, sessionID string) (int64, error)
	FindUI(ctx context.Context, sessionID, uiID string) (switchboard.UI, error)

	// WriteTurn is a turn's atomic write; see switchboard.TurnWrite.
	WriteTurn(ctx context.Context, sessionID string, w switchboard.TurnWrite) (dup bool, err error)
	Window(ctx context.Context, sessionID string, n int) ([]switchboard.Message, error)
	Context(ctx context.Context, sessionID string, n int) (summary string, msgs []switchboard.Message, err error)
	Memories(ctx context.Context, owner string, limit int) ([]switchboard.Memory, error)
	ForgetMemory(ctx context.Context, owner, id string) error
	Search(ctx context.Context, reader, query string, limit int) ([]switchboard.Found, error)
	LoadPending(ctx context.Context, sessionID string) ([]byte, error)

	// AcceptInput stores an input durably before it is queued; Inbox
	// lists those not taken up yet; Unfinished, the sessions a restart
	// must take up.
	AcceptInput(ctx context.Context, sessionID, key string, in switchboard.Input) (id int64, dup bool, err error)
	Inbox(ctx context.Context, sessionID string) ([]switchboard.QueuedInput, error)
	Unfinished(ctx context.Context) ([]string, error)

	SeenInput(ctx context.Context, sessionID, clientID string) (bool, error)

	// Bindings: the places in channels that show a session (bindings.go).
	Bind(ctx context.Context, b switchboard.Binding) error
	Unbind(ctx context.Context, channel, address string) error
	Binding(ctx context.Context, channel, address string) (switchboard.Binding, error)
	SessionBindings(ctx context.Context, sessionID string) ([]switchboard.Binding, error)
	BindingsBehind(ctx context.Context, channel string) ([]switchboard.Binding, error)
	SetRendered(ctx context.Context, channel, address, sessionID string, seq int64) error

	// Invites (invites.go).
	CreateInvite(ctx context.Context, inv switchboard.Invite) error
	RedeemInvite(ctx context.Context, codeHash string, now time.Time) (switchboard.Invite, error)
	RevokeInvites(ctx context.Context, sessionID string, now time.Time) (int, error)
	SetBindingState(ctx context.Context, channel, address, sessionID, state string) error

	// Expired and DeleteSessions serve retention.
	Expired(ctx context.Context, before time.Time, limit int) ([]string, error)
	DeleteSessions(ctx context.Context, ids []string) error

	// Tally reads a running total budgets are checked against (one point
	// lookup); Spending reports what turns spent (/usage).
	Tally(ctx context.Context, k switchboard.TallyKey) (switchboard.Tally, error)
	Spending(ctx context.Context, q switchboard.SpendQuery) ([]switchboard.SpendRow, error)
}

// Config wires a Manager. Zero durations and sizes take the defaults below.
type Config struct {
	Store  Store
	Guides *guides.Catalog
	// DefaultGuide is used when a session is opened without naming one.
	DefaultGuide string
	// Router, when set, chooses the guide of a session opened without
	// naming one, at its first message (routing.go; SetRouter swaps it).
	Router Router
	// Providers by configured name; DefaultProvider serves guides that
	// name none.
	Providers       map[string]*providers.Resilient
	DefaultProvider string
	Tools           *tools.Registry
	// Cluster, when set, shares the sessions with other replicas on the
	// same database (cluster.go); nil: this gateway runs every session.
	Cluster Cluster
	// Tracer, when set, is told every step of every turn (trace.go):
	// telemetry's spans and trace log. nil: nothing is traced.
	Tracer Tracer

	QueueSize        int           // inputs waiting per session (64)
	SubscriberBuffer int           // events buffered per attached listener (256)
	IdleTimeout      time.Duration // unload a session this long after its last listener left and its work ended (15s)
	ApprovalTimeout  time.Duration // a confirmation request expires (10m)
	ToolTimeout      time.Duration // one tool call may run this long (30s)
	// JoinRole is the role of a user who attaches to someone else's
	// session without a role of their own (member).
	JoinRole collaboration.Role

	// DeltaInterval is how long text streamed after a delta is held to go
	// as one delta with what follows (readahead.go): a reply costs a
	// stored event per interval, not per token. 0: each token goes as soon
	// as the session can take it.
	DeltaInterval time.Duration

	// MaxLive bounds the sessions loaded at once (0: no bound); past it,
	// opening one more fails with ErrFull.
	MaxLive int
	// NewPerMinute bounds how many sessions one author may create a
	// minute (0: 20).
	NewPerMinute int
	// Retention deletes sessions whose last turn ended longer ago than
	// this, with everything they hold (0: keep them).
	Retention time.Duration

	// Files, when set, lists a session's files kept outside the
	// conversation (its sandbox's workspace), for /files.
	Files func(sessionID string) ([]File, error)

	// Uploads, when set, keeps the files people send (uploads.go), within
	// UploadLimits.
	Uploads      Uploads
	UploadLimits UploadLimits

	// Forget, when set, is told the sessions retention deleted, after
	// their rows are gone: what is kept of them outside the database (a
	// sandbox's files, saved images) goes with them.
	Forget func(sessionIDs []string)

	// MaxBindings bounds the places one session is shown in (Bind): 20
	// when 0.
	MaxBindings int

	// PublicURL is the origin invite links point at (/s/<code>); empty:
	// links are left out and the code alone is given.
	PublicURL string

	// Spending is the prices and budgets turns start with (nil: none);
	// Manager.SetSpending replaces them at run time (spend.go).
	Spending *Spending

	Logger *slog.Logger
	Now    func() time.Time
	// Metrics counts what the sessions do; nil counts nothing.
	Metrics Metrics
}

// Metrics is what the sessions count. metrics.Metrics implements it on
// Prometheus; the core links no metrics library, and a Manager without one
// counts nothing.
type Metrics interface {
	Event(typ string)
	TurnEnded(outcome string, d time.Duration)
	TurnResumed(reason string)
	Refused(limit string)
	WriteFailed()
	// Spent counts a stored charge's tokens and cost (when priced) by
	// guide and by a model label from a bounded set (spend.go: charged).
	Spent(guide, model string, u switchboard.Usage, costUSD float64, priced bool)
	// BudgetRefused counts a turn a budget of scope refused.
	BudgetRefused(scope string)
	// GaugeFunc registers a gauge read at scrape time.
	GaugeFunc(name, help string, f func() float64)
}

// noMetrics counts nothing.
type noMetrics struct{}

func (noMetrics) Event(string)                                           {}
func (noMetrics) TurnEnded(string, time.Duration)                        {}
func (noMetrics) TurnResumed(string)                                     {}
func (noMetrics) Refused(string)                                         {}
func (noMetrics) WriteFailed()                                           {}
func (noMetrics) Spent(string, string, switchboard.Usage, float64, bool) {}
func (noMetrics) BudgetRefused(string)                                   {}
func (noMetrics) GaugeFunc(string, string, func() float64)               {}

func (c Config) withDefaults() Config {
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 64
	}
	if c.SubscriberBuffer <= 0 {
		c.SubscriberBuffer = 256
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 15 * time.Second
	}
	if c.ApprovalTimeout <= 0 {
		c.ApprovalTimeout = 10 * time.Minute
	}
	if c.ToolTimeout <= 0 {
		c.ToolTimeout = 30 * time.Second
	}
	if c.JoinRole == "" {
		c.JoinRole = collaboration.Member
	}
	if c.MaxBindings <= 0 {
		c.MaxBindings = 20
	}
	if c.NewPerMinute <= 0 {
		c.NewPerMinute = 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Errors a listener reports to its user.
var (
	ErrBusy      = errors.New("this session has too many messages waiting; try again in a moment")
	ErrForbidden = errors.New("not allowed")
	ErrClosed    = errors.New("the gateway is shutting down")
	// ErrDraining: the gateway is finishing its turns before it stops; a
	// client keeps the input and sends it again once reconnected.
	ErrDraining = errors.New("the gateway is restarting; send that again in a moment")
	// ErrShuttingDown is the cause of a turn cut because a shutdown ran out
	// of time: the turn stays open and the next start runs it again.
	ErrShuttingDown = errors.New("the gateway shut down before the turn finished")
	// ErrNotStored: an input could not be stored (disk full, I/O error),
	// so it was not taken; it can be sent again with the same id.
	ErrNotStored = errors.New("the gateway cannot save messages right now (its disk is full or failing); send it again in a few minutes")
	// ErrFull: as many sessions are loaded as sessions.max_live allows.
	ErrFull = errors.New("the gateway has too many conversations open; try again in a few minutes")
	// ErrTooFast: an author opens new sessions faster than allowed.
	ErrTooFast = errors.New("too many new conversations in a short time; wait a minute")
)

// Manager owns the live sessions. Each session runs on its own goroutine
// with a bounded queue, so sessions never wait for each other; the map of
// live sessions is only touched to find or load one.
type Manager struct {
	cfg  Config
	ctx  context.Context // ends at shutdown; every session goroutine runs under it
	live sync.Map        // session id → *session
	wg   sync.WaitGroup  // session goroutines
	bg   sync.WaitGroup  // the manager's own: retention

	// turns is the parent of every turn's context: Drain cancels it when
	// its time is up (cause ErrShuttingDown).
	turns     context.Context
	stopTurns context.CancelCauseFunc
	// draining is closed by Drain: sessions finish the job under way and
	// take no other.
	draining  chan struct{}
	drainOnce sync.Once
	// stopping is set when the manager stops or drains: no session
	// goroutine starts after it (kick), so wg can be waited on.
	startMu  sync.RWMutex
	stopping bool
	// stopped is closed once ctx has ended and the parked sessions have
	// been shut down.
	stopped chan struct{}

	// provs are the providers model calls are made with (SetProviders);
	// lims, the limits in force (SetLimits).
	provs atomic.Pointer[providerSet]
	lims  atomic.Pointer[Limits]
	// routes choose new conversations' guides (routing.go, SetRouter).
	routes atomic.Pointer[routes]

	loadMu    sync.Mutex // serialises loading, never held on the hot path
	liveCount atomic.Int64
	working   atomic.Int64 // session goroutines up: sessions with work

	// creators limits new sessions per author, joiners attempts to join
	// with a code; both guarded by loadMu.
	creators map[string]*rate.Limiter
	joiners  map[string]*rate.Limiter

	// followers render bound sessions, by channel (bindings.go).
	followMu  sync.RWMutex
	followers map[string]Follower

	// spend holds the prices and budgets in force (spend.go).
	spend spendState
}

// NewManager starts a manager; its sessions stop when ctx ends, and Wait
// returns once they have.
func NewManager(ctx context.Context, cfg Config) *Manager {
	m := &Manager{cfg: cfg.withDefaults(), ctx: ctx, draining: make(chan struct{})}
	m.turns, m.stopTurns = context.WithCancelCause(ctx)
	m.SetProviders(cfg.Providers, cfg.DefaultProvider)
	m.creators = map[string]*rate.Limiter{}
	m.SetLimits(Limits{MaxLive: cfg.MaxLive, NewPerMinute: cfg.NewPerMinute, ApprovalTimeout: cfg.ApprovalTimeout, ToolTimeout: cfg.ToolTimeout})
	m.joiners = map[string]*rate.Limiter{}
	m.followers = map[string]Follower{}
	m.SetSpending(cfg.Spending)
	if m.cfg.Retention > 0 {
		m.bg.Go(m.retain)
	}
	m.stopped = make(chan struct{})
	context.AfterFunc(ctx, func() {
		m.stopStarting(false)
		close(m.stopped)
	})
	m.cfg.Metrics.GaugeFunc("switchboard_sessions_live", "Sessions loaded in memory.", func() float64 { return float64(m.liveCount.Load()) })
	m.cfg.Metrics.GaugeFunc("switchboard_sessions_working", "Sessions with work under way: each has a goroutine; an idle session has none.", func() float64 { return float64(m.working.Load()) })
	return m
}

// Live is how many sessions are loaded in memory now.
func (m *Manager) Live() int { return int(m.liveCount.Load()) }

// Working is how many sessions have work under way, and so a goroutine.
func (m *Manager) Working() int { return int(m.working.Load()) }

// Wait blocks until every session goroutine, and the manager's own, have
// stopped.
func (m *Manager) Wait() {
	<-m.stopped // parked sessions have let go (and stored who was last seen)
	m.wg.Wait()
	m.bg.Wait()
}

// Recover loads every session with work a crash or a restart left: a turn
// that was running is run again, a turn waiting for approval waits again
// (its expiry armed), and accepted inputs are answered in order. Call it
// once at start, before listeners take input.
func (m *Manager) Recover(ctx context.Context) error {
	ids, err := m.cfg.Store.Unfinished(ctx)
	if err != nil {
		return fmt.Errorf("sessions: recover: %w", err)
	}
	var errs []error
	discarded := 0
	for _, id := range ids {
		// Another live replica's sessions are its own to run; a
		// stateless request's is deleted (ephemeral.go).
		_, err := m.loadWith(ctx, id, false, false)
		switch {
		case errors.Is(err, errLeftover):
			discarded++
		case err != nil && !errors.Is(err, ErrElsewhere):
			errs = append(errs, err)
		}
	}
	if len(ids) > 0 {
		m.cfg.Logger.Info("sessions with unfinished work taken up", "sessions", len(ids)-len(errs)-discarded, "failed", len(errs), "stateless_deleted", discarded)
	}
	return errors.Join(errs...)
}

// Drain stops taking new work and lets the turns under way finish until
// ctx ends; turns still running then are cut (not stored as stopped: the
// next start runs them again, like after a crash). Listeners stay up
// meanwhile, so their clients see the turns finish. It returns once every
// session goroutine has stopped.
func (m *Manager) Drain(ctx context.Context) {
	m.drainOnce.Do(func() {
		// Under loadMu: no session is loaded once draining.
		m.loadMu.Lock()
		close(m.draining)
		m.loadMu.Unlock()
	})
	m.stopStarting(true)
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		m.releaseAll()
		return
	case <-ctx.Done():
	}
	m.cfg.Logger.Warn("shutdown: turns still running after the grace period are cut, and resumed at the next start")
	m.stopTurns(ErrShuttingDown)
	<-done
	m.releaseAll()
}

// stopStarting keeps session goroutines from starting from now on, and
// lets the listeners of parked sessions go (running ones do so when their
// job ends). With flush, queued events are published first.
func (m *Manager) stopStarting(flush bool) {
	m.startMu.Lock()
	m.stopping = true
	m.startMu.Unlock()
	if flush {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = m.cfg.Store.Flush(ctx)
		cancel()
	}
	m.live.Range(func(_, v any) bool {
		v.(*session).shutdownIfParked()
		return true
	})
}

func (m *Manager) isDraining() bool {
	select {
	case <-m.draining:
		return true
	default:
		return false
	}
}

// AttachOptions says which session to attach to and who is attaching.
type AttachOptions struct {
	// SessionID attaches to an existing session by id. If empty, Key is
	// used: the listener's natural key ("stdin", a Slack thread); a session
	// with that key is created when there is none. With neither, a new
	// session is created.
	SessionID string
	Key       string
	// Guide is used for a new session (default: the configured default).
	Guide  string
	Author switchboard.Author
	// Role, if set, is granted to the author (e.g. from a signed token).
	Role collaboration.Role
	// AfterSeq: replay every stored event after it before live ones. A
	// negative value means "only live events from now on".
	AfterSeq int64
	// Recap, with a negative AfterSeq, first replays the stored events of
	// the last Recap messages (user and assistant) with their own seqs, all
	// at or below Ready.LastSeq: a short "where we were" for a place that
	// attaches without the whole history (the terminal at start, a channel
	// that joins).
	Recap int
	// Follow attaches a channel's renderer to a session bound to one of its
	// places (bindings.go): it makes no one a member, does not keep the
	// session loaded (it ends when the session unloads; the follower is
	// told again when it loads), and receives the notices meant for that
	// channel's people. The value is the channel ("slack").
	Follow string
	// Deliver, when set, is how the listener takes the events instead of
	// Events: called on the subscription's goroutine, in order, once the
	// listener calls Start (so what it sends first, its ready, goes
	// first), and blocking as a full channel would. It returns false when
	// the listener can take no more, which ends the subscription. Ended,
	// if set, is called once the subscription has ended, however it ended.
	// A listener that has an outgoing queue of its own needs no goroutine
	// to move events into it: one goroutine less per connection. (The
	// subscription's goroutine runs only while it has something to
	// deliver: an idle subscription holds none.)
	Deliver func(switchboard.Event) bool
	Ended   func()
	// MembersOnly refuses (ErrForbidden) to attach an author to an existing
	// session they are not yet a member of, unless Role grants them one:
	// listeners whose users are authenticated use it so that knowing a
	// session id is not enough to read it.
	MembersOnly bool
	// Ephemeral opens a new session for one request of a stateless API,
	// seeded with History and deleted by the caller with Delete
	// (ephemeral.go). SessionID and Key must be empty.
	Ephemeral bool
	History   []switchboard.Message
}

// Attach opens or finds a session, makes the author a member and returns a
// subscription to its events.
func (m *Manager) Attach(ctx context.Context, opts AttachOptions) (*Subscription, error) {
	if opts.Follow != "" {
		return m.follow(ctx, opts)
	}
	s, created, err := m.open(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := m.runHere(ctx, s); err != nil { // a mirror: its people read afresh
		return nil, err
	}
	grant := opts.Role
	switch {
	case created:
		grant = "" // the creator is the owner, whatever their token says
	case opts.MembersOnly && grant == "" && !s.isMember(opts.Author):
		return nil, fmt.Errorf("sessions: attach %s: %w: %s is not a member", s.id, ErrForbidden, opts.Author.Key())
	}
	role, err := s.join(ctx, opts.Author, grant)
	if err != nil {
		return nil, err
	}
	last := s.publishedSeq()
	after := opts.AfterSeq
	if after < 0 || after > last {
		// Past the end (a client whose store was reset): from now on.
		after = last
	}
	var recap []switchboard.Event
	if opts.Recap > 0 && opts.AfterSeq < 0 && last > 0 {
		// Published events are committed: the store has them.
		if recap, err = m.cfg.Store.RecentMessages(ctx, s.id, opts.Recap, last); err != nil {
			return nil, fmt.Errorf("sessions: attach %s: recap: %w", s.id, err)
		}
	}
	g := s.guideSnapshot()
	sub := s.subscribe(after, opts.Author.Key(), "", recap, opts.Deliver, opts.Ended)
	sub.Ready = switchboard.ReadyData{
		Session: s.id, Guide: g.Name, Role: string(role), LastSeq: last,
		User:     &switchboard.ReadyUser{ID: opts.Author.ID, Name: opts.Author.DisplayName()},
		Pending:  s.openRequests(),
		Members:  s.readyMembers(),
		Greeting: g.Greeting, Suggestions: g.Suggestions,
	}
	s.mu.Lock()
	s.membersChangedExceptLocked(sub) // the others see the newcomer here
	s.mu.Unlock()
	return sub, nil
}

// Receipt tracks one submitted input.
type Receipt struct {
	done    chan struct{}
	once    sync.Once
	lastSeq int64
	// NewSession is set when the input was /reset: the listener attaches
	// there to go on.
	NewSession string
	// left: the input was a /leave that unbound the place it was written
	// in.
	left bool
}

func newReceipt() *Receipt { return &Receipt{done: make(chan struct{})} }

// finish closes the receipt once; later calls do nothing.
func (r *Receipt) finish(lastSeq int64) {
	r.once.Do(func() {
		r.lastSeq = lastSeq
		close(r.done)
	})
}

// Wait blocks until the session has finished with the input — the turn it
// started has ended or is waiting for an approval — and returns the seq of
// the last event it produced by then.
func (r *Receipt) Wait(ctx context.Context) (int64, error) {
	select {
	case <-r.done:
		return r.lastSeq, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Submit hands an input to a session. A message or command is stored
// before Submit returns (a crash cannot lose it once the listener is told
// it was taken) and a repeated client id is answered once; other inputs
// are queued. It returns as soon as that is done: the outcome arrives as
// events. It fails fast when the queue is full rather than make a
// listener wait.
func (m *Manager) Submit(ctx context.Context, sessionID string, in switchboard.Input) (*Receipt, error) {
	if m.isDraining() {
		return nil, ErrDraining
	}
	s, err := m.load(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if err := m.runHere(ctx, s); err != nil { // a mirror whose owner is gone takes over
		return nil, err
	}
	if err := s.enter(ctx, in); err != nil { // who may act here (access.go)
		return nil, err
	}
	if err := m.checkFiles(in); err != nil {
		return nil, err
	}
	if err := s.checkOffered(in); err != nil {
		return nil, err
	}
	if s.remote.Load() {
		return s.forward(ctx, in) // to the replica that runs it
	}
	if in.Kind == switchboard.InputText && !stops(in) {
		return s.accept(ctx, in)
	}
	return s.submit(ctx, in)
}

// open finds or creates the session an Attach names.
func (m *Manager) open(ctx context.Context, opts AttachOptions) (s *session, created bool, err error) {
	if opts.Ephemeral {
		s, err = m.openEphemeral(ctx, opts)
		return s, err == nil, err
	}
	if strings.HasPrefix(opts.Key, ephemeralKey) {
		return nil, false, fmt.Errorf("sessions: attach: %w: the key %q is the sessions' own", ErrBadInput, opts.Key)
	}
	if opts.SessionID != "" {
		s, err = m.load(ctx, opts.SessionID)
		return s, false, err
	}
	if opts.Key != "" {
		rec, err := m.cfg.Store.SessionByKey(ctx, opts.Key)
		if err == nil {
			s, err = m.load(ctx, rec.ID)
			return s, false, err
		}
		if !errors.Is(err, switchboard.ErrNotFound) {
			return nil, false, fmt.Errorf("sessions: open %q: %w", opts.Key, err)
		}
	}
	s, err = m.create(ctx, opts.Key, opts.Guide, opts.Author)
	if err == nil && opts.Guide == "" {
		s.routeFirst.Store(true) // the channel asked for none: routing.go
	}
	if opts.Key != "" && errors.Is(err, switchboard.ErrExists) {
		// Made a moment ago by another attach, here or on another
		// replica (two messages of a new thread): that one it is.
		rec, ferr := m.cfg.Store.SessionByKey(ctx, opts.Key)
		if ferr != nil {
			return nil, false, fmt.Errorf("sessions: open %q: %w", opts.Key, ferr)
		}
		s, err = m.load(ctx, rec.ID)
		return s, false, err
	}
	return s, err == nil, err
}

// create stores a new session owned by author.
func (m *Manager) create(ctx context.Context, key, guide string, author switchboard.Author) (*session, error) {
	return m.createAs(ctx, key, guide, author, false)
}

// createAs is create; an ephemeral session (ephemeral.go) skips the
// author's NewPerMinute (its listener limits the rate) and is marked so
// in its key.
func (m *Manager) createAs(ctx context.Context, key, guide string, author switchboard.Author, ephemeral bool) (*session, error) {
	if !ephemeral && !m.mayCreate(author) {
		m.cfg.Metrics.Refused("new_per_minute")
		return nil, fmt.Errorf("sessions: create: %w", ErrTooFast)
	}
	if m.full() {
		return nil, fmt.Errorf("sessions: create: %w", ErrFull) // before a row is stored for it
	}
	if guide == "" {
		guide = m.cfg.DefaultGuide
	}
	if _, ok := m.cfg.Guides.Get(guide); !ok {
		return nil, fmt.Errorf("sessions: %w: unknown guide %q (available: %v)", switchboard.ErrNotFound, guide, m.cfg.Guides.Names())
	}
	rec := switchboard.Session{
		ID: newID("s_"), Key: key, Guide: guide, Owner: author.Key(), CreatedAt: m.cfg.Now().UTC(),
	}
	if ephemeral {
		rec.Key = ephemeralKey + rec.ID // stored with its first input, as any without a key
	}
	if key != "" {
		// A keyed session is found by its key (the terminal, a thread):
		// stored at once, so two attaches cannot make two.
		if err := m.store(ctx, rec, author.Name); err != nil {
			return nil, err
		}
		return m.load(ctx, rec.ID)
	}
	// Without a key only its id finds it: stored with its first input
	// (persist), so a page view that sends nothing stores nothing.
	if m.ctx.Err() != nil || m.isDraining() {
		return nil, ErrClosed
	}
	if c := m.cfg.Cluster; c != nil {
		if err := c.Claim(ctx, rec.ID); err != nil {
			return nil, fmt.Errorf("sessions: create: %w", err)
		}
	}
	g, _ := m.cfg.Guides.Get(guide)
	s := m.newSession(rec, g, m.cfg.QueueSize)
	s.unstored.Store(true)
	s.roles[author.Key()] = collaboration.Owner
	s.names[author.Key()] = author.Name
	m.live.Store(rec.ID, s)
	m.liveCount.Add(1)
	s.mu.Lock()
	s.armIdleLocked() // parked from the start: unloaded once idle with nobody attached
	s.mu.Unlock()
	return s, nil
}

// store writes a new session's record and its owner.
func (m *Manager) store(ctx context.Context, rec switchboard.Session, ownerName string) error {
	if err := m.cfg.Store.CreateSession(ctx, rec); err != nil {
		return fmt.Errorf("sessions: create: %w", err)
	}
	if err := m.cfg.Store.SetMember(ctx, rec.ID, switchboard.Member{Key: rec.Owner, Name: ownerName, Role: string(collaboration.Owner), LastSeen: rec.CreatedAt}); err != nil {
		return fmt.Errorf("sessions: create: %w", err)
	}
	m.cfg.Logger.Info("session created", "session", rec.ID, "key", rec.Key, "guide", rec.Guide, "owner", rec.Owner)
	return nil
}

// load returns the live session, loading it from the store if needed;
// the places it is bound to are told it is live (announce).
func (m *Manager) load(ctx context.Context, id string) (*session, error) {
	return m.loadAs(ctx, id, false)
}

// loadAs is load; quiet does not announce, for a follower's own attach
// (which would otherwise tell itself again each time it loads a session).
func (m *Manager) loadAs(ctx context.Context, id string, quiet bool) (*session, error) {
	return m.loadWith(ctx, id, quiet, true)
}

// loadWith is loadAs; with mirror, a session another replica runs is
// loaded as its mirror (cluster.go), without, refused with ErrElsewhere.
func (m *Manager) loadWith(ctx context.Context, id string, quiet, mirror bool) (*session, error) {
	if v, ok := m.live.Load(id); ok {
		return v.(*session), nil
	}
	if m.ctx.Err() != nil || m.isDraining() {
		return nil, ErrClosed
	}
	if m.full() {
		return nil, fmt.Errorf("sessions: load %s: %w", id, ErrFull)
	}
	m.loadMu.Lock()
	defer m.loadMu.Unlock()
	if v, ok := m.live.Load(id); ok {
		return v.(*session), nil
	}
	if m.isDraining() {
		return nil, ErrClosed
	}
	s, err := m.claimAndRestore(ctx, id, mirror)
	if err != nil {
		return nil, err
	}
	m.live.Store(id, s)
	m.liveCount.Add(1)
	if s.remote.Load() {
		s.mu.Lock()
		s.armIdleLocked() // unloaded once nobody looks at it
		s.mu.Unlock()
		// What was stored while it loaded was told to no one here.
		s.wantPull()
		return s, nil
	}
	s.kick() // takes up what the restart left queued, or parks
	if !quiet {
		m.announce(ctx, id)
	}
	return s, nil
}

// unload removes an idle session; the next access loads it again.
func (m *Manager) unload(s *session) {
	if m.live.CompareAndDelete(s.id, s) {
		m.liveCount.Add(-1)
	}
}

// full reports (and counts) that as many sessions are loaded as MaxLive
// allows.
func (m *Manager) full() bool {
	if max := m.limits().MaxLive; max > 0 && m.liveCount.Load() >= int64(max) {
		m.cfg.Metrics.Refused("max_live")
		return true
	}
	return false
}

// mayCreate spends one of the author's new-session tokens.
func (m *Manager) mayCreate(a switchboard.Author) bool {
	m.loadMu.Lock()
	defer m.loadMu.Unlock()
	l := m.creators[a.Key()]
	if l == nil {
		if len(m.creators) >= 10_000 {
			clear(m.creators) // forgetting grants a fresh allowance: bounded memory
		}
		per := m.limits().NewPerMinute
		l = rate.NewLimiter(rate.Every(time.Minute/time.Duration(per)), per)
		m.creators[a.Key()] = l
	}
	return l.Allow()
}

// retain deletes expired sessions now and every hour, until the manager
// stops or drains.
func (m *Manager) retain() {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		m.deleteExpired()
		select {
		case <-t.C:
		case <-m.ctx.Done():
			return
		case <-m.draining:
			return
		}
	}
}

// deleteExpired deletes, page by page, the sessions idle for longer than
// the retention, except those loaded now. loadMu keeps them from loading
// while they go.
func (m *Manager) deleteExpired() {
	const page = 500
	before := m.cfg.Now().Add(-m.cfg.Retention)
	deleted := 0
	for m.ctx.Err() == nil {
		ids, err := m.cfg.Store.Expired(m.ctx, before, page)
		if err != nil {
			m.cfg.Logger.Error("retention: listing expired sessions failed", "err", err)
			return
		}
		m.loadMu.Lock()
		n := len(ids)
		ids = slices.DeleteFunc(ids, func(id string) bool { _, live := m.live.Load(id); return live })
		if len(ids) > 0 {
			err = m.cfg.Store.DeleteSessions(m.ctx, ids)
		}
		m.loadMu.Unlock()
		if err != nil {
			m.cfg.Logger.Error("retention: deleting expired sessions failed", "err", err)
			return
		}
		if m.cfg.Forget != nil && len(ids) > 0 {
			m.cfg.Forget(ids)
		}
		deleted += len(ids)
		if n < page || len(ids) == 0 {
			break
		}
	}
	if deleted > 0 {
		m.cfg.Logger.Info("retention: sessions deleted", "sessions", deleted, "idle_since_before", before)
	}
}

// dedupeKey is what a repeated input is recognised by: the client's id
// for it, per author, so one user's ids never swallow another's.
func dedupeKey(in switchboard.Input) string {
	if in.ClientID == "" {
		return ""
	}
	return in.Author.Key() + " " + in.ClientID
}

func newID(prefix string) string {
	b := make([]byte, 10)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return prefix + hex.EncodeToString(b)
}
