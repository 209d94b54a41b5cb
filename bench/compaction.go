package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// The compaction rows: what memory.policy compact costs in model calls. The
// gateway runs a guide that compacts as the shipped assistant does (window
// 20), in one conversation over WebSocket, against a scripted model in this
// process whose context is compactionWindow tokens: it refuses a longer
// request as OpenAI does, counts tokens as openaitest does (one for every
// three bytes, denser than the gateway's estimate, which learns the
// difference), and answers a summary request with notes of a model's
// length. Extra calls are the summary requests; their share of tokens is
// their prompt and completion tokens among all the conversation's.

// compactionWindow is the scripted model's context, given to the gateway
// as the provider's context_window: a request may hold it less the 4,096
// tokens left for the answer, and the model refuses more than that.
const (
	compactionWindow = 32_000
	compactionLimit  = compactionWindow - 4096
)

// summaryMarker starts the system prompt of the gateway's summary requests
// (sessions' summaryPrompt). Were it to change, the rows would count no
// summaries, and measureCompaction fails rather than report none.
const summaryMarker = "You keep the memory of a conversation"

// compactionGuide compacts with the shipped assistant's window.
const compactionGuide = `---
name: bench-compact
description: The benchmark's compacting guide
temperature: 0
memory: { policy: compact, window: 20 }
---
You are a benchmark that remembers.
`

// compactionResult is one conversation of a given message size.
type compactionResult struct {
	messageBytes int
	turns        int
	elapsed      time.Duration
	modelCounts
}

// modelCounts is what the scripted model was asked.
type modelCounts struct {
	turnCalls, summaryCalls   int
	turnTokens, summaryTokens int64 // prompt and completion
	refused                   int
}

func (r compactionResult) summariesPer100() float64 {
	return 100 * float64(r.summaryCalls) / float64(max(r.turns, 1))
}

func (r compactionResult) summaryShare() float64 {
	return 100 * float64(r.summaryTokens) / float64(max(r.turnTokens+r.summaryTokens, 1))
}

func (r compactionResult) tokensPerTurn() float64 {
	return float64(r.turnTokens+r.summaryTokens) / float64(max(r.turns, 1))
}

// contextModel is the scripted model of the compaction rows.
type contextModel struct {
	limit int
	notes string // a summary's text
	mu    sync.Mutex
	n     modelCounts
}

// newContextModel refuses requests over limit and writes notes as long as
// a model does: ~300 words.
func newContextModel(limit int) *contextModel {
	return &contextModel{limit: limit, notes: "NOTES: " + strings.Repeat("a fact the conversation established. ", 60)}
}

func (m *contextModel) counts() modelCounts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

func (m *contextModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	prompt := openaitest.PromptTokens(body)
	summary := len(req.Messages) > 0 && req.Messages[0].Role == "system" &&
		strings.Contains(openaitest.Text(req.Messages[0].Content), summaryMarker)
	reply := "Noted."
	if summary {
		reply = m.notes
	}
	completion := 1 + len(reply)/3

	m.mu.Lock()
	switch {
	case prompt > m.limit:
		m.n.refused++
	case summary:
		m.n.summaryCalls++
		m.n.summaryTokens += int64(prompt + completion)
	default:
		m.n.turnCalls++
		m.n.turnTokens += int64(prompt + completion)
	}
	m.mu.Unlock()
	if prompt > m.limit {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, m.limit, prompt)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range [][]byte{
		sseChunk(streamChoice(map[string]any{"role": "assistant", "content": reply}, nil)),
		sseChunk(streamChoice(map[string]any{}, "stop")),
		sseChunk(map[string]any{"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "bench-model",
			"choices": []any{}, "usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}),
		[]byte("data: [DONE]\n\n"),
	} {
		if _, err := w.Write(c); err != nil {
			return
		}
	}
}

// measureCompaction runs, for each message size, a fresh gateway with the
// compacting guide and one conversation of turns messages of that size.
func measureCompaction(ctx context.Context, bin, dir string, sizes []int, turns int) ([]compactionResult, error) {
	guides := filepath.Join(dir, "compaction-guides")
	if err := os.MkdirAll(guides, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(guides, "bench-compact.md"), []byte(compactionGuide), 0o644); err != nil {
		return nil, err
	}
	var out []compactionResult
	for _, size := range sizes {
		r, err := compactionRun(ctx, bin, dir, guides, size, turns)
		if err != nil {
			return nil, fmt.Errorf("%d-byte messages: %w", size, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func compactionRun(ctx context.Context, bin, dir, guides string, size, turns int) (compactionResult, error) {
	res := compactionResult{messageBytes: size, turns: turns}
	model := newContextModel(compactionLimit)
	srv := httptest.NewServer(model)
	defer srv.Close()
	gw, err := startGateway(ctx, bin, dir, srv.URL,
		"--set", "guides.dir="+guides, "--set", "guides.default=bench-compact",
		"--set", "providers.0.context_window="+strconv.Itoa(compactionWindow))
	if err != nil {
		return res, err
	}
	defer gw.stop()
	c, err := dialSession(ctx, "ws://"+gw.addr+"/ws")
	if err != nil {
		return res, err
	}
	defer c.Close()
	start := time.Now()
	for i := range turns {
		if err := sayTurn(c, i, compactionMessage(i, size)); err != nil {
			return res, fmt.Errorf("turn %d: %w", i, err)
		}
	}
	res.elapsed = time.Since(start)
	res.modelCounts = model.counts()
	if res.turnCalls < turns {
		return res, fmt.Errorf("the model was called %d times for %d turns", res.turnCalls, turns)
	}
	if res.summaryCalls == 0 && turns > 20 {
		return res, fmt.Errorf("no summary request in %d turns: does the gateway's summary prompt still start %q?", turns, summaryMarker)
	}
	return res, nil
}

// compactionMessage is turn i's message, about n bytes of words.
func compactionMessage(i, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Turn %d.", i)
	for b.Len() < n {
		fmt.Fprintf(&b, " Fact %d.%d: the shipment for order %d left the warehouse on day %d.", i, b.Len(), 1000*i+b.Len(), i%28+1)
	}
	return b.String()
}

// sayTurn sends text as an input and reads until the assistant's message.
func sayTurn(c *gws.Conn, id int, text string) error {
	in, err := json.Marshal(map[string]string{"type": "input", "id": strconv.Itoa(id), "text": text})
	if err != nil {
		return err
	}
	if err := c.WriteMessage(gws.TextMessage, in); err != nil {
		return fmt.Errorf("send input: %w", err)
	}
	for {
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		_, msg, err := c.ReadMessage()
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if bytes.Contains(msg, []byte(`"type":"error"`)) {
			return fmt.Errorf("the gateway answered with an error: %s", msg)
		}
		if isFinal(msg) {
			return nil
		}
	}
}
