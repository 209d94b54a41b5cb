package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/internal/queue"
)

// job is one unit of work for a session goroutine.
type job struct {
	input   switchboard.Input
	receipt *Receipt
	// expire, when set, is a confirmation whose time ran out.
	expire string
	// resume continues a suspended turn whose approvals were all answered
	// before a restart cut it short.
	resume bool
	// stoppedRunning: submitting this /stop or cancel already stopped a
	// running turn, which reports it.
	stoppedRunning bool
	// inboxID is the input's place in the stored inbox: it was accepted
	// durably, and leaves the inbox in the write that takes it up.
	inboxID int64
	// interrupted is an open turn a crash or a failed write cut short,
	// to take up again from the stored context.
	interrupted *pendingTurn
	// stored, for a message handed straight to an idle session, is told
	// once the message is stored (or why it was not): Submit waits for it.
	stored chan error
	// elsewhere: the input was written on another replica and forwarded
	// (cluster.go): no listener here waits on its receipt.
	elsewhere bool
}

// ack tells a waiting Submit the input was stored (err nil) or not. Only
// the first call counts.
func (j job) ack(err error) {
	if j.stored == nil {
		return
	}
	select {
	case j.stored <- err:
	default:
	}
}

// jobs is the session's inbox, made the first time it is needed.
func (s *session) jobs() chan *job {
	s.inboxOnce.Do(func() {
		s.inbox = make(chan *job, s.inboxCap)
		s.inboxMade.Store(true)
	})
	return s.inbox
}

// queued is how many jobs wait in the inbox, without making it.
func (s *session) queued() int {
	if !s.inboxMade.Load() {
		return 0
	}
	return len(s.inbox)
}

// session is one live conversation. Everything below "owned by run" is
// touched only by the session's goroutine, so it needs no lock; mu guards
// what listeners reach from their own goroutines.
type session struct {
	id  string
	m   *Manager
	log *slog.Logger

	// inbox is made on first use (jobs): a session that is only looked
	// at (a page view, a listener that never writes) holds no buffer for
	// inputs. inboxCap is its bound; inboxMade says it exists, for
	// queued, which must not make it.
	inbox     chan *job
	inboxCap  int
	inboxOnce sync.Once
	inboxMade atomic.Bool

	// owned by run
	rec switchboard.Session
	// guide is never changed in place: a new guide is a new value, which
	// shownGuide shares (one copy a session, not two).
	guide *guides.Guide
	// guideGen is the catalog's generation guide was taken up at
	// (takeUpGuide).
	guideGen uint64
	window   []switchboard.Message
	fitting  fitting // how requests are made to fit the model's context (budget.go)
	// uploaded is what was read of the uploads for the model (attached.go).
	uploaded filesView
	summary  string // what the compact policy keeps of older messages (compact.go)
	// answering is whose message the running turn answers (memories.go).
	answering switchboard.Author
	pending   *pendingTurn
	timers    map[string]*time.Timer // expiry of open confirmation requests
	seq       int64                  // last seq assigned

	// held collects the events emitted inside collect (holding), to be
	// stored with the write that follows.
	holding bool
	held    []switchboard.Event

	// onCommit is s.committed, made once: the store calls it with every
	// batch of the session's events.
	onCommit func([]switchboard.Event, error)
	// failing is set when a write failed; the session stops its turn and
	// repairs itself once storage works again (repair).
	failing atomic.Bool
	// acceptMu keeps inputs in the order they were accepted, in the store
	// and in the queue alike.
	acceptMu sync.Mutex

	mu     sync.Mutex
	closed bool
	// removal is a Delete waiting for the session's goroutine to finish
	// what is queued (ephemeral.go).
	removal    chan<- error
	published  int64                         // last seq stored and handed to subscribers
	subs       map[*Subscription]struct{}    // live: registered for committed events
	listeners  map[*Subscription]struct{}    // every open subscription, live or catching up
	following  int                           // of listeners, those that follow (AttachOptions.Follow)
	accepting  int                           // inputs being accepted: not yet queued
	running    bool                          // the session's goroutine is up (see run, kick)
	idle       *time.Timer                   // unloads the session once idle (armIdleLocked)
	roles      map[string]collaboration.Role // author key → role
	pinned     map[string]bool               // author key → role set by the owner's /role (access.go)
	names      map[string]string             // author key → the name they last used
	seen       map[string]time.Time          // author key → last wrote or left (people.go)
	unsaved    map[string]time.Time          // of seen, what the store has not been told
	shownGuide *guides.Guide                 // the guide, for other goroutines (guideSnapshot)
	// membersMayStop is the guide's members_may_stop, for submit.
	membersMayStop bool
	cancelTurn     context.CancelCauseFunc
	// unsent are notices for one person that no listener took (guarded by
	// mu): see passUnsentLocked.
	unsent []unsentNotice
	// open are the approval requests the session waits for, as listeners
	// attaching now are told (ReadyData.Pending); kept by setPending.
	open []switchboard.ConfirmationRequestData
	// awaiting is what the session waits for from its caller (client
	// tools, clienttools.go); kept by setPending.
	awaiting awaiting

	// unstored: a session opened without a key has no row until its first
	// input (persist), so a page view that sends nothing stores nothing.
	persistMu sync.Mutex
	unstored  atomic.Bool
	// routeFirst: the session was opened without a guide; its first
	// message chooses one (routing.go).
	routeFirst atomic.Bool

	// remote: another replica runs the session; this one mirrors it
	// (cluster.go). promoteMu orders taking it over; pullMu, reading the
	// owner's events (pullQueued: a read is due). queuedIDs are the inbox
	// entries queued here (guarded by acceptMu), with a Cluster only.
	remote     atomic.Bool
	promoteMu  sync.Mutex
	pullMu     sync.Mutex
	pullQueued atomic.Bool
	queuedIDs  map[int64]struct{}
	// backlog: inputs wait in the inbox that the queue had no room for.
	backlog atomic.Bool
}

