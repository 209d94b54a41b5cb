package sessions

// Replicas: several gateways on one database, any of them serving any
// conversation (docs/architecture.md, "Replicas").
//
// A conversation is run by one replica at a time, the one holding its
// lease (Cluster.Claim): that replica numbers its events, runs its turns
// and renders it into the chat apps' places. Another replica that a
// person reaches (a WebSocket through the load balancer, a Slack envelope)
// holds the session as a mirror (session.remote):
//
//   - its listeners get the events the owner stores, read from the store
//     when the cluster says some were stored (StoredElsewhere), through
//     the same subscriptions as on the owner;
//   - what its people send is checked here (who may act) and stored in the
//     session's inbox, where the owner takes it up (InputElsewhere): the
//     database is the way between replicas, and the inbox was already
//     what a restart takes up, so a forwarded input survives any crash;
//   - when the owner is gone (its lease expired or was given up), the
//     first replica that needs the session claims it and becomes its
//     owner in place, its listeners staying attached (promote).
//
// An owner that loses its lease (it paused longer than the lease, or lost
// the database) is told so (Lost), or finds out when the database refuses
// its next write (switchboard.ErrLeaseLost): it stops running the session
// and becomes a mirror of the new owner (demote).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// Cluster decides which replica runs a conversation. A Manager without one
// runs every session it loads (a single gateway).
type Cluster interface {
	// Claim makes this replica the one that runs the session, until it
	// releases it or is told it lost it (Manager.Lost). It fails with an
	// error wrapping ErrElsewhere while another replica holds it.
	Claim(ctx context.Context, sessionID string) error
	// Release gives the session up: another replica may claim it at once.
	Release(ctx context.Context, sessionID string)
	// TookOver is told that this replica took up work another replica
	// left in a session it claimed (an open turn, inputs waiting): a
	// failover, which the cluster counts.
	TookOver(sessionID string)
}

// ErrElsewhere is why a replica does not run a session: another one does.
var ErrElsewhere = errors.New("another replica runs this conversation")

// claimAndRestore loads session id to run it here, or, when another
// replica runs it and mirror is set, as a mirror of that replica.
func (m *Manager) claimAndRestore(ctx context.Context, id string, mirror bool) (*session, error) {
	c := m.cfg.Cluster
	if c == nil {
		return m.restore(ctx, id)
	}
	err := c.Claim(ctx, id)
	switch {
	case errors.Is(err, ErrElsewhere) && mirror:
		return m.restoreMirror(ctx, id)
	case err != nil:
		return nil, fmt.Errorf("sessions: load %s: %w", id, err)
	}
	s, err := m.restore(ctx, id)
	if err != nil {
		c.Release(context.WithoutCancel(ctx), id)
		return nil, err
	}
	return s, nil
}

// restoreMirror loads what a mirror shows: the record, the people, the
// last stored seq and the approval requests open.
func (m *Manager) restoreMirror(ctx context.Context, id string) (*session, error) {
	st := m.cfg.Store
	rec, err := st.Session(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sessions: load %s: %w", id, err)
	}
	s := m.newSession(rec, m.guideOf(rec), m.cfg.QueueSize)
	s.remote.Store(true)
	if err := s.refresh(ctx); err != nil {
		return nil, err
	}
	seq, err := st.LastSeq(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sessions: load %s: %w", id, err)
	}
	s.seq, s.published = seq, seq
	return s, nil
}

// rereadMembers reads the session's people again from the store, where
// other replicas record who joined and with which role.
func (s *session) rereadMembers(ctx context.Context) error {
	members, err := s.m.cfg.Store.Members(ctx, s.id)
	if err != nil {
		return fmt.Errorf("members of %s: %w", s.id, err)
	}
	s.mu.Lock()
	s.setMembersLocked(members)
	s.mu.Unlock()
	return nil
}

