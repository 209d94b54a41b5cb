package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	gws "github.com/gorilla/websocket"
)

// The three servers the load generator drives besides the gateway, each run
// as its own process (bench llm|echo|relay) so its CPU and memory are its
// own.

// tokensPerReply is how many content chunks the scripted model streams.
const tokensPerReply = 20

// sseChunk is one server-sent event of a chat-completions stream.
func sseChunk(v any) []byte {
	b, _ := json.Marshal(v)
	return []byte("data: " + string(b) + "\n\n")
}

// streamChoice is a chat.completion.chunk with one choice.
func streamChoice(delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "bench-model",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	}
}

// llmStream is the scripted model's whole answer in the OpenAI
// chat-completions streaming format, split into the chunks it is flushed
// in: a role chunk, 20 content chunks, the finish chunk, usage, [DONE].
func llmStream() [][]byte {
	chunk, choice := sseChunk, streamChoice
	out := [][]byte{chunk(choice(map[string]any{"role": "assistant", "content": ""}, nil))}
	for i := range tokensPerReply {
		out = append(out, chunk(choice(map[string]any{"content": fmt.Sprintf("tok%02d ", i)}, nil)))
	}
	out = append(out,
		chunk(choice(map[string]any{}, "stop")),
		chunk(map[string]any{"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "bench-model",
			"choices": []any{}, "usage": map[string]any{"prompt_tokens": 30, "completion_tokens": tokensPerReply, "total_tokens": 30 + tokensPerReply}}),
		[]byte("data: [DONE]\n\n"))
	return out
}

// llmHandler streams the scripted answer instantly, flushing every chunk,
// to any chat-completions request.
func llmHandler() http.Handler {
	stream := llmStream()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for _, c := range stream {
			if _, err := w.Write(c); err != nil {
				return
			}
			f.Flush()
		}
	})
}

var upgrader = gws.Upgrader{
	ReadBufferSize: 2048, WriteBufferSize: 4096,
	CheckOrigin: func(*http.Request) bool { return true },
}

// echoHandler is the floor: a bare gorilla/websocket server that answers a
// hello with a ready frame and each input with frames of the sizes given,
// the last one an assistant message, as the gateway does per turn.
func echoHandler(sizes []int) http.Handler {
	frames := make([][]byte, len(sizes))
	for i, n := range sizes {
		frames[i] = padded(`{"type":"delta","data":{"content":"`, `"}}`, n)
	}
	if len(frames) > 0 {
		frames[len(frames)-1] = padded(`{"type":"message","data":{"role":"assistant","content":"`, `"}}`, sizes[len(sizes)-1])
	}
	return floor("echo", func(_ context.Context, c *gws.Conn, _ []byte) error {
		for _, f := range frames {
			if err := c.WriteMessage(gws.TextMessage, f); err != nil {
				return err
			}
		}
		return nil
	})
}

// floor serves a floor's WebSocket: a hello is answered with ready, and
// every other frame is an input handed to turn, until the client leaves.
func floor(name string, turn func(ctx context.Context, c *gws.Conn, input []byte) error) http.Handler {
	ready := []byte(`{"seq":0,"type":"ready","data":{"session":"` + name + `","role":"owner","last_seq":0}}`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if bytes.Contains(msg, []byte(`"type":"hello"`)) {
				err = c.WriteMessage(gws.TextMessage, ready)
			} else {
				err = turn(r.Context(), c, msg)
			}
			if err != nil {
				return
			}
		}
	})
}

// padded is prefix + filler + suffix, n bytes long in all (at least the
// prefix and suffix).
func padded(prefix, suffix string, n int) []byte {
	fill := max(0, n-len(prefix)-len(suffix))
	return []byte(prefix + strings.Repeat("x", fill) + suffix)
}

// relayHandler is the other floor: per input, one streaming request to the
// LLM server and each delta sent on as a frame, then the whole message; no
// sessions, no storage, no events.
func relayHandler(llmURL string) http.Handler {
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 2048, MaxIdleConnsPerHost: 2048, IdleConnTimeout: time.Minute}}
	return floor("relay", func(ctx context.Context, c *gws.Conn, input []byte) error {
		var in struct{ Text string }
		if err := json.Unmarshal(input, &in); err != nil {
			return err
		}
		return relayTurn(ctx, client, llmURL, in.Text, c)
	})
}

func relayTurn(ctx context.Context, client *http.Client, llmURL, text string, c *gws.Conn) error {
	body, _ := json.Marshal(map[string]any{
		"model": "bench-model", "stream": true, "stream_options": map[string]any{"include_usage": true},
		"messages": []any{map[string]any{"role": "system", "content": "You are a benchmark."}, map[string]any{"role": "user", "content": text}},
	})
	req, err := http.NewRequestWithContext(ctx, "POST", llmURL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var full strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(line), &chunk) != nil || len(chunk.Choices) == 0 || chunk.Choices[0].Delta.Content == "" {
			continue
		}
		piece := chunk.Choices[0].Delta.Content
		full.WriteString(piece)
		frame, _ := json.Marshal(map[string]any{"type": "delta", "data": map[string]any{"content": piece}})
		if err := c.WriteMessage(gws.TextMessage, frame); err != nil {
			return err
		}
	}
	frame, _ := json.Marshal(map[string]any{"type": "message", "data": map[string]any{"role": "assistant", "content": full.String()}})
	return c.WriteMessage(gws.TextMessage, frame)
}

// serveChild runs one of the servers on a loopback port and prints its
// address as the first line of stdout, for the parent to read.
func serveChild(ctx context.Context, h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