// stored is what a session's owner loads of it from the store.
type stored struct {
	rec     switchboard.Session
	guide   guides.Guide
	seq     int64
	summary string
	window  []switchboard.Message
	members []switchboard.Member
	open    *pendingTurn
	queued  []switchboard.QueuedInput
}

// restore loads a session's record, window, roles and any suspended turn.
func (m *Manager) restore(ctx context.Context, id string) (*session, error) {
	st, err := m.loadStored(ctx, id)
	if err != nil {
		return nil, err
	}
	if ephemeral(st.rec) {
		return nil, m.discardLeftover(ctx, m.newSession(st.rec, st.guide, 1), st.open)
	}
	// Room for what was accepted before a restart, and the turn it cut.
	s := m.newSession(st.rec, st.guide, max(m.cfg.QueueSize, len(st.queued)+1))
	s.takeOver(st)
	return s, nil
}

// loadStored reads what the owner of session id needs to run it.
func (m *Manager) loadStored(ctx context.Context, id string) (stored, error) {
	st := m.cfg.Store
	var out stored
	rec, err := st.Session(ctx, id)
	if err != nil {
		return out, fmt.Errorf("sessions: load %s: %w", id, err)
	}
	out.rec, out.guide = rec, m.guideOf(rec)
	// Events may still sit in the write queue from before an unload.
	if err := st.Flush(ctx); err != nil {
		return out, fmt.Errorf("sessions: load %s: %w", id, err)
	}
	if out.seq, err = st.LastSeq(ctx, id); err != nil {
		return out, fmt.Errorf("sessions: load %s: %w", id, err)
	}
	if out.guide.Memory.Policy == guides.Compact {
		out.summary, out.window, err = st.Context(ctx, id, compactCap(out.guide))
	} else {
		out.window, err = st.Window(ctx, id, out.guide.Memory.Window)
	}
	if err != nil {
		return out, fmt.Errorf("sessions: load %s: %w", id, err)
	}
	if out.members, err = st.Members(ctx, id); err != nil {
		return out, fmt.Errorf("sessions: load %s: %w", id, err)
	}
	if out.open, err = loadTurn(ctx, st, id); err != nil {
		return out, fmt.Errorf("sessions: load %s: %w", id, err)
	}
	if out.queued, err = st.Inbox(ctx, id); err != nil {
		return out, fmt.Errorf("sessions: load %s: %w", id, err)
	}
	return out, nil
}

// guideOf is the guide a stored session runs with.
func (m *Manager) guideOf(rec switchboard.Session) guides.Guide {
	g, ok := m.cfg.Guides.Latest(rec.Guide) // a deleted guide runs on until a restart
	if !ok {
		// A guide removed since: fall back rather than lock users out.
		m.cfg.Logger.Warn("session's guide is gone, using the default", "session", rec.ID, "guide", rec.Guide)
		g, _ = m.cfg.Guides.Get(m.cfg.DefaultGuide)
	}
	return g
}

// takeOver makes s run from what was stored: its context, its people, the
// turn that was open and the inputs that wait. s has no goroutine yet.
func (s *session) takeOver(st stored) {
	s.window, s.summary, s.seq = st.window, st.summary, st.seq
	s.mu.Lock()
	s.published = st.seq
	s.setMembersLocked(st.members)
	s.mu.Unlock()
	// What was under way comes first, then what was waiting: in the
	// order they were accepted. A mirror taking over (promote) may find
	// its queue made already and smaller than what waits: the rest stays
	// in the inbox, taken up once there is room (backlog).
	if !s.inboxMade.Load() {
		s.inboxCap = max(s.inboxCap, len(st.queued)+1)
	}
	s.takeUp(st.open, func(j job) { s.jobs() <- &j })
	for _, q := range st.queued {
		select {
		case s.jobs() <- &job{input: q.Input, inboxID: q.ID, receipt: newReceipt()}:
			s.taken(q.ID)
		default:
			s.backlog.Store(true)
		}
	}
	if st.open != nil || len(st.queued) > 0 {
		s.log.Info("session resumed", "open_turn", st.open != nil, "queued_inputs", len(st.queued))
	}
}

// setMembersLocked replaces what s knows of its people with what the store
// has: who they are, their roles and names; a later last seen is kept.
func (s *session) setMembersLocked(members []switchboard.Member) {
	clear(s.roles)
	clear(s.pinned)
	for _, mb := range members {
		s.roles[mb.Key] = collaboration.Role(mb.Role)
		s.names[mb.Key] = mb.Name
		if mb.Pinned {
			s.pinned[mb.Key] = true
		}
		if !mb.LastSeen.IsZero() && mb.LastSeen.After(s.seen[mb.Key]) {
			s.seen[mb.Key] = mb.LastSeen
		}
	}
}

// newSession is a session's in-memory state, before anything is loaded.
func (m *Manager) newSession(rec switchboard.Session, g guides.Guide, queue int) *session {
	s := &session{
		id: rec.ID, m: m, log: m.cfg.Logger.With("session", rec.ID),
		inboxCap: queue,
		rec:      rec, guide: &g,
		subs: map[*Subscription]struct{}{}, listeners: map[*Subscription]struct{}{},
		roles: map[string]collaboration.Role{}, pinned: map[string]bool{}, names: map[string]string{}, seen: map[string]time.Time{}, unsaved: map[string]time.Time{},
		membersMayStop: g.MembersMayStop,
	}
	s.shownGuide = s.guide
	s.onCommit = s.committed
	return s
}