// refresh reads again what a mirror shows of its session that the owner
// may have changed: its people and the approval requests open.
func (s *session) refresh(ctx context.Context) error {
	members, err := s.m.cfg.Store.Members(ctx, s.id)
	if err != nil {
		return fmt.Errorf("sessions: load %s: members: %w", s.id, err)
	}
	p, err := loadTurn(ctx, s.m.cfg.Store, s.id)
	if err != nil {
		return fmt.Errorf("sessions: load %s: %w", s.id, err)
	}
	open := s.openOf(p)
	s.mu.Lock()
	s.setMembersLocked(members)
	s.open = open
	s.mu.Unlock()
	return nil
}

// runHere makes a mirror the session's owner if no other replica runs it
// now; one whose owner is alive stays a mirror, brought up to date: its
// people read afresh, and the events stored since it last looked shown
// (pull), so that whoever arrives is told what is stored now, not what
// the mirror last heard of (a notification can be missed: one sent while
// the session was loading here, one lost with a connection).
func (m *Manager) runHere(ctx context.Context, s *session) error {
	if !s.remote.Load() {
		return nil
	}
	err := m.promote(ctx, s)
	if errors.Is(err, ErrElsewhere) {
		if err := s.pull(ctx); err != nil {
			return err
		}
		return s.refresh(ctx)
	}
	return err
}

// promote makes a mirror run its session: it claims the lease, shows its
// listeners every event stored so far, then loads what the owner left
// (its context, the open turn, the inputs waiting) and takes it up, as a
// restart would. Its listeners stay attached throughout.
func (m *Manager) promote(ctx context.Context, s *session) error {
	s.promoteMu.Lock()
	defer s.promoteMu.Unlock()
	if !s.remote.Load() {
		return nil
	}
	s.mu.Lock()
	winding := s.running
	s.mu.Unlock()
	if winding {
		// Demoted a moment ago, its goroutine is still letting the cut
		// turn go: what it owns is not to be loaded over. The input goes
		// through the inbox meanwhile, and the scan for conversations
		// left takes the session up once the goroutine has parked.
		return fmt.Errorf("sessions: run %s here: %w (it is still winding down here)", s.id, ErrElsewhere)
	}
	c := m.cfg.Cluster
	if err := c.Claim(ctx, s.id); err != nil {
		return fmt.Errorf("sessions: run %s here: %w", s.id, err)
	}
	// Nothing is stored for the session from now on but by this replica:
	// the lease fences out the old owner's writes.
	if err := s.pull(ctx); err != nil {
		c.Release(context.WithoutCancel(ctx), s.id)
		return err
	}
	st, err := m.loadStored(ctx, s.id)
	if err != nil {
		c.Release(context.WithoutCancel(ctx), s.id)
		return err
	}
	s.mu.Lock()
	shown := s.published
	s.mu.Unlock()
	if shown != st.seq {
		c.Release(context.WithoutCancel(ctx), s.id)
		return fmt.Errorf("sessions: run %s here: its listeners were shown up to %d, the store has %d", s.id, shown, st.seq)
	}
	s.rec = st.rec
	g := st.guide
	s.guide = &g
	s.mu.Lock()
	s.shownGuide = s.guide
	s.membersMayStop = g.MembersMayStop
	s.mu.Unlock()
	s.acceptMu.Lock()
	s.takeOver(st)
	s.remote.Store(false)
	s.acceptMu.Unlock()
	if st.open != nil || len(st.queued) > 0 {
		c.TookOver(s.id)
	}
	s.log.Info("this replica runs the session now")
	s.kick()
	m.announce(ctx, s.id)
	return nil
}

