package anthropic_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/anthropic"
)

const apiKey = "sk-ant-test-123"

// fakeAnthropic speaks the Messages API's streaming wire: POST /v1/messages
// answered with text/event-stream, each event written as
// "event: <type>\ndata: <json>\n\n" as the real service does. It records
// every request it receives.
type fakeAnthropic struct {
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

func newFake(t *testing.T, reply func(w http.ResponseWriter, r *http.Request)) *fakeAnthropic {
	t.Helper()
	f := &fakeAnthropic{release: make(chan struct{})}
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
		if msg := badImage(body); msg != "" {
			apiError(w, http.StatusBadRequest, "invalid_request_error", msg)
			return
		}
		reply(w, r)
	}))
	t.Cleanup(f.Close)
	t.Cleanup(func() { close(f.release) }) // runs before Close
	return f
}

// badImage is what the API says of an image block it refuses: a type
// other than its four, or more than 5 MB of base64.
func badImage(body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	for i, m := range msgs {
		content, _ := m.(map[string]any)["content"].([]any)
		for j, b := range content {
			block, _ := b.(map[string]any)
			if block["type"] != "image" {
				continue
			}
			src, _ := block["source"].(map[string]any)
			switch mt := src["media_type"]; {
			case mt != "image/jpeg" && mt != "image/png" && mt != "image/gif" && mt != "image/webp":
				return fmt.Sprintf("messages.%d.content.%d.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", i, j)
			case len(src["data"].(string)) > 5*1024*1024:
				return fmt.Sprintf("messages.%d.content.%d.image.source.base64: image exceeds 5 MB maximum", i, j)
			}
		}
	}
	return ""
}

func (f *fakeAnthropic) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// sse writes Anthropic server-sent events, flushing each. Every event is a
// pair {type, data}.
func sse(w http.ResponseWriter, events ...[2]string) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	for _, e := range events {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e[0], e[1])
		w.(http.Flusher).Flush()
	}
}

func ev(typ, data string) [2]string { return [2]string{typ, data} }

func messageStart(inputTokens int) [2]string {
	return ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`, inputTokens))
}

func textStart(index int) [2]string {
	return ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, index))
}

func textDelta(index int, text string) [2]string {
	b, _ := json.Marshal(text)
	return ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, index, b))
}

func toolStart(index int, id, name string) [2]string {
	return ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, index, id, name))
}

func jsonDelta(index int, partial string) [2]string {
	b, _ := json.Marshal(partial)
	return ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, index, b))
}

func blockStop(index int) [2]string {
	return ev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
}

func messageDelta(stopReason string, outputTokens int) [2]string {
	return ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stopReason, outputTokens))
}

var (
	ping        = ev("ping", `{"type": "ping"}`)
	messageStop = ev("message_stop", `{"type":"message_stop"}`)
)

// apiError answers as the Messages API does when it refuses a request.
func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_011CSHoEeqs5C35K2UUqR7Fy")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`, typ, msg)
}

// markTransport tags each request, so the fake can tell that the SDK used
// the HTTP client it was given.
type markTransport struct{}

func (markTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Switchboard-Transport", "test")
	return http.DefaultTransport.RoundTrip(r)
}