// persist stores a session created without a row (see unstored): its
// record and its owner, once, before its first input is stored.
func (s *session) persist(ctx context.Context) error {
	if !s.unstored.Load() {
		return nil // every input of a stored session passes here: no lock
	}
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	if !s.unstored.Load() {
		return nil
	}
	s.mu.Lock()
	owner := s.names[s.rec.Owner]
	s.mu.Unlock()
	if err := s.m.store(ctx, s.rec, owner); err != nil {
		return err
	}
	s.unstored.Store(false)
	return nil
}

// run is the session's goroutine while it has work: it takes inputs one
// at a time, so a session's events are always in order, and parks (ends)
// once its queue is empty, so an idle session costs no goroutine. kick
// starts it again when work arrives.
func (s *session) run() {
	defer s.m.wg.Done()
	defer s.m.working.Add(-1)
	for {
		// Stopping or draining: the job under way has finished, and what
		// is queued stays in the inbox for the next start.
		if s.m.ctx.Err() != nil || s.m.isDraining() {
			if r := s.takeRemoval(); r != nil {
				s.deleteNow(s.m.ctx, r) // what is queued goes with it
			}
			s.shutdown(true)
			return
		}
		select {
		case j := <-s.jobs():
			if s.remote.Load() {
				s.letGo(*j) // another replica runs the session now
				continue
			}
			s.handle(*j)
			if s.failing.Load() {
				s.repair(*j)
			} else {
				s.done(j.inboxID)
			}
		default:
			if r := s.takeRemoval(); r != nil { // Delete: done with the queue
				s.deleteNow(s.m.ctx, r)
				continue
			}
			if s.park() {
				return
			}
		}
	}
}

// park ends the goroutine if nothing was queued meanwhile, and arms the
// idle timer that unloads the session.
func (s *session) park() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queued() > 0 || s.removal != nil || s.m.ctx.Err() != nil || s.m.isDraining() {
		return false // run again: take the job, delete, or shut down
	}
	s.running = false
	s.armIdleLocked()
	if s.backlog.Swap(false) {
		go s.takeUpForwarded(s.m.ctx) // inputs left in the inbox for lack of room
	}
	return true
}

// kick starts the session's goroutine for work just queued, unless it is
// up already or the manager is stopping (what is queued then waits in the
// stored inbox for the next start).
func (s *session) kick() {
	m := s.m
	m.startMu.RLock()
	defer m.startMu.RUnlock()
	if m.stopping {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || s.closed {
		return
	}
	s.running = true
	if s.idle != nil {
		s.idle.Stop()
	}
	m.wg.Add(1)
	m.working.Add(1)
	go s.run()
}

// armIdleLocked (re)starts the countdown to unloading a parked session.
func (s *session) armIdleLocked() {
	if s.closed {
		return
	}
	if s.idle == nil {
		s.idle = time.AfterFunc(s.m.cfg.IdleTimeout, s.idleExpired)
		return
	}
	s.idle.Reset(s.m.cfg.IdleTimeout)
}

// idleExpired unloads the session if it is still idle: parked, nobody
// attached, nothing queued or being accepted, no approval waiting (its
// expiry timer lives here). The next access loads it again.
func (s *session) idleExpired() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || s.closed || len(s.listeners) > s.following || s.accepting > 0 || s.queued() > 0 || s.pending != nil {
		return
	}
	s.closed = true
	// Followers render while the session is in use; they end with it and
	// are told again when it loads.
	for sub := range s.subs {
		sub.drop()
	}
	s.m.unload(s)
	s.log.Debug("session unloaded after idling")
	go s.m.releaseUnloaded(s)
}

// shutdown lets the session's listeners go. With flush, what is still
// queued (the turn's last events) is published first, so a drained turn
// reaches them whole; the manager flushes once for all parked sessions.
func (s *session) shutdown(flush bool) {
	if flush {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.m.cfg.Store.Flush(ctx)
		cancel()
	}
	s.mu.Lock()
	s.closeLocked()
	unsaved := s.unsaved
	s.unsaved = map[string]time.Time{}
	s.mu.Unlock()
	s.stopTimers()
	s.saveSeen(unsaved)
}

// closeLocked closes the session for good: its listeners let go, its idle
// timer stopped.
func (s *session) closeLocked() {
	s.closed = true
	for sub := range s.subs {
		sub.drop()
	}
	s.subs = nil
	if s.idle != nil {
		s.idle.Stop()
	}
}

// shutdownIfParked lets a parked session's listeners go; a running one
// does so itself when its job ends.
func (s *session) shutdownIfParked() {
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()
	if !running {
		s.shutdown(false)
	}
}