// demote stops running a session another replica has taken over: the
// running turn is cut (the new owner resumes it), queued work is left to
// the new owner (it is in the inbox), the approval timers stop, and the
// chat apps' renderers let go (the new owner's render it).
func (s *session) demote() {
	if s.remote.Swap(true) {
		return
	}
	s.log.Warn("another replica took this session over (this one paused, or lost the database, for longer than the lease): it stops running it here")
	s.mu.Lock()
	if s.cancelTurn != nil {
		s.cancelTurn(switchboard.ErrLeaseLost)
	}
	var followers []*Subscription
	for sub := range s.listeners {
		if sub.follow != "" {
			followers = append(followers, sub)
		}
	}
	s.mu.Unlock()
	for _, sub := range followers {
		sub.Close()
	}
	s.stopTimers()
	s.wantPull()
}

// letGo answers a job of a session another replica runs now: a message
// handed over directly is forwarded by its Submit (handOver), and one from
// the inbox stays there for the new owner.
func (s *session) letGo(j job) {
	j.ack(switchboard.ErrLeaseLost)
	if j.receipt != nil {
		j.receipt.finish(s.publishedSeq())
	}
}

// forward hands an input for a session another replica runs to that
// replica, through the session's stored inbox: the input is durable once
// forward returns, and answered once however often it is sent. Its
// outcome arrives as the owner's events; the receipt is finished at once.
func (s *session) forward(ctx context.Context, in switchboard.Input) (*Receipt, error) {
	s.mu.Lock()
	// A mirror has no queue, and cannot tell whether a turn is running:
	// a stop is judged as if one were.
	err := s.mayActLocked(in, true)
	s.sawLocked(in.Author.Key())
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if in.Kind == switchboard.InputText {
		if _, err := s.joinAndTell(ctx, in.Author, ""); err != nil {
			s.log.Warn("writer not recorded as a member", "author", in.Author.Key(), "err", err)
		}
	}
	_, dup, err := s.m.cfg.Store.AcceptInput(ctx, s.id, dedupeKey(in), in)
	if err != nil {
		s.m.cfg.Metrics.WriteFailed()
		return nil, fmt.Errorf("sessions: forward input: %w: %w", ErrNotStored, err)
	}
	if dup {
		s.tell(in.Author, switchboard.ErrCodeDuplicate, fmt.Sprintf("Already received (id %s): it is answered once.", quoteID(in.ClientID)))
	}
	r := newReceipt()
	r.finish(s.publishedSeq())
	return r, nil
}

// Unfollower is a Follower that can stop showing a place once it has shown
// the events through seq (places.Layer.UnfollowAfter).
type Unfollower interface {
	UnfollowAfter(address string, seq int64)
}

// placeAfter does, for a /leave or a /reset written on another replica,
// what the listener there does with the receipt when the input is its own
// (places.Layer.SubmitText): the replica that wrote it forwarded it and
// waits for nothing, while this one, which runs the session, renders its
// places. A place taken out of the conversation stops showing it after
// the line that says so; a place where it was reset shows the new one.
func (s *session) placeAfter(ctx context.Context, in switchboard.Input, r *Receipt) {
	ch, addr, ok := strings.Cut(in.Place, ":")
	if !ok || (!r.left && r.NewSession == "") {
		return
	}
	if r.NewSession != "" {
		if b, err := s.m.cfg.Store.Binding(ctx, ch, addr); err != nil || b.SessionID != s.id {
			return // bound elsewhere meanwhile
		}
		if _, err := s.m.Bind(ctx, ch, addr, r.NewSession); err != nil {
			s.log.Error("the place of a /reset written on another replica not bound to the new conversation", "place", in.Place, "err", err)
		}
		return
	}
	if u, ok := s.m.follower(ch).(Unfollower); ok {
		u.UnfollowAfter(addr, r.lastSeq)
	}
}

// wantPull has a mirror read the events stored since it last looked, on
// a goroutine of its own: at most one waits while one reads.
func (s *session) wantPull() {
	if s.pullQueued.Swap(true) {
		return
	}
	go func() {
		s.pullQueued.Store(false)
		if err := s.pull(s.m.ctx); err != nil && s.m.ctx.Err() == nil {
			s.log.Error("mirror: reading the owner's events failed; the next event or the next resync reads them", "err", err)
		}
	}()
}