func newProvider(t *testing.T, url string) *anthropic.Provider {
	t.Helper()
	p, err := anthropic.New(providers.Config{
		Name: "claude", Kind: "anthropic", BaseURL: url, APIKey: apiKey, Model: "claude-test",
		HTTPClient: &http.Client{Transport: markTransport{}},
	})
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

func TestTextStreaming(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			messageStart(25),
			textStart(0),
			ping,
			textDelta(0, "Hel"),
			textDelta(0, "lo, "),
			textDelta(0, "everyone"),
			blockStop(0),
			messageDelta("end_turn", 15),
			messageStop,
		)
	})
	temp := 0.25
	schema := `{"type":"object","properties":{"expr":{"type":"string","minLength":1}},"required":["expr"],"additionalProperties":false}`
	evs, err := collect(newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		System: "You are terse.",
		Messages: []switchboard.Message{
			{Role: switchboard.RoleSystem, Content: "Earlier: Ann asked for brevity."},
			{Role: switchboard.RoleUser, Content: "hi", Author: "Ann"},
			{Role: switchboard.RoleAssistant, Content: "Hello Ann."},
			{Role: switchboard.RoleUser, Content: "hello", Author: "Bob"},
			{Role: switchboard.RoleUser, Content: "greet everyone"},
		},
		Tools:       []providers.ToolSpec{{Name: "calculator", Description: "Evaluates arithmetic", Parameters: json.RawMessage(schema)}},
		Temperature: &temp,
		MaxTokens:   256,
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	assertEvents(t, evs, []providers.Event{
		{Kind: providers.EventTextDelta, Text: "Hel"},
		{Kind: providers.EventTextDelta, Text: "lo, "},
		{Kind: providers.EventTextDelta, Text: "everyone"},
		{Kind: providers.EventUsage, Usage: switchboard.Usage{PromptTokens: 25, CompletionTokens: 15, TotalTokens: 40}},
		{Kind: providers.EventDone, StopReason: "end_turn", Model: "claude-sonnet-4-5-20250929"},
	})

	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("fake saw %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1/messages" {
		t.Errorf("request %s %s, want POST /v1/messages", r.Method, r.Path)
	}
	if got := r.Header.Get("X-Api-Key"); got != apiKey {
		t.Errorf("x-api-key = %q, want %q", got, apiKey)
	}
	if got := r.Header.Get("Anthropic-Version"); got != "2023-06-01" {
		t.Errorf("anthropic-version = %q, want 2023-06-01", got)
	}
	if got := r.Header.Get("Authorization"); got != "" {
		t.Errorf("authorization = %q, want none next to x-api-key", got)
	}
	if got := r.Header.Get("X-Switchboard-Transport"); got != "test" {
		t.Error("the request did not go through cfg.HTTPClient")
	}
	jsonEqual(t, "model", r.Body["model"], `"claude-test"`)
	jsonEqual(t, "stream", r.Body["stream"], `true`)
	jsonEqual(t, "max_tokens", r.Body["max_tokens"], `256`)
	jsonEqual(t, "temperature", r.Body["temperature"], `0.25`)
	jsonEqual(t, "system", r.Body["system"], `[
		{"type":"text","text":"You are terse."},
		{"type":"text","text":"Earlier: Ann asked for brevity."}]`)
	jsonEqual(t, "messages", r.Body["messages"], `[
		{"role":"user","content":[{"type":"text","text":"[Ann]: hi"}]},
		{"role":"assistant","content":[{"type":"text","text":"Hello Ann."}]},
		{"role":"user","content":[{"type":"text","text":"[Bob]: hello"},{"type":"text","text":"greet everyone"}]}]`)
	jsonEqual(t, "tools", r.Body["tools"], `[{"name":"calculator","description":"Evaluates arithmetic","input_schema":`+schema+`}]`)
}

// Anthropic streams each content block in turn, but the adapter must not
// rely on it: the pieces of two parallel calls arrive interleaved here, and
// each call is emitted whole when its own block stops.
func TestParallelToolCalls(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			messageStart(310),
			textStart(0),
			textDelta(0, "Let me check."),
			blockStop(0),
			toolStart(1, "toolu_01A09q90qw90lq917835lq9", "get_weather"),
			toolStart(2, "toolu_01B7hXq3vbn2PzWq8yR5tLmN", "get_time"),
			jsonDelta(1, ""),
			jsonDelta(2, ""),
			jsonDelta(1, `{"city": `),
			jsonDelta(2, `{"tz": "Eu`),
			ping,
			jsonDelta(1, `"Paris", "unit": "c`),
			jsonDelta(2, `rope/Paris"}`),
			blockStop(2),
			jsonDelta(1, `elsius"}`),
			blockStop(1),
			messageDelta("tool_use", 94),
			messageStop,
		)
	})
	evs, err := collect(newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "weather and time in Paris?"}},
		Tools: []providers.ToolSpec{
			{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string"}}}`)},
			{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{"tz":{"type":"string"}}}`)},
		},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	assertEvents(t, evs, []providers.Event{
		{Kind: providers.EventTextDelta, Text: "Let me check."},
		{Kind: providers.EventToolCall, ToolCall: switchboard.ToolCall{ID: "toolu_01B7hXq3vbn2PzWq8yR5tLmN", Name: "get_time", Args: json.RawMessage(`{"tz":"Europe/Paris"}`)}},
		{Kind: providers.EventToolCall, ToolCall: switchboard.ToolCall{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Args: json.RawMessage(`{"city":"Paris","unit":"celsius"}`)}},
		{Kind: providers.EventUsage, Usage: switchboard.Usage{PromptTokens: 310, CompletionTokens: 94, TotalTokens: 404}},
		{Kind: providers.EventDone, StopReason: "tool_use", Model: "claude-sonnet-4-5-20250929"},
	})
	if reqs := f.requests(); len(reqs) == 1 {
		// A tool without a description sends none.
		jsonEqual(t, "tools", reqs[0].Body["tools"], `[
			{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string"}}}},
			{"name":"get_time","input_schema":{"type":"object","properties":{"tz":{"type":"string"}}}}]`)
	}
}

// A call with no arguments has Args {}, and one without an id gets one.
func TestToolCallWithoutArgsOrID(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			messageStart(12),
			toolStart(0, "", "list_files"),
			jsonDelta(0, ""),
			blockStop(0),
			messageDelta("tool_use", 9),
			messageStop,
		)
	})
	evs, err := collect(newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "ls"}},
		Tools:    []providers.ToolSpec{{Name: "list_files"}},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(evs) != 3 || evs[0].Kind != providers.EventToolCall {
		t.Fatalf("events: %s", dump(evs))
	}
	call := evs[0].ToolCall
	if call.Name != "list_files" || string(call.Args) != "{}" || !strings.HasPrefix(call.ID, "call_") || len(call.ID) <= len("call_") {
		t.Errorf("call = %+v (args %s), want list_files with args {} and a generated call_ id", call, call.Args)
	}
	if reqs := f.requests(); len(reqs) == 1 {
		jsonEqual(t, "tools", reqs[0].Body["tools"], `[{"name":"list_files","input_schema":{"type":"object"}}]`)
	}
}

// The assistant's text and both calls go back as one assistant message, and
// both results as one user message of tool_result blocks; nothing is dropped.
func TestToolResultsRoundTrip(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			messageStart(420),
			textStart(0),
			textDelta(0, "Paris: 18°C; the time is unknown."),
			blockStop(0),
			messageDelta("end_turn", 12),
			messageStop,
		)
	})
	evs, err := collect(newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		Model: "claude-other",
		Messages: []switchboard.Message{
			{Role: switchboard.RoleUser, Content: "weather and time in Paris?", Author: "Ann"},
			{Role: switchboard.RoleAssistant, Content: "Let me check.", ToolCalls: []switchboard.ToolCall{
				{ID: "toolu_A", Name: "get_weather", Args: json.RawMessage(`{"city":"Paris","unit":"celsius"}`)},
				{ID: "toolu_B", Name: "get_time", Args: json.RawMessage(`{"tz":"Europe/Paris"}`)},
				{ID: "toolu_C", Name: "list_files"},
			}},
			{Role: switchboard.RoleTool, ToolCallID: "toolu_A", ToolName: "get_weather", Content: "18°C, cloudy"},
			{Role: switchboard.RoleTool, ToolCallID: "toolu_B", ToolName: "get_time", Content: "unknown time zone", IsError: true},
			{Role: switchboard.RoleTool, ToolCallID: "toolu_C", ToolName: "list_files"},
			{Role: switchboard.RoleAssistant, ToolCalls: []switchboard.ToolCall{
				{ID: "toolu_D", Name: "get_time", Args: json.RawMessage(`{"tz":"Europe/Berlin"}`)},
			}},
			{Role: switchboard.RoleTool, ToolCallID: "toolu_D", ToolName: "get_time", Content: "10:30"},
		},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	assertEvents(t, evs, []providers.Event{
		{Kind: providers.EventTextDelta, Text: "Paris: 18°C; the time is unknown."},
		{Kind: providers.EventUsage, Usage: switchboard.Usage{PromptTokens: 420, CompletionTokens: 12, TotalTokens: 432}},
		{Kind: providers.EventDone, StopReason: "end_turn", Model: "claude-sonnet-4-5-20250929"},
	})
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("fake saw %d requests, want 1", len(reqs))
	}
	body := reqs[0].Body
	jsonEqual(t, "model", body["model"], `"claude-other"`)
	jsonEqual(t, "max_tokens (default)", body["max_tokens"], `4096`)
	for _, absent := range []string{"system", "tools", "temperature"} {
		if v, ok := body[absent]; ok {
			t.Errorf("%s = %v, want it absent", absent, v)
		}
	}
	jsonEqual(t, "messages", body["messages"], `[
		{"role":"user","content":[{"type":"text","text":"[Ann]: weather and time in Paris?"}]},
		{"role":"assistant","content":[
			{"type":"text","text":"Let me check."},
			{"type":"tool_use","id":"toolu_A","name":"get_weather","input":{"city":"Paris","unit":"celsius"}},
			{"type":"tool_use","id":"toolu_B","name":"get_time","input":{"tz":"Europe/Paris"}},
			{"type":"tool_use","id":"toolu_C","name":"list_files","input":{}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"toolu_A","content":[{"type":"text","text":"18°C, cloudy"}],"is_error":false},
			{"type":"tool_result","tool_use_id":"toolu_B","content":[{"type":"text","text":"unknown time zone"}],"is_error":true},
			{"type":"tool_result","tool_use_id":"toolu_C","is_error":false}]},
		{"role":"assistant","content":[
			{"type":"tool_use","id":"toolu_D","name":"get_time","input":{"tz":"Europe/Berlin"}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"toolu_D","content":[{"type":"text","text":"10:30"}],"is_error":false}]}]`)
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		errType    string
		retryAfter string
		wantAfter  time.Duration
		retryable  bool
	}{
		{"rate limited", http.StatusTooManyRequests, "rate_limit_error", "2", 2 * time.Second, true},
		{"bad request", http.StatusBadRequest, "invalid_request_error", "", 0, false},
		{"server error", http.StatusInternalServerError, "api_error", "", 0, true},
		{"overloaded", anthropic.StatusOverloaded, "overloaded_error", "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				apiError(w, tt.status, tt.errType, "nope")
			})
			evs, err := collect(newProvider(t, f.URL).Stream(context.Background(), providers.Request{
				Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
			}))
			if len(evs) != 0 {
				t.Errorf("events before the error: %s", dump(evs))
			}
			var pe *providers.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (%T), want *providers.Error", err, err)
			}
			if pe.Provider != "claude" || pe.Status != tt.status || pe.RetryAfter != tt.wantAfter || pe.Retryable() != tt.retryable {
				t.Errorf("error = {Provider:%q Status:%d RetryAfter:%v Retryable:%v}, want {claude %d %v %v}",
					pe.Provider, pe.Status, pe.RetryAfter, pe.Retryable(), tt.status, tt.wantAfter, tt.retryable)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("fake saw %d requests, want exactly 1 (SDK retries must be off)", n)
			}
		})
	}
}

// An error event mid-stream ends the stream with a *providers.Error whose
// status is the one Anthropic documents for the error type.
func TestErrorEventMidStream(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			messageStart(25),
			textStart(0),
			textDelta(0, "Hel"),
			ev("error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`),
			textDelta(0, "lo"),
			blockStop(0),
			messageDelta("end_turn", 2),
			messageStop,
		)
	})
	var evs []providers.Event
	var errs []error
	for e, err := range newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
	}) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(errs) > 0 {
			t.Errorf("event %+v yielded after the error", e)
		}
		evs = append(evs, e)
	}
	assertEvents(t, evs, []providers.Event{{Kind: providers.EventTextDelta, Text: "Hel"}})
	if len(errs) != 1 {
		t.Fatalf("errors = %v, want exactly one", errs)
	}
	var pe *providers.Error
	if !errors.As(errs[0], &pe) {
		t.Fatalf("err = %v (%T), want *providers.Error", errs[0], errs[0])
	}
	if pe.Status != anthropic.StatusOverloaded || !pe.Retryable() {
		t.Errorf("error = %v (Status %d, Retryable %v), want Status 529, retryable", pe, pe.Status, pe.Retryable())
	}
	if !strings.Contains(pe.Error(), "Overloaded") {
		t.Errorf("error %q does not carry the server's message", pe)
	}
}