// submit queues an input. Cancelling is out of band: it must reach a turn
// that is running, which the queue would only reach after it ended.
func (s *session) submit(ctx context.Context, in switchboard.Input) (*Receipt, error) {
	s.mu.Lock()
	if err := s.mayQueueLocked(in); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	// A stop acts as it is taken, so a repeated one is caught here; its id
	// is recorded only once it passed the checks above, so a refused stop
	// can be sent again.
	if key := dedupeKey(in); key != "" && stops(in) {
		seen, err := s.m.cfg.Store.SeenInput(ctx, s.id, key)
		if err != nil {
			return nil, fmt.Errorf("sessions: submit: %w", err)
		}
		if seen {
			r := newReceipt()
			r.finish(s.publishedSeq())
			return r, nil
		}
	}
	s.mu.Lock()
	if err := s.mayQueueLocked(in); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if in.Kind == switchboard.InputToolResults {
		// Refused at once, to the caller who sent them; the session
		// checks again as it takes them.
		if err := s.awaiting.check(in); err != nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("sessions: submit: %w", err)
		}
	}
	j := job{input: in, receipt: newReceipt()}
	if stops(in) && s.cancelTurn != nil {
		s.cancelTurn(nil) // cause: context.Canceled, the user's stop
		j.stoppedRunning = true
	}
	select {
	case s.jobs() <- &j:
	default:
		s.mu.Unlock()
		return nil, ErrBusy
	}
	s.mu.Unlock()
	s.kick()
	return j.receipt, nil
}

// mayQueueLocked refuses what the session cannot take from this author
// now: what mayActLocked refuses, and anything once the queue is full.
func (s *session) mayQueueLocked(in switchboard.Input) error {
	if err := s.mayActLocked(in, s.cancelTurn != nil); err != nil {
		return err
	}
	if s.queued() >= s.inboxCap {
		return ErrBusy
	}
	return nil
}

// mayActLocked refuses an input its author may not send: the session is
// closed, they may not write (a message, a click, an answer or a stop
// alike; read-only commands aside), or they may not stop a turn that may
// be running. It is the one check of what a person may send, made on the
// replica that runs the session (mayQueueLocked) and on a mirror before
// it forwards (forward), so no path lets through what another refuses.
func (s *session) mayActLocked(in switchboard.Input, running bool) error {
	role := s.roleLocked(in.Author)
	switch {
	case s.closed:
		return ErrClosed
	case !role.CanWrite() && !readOnlyCommand(in):
		return refuse(ErrForbidden, "%s is a %s in this session and may not write", in.Author.DisplayName(), role)
	case stops(in) && running && !role.CanApprove() && !s.membersMayStop:
		return refuse(ErrForbidden, "in this conversation only the owner or an approver may stop a turn")
	}
	return nil
}

// accept takes a message or command so that once the listener is told it
// was taken, a crash cannot lose it. A session with work under way or
// queued stores it in its inbox first (a restart takes it up) and queues
// it; an idle one is handed a message at once, and accept returns when
// the turn's first write has stored it (one commit instead of two, on the
// path every conversation takes). A client id the session has seen is
// answered at once, and not queued again.
func (s *session) accept(ctx context.Context, in switchboard.Input) (*Receipt, error) {
	s.acceptMu.Lock()
	defer s.acceptMu.Unlock()
	// Only its owner can write to a session not stored yet (another
	// member's join stores it), so storing it comes before the checks.
	if err := s.persist(ctx); err != nil {
		s.m.cfg.Metrics.WriteFailed()
		return nil, fmt.Errorf("sessions: accept input: %w: %w", ErrNotStored, err)
	}
	s.mu.Lock()
	if err := s.mayQueueLocked(in); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	_, command := commandOf(in)
	direct := !s.running && s.queued() == 0 && !command // parked: nothing under way
	_, member := s.roles[in.Author.Key()]
	s.sawLocked(in.Author.Key())
	s.accepting++ // the session stays loaded until the job is queued
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.accepting--
		s.mu.Unlock()
	}()
	if !member {
		// Someone writing where they may (a Slack thread's other people)
		// is one of the session's people from now on: /who lists them.
		if _, err := s.joinAndTell(ctx, in.Author, ""); err != nil {
			s.log.Warn("writer not recorded as a member", "author", in.Author.Key(), "err", err)
		}
	}

	if direct {
		return s.handOver(ctx, in)
	}
	id, dup, err := s.m.cfg.Store.AcceptInput(ctx, s.id, dedupeKey(in), in)
	if err != nil {
		s.m.cfg.Metrics.WriteFailed()
		return nil, fmt.Errorf("sessions: accept input: %w: %w", ErrNotStored, err)
	}
	r := newReceipt()
	s.taken(id)
	if dup {
		// Sent again after a reconnect: it is stored, or queued, and
		// will be answered once; its events reach the client by seq.
		s.tell(in.Author, switchboard.ErrCodeDuplicate, fmt.Sprintf("Already received (id %s): it is answered once.", quoteID(in.ClientID)))
		r.finish(s.publishedSeq())
		return r, nil
	}
	select {
	case s.jobs() <- &job{input: in, inboxID: id, receipt: r}:
		s.kick()
	case <-s.m.ctx.Done():
		// Stored: the next start takes it up.
	}
	return r, nil
}

// handOver gives an idle session a message and waits until its turn has
// stored it (userTurn, durably) or refused it.
func (s *session) handOver(ctx context.Context, in switchboard.Input) (*Receipt, error) {
	j := job{input: in, receipt: newReceipt(), stored: make(chan error, 1)}
	select {
	case s.jobs() <- &j:
		s.kick()
	case <-s.m.ctx.Done():
		return nil, ErrClosed
	}
	select {
	case err := <-j.stored:
		if errors.Is(err, switchboard.ErrLeaseLost) {
			return s.forward(ctx, in) // the new owner answers it
		}
		if err != nil {
			s.m.cfg.Metrics.WriteFailed()
			return nil, fmt.Errorf("sessions: accept input: %w: %w", ErrNotStored, err)
		}
		return j.receipt, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.m.draining:
		// Maybe stored, maybe not: the client sends it again, and a
		// repeat of a stored one is answered once.
		return nil, ErrDraining
	case <-s.m.ctx.Done():
		return nil, ErrClosed
	}
}

