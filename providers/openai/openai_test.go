package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai"
)

const apiKey = "sk-test-123"

// fakeOpenAI speaks the Chat Completions streaming wire: POST
// /v1/chat/completions answered with text/event-stream, each chunk written
// as "data: <json>\n\n" and the stream closed by "data: [DONE]\n\n". It
// records every request it receives.
type fakeOpenAI struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
	// release unblocks handlers that wait for the client to go away, so the
	// server can always shut down.
	release chan struct{}
}

type seenRequest struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
}

func newFake(t *testing.T, reply func(w http.ResponseWriter, r *http.Request)) *fakeOpenAI {
	t.Helper()
	f := &fakeOpenAI{release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		var body map[string]any
		if err == nil {
			err = json.Unmarshal(raw, &body)
		}
		if err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "bad body")
			return
		}
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
		reply(w, r)
	}))
	t.Cleanup(f.Close)
	t.Cleanup(func() { close(f.release) }) // runs before Close
	return f
}

func (f *fakeOpenAI) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// baseURL is what the SDK takes: the API root ending in /v1.
func (f *fakeOpenAI) baseURL() string { return f.URL + "/v1" }

// sse writes the given data lines as server-sent events, flushing each.
func sse(w http.ResponseWriter, data ...string) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	for _, d := range data {
		fmt.Fprintf(w, "data: %s\n\n", d)
		w.(http.Flusher).Flush()
	}
}

const done = "[DONE]"

// chunk is one chat.completion.chunk with a single choice, as OpenAI sends
// it when stream_options.include_usage is set (usage null until the end).
func chunk(delta, finish string) string {
	fin := "null"
	if finish != "" {
		fin = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`{"id":"chatcmpl-7QyqpwdfhqwajicIEznoc6Q47XAyW","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":null}`, delta, fin)
}

func roleChunk() string { return chunk(`{"role":"assistant","content":"","refusal":null}`, "") }

func textChunk(s string) string {
	b, _ := json.Marshal(s)
	return chunk(fmt.Sprintf(`{"content":%s}`, b), "")
}

// toolStart opens a call: only the first piece carries id, type and name.
func toolStart(index int, id, name, args string) string {
	a, _ := json.Marshal(args)
	return chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}]}`, index, id, name, a), "")
}

func toolArgs(index int, args string) string {
	a, _ := json.Marshal(args)
	return chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, index, a), "")
}

func finishChunk(reason string) string { return chunk(`{}`, reason) }

// usageChunk is the last chunk include_usage asks for: no choices.
func usageChunk(prompt, completion int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-7QyqpwdfhqwajicIEznoc6Q47XAyW","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`, prompt, completion, prompt+completion)
}

// apiError answers as the API does when it refuses a request.
func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-request-id", "req_6f1c2b0e9d8a7c6b5a4f3e2d1c0b9a8f")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"param":null,"code":null}}`, msg, typ)
}