// A stream that ends without message_stop is an error, never a silent
// success: whether the connection drops or the body just ends.
func TestStreamCut(t *testing.T) {
	partial := [][2]string{
		messageStart(25),
		textStart(0),
		textDelta(0, "Hel"),
		toolStart(1, "toolu_01", "get_weather"),
		jsonDelta(1, `{"city":`),
	}
	tests := []struct {
		name string
		cut  func(w http.ResponseWriter)
	}{
		{"connection dropped", func(w http.ResponseWriter) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}},
		{"body ended", func(http.ResponseWriter) {}},
		{"ended after message_delta", func(w http.ResponseWriter) {
			sse(w, jsonDelta(1, `"Paris"}`), blockStop(1), messageDelta("tool_use", 20))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				sse(w, partial...)
				tt.cut(w)
			})
			var evs []providers.Event
			var err error
			for e, e2 := range newProvider(t, f.URL).Stream(context.Background(), providers.Request{
				Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
			}) {
				if e2 != nil {
					err = e2
					break
				}
				evs = append(evs, e)
			}
			for _, e := range evs {
				if e.Kind == providers.EventDone || e.Kind == providers.EventUsage {
					t.Errorf("got %+v from a stream that never finished", e)
				}
			}
			if len(evs) == 0 || evs[0].Text != "Hel" {
				t.Errorf("events = %s, want the text that arrived before the cut", dump(evs))
			}
			var pe *providers.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (%T), want *providers.Error", err, err)
			}
			if pe.Status != 0 || !pe.Retryable() {
				t.Errorf("error = %v (Status %d, Retryable %v), want Status 0, retryable", pe, pe.Status, pe.Retryable())
			}
		})
	}
}