// schedule queues internal work, such as an expiry, without blocking a
// timer goroutine on a full queue for longer than it must.
func (s *session) schedule(j job) {
	go func() {
		select {
		case s.jobs() <- &j:
			s.kick()
		case <-s.m.ctx.Done():
		}
	}()
}

// join makes the author a member with the role they already have, the role
// given, or the join role. A role the owner pinned with /role stays.
func (s *session) join(ctx context.Context, a switchboard.Author, role collaboration.Role) (collaboration.Role, error) {
	s.mu.Lock()
	_, known := s.roles[a.Key()]
	s.mu.Unlock()
	if !known && s.m.cfg.Cluster != nil && !s.unstored.Load() {
		// Joined on another replica, perhaps with a role given there:
		// what the store has, not a member's role over it.
		if err := s.rereadMembers(ctx); err != nil {
			return "", fmt.Errorf("sessions: join: %w", err)
		}
	}
	s.mu.Lock()
	cur, known := s.roles[a.Key()]
	pinned := s.pinned[a.Key()]
	renamed := a.Name != "" && s.names[a.Key()] != a.Name
	s.mu.Unlock()
	if known && pinned {
		role = cur
	}
	if known && (role == "" || role == cur) && !renamed {
		return cur, nil
	}
	if known && role == "" {
		role = cur // a new name only
	}
	if role == "" {
		role = s.m.cfg.JoinRole
	}
	// A second person in a session not stored yet: it is in use.
	if err := s.persist(ctx); err != nil {
		return "", fmt.Errorf("sessions: join: %w", err)
	}
	if err := s.m.cfg.Store.SetMember(ctx, s.id, switchboard.Member{Key: a.Key(), Name: a.Name, Role: string(role), Pinned: pinned}); err != nil {
		return "", fmt.Errorf("sessions: join: %w", err)
	}
	s.mu.Lock()
	s.roles[a.Key()] = role
	if a.Name != "" {
		s.names[a.Key()] = a.Name
	}
	s.mu.Unlock()
	return role, nil
}

// joinAndTell is join for someone who does not attach (a writer from a
// chat app, an invite redeemed for a place): the others are told of a new
// member or role at once. Attach tells them itself, once attached, so
// that the newcomer is shown as here.
func (s *session) joinAndTell(ctx context.Context, a switchboard.Author, role collaboration.Role) (collaboration.Role, error) {
	before := s.role(a)
	wasMember := s.isMember(a)
	got, err := s.join(ctx, a, role)
	if err == nil && (!wasMember || got != before) {
		s.mu.Lock()
		s.membersChangedLocked()
		s.mu.Unlock()
	}
	return got, err
}

func (s *session) roleLocked(a switchboard.Author) collaboration.Role {
	if r, ok := s.roles[a.Key()]; ok {
		return r
	}
	return s.m.cfg.JoinRole
}

func (s *session) role(a switchboard.Author) collaboration.Role {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.roleLocked(a)
}

func (s *session) isMember(a switchboard.Author) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.roles[a.Key()]
	return ok
}

func (s *session) memberCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.roles)
}

// guideSnapshot is the session's guide as listeners see it, safe to call
// from any goroutine (the session's guide field belongs to run).
func (s *session) guideSnapshot() guides.Guide {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.shownGuide
}

func (s *session) publishedSeq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.published
}

// handle processes one job and closes its receipt.
func (s *session) handle(j job) {
	ctx := s.m.ctx
	switch {
	case j.expire != "":
		s.expire(ctx, j.expire)
		return
	case j.resume:
		s.resumePending(ctx)
		return
	case j.interrupted != nil:
		s.resumeInterrupted(ctx, j.interrupted, "restart")
		return
	}
	defer func() {
		j.ack(nil)
		if j.receipt != nil {
			j.receipt.finish(s.seq)
			if j.elsewhere {
				s.placeAfter(ctx, j.input, j.receipt)
			}
		}
	}()
	in := j.input
	// A forwarded stop, answer or click (cluster.go) runs at most once: it
	// leaves the inbox first, as a command does.
	if j.inboxID != 0 && in.Kind != switchboard.InputText && !s.write(ctx, switchboard.TurnWrite{InboxID: j.inboxID}) {
		return
	}
	switch in.Kind {
	case switchboard.InputCancel:
		s.stop(ctx, in.Author, j.stoppedRunning)
	case switchboard.InputConfirm:
		s.confirm(ctx, in)
	case switchboard.InputAction:
		s.action(ctx, in)
	case switchboard.InputToolResults:
		s.toolResults(ctx, in)
	case switchboard.InputText:
		if cmd, ok := commandOf(in); ok {
			// A command runs at most once: it leaves the inbox first.
			if j.inboxID != 0 && !s.write(ctx, switchboard.TurnWrite{InboxID: j.inboxID}) {
				return
			}
			s.command(ctx, j, cmd)
			return
		}
		s.userTurn(ctx, j, in.Text)
	default:
		s.tell(in.Author, switchboard.ErrCodeBadInput, fmt.Sprintf("unknown input kind %s", quoteID(string(in.Kind))))
	}
}

// store makes one of the session's atomic writes (switchboard.TurnWrite).
// A write is refused if an event before it was not stored, so a turn's
// progress is never stored past a hole in what was shown; a failure
// pauses the session until storage works again (repair).
func (s *session) store(ctx context.Context, w switchboard.TurnWrite) (dup bool, err error) {
	if s.failing.Load() {
		return false, errStorage
	}
	if len(w.Events) == 0 {
		w.EventsThrough = s.seq
	}
	dup, err = s.m.cfg.Store.WriteTurn(ctx, s.id, w)
	if err != nil {
		s.writeFailed(err)
	}
	return dup, err
}

