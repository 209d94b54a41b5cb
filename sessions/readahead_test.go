package sessions

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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

// whileBusy streams "Hel", then, once the consumer has taken it, the rest
// at once (they arrive while it is busy), and checks what readAhead
// yields against want.
func whileBusy(t *testing.T, rest []providers.Event, want []providers.Event) {
	t.Helper()
	gate, arrived := make(chan struct{}), make(chan struct{})
	p := scriptedStream(func(ctx context.Context, yield func(providers.Event, error) bool) {
		if !yield(textDelta("Hel"), nil) {
			return
		}
		<-gate // everything below arrives while the consumer is busy
		for _, ev := range rest {
			if !yield(ev, nil) {
				return
			}
		}
		close(arrived)
	})
	var got []providers.Event
	for ev, err := range readAhead(t.Context(), p, providers.Request{}, 0) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
		if len(got) == 1 {
			close(gate)
			<-arrived
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || got[i].Text != want[i].Text || got[i].ToolCall.ID != want[i].ToolCall.ID || got[i].Usage != want[i].Usage {
			t.Fatalf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestReadAheadMergesTextThatArrivedWhileBusy(t *testing.T) {
	call := providers.Event{Kind: providers.EventToolCall, ToolCall: switchboard.ToolCall{ID: "c1", Name: "current_time"}}
	whileBusy(t,
		[]providers.Event{textDelta("lo "), textDelta("Al"), call, textDelta("ice"), {Kind: providers.EventDone}},
		[]providers.Event{textDelta("Hel"), textDelta("lo Al"), call, {Kind: textTail, Text: "ice"}, {Kind: providers.EventDone}})
}

// The text held when the response ends goes as its tail, which the
// session stores with the message that follows. The usage does not make
// held text go.
func TestReadAheadEndsWithTheTail(t *testing.T) {
	usage := providers.Event{Kind: providers.EventUsage, Usage: switchboard.Usage{TotalTokens: 9}}
	whileBusy(t,
		[]providers.Event{textDelta("lo "), usage, textDelta("Alice"), {Kind: providers.EventDone}},
		[]providers.Event{textDelta("Hel"), usage, {Kind: textTail, Text: "lo Alice"}, {Kind: providers.EventDone}})
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
	for ev := range readAhead(t.Context(), p, providers.Request{}, 0) {
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
	for ev, err := range readAhead(t.Context(), p, providers.Request{}, 0) {
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
	for range readAhead(t.Context(), p, providers.Request{}, 0) {
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

// A reply streamed a token every 50 ms, with a 200 ms interval: the first
// token goes at once, then about one delta per interval with the tokens
// that came in it; held text goes before a tool call and at the end. No
// text is lost or reordered.
func TestReadAheadHoldsTextForTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		call := providers.Event{Kind: providers.EventToolCall, ToolCall: switchboard.ToolCall{ID: "c1", Name: "current_time"}}
		p := scriptedStream(func(ctx context.Context, yield func(providers.Event, error) bool) {
			for i := range 20 {
				if i > 0 {
					time.Sleep(50 * time.Millisecond)
				}
				if !yield(textDelta(fmt.Sprintf("t%d ", i)), nil) {
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
			if !yield(call, nil) || !yield(textDelta("after"), nil) {
				return
			}
			yield(providers.Event{Kind: providers.EventDone}, nil)
		})
		start := time.Now()
		type got struct {
			ev providers.Event
			at time.Duration
		}
		var evs []got
		for ev, err := range readAhead(t.Context(), p, providers.Request{}, 200*time.Millisecond) {
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, got{ev, time.Since(start)})
		}
		var text strings.Builder
		deltas := 0
		for i, g := range evs {
			if g.ev.Kind != providers.EventTextDelta && g.ev.Kind != textTail {
				continue
			}
			deltas++
			text.WriteString(g.ev.Text)
			if i == 0 && g.at != 0 {
				t.Errorf("the first token went after %v, want at once", g.at)
			}
		}
		want := ""
		for i := range 20 {
			want += fmt.Sprintf("t%d ", i)
		}
		if text.String() != want+"after" {
			t.Fatalf("the text came as %q", text.String())
		}
		// 20 tokens over 950 ms: the first at once, then one per 200 ms
		// (5), the rest before the tool call, and "after" at the end.
		if deltas < 5 || deltas > 8 {
			t.Fatalf("%d deltas for 20 tokens over 950 ms with a 200 ms interval: %+v", deltas, evs)
		}
		for i, g := range evs {
			if g.ev.Kind == providers.EventToolCall {
				if prev := evs[i-1]; prev.ev.Kind != providers.EventTextDelta || !strings.HasSuffix(prev.ev.Text, "t19 ") {
					t.Fatalf("the held text did not go before the tool call: %+v", evs)
				}
			}
		}
		if last := evs[len(evs)-1]; last.ev.Kind != providers.EventDone || evs[len(evs)-2].ev.Kind != textTail || evs[len(evs)-2].ev.Text != "after" {
			t.Fatalf("the end: %+v", evs[len(evs)-2:])
		}
	})
}
