// Package openaitest is a scripted OpenAI chat-completions server for tests
// and benchmarks: it speaks the real streaming wire (SSE chunks with
// delta.content and delta.tool_calls by index, a usage chunk, data: [DONE]),
// so the real SDK adapter talks to it exactly as it would to the API. It
// also embeds (POST /v1/embeddings, embeddings.go), deterministically.
package openaitest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Reply is one scripted answer.
type Reply struct {
	Text      []string   // content chunks, streamed in order
	ToolCalls []ToolCall // streamed after the text, arguments in two pieces
	// Status, when set, answers with that HTTP status and an error body.
	Status     int
	RetryAfter string
	// Cut drops the connection after the text, without finish or [DONE].
	Cut bool
	// Hang waits until the client gives up.
	Hang bool
	// Gate, when set, is waited on after the first text chunk, so a test
	// can act while a reply is mid-stream.
	Gate chan struct{}
	// Delay, when set, is waited between two text chunks (ending early,
	// without finishing the reply, if the client gives up), so a reply
	// streams slowly enough for a test to act while it is mid-stream.
	Delay time.Duration
}

// ToolCall is a scripted call.
type ToolCall struct {
	ID, Name, Args string
}

// Request is what the server received.
type Request struct {
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Model string `json:"model"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Temperature *float64 `json:"temperature"`
}

// Server is the fake. Replies are taken from the script in order; when it
// is empty, the responder (if set) or a plain "ok" answers.
type Server struct {
	*httptest.Server

	mu        sync.Mutex
	script    []Reply
	responder func(Request) Reply
	requests  []Request
	limit     int // SetContextLimit's
	noUsage   bool
	tooLong   []int
	emb       embeddings // POST /v1/embeddings (embeddings.go)
}

// TooLong are the prompt tokens of each request refused as over the
// context limit, in order.
func (s *Server) TooLong() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.tooLong...)
}

// SetContextLimit makes the model's context window n tokens: a request
// over it is refused as OpenAI refuses it (400, code
// context_length_exceeded) and not taken from the script, and every answer
// reports its request's prompt tokens, counted as PromptTokens does. 0
// lifts the limit.
func (s *Server) SetContextLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = n
}

// SetNoUsage makes the server answer without a usage chunk, as some
// OpenAI-compatible servers do: the gateway learns nothing of how it
// counts tokens.
func (s *Server) SetNoUsage(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noUsage = on
}

// PromptTokens is how the fake counts a request's tokens: a token for
// every three bytes of the body's messages and tools (denser than the
// gateway's own estimate, which must learn the difference), at least one
// per message.
func PromptTokens(body []byte) int {
	var r struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	_ = json.Unmarshal(body, &r)
	n := 0
	for _, m := range append(r.Messages, r.Tools...) {
		n += 1 + len(m)/3
	}
	return n
}

// Respond sets how requests are answered once the script is used up.
func (s *Server) Respond(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder = f
}

// New starts a server on 127.0.0.1; Close it when done.
func New() *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	return s
}

// BaseURL is what a provider's base_url is set to.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Push appends replies to the script.
func (s *Server) Push(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, r...)
}

// Requests returns what was received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ToolResults are the tool results the model was given, in every request
// so far: text written for the model.
func (s *Server) ToolResults() []string {
	var out []string
	for _, req := range s.Requests() {
		for _, m := range req.Messages {
			if m.Role == "tool" {
				out = append(out, Text(m.Content))
			}
		}
	}
	return out
}

// LastSystem is the system message of the last request ("" when it had
// none), and whether there was a request at all.
func (s *Server) LastSystem() (string, bool) {
	reqs := s.Requests()
	if len(reqs) == 0 {
		return "", false
	}
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == "system" {
			return Text(m.Content), true
		}
	}
	return "", true
}

// Text returns a message's content as a string (it may be a string or a
// list of parts on the wire).
func Text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	out := ""
	for _, p := range parts {
		out += p.Text
	}
	return out
}

// Asked reports whether a request so far had a user message containing
// text.
func (s *Server) Asked(text string) bool {
	for _, req := range s.Requests() {
		for _, m := range req.Messages {
			if m.Role == "user" && strings.Contains(Text(m.Content), text) {
				return true
			}
		}
	}
	return false
}

// Images returns the pictures of a message's content, as the data URLs
// of its image_url parts.
func Images(raw json.RawMessage) []string {
	var parts []struct {
		Type     string `json:"type"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Type == "image_url" {
			out = append(out, p.ImageURL.URL)
		}
	}
	return out
}