// write is store for writes that cannot be duplicates.
func (s *session) write(ctx context.Context, w switchboard.TurnWrite) bool {
	_, err := s.store(ctx, w)
	return err == nil
}

// event numbers an event. Only the session goroutine numbers events, so
// seq order is the order they were produced in.
func (s *session) event(typ switchboard.EventType, data any) (switchboard.Event, bool) {
	raw, err := json.Marshal(data)
	if err != nil {
		s.log.Error("event not encodable", "type", typ, "err", err)
		return switchboard.Event{}, false
	}
	s.seq++
	return switchboard.Event{
		Seq: s.seq, Time: s.m.cfg.Now().UTC().Truncate(time.Millisecond), Session: s.id,
		Agent: s.guide.Name, Type: typ, Data: raw,
	}, true
}

// emit numbers an event and queues it for storage. Listeners get it from
// committed, once it is stored: what a client is shown is never lost or
// renumbered by a crash. While storage is failing nothing is emitted; the
// session repairs itself first.
func (s *session) emit(ctx context.Context, typ switchboard.EventType, data any) {
	if s.failing.Load() {
		return
	}
	ev, ok := s.event(typ, data)
	if !ok {
		return
	}
	if s.holding {
		s.held = append(s.held, ev)
		return
	}
	if err := s.m.cfg.Store.AppendEvents(ctx, s.onCommit, ev); err != nil {
		s.writeFailed(err)
	}
}

// collect runs fn with the events it emits held back, and returns them,
// numbered, for the caller to store in the write that follows, with what
// they announce: a confirmation request is shown if and only if the turn
// waiting for it is stored. The caller must store them (s.write) next.
func (s *session) collect(fn func()) []switchboard.Event {
	s.holding = true
	fn()
	s.holding = false
	evs := s.held
	s.held = nil
	return evs
}

