// Package queue is a bounded FIFO whose buffer grows with what waits and
// is let go of when it empties: an idle owner holds no buffer, where a
// channel of the same bound holds all of it from the start. Pushers never
// block (Push refuses past the bound, and the caller decides what that
// means); the one consumer pops after Ready says something came.
package queue

import (
	"context"
	"sync"
)

// Queue is safe for many pushers and one consumer.
type Queue[T any] struct {
	mu    sync.Mutex
	items []T
	ready chan struct{}
}

// New returns an empty queue.
func New[T any]() *Queue[T] { return &Queue[T]{ready: make(chan struct{}, 1)} }

// Push adds v unless max items wait already.
func (q *Queue[T]) Push(v T, max int) bool {
	q.mu.Lock()
	if len(q.items) >= max {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// Pop takes the oldest item; ok is false when none waits.
func (q *Queue[T]) Pop() (v T, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return v, false
	}
	v = q.items[0]
	var zero T
	q.items[0] = zero
	q.items = q.items[1:]
	if len(q.items) == 0 {
		q.items = nil // the buffer goes with the last item
	}
	return v, true
}

// Len is how many items wait.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// Ready is signalled after a Push: pop until Pop says none is left, then
// wait on it again. A signal may come for items already popped.
func (q *Queue[T]) Ready() <-chan struct{} { return q.ready }

// Send puts v on ch, preferring the channel to ctx: a value that fits is
// sent even if ctx has just ended, so nothing is refused that need not
// be. Only when ch is full does it wait, until there is room or ctx ends.
func Send[T any](ctx context.Context, ch chan<- T, v T) error {
	select {
	case ch <- v:
		return nil
	default:
	}
	select {
	case ch <- v:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
