package providers

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Policy is how a Resilient provider retries and times out.
type Policy struct {
	// MaxRetries is how many times a failed call is tried again (0: never).
	MaxRetries int
	// BaseDelay and MaxDelay bound the exponential backoff; a Retry-After
	// from the server wins over the computed delay (up to MaxRetryAfter).
	BaseDelay, MaxDelay, MaxRetryAfter time.Duration
	// IdleTimeout ends a call that has produced nothing for that long: before
	// the first byte, and between two stream events. A stream that keeps
	// producing may run for as long as it needs.
	IdleTimeout time.Duration
}

// Defaults for the zero fields of a Policy.
const (
	DefaultBaseDelay     = 500 * time.Millisecond
	DefaultMaxDelay      = 20 * time.Second
	DefaultMaxRetryAfter = 60 * time.Second
	DefaultIdleTimeout   = 60 * time.Second
)

func (p Policy) withDefaults() Policy {
	p.MaxRetries = max(p.MaxRetries, 0)
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if p.IdleTimeout <= 0 {
		p.IdleTimeout = DefaultIdleTimeout
	}
	return p
}

// Resilient wraps a provider with retries, an idle timeout and an optional
// fallback. Retrying is only possible before the stream has yielded
// anything: once text reached the user, a retry would show it twice, so a
// later failure is returned as it is.
type Resilient struct {
	Name     string
	Provider Provider
	Policy   Policy
	// Fallback, if set, gets the request when every retry failed with a
	// retryable error. Its own Resilient wrapper retries it in turn.
	Fallback *Resilient
	Logger   *slog.Logger
	// Sleep waits between attempts; tests replace it to observe delays.
	Sleep func(ctx context.Context, d time.Duration) error
}

// ErrIdleTimeout is the cause of a call that went silent for too long.
var ErrIdleTimeout = errors.New("no response from the model within the idle timeout")

// Stream implements Provider.
func (r *Resilient) Stream(ctx context.Context, req Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		err, started := r.stream(ctx, req, yield)
		if err == nil || started {
			if err != nil {
				yield(Event{}, err)
			}
			return
		}
		var pe *Error
		if r.Fallback != nil && errors.As(err, &pe) && pe.Retryable() && ctx.Err() == nil {
			r.logger().Warn("provider failed, using fallback", "provider", r.Name, "fallback", r.Fallback.Name, "err", err)
			req := req
			req.Model = "" // the fallback answers with its own model
			for ev, ferr := range r.Fallback.Stream(ctx, req) {
				if !yield(ev, ferr) || ferr != nil {
					return
				}
			}
			return
		}
		yield(Event{}, err)
	}
}

// stream runs the attempts. It returns the final error, if any, and whether
// anything was yielded (after which no retry or fallback may happen).
func (r *Resilient) stream(ctx context.Context, req Request, yield func(Event, error) bool) (error, bool) {
	p := r.Policy.withDefaults()
	var lastErr error
	for attempt := 0; attempt <= p.MaxRetries; attempt++ {
		if attempt > 0 {
			d := r.backoff(p, attempt, lastErr)
			r.logger().Warn("provider call failed, retrying", "provider", r.Name, "attempt", attempt, "delay", d, "err", lastErr)
			if err := r.sleep(ctx, d); err != nil {
				return fmt.Errorf("%s: waiting to retry: %w", r.Name, err), false
			}
		}
		err, started, stopped := r.attempt(ctx, p, req, yield)
		if err == nil || started || stopped {
			return err, started || stopped
		}
		lastErr = err
		var pe *Error
		if !errors.As(err, &pe) || !pe.Retryable() || ctx.Err() != nil {
			return err, false
		}
	}
	return fmt.Errorf("%s: giving up after %d attempts: %w", r.Name, p.MaxRetries+1, lastErr), false
}

// attempt makes one call under the idle watchdog. stopped reports that the
// consumer stopped ranging, which is not an error.
func (r *Resilient) attempt(ctx context.Context, p Policy, req Request, yield func(Event, error) bool) (err error, started, stopped bool) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	timer := time.AfterFunc(p.IdleTimeout, func() { cancel(ErrIdleTimeout) })
	defer timer.Stop()
	reset := func() {
		mu.Lock()
		timer.Reset(p.IdleTimeout)
		mu.Unlock()
	}
	for ev, err := range r.Provider.Stream(ctx, req) {
		if err != nil {
			if context.Cause(ctx) == ErrIdleTimeout {
				err = &Error{Provider: r.Name, Err: fmt.Errorf("%w (%s)", ErrIdleTimeout, p.IdleTimeout)}
			}
			return err, started, false
		}
		reset()
		started = true
		if !yield(ev, nil) {
			return nil, started, true
		}
	}
	return nil, started, false
}

// backoff is exponential with full jitter, unless the server said when to
// come back.
func (r *Resilient) backoff(p Policy, attempt int, err error) time.Duration {
	var pe *Error
	if errors.As(err, &pe) && pe.RetryAfter > 0 {
		return min(pe.RetryAfter, p.MaxRetryAfter)
	}
	ceiling := min(p.BaseDelay<<(attempt-1), p.MaxDelay)
	return ceiling/2 + rand.N(ceiling/2+1)
}

func (r *Resilient) sleep(ctx context.Context, d time.Duration) error {
	if r.Sleep != nil {
		return r.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (r *Resilient) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}
