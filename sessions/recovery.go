package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// This file is how a session takes up what a crash, a restart or a failed
// write cut short. The store always says what was under way: an open turn
// (running, or waiting for approvals) and the inputs accepted but not
// taken up (the inbox). A session loading, or repairing itself after a
// failed write, reads that and goes on from there.

// loadTurn reads the session's open turn, nil if there is none.
func loadTurn(ctx context.Context, st Store, id string) (*pendingTurn, error) {
	data, err := st.LoadPending(ctx, id)
	if errors.Is(err, switchboard.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p pendingTurn
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("open turn: %w", err)
	}
	if len(p.Confirmations) == 0 {
		p.Phase = phaseRunning
	}
	return &p, nil
}

// takeUp goes on with an open turn: a turn that was running is run again
// (queued with do); a turn waiting for approvals waits again, with its
// requests open and their expiry armed, or goes on if all were answered.
func (s *session) takeUp(p *pendingTurn, do func(job)) {
	switch {
	case p == nil:
	case p.Phase == phaseRunning:
		do(job{interrupted: p})
	case p.allResolved():
		s.setPending(p)
		do(job{resume: true})
	default:
		s.setPending(p)
		s.armTimers()
	}
}

// maxResumes bounds how often one turn is run again: a turn that takes
// the gateway down every time it runs must not do so forever.
const maxResumes = 3

// resumeInterrupted runs again a turn a crash, a restart or a failed write
// cut short. Whatever was streamed of it is not its answer: an
// "interrupted" error says so to the listeners, then the model is asked
// again from the stored context. A tool step that was cut before its
// results were stored is asked for again: an "ask" tool asks again, and an
// "auto" tool may run twice.
func (s *session) resumeInterrupted(ctx context.Context, p *pendingTurn, reason string) {
	t := p.Turn
	t.started = s.m.cfg.Now()
	if t.Resumed >= maxResumes {
		s.log.Error("interrupted turn given up: it was cut every time it ran", "resumed", t.Resumed)
		s.emitError(ctx, switchboard.ErrCodeInternal, fmt.Sprintf(
			"This message could not be answered: answering it was interrupted %d times. Send it again, or rephrase it.", t.Resumed+1))
		s.endTurn(ctx, &t, nil)
		return
	}
	t.Resumed++
	ev, ok := s.event(switchboard.EventError, switchboard.ErrorData{
		Code:    switchboard.ErrCodeInterrupted,
		Message: "The answer was interrupted (the gateway restarted or could not save it). Answering again.",
	})
	if !ok {
		return
	}
	s.traceTurn(ctx, &t, "restart", "")
	// Stored, and waited for, before the model is called: while storage
	// still fails, no tokens are spent on an answer that cannot be kept.
	if !s.write(ctx, switchboard.TurnWrite{Events: []switchboard.Event{ev}, Published: s.onCommit, Turn: running(t)}) {
		s.traceTurnEnd(&t, "not_stored", nil)
		return
	}
	s.m.cfg.Metrics.TurnResumed(reason)
	s.log.Info("interrupted turn resumed", "reason", reason, "iteration", t.Iteration, "resumed", t.Resumed)
	s.agentLoop(ctx, &t, nil)
}

// Backoff between repair attempts while storage keeps failing.
const (
	repairFirst = 500 * time.Millisecond
	repairMax   = 30 * time.Second
)

// repair brings the session back after a write failed (disk full, I/O
// error). It waits until storage works again, numbers events from the
// last one stored (nothing after it was ever shown), reloads the open turn
// from the store and goes on with it as a restart would, and handles again
// the job that failed if its input was never stored. The session takes no
// other input meanwhile: its inputs wait, accepted, in the inbox.
func (s *session) repair(failed job) {
	ctx := s.m.ctx
	wait := repairFirst
	for s.failing.Load() {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		case <-s.m.draining:
			return // the next start takes it up
		}
		wait = min(2*wait, repairMax)
		// Once the queue is through, no older write is still to fail.
		_ = s.m.cfg.Store.Flush(ctx)
		seq, err := s.m.cfg.Store.LastSeq(ctx, s.id)
		if err != nil {
			s.log.Warn("repair: storage still failing", "err", err)
			continue
		}
		open, err := loadTurn(ctx, s.m.cfg.Store, s.id)
		if err != nil {
			s.log.Warn("repair: storage still failing", "err", err)
			continue
		}
		queued, err := s.m.cfg.Store.Inbox(ctx, s.id)
		if err != nil {
			s.log.Warn("repair: storage still failing", "err", err)
			continue
		}
		s.seq = seq
		s.mu.Lock()
		s.published = seq
		s.mu.Unlock()
		s.stopTimers()
		s.setPending(nil)
		s.failing.Store(false)
		s.log.Info("storage works again: session resumed", "last_seq", seq)

		s.takeUp(open, func(j job) {
			if j.interrupted != nil {
				s.resumeInterrupted(ctx, j.interrupted, "storage")
				return
			}
			s.handle(j)
		})
		if s.failing.Load() || failed.inboxID == 0 {
			continue
		}
		if slices.ContainsFunc(queued, func(q switchboard.QueuedInput) bool { return q.ID == failed.inboxID }) {
			s.handle(failed) // its input was never taken up
		}
	}
}
