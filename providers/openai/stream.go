package openai

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// chunk is what the adapter reads of one streamed chat.completion.chunk.
//
// It is decoded with encoding/json rather than as the SDK's
// ChatCompletionChunk, whose reflective decoder cost a fifth of the
// gateway's CPU under load (docs/benchmarks.md). The request, its errors
// and the server-sent-event framing stay the SDK's; only these few fields
// are read, and a field that is null or absent reads as empty, as it does
// through the SDK.
type chunk struct {
	Model   string   `json:"model"`
	Usage   *usage   `json:"usage"`
	Choices []choice `json:"choices"`
}

type choice struct {
	Index int64 `json:"index"`
	Delta struct {
		Content   string          `json:"content"`
		Refusal   string          `json:"refusal"`
		ToolCalls []toolCallDelta `json:"tool_calls"`
	} `json:"delta"`
	FinishReason string `json:"finish_reason"`
}

type toolCallDelta struct {
	Index    int64  `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	// PromptTokensDetails.CachedTokens are the part of the prompt read
	// from OpenAI's prompt cache.
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// turn is what one streamed response has said so far.
type turn struct {
	// calls are the tool calls not yet emitted, in the order they began.
	calls []*pendingCall
	// open maps a delta's tool call index to the call it continues: only a
	// call's first chunk has its id and name, and the pieces of parallel
	// calls may interleave.
	open   map[int64]*pendingCall
	model  string
	finish string
	tokens *usage
}

type pendingCall struct {
	id, name string
	args     strings.Builder
}

func newTurn() *turn { return &turn{open: map[int64]*pendingCall{}} }

// consume yields the events of one chunk. more is false when the consumer
// stopped ranging; err reports a response that makes no sense.
func (t *turn) consume(chunk chunk, yield func(providers.Event, error) bool) (more bool, err error) {
	if chunk.Model != "" {
		t.model = chunk.Model
	}
	// The usage chunk comes last with no choices; some compatible servers
	// put usage on every chunk instead, so only the last one counts.
	if chunk.Usage != nil {
		t.tokens = chunk.Usage
	}
	for _, choice := range chunk.Choices {
		if choice.Index != 0 {
			continue // only one choice is asked for
		}
		d := choice.Delta
		if text := d.Content + d.Refusal; text != "" {
			if !yield(providers.Event{Kind: providers.EventTextDelta, Text: text}, nil) {
				return false, nil
			}
		}
		for _, tc := range d.ToolCalls {
			t.addToolDelta(tc)
		}
		if choice.FinishReason != "" {
			t.finish = choice.FinishReason
			// Every call's arguments are complete once the choice is.
			if more, err := t.flush(yield); !more || err != nil {
				return more, err
			}
		}
	}
	return true, nil
}

// addToolDelta adds one piece of a tool call. A piece whose id differs from
// the call open at its index starts a new call: some compatible servers
// send every call whole with the same (or no) index.
func (t *turn) addToolDelta(tc toolCallDelta) {
	c, ok := t.open[tc.Index]
	if !ok || (tc.ID != "" && tc.ID != c.id) {
		c = &pendingCall{id: tc.ID}
		t.open[tc.Index] = c
		t.calls = append(t.calls, c)
	}
	if c.name == "" {
		c.name = tc.Function.Name
	}
	c.args.WriteString(tc.Function.Arguments)
}

// flush yields every pending tool call whole, in the order the calls began.
func (t *turn) flush(yield func(providers.Event, error) bool) (bool, error) {
	calls := t.calls
	t.calls, t.open = nil, map[int64]*pendingCall{}
	for _, c := range calls {
		call, err := c.toolCall()
		if err != nil {
			return false, err
		}
		if !yield(providers.Event{Kind: providers.EventToolCall, ToolCall: call}, nil) {
			return false, nil
		}
	}
	return true, nil
}

// toolCall checks the accumulated arguments and gives the call an id if
// the server sent none.
func (c *pendingCall) toolCall() (switchboard.ToolCall, error) {
	id := c.id
	if id == "" {
		id = newCallID()
	}
	raw := strings.TrimSpace(c.args.String())
	if raw == "" {
		raw = "{}"
	}
	var args bytes.Buffer
	if err := json.Compact(&args, []byte(raw)); err != nil {
		return switchboard.ToolCall{}, fmt.Errorf("tool call %s (%s): arguments are not valid JSON: %w", id, c.name, err)
	}
	return switchboard.ToolCall{ID: id, Name: c.name, Args: json.RawMessage(args.Bytes())}, nil
}

// usage reports the token counts, if the server sent any.
func (t *turn) usage() (switchboard.Usage, bool) {
	if t.tokens == nil {
		return switchboard.Usage{}, false
	}
	u := t.tokens
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return switchboard.Usage{
		PromptTokens:     int(u.PromptTokens),
		CompletionTokens: int(u.CompletionTokens),
		TotalTokens:      int(total),
		CachedTokens:     int(u.PromptTokensDetails.CachedTokens),
	}, true
}

func newCallID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b)
}