// stallAfter writes the events, then holds the stream open until the client
// goes away (gone is closed then).
func stallAfter(f *fakeAnthropic, gone chan<- struct{}, events ...[2]string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		defer close(gone)
		sse(w, events...)
		select {
		case <-r.Context().Done():
		case <-f.release:
		}
	}
}

// await waits for ch to close. The deadline only keeps a broken adapter from
// hanging the test run; it measures nothing.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("gave up waiting for %s", what)
	}
}

func TestContextCancelStopsStream(t *testing.T) {
	gone := make(chan struct{})
	var f *fakeAnthropic
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) {
		stallAfter(f, gone, messageStart(25), textStart(0), textDelta(0, "Hel"))(w, r)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var evs []providers.Event
	var err error
	for e, e2 := range newProvider(t, f.URL).Stream(ctx, providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
	}) {
		if e2 != nil {
			err = e2
			break
		}
		evs = append(evs, e)
		cancel() // the stream is stalled; only cancellation can end it
	}
	assertEvents(t, evs, []providers.Event{{Kind: providers.EventTextDelta, Text: "Hel"}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Retryable() {
		t.Errorf("err = %v (%T), want a non-retryable *providers.Error", err, err)
	}
	await(t, gone, "the server to see the connection close")
}

func TestConsumerStopClosesStream(t *testing.T) {
	gone := make(chan struct{})
	var f *fakeAnthropic
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) {
		stallAfter(f, gone, messageStart(25), textStart(0), textDelta(0, "Hel"))(w, r)
	})
	n := 0
	for e, err := range newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
	}) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		n++
		if e.Text != "Hel" {
			t.Errorf("event = %+v, want the first text delta", e)
		}
		break
	}
	if n != 1 {
		t.Fatalf("got %d events, want 1", n)
	}
	// Returning from the loop must close the body, so the server sees the
	// client leave.
	await(t, gone, "the server to see the client leave")
}