// pull hands a mirror's listeners the events stored after the last they
// were shown, in order.
func (s *session) pull(ctx context.Context) error {
	s.pullMu.Lock()
	defer s.pullMu.Unlock()
	for {
		s.mu.Lock()
		after := s.published
		s.mu.Unlock()
		evs, err := s.m.cfg.Store.EventsAfter(ctx, s.id, after, 512)
		if err != nil {
			return fmt.Errorf("sessions: %s: events after %d: %w", s.id, after, err)
		}
		if len(evs) == 0 {
			return nil
		}
		approvals := false
		for _, e := range evs {
			approvals = approvals || e.Type == switchboard.EventConfirmationRequest || e.Type == switchboard.EventConfirmationResolved
		}
		s.mu.Lock()
		s.publishLocked(evs)
		s.mu.Unlock()
		if approvals && s.remote.Load() {
			if err := s.refresh(ctx); err != nil {
				return err
			}
		}
	}
}

// taken notes that the inbox entry id is queued here, so that taking up
// forwarded inputs does not queue it twice; the caller holds acceptMu.
func (s *session) taken(id int64) {
	if s.m.cfg.Cluster == nil {
		return
	}
	if s.queuedIDs == nil {
		s.queuedIDs = map[int64]struct{}{}
	}
	s.queuedIDs[id] = struct{}{}
}

// done forgets an inbox entry the session has taken up and removed.
func (s *session) done(id int64) {
	if s.m.cfg.Cluster == nil || id == 0 {
		return
	}
	s.acceptMu.Lock()
	delete(s.queuedIDs, id)
	s.acceptMu.Unlock()
}

// takeUpForwarded queues the inputs other replicas stored in the inbox
// of a session this replica runs, in the order they were stored, each
// once. A stop stops the running turn at once, as a local one does.
func (s *session) takeUpForwarded(ctx context.Context) {
	if s.m.cfg.Cluster == nil {
		return // one gateway: every input was queued as it was accepted
	}
	s.acceptMu.Lock()
	defer s.acceptMu.Unlock()
	if s.remote.Load() {
		return
	}
	queued, err := s.m.cfg.Store.Inbox(ctx, s.id)
	if err != nil {
		s.log.Error("forwarded inputs not read; the next one, or a resync, reads them", "err", err)
		return
	}
	fresh := false
	for _, q := range queued {
		if _, ok := s.queuedIDs[q.ID]; !ok {
			fresh = true
		}
	}
	if !fresh {
		return
	}
	// Whoever joined or was given a role on another replica.
	if err := s.rereadMembers(ctx); err != nil {
		s.log.Warn("members not read again; roles given on other replicas may be missed", "err", err)
	}
	for _, q := range queued {
		if _, ok := s.queuedIDs[q.ID]; ok {
			continue
		}
		j := &job{input: q.Input, inboxID: q.ID, receipt: newReceipt(), elsewhere: true}
		s.mu.Lock()
		if stops(q.Input) && s.cancelTurn != nil {
			s.cancelTurn(nil)
			j.stoppedRunning = true
		}
		select {
		case s.jobs() <- j:
			s.taken(q.ID)
		default:
			s.mu.Unlock()
			s.backlog.Store(true) // taken up once the queue is through
			s.kick()
			return
		}
		s.mu.Unlock()
	}
	s.kick()
}

// StoredElsewhere tells the manager that another replica stored events of
// a session: a mirror of it here shows them to its listeners.
func (m *Manager) StoredElsewhere(sessionID string) {
	if v, ok := m.live.Load(sessionID); ok {
		if s := v.(*session); s.remote.Load() {
			s.wantPull()
		}
	}
}

