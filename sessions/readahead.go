package sessions

import (
	"context"
	"iter"
	"strings"

	"github.com/switchboard-gw/switchboard/providers"
)

const (
	// readAheadBuffer is how many stream events may wait for the session.
	readAheadBuffer = 64
	// maxMergedDelta bounds a merged delta, so merging never makes a
	// frame a client's read limit refuses. A longer delta from the model
	// is passed on as it came.
	maxMergedDelta = 4 << 10
)

// readAhead streams a model response like p.Stream does, but reads it on
// its own goroutine, so decoding the next chunk overlaps with storing and
// sending the last one, and merges text deltas that have piled up meanwhile
// into one.
//
// A model streaming at reading pace (tens of milliseconds a token) is
// passed through token by token. When tokens arrive faster than the session
// can store and send them — a fast local model, a busy gateway — a
// session that is behind sends what has arrived as one delta instead of
// falling further behind frame by frame: fewer events to store, fewer
// frames to write, the same text. Other events keep their order.
//
// The goroutine ends before the sequence returns, whether the stream ended
// or the consumer stopped early.
func readAhead(ctx context.Context, p providers.Provider, req providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		stream := p.Stream(ctx, req)
		type item struct {
			ev  providers.Event
			err error
		}
		items := make(chan item, readAheadBuffer)
		stopped, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			defer close(items)
			for ev, err := range stream {
				select {
				case <-stopped:
					return // the consumer stopped: stop the stream too
				default:
				}
				select {
				case items <- item{ev, err}:
				case <-stopped:
					return
				}
			}
		}()
		defer func() {
			close(stopped)
			cancel() // ends the stream's request if it is still going
			<-done
		}()

		var text strings.Builder
		flush := func() bool {
			if text.Len() == 0 {
				return true
			}
			ev := providers.Event{Kind: providers.EventTextDelta, Text: text.String()}
			text.Reset()
			return yield(ev, nil)
		}
		for it := range items {
			// Take what else has already arrived, merging adjacent text.
			for {
				if it.err == nil && it.ev.Kind == providers.EventTextDelta {
					if text.Len() > 0 && text.Len()+len(it.ev.Text) > maxMergedDelta && !flush() {
						return
					}
					text.WriteString(it.ev.Text)
				} else if !flush() || !yield(it.ev, it.err) {
					return
				}
				var ok bool
				select {
				case it, ok = <-items:
				default:
				}
				if !ok {
					break
				}
			}
			if !flush() {
				return
			}
		}
	}
}