func TestBadRequestIsNotSent(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		t.Error("no request should reach the server")
	})
	tests := []struct {
		name string
		req  providers.Request
	}{
		{"unknown role", providers.Request{Messages: []switchboard.Message{{Role: "robot", Content: "hi"}}}},
		{"bad tool schema", providers.Request{
			Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
			Tools:    []providers.ToolSpec{{Name: "broken", Parameters: json.RawMessage(`{"type":`)}},
		}},
		{"bad tool call args", providers.Request{Messages: []switchboard.Message{
			{Role: switchboard.RoleAssistant, ToolCalls: []switchboard.ToolCall{{ID: "t1", Name: "x", Args: json.RawMessage(`{"a":`)}}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := collect(newProvider(t, f.URL).Stream(context.Background(), tt.req))
			var pe *providers.Error
			if err == nil || errors.As(err, &pe) {
				t.Errorf("err = %v, want a plain (not retryable) error", err)
			}
		})
	}
}

// A prompt over the model's context window is refused as Anthropic
// refuses it ("prompt is too long"): ErrContextTooLong; another invalid
// request is not.
func TestContextTooLong(t *testing.T) {
	for msg, want := range map[string]bool{
		"prompt is too long: 208370 tokens > 200000 maximum": true,
		"messages: text content blocks must be non-empty":    false,
	} {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			apiError(w, http.StatusBadRequest, "invalid_request_error", msg)
		})
		_, err := collect(newProvider(t, f.URL).Stream(context.Background(), providers.Request{
			Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
		}))
		if got := errors.Is(err, providers.ErrContextTooLong); got != want {
			t.Errorf("%q: errors.Is(%v, ErrContextTooLong) = %v, want %v", msg, err, got, want)
		}
	}
}