// badImage is what the API says of an image_url part it refuses: data
// that is not a picture of its four types (base64 in a data URL; the fake
// fetches no http URL).
func badImage(req Request) string {
	for _, m := range req.Messages {
		for _, u := range Images(m.Content) {
			meta, data, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
			typ, isBase64 := strings.CutSuffix(meta, ";base64")
			_, err := base64.StdEncoding.DecodeString(data)
			switch {
			case !strings.HasPrefix(u, "data:") || !ok || !isBase64 || err != nil:
				return `{"error":{"message":"Invalid image URL: expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got an invalid data URL.","type":"invalid_request_error","param":"messages","code":"invalid_image_url"}}`
			case typ != "image/png" && typ != "image/jpeg" && typ != "image/gif" && typ != "image/webp":
				return `{"error":{"message":"You uploaded an unsupported image. Please make sure your image has of one the following formats: ['png', 'jpeg', 'gif', 'webp'].","type":"invalid_request_error","param":null,"code":"invalid_image_format"}}`
			}
		}
	}
	return ""
}

// MaxTools is the most tools the chat-completions API takes in a request.
const MaxTools = 128

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/embeddings" && r.Method == http.MethodPost {
		s.handleEmbeddings(w, r)
		return
	}
	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	if msg := badImage(req); msg != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, msg)
		return
	}
	if len(req.Tools) > MaxTools {
		// As the API answers a request with too many tools.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"Invalid 'tools': array too long. Expected an array with maximum length %d, but got an array with length %d instead.","type":"invalid_request_error","param":"tools","code":"array_above_max_length"}}`, MaxTools, len(req.Tools))
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	prompt, limit, noUsage := PromptTokens(body), s.limit, s.noUsage
	if limit > 0 && prompt > limit {
		s.tooLong = append(s.tooLong, prompt)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, limit, prompt)
		return
	}
	var reply Reply
	switch {
	case len(s.script) > 0:
		reply, s.script = s.script[0], s.script[1:]
	case s.responder != nil:
		reply = s.responder(req)
	default:
		reply = Reply{Text: []string{"ok"}}
	}
	s.mu.Unlock()

	if reply.Hang {
		<-r.Context().Done()
		return
	}
	if reply.Status != 0 {
		if reply.RetryAfter != "" {
			w.Header().Set("Retry-After", reply.RetryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reply.Status)
		fmt.Fprintf(w, `{"error":{"message":"scripted failure %d","type":"server_error","code":null}}`, reply.Status)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	chunk := func(delta any, finish any, usage any) {
		c := map[string]any{
			"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
			"choices": []any{},
		}
		if delta != nil {
			c["choices"] = []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}
		}
		if usage != nil {
			c["usage"] = usage
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	for i, t := range reply.Text {
		if i > 0 && reply.Delay > 0 {
			wait := time.NewTimer(reply.Delay)
			select {
			case <-wait.C:
			case <-r.Context().Done():
				wait.Stop()
				return
			}
		}
		chunk(map[string]any{"content": t}, nil, nil)
		if i == 0 && reply.Gate != nil {
			select {
			case <-reply.Gate:
			case <-r.Context().Done():
				return
			}
		}
	}
	if reply.Cut {
		return
	}
	for i, tc := range reply.ToolCalls {
		half := len(tc.Args) / 2
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": tc.Args[:half]},
		}}}, nil, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "function": map[string]any{"arguments": tc.Args[half:]},
		}}}, nil, nil)
	}
	finish := "stop"
	if len(reply.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	chunk(map[string]any{}, finish, nil)
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
	if limit > 0 {
		usage["prompt_tokens"], usage["total_tokens"] = prompt, prompt+5
	}
	if !noUsage {
		chunk(nil, nil, usage)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}
