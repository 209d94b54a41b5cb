package sessions

import (
	"context"
	"iter"
	"strings"
	"time"

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

// textTail is readAhead's own kind of event: the text held when the
// response ended. It is a delta like any other, but nothing follows it
// in the response, so the session stores it in the write of the message
// that follows at once (one write a turn fewer) instead of on its own.
const textTail providers.EventKind = -1

// readAhead streams a model response like p.Stream does, but reads it on
// its own goroutine, so decoding the next chunk overlaps with storing and
// sending the last one, and merges text deltas into fewer.
//
// Two things merge them. Text that piled up while the session was busy
// storing and sending goes as one delta: a busy gateway or a fast local
// model does not fall behind frame by frame. And after a delta, text is
// held for up to interval (sessions' DeltaInterval) and goes as one delta
// with what else comes meanwhile: a reply streamed token by token costs a
// stored event per interval, not per token, while people still see it
// grow several times a second. The first text of a response goes at
// once, and held text goes before a tool call or an error, which keep
// their order with it; the usage, which no one is shown until the turn
// ends, passes it. Text still held when the response ends goes as a
// textTail. Every delta is stored before it is shown, as every event is;
// held text is neither, so a crash loses nothing anyone saw. interval 0
// passes each token on as soon as the session can take it.
//
// The goroutine ends before the sequence returns, whether the stream ended
// or the consumer stopped early.
func readAhead(ctx context.Context, p providers.Provider, req providers.Request, interval time.Duration) iter.Seq2[providers.Event, error] {
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

		var (
			text strings.Builder
			last time.Time // when the last delta went
			hold *time.Timer
		)
		defer func() {
			if hold != nil {
				hold.Stop()
			}
		}()
		flush := func() bool {
			if text.Len() == 0 {
				return true
			}
			ev := providers.Event{Kind: providers.EventTextDelta, Text: text.String()}
			text.Reset()
			last = time.Now()
			return yield(ev, nil)
		}
		// tail hands over the text held when the response has ended.
		tail := func() bool {
			if text.Len() == 0 {
				return true
			}
			ev := providers.Event{Kind: textTail, Text: text.String()}
			text.Reset()
			return yield(ev, nil)
		}
		// due is when held text goes: now for the first of a response or
		// past the interval, else at the interval's end.
		due := func() <-chan time.Time {
			if text.Len() == 0 || interval <= 0 || last.IsZero() {
				return nil
			}
			wait := interval - time.Since(last)
			if wait <= 0 {
				return nil
			}
			if hold == nil {
				hold = time.NewTimer(wait)
			} else {
				hold.Reset(wait)
			}
			return hold.C
		}
		for {
			var it item
			var ok bool
			if text.Len() > 0 {
				wait := due()
				if wait == nil {
					if !flush() {
						return
					}
					continue
				}
				select {
				case it, ok = <-items:
				case <-wait:
					if !flush() {
						return
					}
					continue
				}
			} else {
				it, ok = <-items
			}
			if !ok {
				tail()
				return
			}
			// Take what else has already arrived, merging adjacent text.
			for {
				switch {
				case it.err == nil && it.ev.Kind == providers.EventTextDelta:
					if text.Len() > 0 && text.Len()+len(it.ev.Text) > maxMergedDelta && !flush() {
						return
					}
					text.WriteString(it.ev.Text)
				case it.err == nil && it.ev.Kind == providers.EventUsage:
					if !yield(it.ev, nil) {
						return
					}
				case it.err == nil && it.ev.Kind == providers.EventDone:
					if !tail() || !yield(it.ev, nil) {
						return
					}
				default:
					if !flush() || !yield(it.ev, it.err) {
						return
					}
				}
				select {
				case it, ok = <-items:
				default:
					ok = false
				}
				if !ok {
					break
				}
			}
		}
	}
}