// A user message's pictures go before its text, as base64 image blocks;
// a file without a picture is known by the text alone.
func TestImagesGoBeforeTheText(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, messageStart(10), textStart(0), textDelta(0, "A chart."), blockStop(0),
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`),
			ev("message_stop", `{"type":"message_stop"}`))
	})
	p := newProvider(t, f.URL)
	png := []byte("\x89PNG\r\n\x1a\nfake")
	req := providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "What is this?", Files: []switchboard.File{
			{Name: "chart.png", Path: "uploads/chart.png", Type: "image/png", Size: 12},
			{Name: "data.csv", Path: "uploads/data.csv", Type: "text/csv", Size: 9},
		}}},
		Images: map[string]providers.Image{"uploads/chart.png": {Type: "image/png", Data: png}},
	}
	if _, err := collect(p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	content := f.requests()[0].Body["messages"].([]any)[0].(map[string]any)["content"].([]any)
	if len(content) != 2 {
		t.Fatalf("content blocks: %v", content)
	}
	img, text := content[0].(map[string]any), content[1].(map[string]any)
	src, _ := img["source"].(map[string]any)
	if img["type"] != "image" || src["type"] != "base64" || src["media_type"] != "image/png" || src["data"] != base64.StdEncoding.EncodeToString(png) {
		t.Errorf("image block: %v", img)
	}
	if text["type"] != "text" || text["text"] != "What is this?" {
		t.Errorf("text block: %v", text)
	}
}

// Anthropic's input_tokens leave out what was read from (and written to)
// the prompt cache: the usage's prompt tokens add them back, so they count
// all the input as with every provider, and the cache reads are its
// cached tokens.
func TestCachedTokens(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			ev("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":21,"cache_creation_input_tokens":188,"cache_read_input_tokens":1800,"output_tokens":1}}}`),
			textStart(0), textDelta(0, "Again."), blockStop(0),
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":21,"cache_creation_input_tokens":188,"cache_read_input_tokens":1800,"output_tokens":40}}`),
			messageStop,
		)
	})
	evs, err := collect(newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "again"}},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	assertEvents(t, evs, []providers.Event{
		{Kind: providers.EventTextDelta, Text: "Again."},
		{Kind: providers.EventUsage, Usage: switchboard.Usage{PromptTokens: 21 + 188 + 1800, CompletionTokens: 40, TotalTokens: 21 + 188 + 1800 + 40, CachedTokens: 1800}},
		{Kind: providers.EventDone, StopReason: "end_turn", Model: "claude-sonnet-4-5-20250929"},
	})
}
