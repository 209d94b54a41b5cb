package anthropic

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
)

// turn is what one streamed response has said so far.
type turn struct {
	// tools are the tool_use blocks still open, by content block index:
	// each block's input arrives in pieces, and nothing forbids the pieces
	// of parallel calls from interleaving.
	tools      map[int64]*toolBlock
	model      string
	stopReason string
	input      int64
	output     int64
	// cacheRead and cacheWrite are the input read from and written to
	// the prompt cache, which input leaves out.
	cacheRead, cacheWrite int64
	stopped               bool // message_stop arrived
}

type toolBlock struct {
	id, name string
	start    json.RawMessage // input given whole in content_block_start, if any
	partial  strings.Builder // concatenated input_json_delta pieces
}

func newTurn() *turn { return &turn{tools: map[int64]*toolBlock{}} }

// consume yields the events of one stream event. more is false when the
// consumer stopped ranging; err reports a stream that makes no sense.
func (t *turn) consume(ev sdk.MessageStreamEventUnion, yield func(providers.Event, error) bool) (more bool, err error) {
	switch ev.Type {
	case "message_start":
		t.model = string(ev.Message.Model)
		t.input = ev.Message.Usage.InputTokens
		t.output = ev.Message.Usage.OutputTokens
		t.cacheRead = ev.Message.Usage.CacheReadInputTokens
		t.cacheWrite = ev.Message.Usage.CacheCreationInputTokens
	case "content_block_start":
		switch cb := ev.ContentBlock; cb.Type {
		case "text":
			if cb.Text != "" {
				return yield(providers.Event{Kind: providers.EventTextDelta, Text: cb.Text}, nil), nil
			}
		case "tool_use":
			b := &toolBlock{id: cb.ID, name: cb.Name}
			if b.id == "" {
				b.id = newCallID()
			}
			if raw := cb.JSON.Input.Raw(); raw != "" && raw != "null" {
				b.start = json.RawMessage(raw)
			}
			t.tools[ev.Index] = b
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			if ev.Delta.Text != "" {
				return yield(providers.Event{Kind: providers.EventTextDelta, Text: ev.Delta.Text}, nil), nil
			}
		case "input_json_delta":
			b, ok := t.tools[ev.Index]
			if !ok {
				return false, fmt.Errorf("input_json_delta for content block %d, which is no open tool_use", ev.Index)
			}
			b.partial.WriteString(ev.Delta.PartialJSON)
		}
	case "content_block_stop":
		b, ok := t.tools[ev.Index]
		if !ok {
			return true, nil // a text or thinking block
		}
		delete(t.tools, ev.Index)
		return emitCall(b, yield)
	case "message_delta":
		t.stopReason = string(ev.Delta.StopReason)
		// Counts in message_delta are cumulative for the whole message.
		if ev.Usage.InputTokens > 0 {
			t.input = ev.Usage.InputTokens
		}
		if ev.Usage.OutputTokens > 0 {
			t.output = ev.Usage.OutputTokens
		}
		if ev.Usage.CacheReadInputTokens > 0 {
			t.cacheRead = ev.Usage.CacheReadInputTokens
		}
		if ev.Usage.CacheCreationInputTokens > 0 {
			t.cacheWrite = ev.Usage.CacheCreationInputTokens
		}
	case "message_stop":
		// A tool_use block left open is still a complete call once the
		// message is: emit it rather than lose it.
		for _, i := range slices.Sorted(maps.Keys(t.tools)) {
			b := t.tools[i]
			delete(t.tools, i)
			if more, err := emitCall(b, yield); !more || err != nil {
				return more, err
			}
		}
		t.stopped = true
	}
	return true, nil
}

// emitCall yields a finished tool call with its arguments as compact JSON.
func emitCall(b *toolBlock, yield func(providers.Event, error) bool) (bool, error) {
	raw := []byte(strings.TrimSpace(b.partial.String()))
	if len(raw) == 0 {
		raw = b.start
	}
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	var args bytes.Buffer
	if err := json.Compact(&args, raw); err != nil {
		return false, fmt.Errorf("tool call %s (%s): arguments are not valid JSON: %w", b.id, b.name, err)
	}
	call := switchboard.ToolCall{ID: b.id, Name: b.name, Args: json.RawMessage(args.Bytes())}
	return yield(providers.Event{Kind: providers.EventToolCall, ToolCall: call}, nil), nil
}

// usage counts as prompt tokens all the input the model read: Anthropic's
// input_tokens are only what came after the last cache breakpoint, so the
// cache reads (cache_read_input_tokens, also the usage's CachedTokens) and
// the cache writes (cache_creation_input_tokens, priced as input here) are
// added back. Prompt tokens then mean the same with every provider.
func (t *turn) usage() switchboard.Usage {
	prompt := t.input + t.cacheRead + t.cacheWrite
	return switchboard.Usage{
		PromptTokens:     int(prompt),
		CompletionTokens: int(t.output),
		TotalTokens:      int(prompt + t.output),
		CachedTokens:     int(t.cacheRead),
	}
}

func newCallID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b)
}
