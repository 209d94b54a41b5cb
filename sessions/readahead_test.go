package sessions

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// scriptedStream is a provider whose stream is written by the test, so it
// can decide what has "arrived" while the session is busy.
type scriptedStream func(ctx context.Context, yield func(providers.Event, error) bool)

func (f scriptedStream) Stream(ctx context.Context, _ providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) { f(ctx, yield) }
}

func textDelta(s string) providers.Event {
	return providers.Event{Kind: providers.EventTextDelta, Text: s}
}

func TestReadAheadMergesTextThatArrivedWhileBusy(t *testing.T) {
	gate, arrived := make(chan struct{}), make(chan struct{})
	call := providers.Event{Kind: providers.EventToolCall, ToolCall: switchboard.ToolCall{ID: "c1", Name: "current_time"}}
	p := scriptedStream(func(ctx context.Context, yield func(providers.Event, error) bool) {
		if !yield(textDelta("Hel"), nil) {
			return
		}
		<-gate // everything below arrives while the consumer is busy
		for _, ev := range []providers.Event{textDelta("lo "), textDelta("Al"), call, textDelta("ice"), {Kind: providers.EventDone}} {
			if !yield(ev, nil) {
				return
			}
		}
		close(arrived)
	})

	var got []providers.Event
	for ev, err := range readAhead(t.Context(), p, providers.Request{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
		if len(got) == 1 {
			close(gate)
			<-arrived
		}
	}
	want := []providers.Event{textDelta("Hel"), textDelta("lo Al"), call, textDelta("ice"), {Kind: providers.EventDone}}
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || got[i].Text != want[i].Text || got[i].ToolCall.ID != want[i].ToolCall.ID {
			t.Fatalf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestReadAheadKeepsMergedDeltasSmall(t *testing.T) {
	piece := strings.Repeat("a", 1000)
	big := strings.Repeat("b", maxMergedDelta+1)
	gate, arrived := make(chan struct{}), make(chan struct{})
	p := scriptedStream(func(ctx context.Context, yield func(providers.Event, error) bool) {
		if !yield(textDelta("go"), nil) {
			return
		}
		<-gate
		for _, ev := range []providers.Event{textDelta(piece), textDelta(piece), textDelta(piece), textDelta(piece), textDelta(piece), textDelta(big), textDelta(piece)} {
			if !yield(ev, nil) {
				return
			}
		}
		close(arrived)
	})
	var got []string
	for ev := range readAhead(t.Context(), p, providers.Request{}) {
		if len(got) == 0 {
			close(gate)
			<-arrived // everything else piles up behind the first delta
		}
		got = append(got, ev.Text)
	}
	// After the first: four pieces fit in one delta, the fifth starts the
	// next; the oversized one goes alone and whole.
	want := []int{2, 4000, 1000, maxMergedDelta + 1, 1000}
	if len(got) != len(want) {
		t.Fatalf("got %d deltas, want %d", len(got), len(want))
	}
	for i, n := range want {
		if len(got[i]) != n {
			t.Fatalf("delta %d is %d bytes, want %d", i, len(got[i]), n)
		}
	}
}

func TestReadAheadPassesErrorsAfterTheTextBeforeThem(t *testing.T) {
	boom := errors.New("stream broke")
	p := scriptedStream(func(ctx context.Context, yield func(providers.Event, error) bool) {
		_ = yield(textDelta("par"), nil) && yield(textDelta("tial"), nil) && yield(providers.Event{}, boom)
	})
	var texts string
	var gotErr error
	for ev, err := range readAhead(t.Context(), p, providers.Request{}) {
		if err != nil {
			gotErr = err
			break
		}
		texts += ev.Text
	}
	if texts != "partial" || !errors.Is(gotErr, boom) {
		t.Fatalf("text %q, err %v; want all the text, then the error", texts, gotErr)
	}
}

func TestReadAheadStopsTheStreamWhenTheConsumerStops(t *testing.T) {
	ended := make(chan error, 1)
	p := scriptedStream(func(ctx context.Context, yield func(providers.Event, error) bool) {
		for yield(textDelta("x"), nil) {
		}
		<-ctx.Done() // the request is cancelled, as an HTTP stream's would be
		ended <- ctx.Err()
	})
	n := 0
	for range readAhead(t.Context(), p, providers.Request{}) {
		if n++; n == 3 {
			break
		}
	}
	// readAhead has returned, so the stream's goroutine must be done.
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stream's context ended with %v", err)
		}
	default:
		t.Fatal("the stream was still running after the consumer stopped")
	}
}
