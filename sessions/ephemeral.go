package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/switchboard-gw/switchboard"
)

// An ephemeral session serves one request of a stateless API (the
// OpenAI-compatible listener's chat completions): the request carries the
// conversation so far, the session runs its last message through the
// guide (system prompt, tools, approval policy) as any turn, and the
// listener deletes it (Delete) once it has the answer. Opened with
// AttachOptions.Ephemeral:
//
//   - History seeds the session's window: the model is given those
//     messages before the one submitted. They are not stored and shown
//     to no one: they are the caller's.
//   - NewPerMinute does not apply (the listener rate-limits its callers:
//     a request a session).
//
// Like any session opened without a key, it is stored with its first
// input, under a key of the sessions' own (ephemeralKey + its id), which
// no listener's key starts with and Attach refuses. A crash before Delete
// leaves it stored: its request's client got an error, and nothing of it
// is to be kept, so the next start deletes it instead of running its open
// turn again (restore); so does loading it by its id. One left with no
// open turn (a crash between the answer and Delete) is not loaded at
// start: sessions.retention deletes it.

// ephemeralKey starts the key of every ephemeral session.
const ephemeralKey = switchboard.EphemeralKey

// ephemeral reports whether a stored session is an ephemeral one.
func ephemeral(rec switchboard.Session) bool { return strings.HasPrefix(rec.Key, ephemeralKey) }

// errLeftover: the session loaded was an ephemeral one a crash left, and
// was deleted.
var errLeftover = fmt.Errorf("%w: a stateless request's session, left by a crash and deleted", switchboard.ErrNotFound)

// discardLeftover deletes an ephemeral session a crash left stored (s,
// which runs nothing), charging first what its open turn had spent by its
// last stored step.
func (m *Manager) discardLeftover(ctx context.Context, s *session, open *pendingTurn) error {
	if open != nil {
		if c := s.charge(&open.Turn); c != nil {
			if _, err := m.cfg.Store.WriteTurn(ctx, s.id, switchboard.TurnWrite{Charge: c}); err != nil {
				return fmt.Errorf("sessions: charge the leftover stateless session %s: %w", s.id, err)
			}
			s.charged(c)
		}
	}
	if err := m.cfg.Store.DeleteSessions(ctx, []string{s.id}); err != nil {
		return fmt.Errorf("sessions: delete the leftover stateless session %s: %w", s.id, err)
	}
	m.forget(s.id)
	m.cfg.Logger.Info("a stateless request's session left by a crash was deleted, not resumed", "session", s.id, "owner", s.rec.Owner)
	return fmt.Errorf("sessions: load %s: %w", s.id, errLeftover)
}

// openEphemeral creates the session an ephemeral Attach asks for.
func (m *Manager) openEphemeral(ctx context.Context, opts AttachOptions) (*session, error) {
	if opts.SessionID != "" || opts.Key != "" {
		return nil, fmt.Errorf("sessions: attach: %w: an ephemeral session is new: no id or key", ErrBadInput)
	}
	s, err := m.createAs(ctx, "", opts.Guide, opts.Author, true)
	if err != nil {
		return nil, err
	}
	// Not running yet, and found by nobody else: the window is ours.
	before, step := m.openStep(opts.History, opts.Author)
	s.remember(before...)
	if step != nil {
		// The caller ran the tools the history's last step called: the
		// session awaits their results (InputToolResults), as a turn
		// suspended for them would (clienttools.go).
		s.setPending(step)
		s.armTimers()
	}
	return s, nil
}

// Delete removes a session and everything it holds once the session is
// done with the job under way and what is queued: the turn under way ends
// first. A suspended turn (an approval waiting) is dropped with it; so
// are inputs still queued when the manager stops. It returns when the
// rows are gone, or ctx ends. A session not loaded here is deleted from
// the store directly.
func (m *Manager) Delete(ctx context.Context, sessionID string) error {
	v, ok := m.live.Load(sessionID)
	if !ok {
		return m.deleteStored(ctx, sessionID)
	}
	s := v.(*session)
	done := make(chan error, 1)
	s.mu.Lock()
	switch {
	case s.closed: // unloaded meanwhile
		s.mu.Unlock()
		return m.deleteStored(ctx, sessionID)
	case s.removal != nil:
		s.mu.Unlock()
		return fmt.Errorf("sessions: delete %s: %w", sessionID, ErrDeleting)
	case !s.running && s.queued() == 0:
		// Parked: nothing runs in it. Running it here keeps kick from
		// starting its goroutine, and deleteNow closes it for good.
		s.running = true
		s.mu.Unlock()
		s.deleteNow(ctx, done)
	default:
		s.removal = done // its goroutine deletes it (run)
		s.mu.Unlock()
		s.kick() // work queued on a parked session: it runs, then deletes
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("sessions: delete %s: %w", sessionID, ctx.Err())
	}
}

// ErrDeleting: a session is being deleted already.
var ErrDeleting = errors.New("the session is being deleted")

func (m *Manager) deleteStored(ctx context.Context, id string) error {
	if err := m.cfg.Store.DeleteSessions(ctx, []string{id}); err != nil {
		return fmt.Errorf("sessions: delete %s: %w", id, err)
	}
	m.forget(id)
	return nil
}

// takeRemoval is the Delete waiting for the session's goroutine, if any.
func (s *session) takeRemoval() chan<- error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.removal
	s.removal = nil
	return r
}

// deleteNow is Delete on the session's goroutine: nothing runs in the
// session meanwhile.
func (s *session) deleteNow(ctx context.Context, done chan<- error) {
	s.stopTimers()
	if p := s.pending; p != nil && !s.unstored.Load() {
		// A turn dropped while it waits has spent tokens all the same:
		// its charge outlives the session, as every turn's does.
		if c := s.charge(&p.Turn); c != nil && s.write(ctx, switchboard.TurnWrite{Charge: c}) {
			s.charged(c)
		}
	}
	s.pending = nil
	if !s.unstored.Load() {
		if err := s.m.cfg.Store.DeleteSessions(ctx, []string{s.id}); err != nil {
			done <- fmt.Errorf("sessions: delete %s: %w", s.id, err)
			return
		}
	}
	s.mu.Lock()
	s.closeLocked()
	s.mu.Unlock()
	s.m.unload(s)
	go s.m.releaseUnloaded(s)
	s.m.forget(s.id)
	s.log.Debug("session deleted")
	done <- nil
}

// forget tells Config.Forget a session is gone.
func (m *Manager) forget(id string) {
	if m.cfg.Forget != nil {
		m.cfg.Forget([]string{id})
	}
}

// ErrBadInput: options that contradict each other, client tools no
// provider would take, tool results the session does not wait for; a
// Refusal says which to the person (Reason).
var ErrBadInput = errors.New("bad input")