// InputElsewhere tells the manager that an input was stored in a
// session's inbox, perhaps by another replica: if this replica runs the
// session, it takes it up.
func (m *Manager) InputElsewhere(sessionID string) {
	if v, ok := m.live.Load(sessionID); ok {
		if s := v.(*session); !s.remote.Load() {
			go s.takeUpForwarded(m.ctx)
		}
	}
}

// BoundElsewhere tells the manager that a place was bound to a session,
// perhaps on another replica: if this replica runs it, the place's
// renderer follows it here.
func (m *Manager) BoundElsewhere(sessionID string) {
	if v, ok := m.live.Load(sessionID); ok && !v.(*session).remote.Load() {
		go m.announce(m.ctx, sessionID)
	}
}

// MembersElsewhere tells the manager that a session's people changed,
// perhaps on another replica (someone joined, a role was given, someone
// left): a session loaded here reads them again and shows its listeners
// the roster. Who is here is each replica's own: its listeners.
func (m *Manager) MembersElsewhere(sessionID string) {
	v, ok := m.live.Load(sessionID)
	if !ok {
		return
	}
	s := v.(*session)
	if s.unstored.Load() {
		return
	}
	go func() {
		if err := s.rereadMembers(m.ctx); err != nil {
			if m.ctx.Err() == nil {
				s.log.Warn("members not read again after a change elsewhere", "err", err)
			}
			return
		}
		s.mu.Lock()
		s.membersChangedLocked()
		s.mu.Unlock()
	}()
}

// Lost tells the manager that this replica no longer holds the lease of a
// session: it stops running it (demote).
func (m *Manager) Lost(sessionID string) {
	if v, ok := m.live.Load(sessionID); ok {
		v.(*session).demote()
	}
}

// TakeOver runs here a session whose owner is gone (its lease expired
// with work left: Cluster's orphans) and reports whether it does; one
// another replica has claimed meanwhile is left to it.
func (m *Manager) TakeOver(ctx context.Context, sessionID string) (bool, error) {
	var err error
	if v, ok := m.live.Load(sessionID); ok {
		s := v.(*session)
		if !s.remote.Load() {
			return false, nil // already run here
		}
		err = m.promote(ctx, s)
	} else if _, err = m.loadWith(ctx, sessionID, false, false); err == nil {
		m.cfg.Cluster.TookOver(sessionID) // an orphan: it has work left
	}
	if errors.Is(err, ErrElsewhere) {
		return false, nil
	}
	return err == nil, err
}

// Resync has every session loaded here look again at what it may have
// missed while the cluster could not tell it (its notifications dropped,
// or not yet listened for): mirrors read the events stored since, owners
// the inputs forwarded and the places bound (their followers are told
// again, which a follower already showing the place ignores), and both
// their people.
func (m *Manager) Resync() {
	m.live.Range(func(k, v any) bool {
		s := v.(*session)
		if s.remote.Load() {
			s.wantPull()
		} else {
			go s.takeUpForwarded(m.ctx)
			go m.announce(m.ctx, s.id)
		}
		m.MembersElsewhere(k.(string))
		return true
	})
}

// releaseUnloaded gives up the lease of a session that was unloaded,
// unless it was loaded again meanwhile (loadMu orders the two).
func (m *Manager) releaseUnloaded(s *session) {
	if m.cfg.Cluster == nil || s.remote.Load() {
		return
	}
	m.loadMu.Lock()
	defer m.loadMu.Unlock()
	if _, live := m.live.Load(s.id); live {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.cfg.Cluster.Release(ctx, s.id)
}

// releaseAll gives up the leases of the sessions this replica runs, once
// their goroutines have stopped (Drain): the other replicas take their
// open turns up at once instead of after the lease runs out.
func (m *Manager) releaseAll() {
	if m.cfg.Cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.live.Range(func(_, v any) bool {
		if s := v.(*session); !s.remote.Swap(true) {
			m.cfg.Cluster.Release(ctx, s.id)
		}
		return true
	})
}
