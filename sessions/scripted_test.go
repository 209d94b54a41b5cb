package sessions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// scripted is a model in the test's own process, for tests that run in a
// synctest bubble: there, the scripted server of openaitest cannot be used,
// since a goroutine waiting on the network is not durably blocked and the
// bubble's clock would never move. It answers from the same script as
// openaitest (its Text and ToolCalls, streamed in that order, then usage
// and done; Delay between two pieces of text) and records the requests it was given.
type scripted struct {
	mu        sync.Mutex
	script    []openaitest.Reply
	responder func(providers.Request) openaitest.Reply
	requests  []providers.Request
}

// Push appends replies to the script.
func (s *scripted) Push(r ...openaitest.Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, r...)
}

// Respond sets how requests are answered once the script is used up.
func (s *scripted) Respond(f func(providers.Request) openaitest.Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder = f
}

// Requests returns what the model was asked so far.
func (s *scripted) Requests() []providers.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Stream implements providers.Provider.
func (s *scripted) Stream(ctx context.Context, req providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		req.Messages = slices.Clone(req.Messages) // the session's window changes after the call
		s.mu.Lock()
		s.requests = append(s.requests, req)
		var r openaitest.Reply
		switch {
		case len(s.script) > 0:
			r, s.script = s.script[0], s.script[1:]
		case s.responder != nil:
			r = s.responder(req)
		default:
			r = openaitest.Reply{Text: []string{"ok"}}
		}
		s.mu.Unlock()
		if r.Status != 0 || r.Cut || r.Hang || r.Gate != nil {
			yield(providers.Event{}, fmt.Errorf("scripted model: only Text, ToolCalls and Delay are scripted in process, not %+v", r))
			return
		}
		for i, t := range r.Text {
			if i > 0 && r.Delay > 0 {
				time.Sleep(r.Delay) // in a bubble, the text before goes out first
			}
			if ctx.Err() != nil {
				yield(providers.Event{}, context.Cause(ctx))
				return
			}
			if !yield(providers.Event{Kind: providers.EventTextDelta, Text: t}, nil) {
				return
			}
		}
		for _, c := range r.ToolCalls {
			call := switchboard.ToolCall{ID: c.ID, Name: c.Name, Args: json.RawMessage(c.Args)}
			if !yield(providers.Event{Kind: providers.EventToolCall, ToolCall: call}, nil) {
				return
			}
		}
		stop := "stop"
		if len(r.ToolCalls) > 0 {
			stop = "tool_calls"
		}
		if !yield(providers.Event{Kind: providers.EventUsage, Usage: switchboard.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}, nil) {
			return
		}
		yield(providers.Event{Kind: providers.EventDone, StopReason: stop, Model: "gpt-test"}, nil)
	}
}

// lastMessage is the last message of the last request the model got.
func lastMessage(t *testing.T, s *scripted) switchboard.Message {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 || len(reqs[len(reqs)-1].Messages) == 0 {
		t.Fatal("the model was never called")
	}
	msgs := reqs[len(reqs)-1].Messages
	return msgs[len(msgs)-1]
}