func newProvider(t *testing.T, baseURL string) *openai.Provider {
	t.Helper()
	p, err := openai.New(providers.Config{Name: "gpt", Kind: "openai", BaseURL: baseURL, APIKey: apiKey, Model: "gpt-test"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func collect(seq func(func(providers.Event, error) bool)) ([]providers.Event, error) {
	var evs []providers.Event
	for e, err := range seq {
		if err != nil {
			return evs, err
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// jsonEqual compares a decoded JSON value with the JSON text want.
func jsonEqual(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want JSON: %v", what, err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.Marshal(got)
		t.Errorf("%s:\n got %s\nwant %s", what, g, want)
	}
}

func assertEvents(t *testing.T, got, want []providers.Event) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %s\nwant %s", dump(got), dump(want))
	}
}

func dump(evs []providers.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %+v args=%s", e, e.ToolCall.Args)
	}
	return b.String()
}

func providerError(t *testing.T, err error) *providers.Error {
	t.Helper()
	var pe *providers.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *providers.Error", err, err)
	}
	if pe.Provider != "gpt" {
		t.Errorf("Provider = %q, want gpt", pe.Provider)
	}
	return pe
}

func TestTextStreaming(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, roleChunk(), textChunk("Hel"), textChunk("lo, "), textChunk("everyone"),
			finishChunk("stop"), usageChunk(25, 15), done)
	})
	temp := 0.3
	evs, err := collect(newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
		System:      "You are terse.",
		Messages:    []switchboard.Message{{Role: switchboard.RoleUser, Author: "Ann", Content: "hi"}},
		Temperature: &temp,
		MaxTokens:   100,
		Tools: []providers.ToolSpec{{
			Name: "get_weather", Description: "Weather for a city",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":9007199254740993}},"required":["city"]}`),
		}},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	assertEvents(t, evs, []providers.Event{
		{Kind: providers.EventTextDelta, Text: "Hel"},
		{Kind: providers.EventTextDelta, Text: "lo, "},
		{Kind: providers.EventTextDelta, Text: "everyone"},
		{Kind: providers.EventUsage, Usage: switchboard.Usage{PromptTokens: 25, CompletionTokens: 15, TotalTokens: 40}},
		{Kind: providers.EventDone, StopReason: "stop", Model: "gpt-4o-mini-2024-07-18"},
	})

	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" {
		t.Errorf("request = %s %s, want POST /v1/chat/completions", r.Method, r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+apiKey {
		t.Errorf("Authorization = %q", got)
	}
	b := r.Body
	jsonEqual(t, "model", b["model"], `"gpt-test"`)
	jsonEqual(t, "stream", b["stream"], `true`)
	jsonEqual(t, "stream_options", b["stream_options"], `{"include_usage":true}`)
	jsonEqual(t, "temperature", b["temperature"], `0.3`)
	// A base URL that is not OpenAI's may be any compatible server, which
	// knows max_tokens.
	jsonEqual(t, "max_tokens", b["max_tokens"], `100`)
	if _, ok := b["max_completion_tokens"]; ok {
		t.Error("max_completion_tokens sent to a compatible server")
	}
	jsonEqual(t, "messages", b["messages"], `[
		{"role":"system","content":"You are terse."},
		{"role":"user","content":"[Ann]: hi"}]`)
	jsonEqual(t, "tools", b["tools"], `[{"type":"function","function":{
		"name":"get_weather","description":"Weather for a city",
		"parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":9007199254740993}},"required":["city"]}}}]`)
}

func TestParallelToolCalls(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			roleChunk(),
			textChunk("Let me check."),
			toolStart(0, "call_a", "get_weather", ""),
			toolStart(1, "call_b", "get_time", `{"tz`),
			toolArgs(0, `{"city":`),
			toolArgs(1, `":"UTC"}`),
			toolArgs(0, ` "Paris"}`),
			// A call whose server gave no id and no arguments.
			chunk(`{"tool_calls":[{"index":2,"type":"function","function":{"name":"ping"}}]}`, ""),
			finishChunk("tool_calls"),
			usageChunk(30, 20),
			done)
	})
	evs, err := collect(newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "weather and time?"}},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(evs) != 6 {
		t.Fatalf("got %d events, want 6:%s", len(evs), dump(evs))
	}
	gen := evs[3].ToolCall
	if !strings.HasPrefix(gen.ID, "call_") || len(gen.ID) <= len("call_") {
		t.Errorf("generated id = %q, want call_<hex>", gen.ID)
	}
	assertEvents(t, evs, []providers.Event{
		{Kind: providers.EventTextDelta, Text: "Let me check."},
		{Kind: providers.EventToolCall, ToolCall: switchboard.ToolCall{ID: "call_a", Name: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`)}},
		{Kind: providers.EventToolCall, ToolCall: switchboard.ToolCall{ID: "call_b", Name: "get_time", Args: json.RawMessage(`{"tz":"UTC"}`)}},
		{Kind: providers.EventToolCall, ToolCall: switchboard.ToolCall{ID: gen.ID, Name: "ping", Args: json.RawMessage(`{}`)}},
		{Kind: providers.EventUsage, Usage: switchboard.Usage{PromptTokens: 30, CompletionTokens: 20, TotalTokens: 50}},
		{Kind: providers.EventDone, StopReason: "tool_calls", Model: "gpt-4o-mini-2024-07-18"},
	})
}

// Some compatible servers (older Ollama) send every call whole in one chunk
// without an index; their distinct ids keep them apart.
func TestWholeCallsWithoutIndex(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			chunk(`{"role":"assistant","content":"","tool_calls":[`+
				`{"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}},`+
				`{"id":"call_2","type":"function","function":{"name":"b","arguments":"{\"y\":2}"}}]}`, ""),
			finishChunk("stop"),
			done)
	})
	evs, err := collect(newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "go"}},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	// No usage chunk arrived, so no usage event.
	assertEvents(t, evs, []providers.Event{
		{Kind: providers.EventToolCall, ToolCall: switchboard.ToolCall{ID: "call_1", Name: "a", Args: json.RawMessage(`{"x":1}`)}},
		{Kind: providers.EventToolCall, ToolCall: switchboard.ToolCall{ID: "call_2", Name: "b", Args: json.RawMessage(`{"y":2}`)}},
		{Kind: providers.EventDone, StopReason: "stop", Model: "gpt-4o-mini-2024-07-18"},
	})
}

func TestToolResultsRoundTrip(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, roleChunk(), textChunk("Paris is mild."), finishChunk("stop"), usageChunk(60, 5), done)
	})
	_, err := collect(newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
		Model:  "gpt-4.1",
		System: "You are terse.",
		Messages: []switchboard.Message{
			{Role: switchboard.RoleUser, Author: "Ann", Content: "weather and time?"},
			{Role: switchboard.RoleAssistant, ToolCalls: []switchboard.ToolCall{
				{ID: "call_a", Name: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`)},
				{ID: "call_b", Name: "get_time", Args: json.RawMessage(`{"tz":"UTC"}`)},
			}},
			{Role: switchboard.RoleTool, ToolCallID: "call_a", ToolName: "get_weather", Content: "18C, clear"},
			{Role: switchboard.RoleTool, ToolCallID: "call_b", ToolName: "get_time", Content: "clock unavailable", IsError: true},
			{Role: switchboard.RoleAssistant, Content: "It is 18C; the time is unknown."},
			{Role: switchboard.RoleSystem, Content: "Ann <ann@example.com> & Bob joined."},
			{Role: switchboard.RoleUser, Content: "thanks"},
		},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	jsonEqual(t, "model", reqs[0].Body["model"], `"gpt-4.1"`)
	jsonEqual(t, "messages", reqs[0].Body["messages"], `[
		{"role":"system","content":"You are terse."},
		{"role":"user","content":"[Ann]: weather and time?"},
		{"role":"assistant","tool_calls":[
			{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
			{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]},
		{"role":"tool","tool_call_id":"call_a","content":"18C, clear"},
		{"role":"tool","tool_call_id":"call_b","content":"Error: clock unavailable"},
		{"role":"assistant","content":"It is 18C; the time is unknown."},
		{"role":"system","content":"Ann <ann@example.com> & Bob joined."},
		{"role":"user","content":"thanks"}]`)
	if _, ok := reqs[0].Body["tools"]; ok {
		t.Error("tools sent though the request declared none")
	}
}

func TestHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		status     int
		retryAfter string
		typ        string
		wantAfter  time.Duration
		retryable  bool
	}{
		{http.StatusTooManyRequests, "2", "requests", 2 * time.Second, true},
		{http.StatusBadRequest, "", "invalid_request_error", 0, false},
		{http.StatusUnauthorized, "", "invalid_request_error", 0, false},
		{http.StatusInternalServerError, "", "server_error", 0, true},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				apiError(w, tc.status, tc.typ, "scripted failure")
			})
			evs, err := collect(newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
				Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
			}))
			if err == nil {
				t.Fatalf("no error; events:%s", dump(evs))
			}
			if len(evs) != 0 {
				t.Errorf("events before the error:%s", dump(evs))
			}
			pe := providerError(t, err)
			if pe.Status != tc.status {
				t.Errorf("Status = %d, want %d", pe.Status, tc.status)
			}
			if pe.RetryAfter != tc.wantAfter {
				t.Errorf("RetryAfter = %v, want %v", pe.RetryAfter, tc.wantAfter)
			}
			if pe.Retryable() != tc.retryable {
				t.Errorf("Retryable() = %v, want %v", pe.Retryable(), tc.retryable)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("server saw %d requests; the SDK must not retry", n)
			}
		})
	}
}

func TestStreamCut(t *testing.T) {
	for name, cut := range map[string]func(w http.ResponseWriter){
		// The handler returns: the body ends cleanly, but without [DONE].
		"no [DONE]": func(w http.ResponseWriter) {
			sse(w, roleChunk(), textChunk("Hel"), toolStart(0, "call_a", "get_weather", `{"ci`))
		},
		// finish_reason came but the stream stopped before [DONE].
		"after finish": func(w http.ResponseWriter) {
			sse(w, roleChunk(), textChunk("Hel"), finishChunk("stop"))
		},
		// The connection drops in the middle of a chunk.
		"connection drop": func(w http.ResponseWriter) {
			sse(w, roleChunk(), textChunk("Hel"))
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			// Half a chunked-encoding frame, then nothing.
			fmt.Fprint(buf, "40\r\ndata: {\"id\":\"chatcmpl-7Qy")
			buf.Flush()
			conn.Close()
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) { cut(w) })
			evs, err := collect(newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
				Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
			}))
			if err == nil {
				t.Fatalf("a cut stream succeeded; events:%s", dump(evs))
			}
			assertEvents(t, evs, []providers.Event{{Kind: providers.EventTextDelta, Text: "Hel"}})
			pe := providerError(t, err)
			if pe.Status != 0 || !pe.Retryable() {
				t.Errorf("Status = %d, Retryable = %v; want 0, true (%v)", pe.Status, pe.Retryable(), err)
			}
		})
	}
}