// committed is told by the store which of the session's events are
// stored, in seq order, and hands them to every attached listener. It runs
// on the store's writer goroutine.
func (s *session) committed(evs []switchboard.Event, err error) {
	if err != nil {
		s.writeFailed(err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range evs {
		s.m.cfg.Metrics.Event(string(e.Type)) // counted once stored, whichever write stored it
	}
	s.publishLocked(evs)
}

// publishLocked hands stored events, in seq order, to every attached
// listener.
func (s *session) publishLocked(evs []switchboard.Event) {
	for _, e := range evs {
		s.published = e.Seq
		if len(s.subs) == 0 {
			continue
		}
		shared := e // one copy, shared by every subscriber: an event is never changed
		ev := &shared
		for sub := range s.subs {
			if !sub.live.Push(ev, s.m.cfg.SubscriberBuffer) {
				// Too slow: drop it from live delivery; it catches up
				// from the store and never holds the session back.
				delete(s.subs, sub)
				sub.drop()
				continue
			}
			sub.wakeLocked()
		}
	}
}

// errStorage cuts a turn whose writes failed.
var errStorage = errors.New("storage failed")

// writeFailed stops the session's work after a write it could not store:
// the running turn is cut (it stays open in the store and is taken up
// again by repair), and every listener is told why, once.
func (s *session) writeFailed(err error) {
	if errors.Is(err, switchboard.ErrLeaseLost) {
		s.demote() // not a failure here: another replica runs it now
		return
	}
	if s.failing.Swap(true) {
		return
	}
	s.m.cfg.Metrics.WriteFailed()
	s.log.Error("session write failed: pausing until storage works again", "err", err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancelTurn != nil {
		s.cancelTurn(errStorage)
	}
	s.noticeLocked(switchboard.ErrCodeStorage, "The gateway cannot save this conversation right now (its disk is full or failing), so it has paused. "+
		"Nothing you were shown is lost: it goes on by itself once storage works again.")
}

// noticeLocked tells every attached listener something that is not part
// of the conversation's history: the event has no seq, is not stored,
// and a listener that misses it misses nothing it could catch up on.
func (s *session) noticeLocked(code, msg string) {
	s.noticeToLocked("", code, msg)
}

// tell answers one author's input that the session refused or could not
// use, on that author's listeners only: what one member got wrong (a bad
// id, a command they may not use) is not broadcast to everyone, and text
// they chose never reaches others inside an error.
func (s *session) tell(to switchboard.Author, code, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noticeToLocked(to.Key(), code, msg)
}

// tellLink is tell for an info notice about a link.
func (s *session) tellLink(to switchboard.Author, msg, link string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendNoticeLocked(switchboard.ErrorData{Code: NoticeInfo, Message: msg, For: to.Key(), Link: link})
}

// noticeToLocked sends a notice to the listeners of author key to, or to
// all of them when to is empty.
func (s *session) noticeToLocked(to, code, msg string) {
	s.sendNoticeLocked(switchboard.ErrorData{Code: code, Message: msg, For: to})
}

func (s *session) sendNoticeLocked(d switchboard.ErrorData) {
	to := d.For
	raw, _ := json.Marshal(d)
	ev := switchboard.Event{
		Time: s.m.cfg.Now().UTC().Truncate(time.Millisecond), Session: s.id,
		Agent: s.shownGuide.Name, Type: switchboard.EventError, Data: raw,
	}
	sent := false
	for sub := range s.listeners {
		if to != "" && sub.author != to && !(sub.follow != "" && strings.HasPrefix(to, sub.follow+":")) {
			continue
		}
		sent = true
		select {
		case sub.notices <- &ev:
			sub.wakeLocked()
		default: // a listener this far behind gets the history, not notices
		}
	}
	if !sent && to != "" {
		// The answer to a command from a chat app that loaded the session:
		// its follower is told of the load and attaches a moment later.
		if len(s.unsent) == maxUnsent {
			s.unsent = s.unsent[1:]
		}
		s.unsent = append(s.unsent, unsentNotice{to: to, ev: ev, at: s.m.cfg.Now()})
	}
}

// unsentNotice is a notice for one person that no listener of theirs was
// attached to take; a follower of their channel attaching soon after gets
// it (passUnsentLocked).
type unsentNotice struct {
	to string
	ev switchboard.Event
	at time.Time
}

const (
	maxUnsent = 8
	unsentTTL = 10 * time.Second
)

// passUnsentLocked hands a follower that has just attached the notices
// for its channel's people that found no listener a moment ago.
func (s *session) passUnsentLocked(sub *Subscription) {
	now := s.m.cfg.Now()
	keep := s.unsent[:0]
	for _, n := range s.unsent {
		switch {
		case now.Sub(n.at) > unsentTTL: // stale: dropped
		case strings.HasPrefix(n.to, sub.follow+":"):
			select {
			case sub.notices <- &n.ev:
				sub.wakeLocked()
			default:
			}
		default:
			keep = append(keep, n)
		}
	}
	s.unsent = keep
}

func (s *session) emitError(ctx context.Context, code, msg string) {
	s.emit(ctx, switchboard.EventError, switchboard.ErrorData{Code: code, Message: msg})
}

func (s *session) emitState(ctx context.Context, state, tool string) {
	s.emit(ctx, switchboard.EventState, switchboard.StateData{State: state, Tool: tool})
}

// systemMessage tells everyone in the session something from the gateway.
func (s *session) systemMessage(ctx context.Context, text string) {
	s.emit(ctx, switchboard.EventMessage, switchboard.MessageData{
		ID: newID("m_"), Role: switchboard.RoleSystem, Author: "switchboard", Content: text, Format: switchboard.FormatText,
	})
}

// Subscription delivers a session's events, in seq order with no gap and no
// duplicate, to one listener.
type Subscription struct {
	Ready switchboard.ReadyData

	s      *session
	author string // Author.Key() of who attached
	out    chan switchboard.Event
	// live is filled by committed while registered, up to
	// SubscriberBuffer events; it holds no buffer while nothing waits.
	live *queue.Queue[*switchboard.Event]
	// notices are events outside the history (seq 0), for this listener.
	notices chan *switchboard.Event
	// deliver and ended replace out for a listener that takes the events
	// by a call (AttachOptions.Deliver), from when start is closed.
	deliver   func(switchboard.Event) bool
	ended     func()
	start     chan struct{}
	startOnce sync.Once
	// ctx ends the pump: on Close (cancel) or when the manager stops.
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	// follow is the channel of a follower (AttachOptions.Follow): it does
	// not keep the session loaded, and gets the notices for that channel's
	// people.
	follow string
	// dropped is closed by drop so pump learns it must catch up; both
	// fields are guarded by the session's mu.
	dropped   chan struct{}
	isDropped bool
	// resting: no goroutine runs the subscription; it waits at the live
	// edge, after seq last (see run). Both are guarded by the session's mu.
	resting  bool
	last     int64
	stopWake func() bool
}

// Events is the stream. It is closed when the subscription ends (Close,
// shutdown, or an unrecoverable store error). It is nil for a
// subscription that delivers (AttachOptions.Deliver).
func (sub *Subscription) Events() <-chan switchboard.Event { return sub.out }

// Start lets a subscription that delivers (AttachOptions.Deliver) begin;
// for one read through Events it does nothing.
func (sub *Subscription) Start() {
	if sub.start != nil {
		sub.startOnce.Do(func() { close(sub.start) })
	}
}

// Close detaches the listener.
func (sub *Subscription) Close() {
	sub.once.Do(func() { sub.cancel() })
}

// drop ends live delivery; the caller holds the session's mu.
func (sub *Subscription) drop() {
	if !sub.isDropped {
		sub.isDropped = true
		close(sub.dropped)
		sub.wakeLocked()
	}
}

// subscribe delivers the recap events first, then every event after seq
// after.
func (s *session) subscribe(after int64, author, follow string, recap []switchboard.Event, deliver func(switchboard.Event) bool, ended func()) *Subscription {
	sub := &Subscription{
		s: s, author: author, follow: follow,
		notices: make(chan *switchboard.Event, 16),
		deliver: deliver, ended: ended,
	}
	if deliver != nil {
		sub.start = make(chan struct{})
	} else {
		sub.out = make(chan switchboard.Event)
	}
	// Close cancels the pump's context itself: no goroutine waits for it,
	// and a resting pump is woken to end.
	sub.ctx, sub.cancel = context.WithCancel(s.m.ctx)
	sub.stopWake = context.AfterFunc(sub.ctx, func() {
		s.mu.Lock()
		sub.wakeLocked()
		s.mu.Unlock()
	})
	s.mu.Lock()
	s.listeners[sub] = struct{}{}
	if follow != "" {
		s.following++
	}
	s.mu.Unlock()
	go sub.pump(after, recap)
	return sub
}

// pump delivers the recap, then runs the subscription (run).
func (sub *Subscription) pump(last int64, recap []switchboard.Event) {
	for _, ev := range recap {
		if !sub.send(sub.ctx, ev) {
			sub.end()
			return
		}
	}
	sub.run(last, false)
}

// run reads stored events until it reaches the live edge, then switches to
// live delivery; if it falls behind there, it goes back to the store. With
// live set it starts at the live edge, where it rested.
//
// When nothing waits at the live edge it rests: the goroutine returns and
// the subscription stays registered. The next event, notice, drop or Close
// starts it again (wakeLocked), so an idle listener holds no goroutine
// here. Everything that wakes it is queued under the session's mu, which
// rest takes to look for work: nothing is queued between the last look
// and resting.
func (sub *Subscription) run(last int64, live bool) {
	ctx := sub.ctx
	st := sub.s.m.cfg.Store
	for {
		// Catch up from the store until registering live leaves no gap.
		for !live {
			registered, closed := sub.register(last)
			if closed {
				sub.end()
				return
			}
			if registered {
				break
			}
			// Published events are committed: the store has them.
			evs, err := st.EventsAfter(ctx, sub.s.id, last, 512)
			if err != nil {
				if ctx.Err() == nil {
					sub.s.log.Error("subscriber catch-up failed", "err", err)
				}
				sub.end()
				return
			}
			for _, ev := range evs {
				if !sub.send(ctx, ev) {
					sub.end()
					return
				}
				last = ev.Seq
			}
			if !sub.passNotices(ctx) {
				sub.end()
				return
			}
		}
		live = false
		// Live: forward until dropped, stopped, or there is nothing to do.
		for {
			select {
			case ev := <-sub.notices:
				if !sub.send(ctx, *ev) {
					sub.end()
					return
				}
				continue
			case <-sub.live.Ready():
				for ev, ok := sub.live.Pop(); ok; ev, ok = sub.live.Pop() {
					if ev.Seq <= last {
						continue
					}
					if !sub.send(ctx, *ev) {
						sub.end()
						return
					}
					last = ev.Seq
				}
				continue
			case <-sub.dropped:
			case <-ctx.Done():
				sub.end()
				return
			default:
				if sub.rest(last) {
					return
				}
				continue
			}
			break
		}
		// Drain what was delivered live before the drop, then catch up.
		for ev, ok := sub.live.Pop(); ok; ev, ok = sub.live.Pop() {
			if ev.Seq > last {
				if !sub.send(ctx, *ev) {
					sub.end()
					return
				}
				last = ev.Seq
			}
		}
		sub.s.mu.Lock()
		closed := sub.s.closed
		sub.s.mu.Unlock()
		if closed {
			sub.end()
			return
		}
	}
}

// rest ends the goroutine at the live edge when nothing waits for it:
// it reports whether it did, remembering where delivery stopped.
func (sub *Subscription) rest(last int64) bool {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(sub.notices) > 0 || sub.live.Len() > 0 || sub.isDropped || sub.ctx.Err() != nil {
		return false
	}
	sub.resting, sub.last = true, last
	return true
}

// wakeLocked starts a resting subscription again, at the live edge; the
// caller holds the session's mu and has just queued something for it.
func (sub *Subscription) wakeLocked() {
	if sub.resting {
		sub.resting = false
		go sub.run(sub.last, true)
	}
}

// end lets the subscription go: the last thing run does.
func (sub *Subscription) end() {
	sub.cancel()
	sub.stopWake()
	sub.detach()
	if sub.out != nil {
		close(sub.out)
	}
	if sub.ended != nil {
		sub.ended()
	}
}

// register joins live delivery if last is the live edge.
func (sub *Subscription) register(last int64) (registered, closed bool) {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, true
	}
	if s.published != last {
		return false, false
	}
	sub.live = queue.New[*switchboard.Event]()
	sub.dropped = make(chan struct{})
	sub.isDropped = false
	s.subs[sub] = struct{}{}
	return true, false
}

func (sub *Subscription) detach() {
	s := sub.s
	s.mu.Lock()
	delete(s.subs, sub)
	if _, ok := s.listeners[sub]; ok && sub.follow != "" {
		s.following--
	}
	delete(s.listeners, sub)
	if sub.author != "" && sub.follow == "" {
		s.sawLocked(sub.author)
		s.membersChangedLocked()
	}
	if len(s.listeners) == s.following && !s.running {
		s.armIdleLocked() // the idle time counts from the last listener's leaving
	}
	s.mu.Unlock()
}

// passNotices sends the notices waiting, without blocking for more.
func (sub *Subscription) passNotices(ctx context.Context) bool {
	for {
		select {
		case ev := <-sub.notices:
			if !sub.send(ctx, *ev) {
				return false
			}
		default:
			return true
		}
	}
}

func (sub *Subscription) send(ctx context.Context, ev switchboard.Event) bool {
	if sub.deliver != nil {
		select {
		case <-sub.start:
		case <-ctx.Done():
			return false
		}
		return ctx.Err() == nil && sub.deliver(ev)
	}
	select {
	case sub.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// quoteID shows an id or name a client chose, quoted and cut to a length
// that cannot carry a message of its own.
func quoteID(id string) string { return strconv.Quote(preview(id, 40)) }

func readOnlyCommand(in switchboard.Input) bool {
	cmd, ok := commandOf(in)
	return ok && readOnly[cmd.name]
}

// stops reports whether an input stops the running turn.
func stops(in switchboard.Input) bool {
	if in.Kind == switchboard.InputCancel {
		return true
	}
	cmd, ok := commandOf(in)
	return in.Kind == switchboard.InputText && ok && cmd.name == "stop"
}
