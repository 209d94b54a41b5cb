package sessions

import (
	"context"
	"errors"
	"fmt"
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
// input; a crash before Delete leaves it to retention.

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
	s.remember(opts.History...)
	return s, nil
}

// Delete removes a session and everything it holds once the session is
// done with what is queued before this call: the turn under way ends
// first. A suspended turn (an approval waiting) is dropped with it. It
// returns when the rows are gone, or ctx ends. A session not loaded here
// is deleted from the store directly.
func (m *Manager) Delete(ctx context.Context, sessionID string) error {
	v, ok := m.live.Load(sessionID)
	if !ok {
		if err := m.cfg.Store.DeleteSessions(ctx, []string{sessionID}); err != nil {
			return fmt.Errorf("sessions: delete %s: %w", sessionID, err)
		}
		m.forget(sessionID)
		return nil
	}
	s := v.(*session)
	done := make(chan error, 1)
	s.mu.Lock()
	if s.closed { // unloaded meanwhile
		s.mu.Unlock()
		if err := m.cfg.Store.DeleteSessions(ctx, []string{sessionID}); err != nil {
			return fmt.Errorf("sessions: delete %s: %w", sessionID, err)
		}
		m.forget(sessionID)
		return nil
	}
	select {
	case s.jobs() <- &job{remove: done}:
	default:
		s.mu.Unlock()
		return fmt.Errorf("sessions: delete %s: %w", sessionID, ErrBusy)
	}
	s.mu.Unlock()
	s.kick()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("sessions: delete %s: %w", sessionID, ctx.Err())
	}
}

// deleteNow is Delete on the session's goroutine: nothing runs in the
// session meanwhile.
func (s *session) deleteNow(ctx context.Context, done chan<- error) {
	s.stopTimers()
	s.pending = nil
	if !s.unstored.Load() {
		if err := s.m.cfg.Store.DeleteSessions(ctx, []string{s.id}); err != nil {
			done <- fmt.Errorf("sessions: delete %s: %w", s.id, err)
			return
		}
	}
	s.mu.Lock()
	s.closed = true
	for sub := range s.subs {
		sub.drop()
	}
	s.subs = nil
	if s.idle != nil {
		s.idle.Stop()
	}
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

// ErrBadInput is returned for options that contradict each other.
var ErrBadInput = errors.New("bad input")