func TestErrorChunk(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		status     int
		retryable  bool
	}{
		{"openai", `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`, 0, true},
		{"vllm", `{"error":{"object":"error","message":"context too long","type":"BadRequestError","param":null,"code":400}}`, 400, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				sse(w, roleChunk(), textChunk("Hel"), tc.data, done)
			})
			evs, err := collect(newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
				Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
			}))
			if err == nil {
				t.Fatalf("no error; events:%s", dump(evs))
			}
			pe := providerError(t, err)
			if pe.Status != tc.status || pe.Retryable() != tc.retryable {
				t.Errorf("Status = %d, Retryable = %v; want %d, %v (%v)", pe.Status, pe.Retryable(), tc.status, tc.retryable, err)
			}
		})
	}
}

func TestMalformedChunk(t *testing.T) {
	for name, data := range map[string]string{
		"not JSON":     `{"choices":[{"index":0,"delta":{"content":"Hel`,
		"content type": `{"choices":[{"index":0,"delta":{"content":{"text":"lo"}}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				sse(w, roleChunk(), textChunk("Hel"), data, done)
			})
			evs, err := collect(newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
				Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
			}))
			if err == nil {
				t.Fatalf("no error; events:%s", dump(evs))
			}
			if !strings.HasPrefix(err.Error(), "gpt: ") {
				t.Errorf("error %q does not name the provider", err)
			}
			if len(evs) != 1 || evs[0].Text != "Hel" {
				t.Errorf("events before the error:%s", dump(evs))
			}
		})
	}
}

func TestInvalidToolArguments(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, roleChunk(), toolStart(0, "call_a", "get_weather", `{"city":`), finishChunk("tool_calls"), done)
	})
	evs, err := collect(newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
	}))
	if err == nil {
		t.Fatalf("broken arguments accepted; events:%s", dump(evs))
	}
	providerError(t, err)
	if len(evs) != 0 {
		t.Errorf("events before the error:%s", dump(evs))
	}
}

func TestCancelStopsStream(t *testing.T) {
	gone := make(chan struct{})
	var f *fakeOpenAI
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, roleChunk(), textChunk("Hel"))
		select {
		case <-r.Context().Done():
			close(gone)
		case <-f.release:
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		evs []providers.Event
		err error
	)
	for e, e2 := range newProvider(t, f.baseURL()).Stream(ctx, providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
	}) {
		if e2 != nil {
			err = e2
			break
		}
		evs = append(evs, e)
		cancel()
	}
	assertEvents(t, evs, []providers.Event{{Kind: providers.EventTextDelta, Text: "Hel"}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if pe := providerError(t, err); pe.Retryable() {
		t.Error("a cancelled stream is retryable")
	}
	<-gone // the server saw the request go away
}

func TestStopRangingClosesBody(t *testing.T) {
	gone := make(chan struct{})
	var f *fakeOpenAI
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, roleChunk(), textChunk("Hel"), textChunk("lo"))
		select {
		case <-r.Context().Done():
			close(gone)
		case <-f.release:
		}
	})
	n := 0
	for _, err := range newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
	}) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		n++
		break
	}
	if n != 1 {
		t.Fatalf("ranged over %d events", n)
	}
	<-gone // the response body was closed, so the server saw the client leave
}

// A compatible server without auth (Ollama, vLLM) gets no Authorization
// header, and OPENAI_* variables in the environment are not picked up.
func TestNoKeyNoEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-env")
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, roleChunk(), textChunk("hi"), finishChunk("stop"), done)
	})
	p, err := openai.NewOllama(providers.Config{Name: "local", BaseURL: f.baseURL(), Model: "llama3.2"})
	if err != nil {
		t.Fatalf("NewOllama: %v", err)
	}
	evs, err := collect(p.Stream(t.Context(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	assertEvents(t, evs, []providers.Event{
		{Kind: providers.EventTextDelta, Text: "hi"},
		{Kind: providers.EventDone, StopReason: "stop", Model: "gpt-4o-mini-2024-07-18"},
	})
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	for _, h := range []string{"Authorization", "OpenAI-Organization"} {
		if v := reqs[0].Header.Get(h); v != "" {
			t.Errorf("%s = %q, want none", h, v)
		}
	}
	jsonEqual(t, "model", reqs[0].Body["model"], `"llama3.2"`)
}

// redirect sends every request to the fake while recording the URL the SDK
// meant to reach, so default endpoints are checked without leaving
// 127.0.0.1.
type redirect struct {
	to   *url.URL
	mu   sync.Mutex
	urls []string
}

func (rd *redirect) RoundTrip(r *http.Request) (*http.Response, error) {
	rd.mu.Lock()
	rd.urls = append(rd.urls, r.URL.String())
	rd.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = rd.to.Scheme, rd.to.Host
	return http.DefaultTransport.RoundTrip(r)
}

func TestDefaultEndpoints(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, roleChunk(), textChunk("hi"), finishChunk("stop"), usageChunk(1, 1), done)
	})
	to, _ := url.Parse(f.URL)
	for _, tc := range []struct {
		name    string
		build   func(providers.Config) (*openai.Provider, error)
		wantURL string
		// OpenAI's own API takes max_completion_tokens; reasoning models
		// reject max_tokens.
		wantLimit string
	}{
		{"openai", openai.New, "https://api.openai.com/v1/chat/completions", "max_completion_tokens"},
		{"ollama", openai.NewOllama, openai.DefaultOllamaBaseURL + "/chat/completions", "max_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := &redirect{to: to}
			p, err := tc.build(providers.Config{Name: tc.name, APIKey: apiKey, Model: "m", HTTPClient: &http.Client{Transport: rd}})
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			before := len(f.requests())
			if _, err := collect(p.Stream(t.Context(), providers.Request{
				MaxTokens: 64,
				Messages:  []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
			})); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if !reflect.DeepEqual(rd.urls, []string{tc.wantURL}) {
				t.Errorf("requested %v, want %s", rd.urls, tc.wantURL)
			}
			body := f.requests()[before].Body
			jsonEqual(t, tc.wantLimit, body[tc.wantLimit], `64`)
		})
	}
}

func TestNoModel(t *testing.T) {
	p, err := openai.New(providers.Config{Name: "gpt", BaseURL: "http://127.0.0.1:1/v1"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = collect(p.Stream(t.Context(), providers.Request{}))
	if err == nil || !strings.Contains(err.Error(), "no model") {
		t.Fatalf("err = %v, want a missing model error", err)
	}
}

func TestBadBaseURL(t *testing.T) {
	if _, err := openai.New(providers.Config{BaseURL: "127.0.0.1:11434/v1"}); err == nil {
		t.Fatal("a base URL without scheme was accepted")
	}
}

// The terminator split across two writes (two reads on the client) is
// still recognised.
func TestDoneSplitAcrossWrites(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, roleChunk(), textChunk("hi"), finishChunk("stop"))
		fmt.Fprint(w, "data: [DO")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "NE]\n\n")
	})
	evs, err := collect(newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	assertEvents(t, evs, []providers.Event{
		{Kind: providers.EventTextDelta, Text: "hi"},
		{Kind: providers.EventDone, StopReason: "stop", Model: "gpt-4o-mini-2024-07-18"},
	})
}

// A request over the model's context window is refused as OpenAI refuses
// it (code context_length_exceeded); an OpenAI-compatible server (vLLM)
// says so without the code. Both are ErrContextTooLong, which a session
// answers with a shorter request; any other 400 is not.
func TestContextTooLong(t *testing.T) {
	for name, tc := range map[string]struct {
		body string
		want bool
	}{
		"openai": {`{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, true},
		"vllm":   {`{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4800 in the messages, 200 in the completion).","type":"BadRequestError","param":null,"code":400}`, true},
		"other":  {`{"error":{"message":"Invalid value for 'temperature'.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, tc.body)
			})
			_, err := collect(newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
				Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
			}))
			if got := errors.Is(err, providers.ErrContextTooLong); got != tc.want {
				t.Fatalf("errors.Is(%v, ErrContextTooLong) = %v, want %v", err, got, tc.want)
			}
			if pe := providerError(t, err); pe.Status != http.StatusBadRequest || pe.Retryable() {
				t.Errorf("Status %d, Retryable %v: want 400, not retryable", pe.Status, pe.Retryable())
			}
		})
	}
}

// OpenAI counts cached input inside prompt_tokens and says how much of it
// was cached in prompt_tokens_details.cached_tokens: the usage keeps both.
func TestCachedTokens(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, roleChunk(), textChunk("Again."), finishChunk("stop"),
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
			done)
	})
	evs, err := collect(newProvider(t, f.baseURL()).Stream(t.Context(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "again"}},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	assertEvents(t, evs, []providers.Event{
		{Kind: providers.EventTextDelta, Text: "Again."},
		{Kind: providers.EventUsage, Usage: switchboard.Usage{PromptTokens: 2006, CompletionTokens: 300, TotalTokens: 2306, CachedTokens: 1920}},
		{Kind: providers.EventDone, StopReason: "stop", Model: "gpt-4o-mini-2024-07-18"},
	})
}
