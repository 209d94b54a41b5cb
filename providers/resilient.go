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
	// BreakerFailures is how many turns in a row may fail with a retryable
	// error (rate limits, 5xx, network faults, timeouts; never refusals)
	// before the provider's circuit opens (see Circuit); negative: never.
	BreakerFailures int
	// BreakerCooldown is how long an open circuit keeps calls away from the
	// provider before one probe call tries it again.
	BreakerCooldown time.Duration
}

// Defaults for the zero fields of a Policy.
const (
	DefaultBaseDelay     = 500 * time.Millisecond
	DefaultMaxDelay      = 20 * time.Second
	DefaultMaxRetryAfter = 60 * time.Second
	DefaultIdleTimeout   = 60 * time.Second

	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 30 * time.Second
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
	if p.BreakerFailures == 0 {
		p.BreakerFailures = DefaultBreakerFailures
	}
	if p.BreakerCooldown <= 0 {
		p.BreakerCooldown = DefaultBreakerCooldown
	}
	return p
}

// Resilient wraps a provider with retries, an idle timeout, a circuit
// breaker and an optional fallback. Retrying is only possible before the
// stream has yielded anything: once text reached the user, a retry would
// show it twice, so a later failure is returned as it is.
//
// A call that fails for good ends with a *Failure: its kind, a reference
// id, and the detail, safe to log (no credentials, bodies capped). The
// failure is logged with the same reference; Describe turns it into the
// message for users.
type Resilient struct {
	Name string
	// Kind is the provider's kind as configured (openai, anthropic,
	// gemini, ollama; demo for the offline model), for traces.
	Kind     string
	Provider Provider
	Policy   Policy
	// Fallback, if set, gets the request when every retry failed with a
	// retryable error, or at once while the circuit is open. Its own
	// Resilient wrapper retries it in turn.
	Fallback *Resilient
	Logger   *slog.Logger
	// Sleep waits between attempts; tests replace it to observe delays.
	Sleep func(ctx context.Context, d time.Duration) error
	// Circuit is the provider's circuit breaker; nil means none. Copies of
	// a Resilient share the Circuit they hold (sessions copy a Resilient
	// to give it a guide's fallback), so set it where the Resilient is
	// built: NewCircuit(name, onChange).
	Circuit *Circuit
	// Now is the breaker's clock; nil means time.Now.
	Now func() time.Time
	// ContextWindow is the model's context window in tokens (the
	// provider's context_window, else ContextWindow of its model); 0:
	// not known, and a request is shortened only when the provider
	// refuses it as too long (ErrContextTooLong).
	ContextWindow int
	// NoVision: the model takes no image input (the provider's vision:
	// false); a request's Images are left out, the model reads what the
	// messages say of the files.
	NoVision bool
	// Model is the model the provider is configured with, which a request
	// naming none gets: the sessions price a response by it when its own
	// model has no price, label their metrics with it, and traces name it.
	Model string
}

// ErrIdleTimeout is the cause of a call that went silent for too long.
var ErrIdleTimeout = errors.New("no response from the model within the idle timeout")

// Stream implements Provider.
func (r *Resilient) Stream(ctx context.Context, req Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if r.NoVision {
			req.Images = nil // the fallback of a provider with vision may have none
		}
		req, back := wireNames(req)
		if back != nil {
			outer := yield
			yield = func(ev Event, err error) bool {
				if name, ok := back[ev.ToolCall.Name]; ok && ev.Kind == EventToolCall {
					ev.ToolCall.Name = name
				}
				return outer(ev, err)
			}
		}
		p := r.Policy.withDefaults()
		allowed, probe := r.Circuit.allow(p, r.now())
		var (
			err     error
			started bool
		)
		if allowed {
			if probe {
				r.logger().Info("provider circuit half-open: trying one call", "provider", r.Name)
				p.MaxRetries = 0 // one call decides; the fallback is waiting
			}
			err, started = r.stream(ctx, p, req, yield)
			r.recordOutcome(ctx, p, err, probe)
		} else {
			err = &Error{Provider: r.Name, Err: ErrCircuitOpen}
		}
		if err == nil {
			return
		}
		var pe *Error
		if !started && r.Fallback != nil && errors.As(err, &pe) && pe.Retryable() && ctx.Err() == nil {
			if allowed {
				r.logger().Warn("provider failed, using fallback", "provider", r.Name, "fallback", r.Fallback.Name, "err", err)
			} else {
				r.logger().Debug("provider circuit open, using fallback", "provider", r.Name, "fallback", r.Fallback.Name)
			}
			req := req
			req.Model = "" // the fallback answers with its own model
			for ev, ferr := range r.Fallback.Stream(ctx, req) {
				if !yield(ev, ferr) || ferr != nil {
					return
				}
			}
			return
		}
		yield(Event{}, r.fail(ctx, err))
	}
}

// fail gives a call's final error its kind and a reference id, and logs
// the detail with that reference. An error that already is a Failure (a
// fallback's) and a call cancelled by its caller are returned as they are.
func (r *Resilient) fail(ctx context.Context, err error) error {
	var f *Failure
	if ctx.Err() != nil || errors.As(err, &f) {
		return err
	}
	f = &Failure{Provider: r.Name, Kind: Classify(err), Ref: NewRef(), Err: err}
	r.logger().Warn("provider call failed", "provider", r.Name, "kind", f.Kind, "ref", f.Ref, "err", RedactText(err.Error()))
	return f
}

// recordOutcome tells the circuit how a call went, and logs a change.
func (r *Resilient) recordOutcome(ctx context.Context, p Policy, err error, probe bool) {
	if r.Circuit == nil {
		return
	}
	o := outcomeSuccess
	var pe *Error
	switch {
	case err == nil:
	case ctx.Err() != nil:
		o = outcomeNeutral
	case errors.As(err, &pe) && pe.Retryable():
		o = outcomeFailure
	case errors.As(err, &pe):
		// A refusal: the provider is up and answering.
	default:
		o = outcomeNeutral // never sent
	}
	opened, closed := r.Circuit.record(p, r.now(), o, probe)
	switch {
	case opened && probe:
		r.logger().Warn("provider circuit still open: the probe call failed", "provider", r.Name, "cooldown", p.BreakerCooldown)
	case opened:
		r.logger().Warn("provider circuit open: calls skip it", "provider", r.Name, "failures", p.BreakerFailures, "cooldown", p.BreakerCooldown)
	case closed:
		r.logger().Info("provider circuit closed: the probe call succeeded", "provider", r.Name)
	}
}

func (r *Resilient) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// stream runs the attempts. It returns the final error, if any, and whether
// anything was yielded (after which no retry or fallback may happen).
func (r *Resilient) stream(ctx context.Context, p Policy, req Request, yield func(Event, error) bool) (error, bool) {
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
	if p.MaxRetries == 0 {
		return lastErr, false
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
