package websocket

import "sync"

// frameQueue is a connection's outgoing frames, in order: bounded (push
// refuses past max frames), grown as frames come and let go of as it
// empties, so an idle connection holds no buffer for it (a channel of
// SendBuffer frames would hold 6 KiB each, idle or not). The reader and
// the forwarder push; the writer pops, woken by ready.
type frameQueue struct {
	mu     sync.Mutex
	frames [][]byte
	ready  chan struct{} // cap 1: a frame was pushed
}

func newFrameQueue() *frameQueue { return &frameQueue{ready: make(chan struct{}, 1)} }

// push adds b unless the queue holds max frames already.
func (q *frameQueue) push(b []byte, max int) bool {
	q.mu.Lock()
	if len(q.frames) >= max {
		q.mu.Unlock()
		return false
	}
	q.frames = append(q.frames, b)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// pop takes the oldest frame; ok is false when there is none.
func (q *frameQueue) pop() (b []byte, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.frames) == 0 {
		return nil, false
	}
	b = q.frames[0]
	q.frames[0] = nil
	q.frames = q.frames[1:]
	if len(q.frames) == 0 {
		q.frames = nil // the backing array goes with the last frame
	}
	return b, true
}

// len is how many frames wait.
func (q *frameQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.frames)
}
