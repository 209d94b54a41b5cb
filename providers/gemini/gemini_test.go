package gemini_test

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
	"github.com/switchboard-gw/switchboard/providers/gemini"
)

// fakeGemini speaks the Gemini API's streaming wire: POST
// /v1beta/models/{model}:streamGenerateContent?alt=sse answered with
// text/event-stream, one `data: {GenerateContentResponse}` event per chunk,
// events separated by CRLF CRLF as the real service does. It records every
// request it receives.
type fakeGemini struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	Method, Path, Query string
	Header              http.Header
	Body                map[string]any
}

func newFake(t *testing.T, reply func(w http.ResponseWriter, r *http.Request)) *fakeGemini {
	t.Helper()
	f := &fakeGemini{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		var body map[string]any
		if err == nil {
			err = json.Unmarshal(raw, &body)
		}
		if err != nil {
			http.Error(w, `{"error":{"code":400,"message":"bad body","status":"INVALID_ARGUMENT"}}`, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
		reply(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeGemini) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// sse writes the chunks as server-sent events, flushing each.
func sse(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\r\n\r\n", c)
		w.(http.Flusher).Flush()
	}
}

func apiError(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func newProvider(t *testing.T, url string) *gemini.Provider {
	t.Helper()
	p, err := gemini.New(providers.Config{Name: "gem", Kind: "gemini", BaseURL: url + "/", APIKey: "k-123", Model: "gemini-test"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func collect(t *testing.T, seq func(func(providers.Event, error) bool)) ([]providers.Event, error) {
	t.Helper()
	var evs []providers.Event
	for ev, err := range seq {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
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

func TestTextStreaming(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			`{"candidates": [{"content": {"parts": [{"text": "**Weighing** the greeting","thought": true}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 12,"totalTokenCount": 12},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`,
			`{"candidates": [{"content": {"parts": [{"text": "Hel","thoughtSignature": "c2lnbmF0dXJl"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 12,"candidatesTokenCount": 1,"totalTokenCount": 13},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`,
			`{"candidates": [{"content": {"parts": [{"text": "lo, "}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 12,"candidatesTokenCount": 3,"totalTokenCount": 15},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`,
			`{"candidates": [{"content": {"parts": [{"text": "world"}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 12,"candidatesTokenCount": 5,"thoughtsTokenCount": 4,"totalTokenCount": 21},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`,
		)
	})
	temp := 0.25
	schema := `{"type":"object","properties":{"expr":{"type":"string","minLength":1}},"required":["expr"],"additionalProperties":false}`
	evs, err := collect(t, newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		System: "You are terse.",
		Messages: []switchboard.Message{
			{Role: switchboard.RoleSystem, Content: "Earlier: Ann asked for brevity."},
			{Role: switchboard.RoleUser, Content: "hi", Author: "Ann"},
			{Role: switchboard.RoleAssistant, Content: "Hello Ann."},
			{Role: switchboard.RoleUser, Content: "greet everyone"},
		},
		Tools:       []providers.ToolSpec{{Name: "calculator", Description: "Evaluates arithmetic", Parameters: json.RawMessage(schema)}},
		Temperature: &temp,
		MaxTokens:   256,
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}

	want := []providers.Event{
		{Kind: providers.EventTextDelta, Text: "Hel"},
		{Kind: providers.EventTextDelta, Text: "lo, "},
		{Kind: providers.EventTextDelta, Text: "world"},
		{Kind: providers.EventUsage, Usage: switchboard.Usage{PromptTokens: 12, CompletionTokens: 9, TotalTokens: 21}},
		{Kind: providers.EventDone, StopReason: "STOP", Model: "gemini-2.5-flash"},
	}
	if !reflect.DeepEqual(evs, want) {
		t.Errorf("events:\n got %+v\nwant %+v", evs, want)
	}

	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1beta/models/gemini-test:streamGenerateContent" || r.Query != "alt=sse" {
		t.Errorf("request line: %s %s?%s", r.Method, r.Path, r.Query)
	}
	if got := r.Header.Get("x-goog-api-key"); got != "k-123" {
		t.Errorf("x-goog-api-key = %q", got)
	}
	// System messages in the history join the system prompt (contents have
	// no system role); the SDK labels the instruction with the user role.
	jsonEqual(t, "systemInstruction", r.Body["systemInstruction"],
		`{"role":"user","parts":[{"text":"You are terse."},{"text":"Earlier: Ann asked for brevity."}]}`)
	jsonEqual(t, "contents", r.Body["contents"], `[
		{"role":"user","parts":[{"text":"[Ann]: hi"}]},
		{"role":"model","parts":[{"text":"Hello Ann."}]},
		{"role":"user","parts":[{"text":"greet everyone"}]}]`)
	jsonEqual(t, "tools", r.Body["tools"], `[{"functionDeclarations":[
		{"name":"calculator","description":"Evaluates arithmetic","parametersJsonSchema":`+schema+`}]}]`)
	jsonEqual(t, "generationConfig", r.Body["generationConfig"], `{"temperature":0.25,"maxOutputTokens":256}`)
}

func TestParallelToolCalls(t *testing.T) {
	// Gemini sends each call whole, as its own functionCall part; parallel
	// calls share a chunk. A call may come without an id.
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			`{"candidates": [{"content": {"parts": [{"text": "Checking both."}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-pro"}`,
			`{"candidates": [{"content": {"parts": [{"functionCall": {"id": "fc_paris","name": "current_time","args": {"tz": "Europe/Paris"}},"thoughtSignature": "c2lnbmF0dXJl"},{"functionCall": {"id": "fc_tokyo","name": "current_time","args": {"tz": "Asia/Tokyo","format": {"hour12": false}}}}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-pro"}`,
			`{"candidates": [{"content": {"parts": [{"functionCall": {"name": "list_zones"}}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 30,"candidatesTokenCount": 20,"totalTokenCount": 50},"modelVersion": "gemini-2.5-pro"}`,
		)
	})
	evs, err := collect(t, newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		Model:    "gemini-other",
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "time in Paris and Tokyo?"}},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := f.requests()[0].Path; got != "/v1beta/models/gemini-other:streamGenerateContent" {
		t.Errorf("path = %s: the request's model must win over the configured one", got)
	}

	var calls []switchboard.ToolCall
	var text string
	for _, ev := range evs {
		switch ev.Kind {
		case providers.EventToolCall:
			calls = append(calls, ev.ToolCall)
		case providers.EventTextDelta:
			text += ev.Text
		}
	}
	if text != "Checking both." {
		t.Errorf("text = %q", text)
	}
	if len(calls) != 3 {
		t.Fatalf("got %d tool calls, want 3: %+v", len(calls), calls)
	}
	wantArgs := []string{`{"tz":"Europe/Paris"}`, `{"tz":"Asia/Tokyo","format":{"hour12":false}}`, `{}`}
	for i, c := range calls {
		var got any
		if err := json.Unmarshal(c.Args, &got); err != nil {
			t.Fatalf("call %d: args %s are not JSON: %v", i, c.Args, err)
		}
		jsonEqual(t, fmt.Sprintf("call %d args", i), got, wantArgs[i])
	}
	if calls[0].ID != "fc_paris" || calls[1].ID != "fc_tokyo" || calls[0].Name != "current_time" || calls[1].Name != "current_time" {
		t.Errorf("calls = %+v", calls[:2])
	}
	if calls[2].Name != "list_zones" || !strings.HasPrefix(calls[2].ID, "call_") || len(calls[2].ID) <= len("call_") {
		t.Errorf("call without a server id: %+v, want a generated call_ id", calls[2])
	}
	if last := evs[len(evs)-1]; last.Kind != providers.EventDone || last.StopReason != "STOP" || last.Model != "gemini-2.5-pro" {
		t.Errorf("last event = %+v", last)
	}
}

func TestToolResultsRoundTrip(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, `{"candidates": [{"content": {"parts": [{"text": "Paris 10:00; Tokyo unknown."}],"role": "model"},"finishReason": "STOP","index": 0}]}`)
	})
	_, err := collect(t, newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		Messages: []switchboard.Message{
			{Role: switchboard.RoleUser, Content: "time in Paris and Tokyo?", Author: "Bo"},
			{Role: switchboard.RoleAssistant, Content: "Checking both.", ToolCalls: []switchboard.ToolCall{
				{ID: "fc_paris", Name: "current_time", Args: json.RawMessage(`{"tz":"Europe/Paris"}`)},
				{ID: "fc_tokyo", Name: "current_time", Args: json.RawMessage(`{"tz":"Asia/Tokio"}`)},
			}},
			{Role: switchboard.RoleTool, ToolCallID: "fc_paris", ToolName: "current_time", Content: "10:00"},
			{Role: switchboard.RoleTool, ToolCallID: "fc_tokyo", ToolName: "current_time", Content: "unknown time zone Asia/Tokio", IsError: true},
			{Role: switchboard.RoleAssistant, ToolCalls: []switchboard.ToolCall{{ID: "fc_zones", Name: "list_zones"}}},
			{Role: switchboard.RoleTool, ToolCallID: "fc_zones", ToolName: "list_zones", Content: "[]"},
		},
		Tools: []providers.ToolSpec{{Name: "current_time"}, {Name: "list_zones"}},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	// The replayed turns carry Google's documented placeholder signature
	// (base64 of "skip_thought_signature_validator") on their first call.
	const sig = "c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I="
	body := f.requests()[0].Body
	jsonEqual(t, "contents", body["contents"], `[
		{"role":"user","parts":[{"text":"[Bo]: time in Paris and Tokyo?"}]},
		{"role":"model","parts":[
			{"text":"Checking both."},
			{"functionCall":{"id":"fc_paris","name":"current_time","args":{"tz":"Europe/Paris"}},"thoughtSignature":"`+sig+`"},
			{"functionCall":{"id":"fc_tokyo","name":"current_time","args":{"tz":"Asia/Tokio"}}}]},
		{"role":"user","parts":[
			{"functionResponse":{"id":"fc_paris","name":"current_time","response":{"result":"10:00"}}},
			{"functionResponse":{"id":"fc_tokyo","name":"current_time","response":{"error":"unknown time zone Asia/Tokio"}}}]},
		{"role":"model","parts":[{"functionCall":{"id":"fc_zones","name":"list_zones"},"thoughtSignature":"`+sig+`"}]},
		{"role":"user","parts":[{"functionResponse":{"id":"fc_zones","name":"list_zones","response":{"result":"[]"}}}]}]`)
	jsonEqual(t, "tools", body["tools"], `[{"functionDeclarations":[{"name":"current_time"},{"name":"list_zones"}]}]`)
	if _, ok := body["systemInstruction"]; ok {
		t.Errorf("systemInstruction sent without a system prompt: %v", body["systemInstruction"])
	}
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		wantStatus int
		wantAfter  time.Duration
		retryable  bool
	}{
		{
			name: "429 with Retry-After", status: 429, header: map[string]string{"Retry-After": "2"},
			body:       `{"error": {"code": 429,"message": "Resource has been exhausted (e.g. check quota).","status": "RESOURCE_EXHAUSTED"}}`,
			wantStatus: 429, wantAfter: 2 * time.Second, retryable: true,
		},
		{
			name: "429 with RetryInfo", status: 429,
			body:       `{"error": {"code": 429,"message": "You exceeded your current quota.","status": "RESOURCE_EXHAUSTED","details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo","retryDelay": "7s"}]}}`,
			wantStatus: 429, wantAfter: 7 * time.Second, retryable: true,
		},
		{
			name: "400", status: 400,
			body:       `{"error": {"code": 400,"message": "Invalid JSON payload received.","status": "INVALID_ARGUMENT"}}`,
			wantStatus: 400,
		},
		{
			name: "500", status: 500,
			body:       `{"error": {"code": 500,"message": "An internal error has occurred.","status": "INTERNAL"}}`,
			wantStatus: 500, retryable: true,
		},
		{
			// A proxy's answer: the status is the HTTP one, not the body's.
			name: "503 plain text", status: 503, body: "upstream connect error",
			wantStatus: 503, retryable: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				apiError(w, tt.status, tt.body)
			})
			evs, err := collect(t, newProvider(t, f.URL).Stream(context.Background(), providers.Request{
				Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
			}))
			if len(evs) != 0 {
				t.Errorf("events before the error: %+v", evs)
			}
			var pe *providers.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (%T), want *providers.Error", err, err)
			}
			if pe.Provider != "gem" || pe.Status != tt.wantStatus || pe.RetryAfter != tt.wantAfter || pe.Retryable() != tt.retryable {
				t.Errorf("got provider %q status %d retry-after %v retryable %v; want gem %d %v %v",
					pe.Provider, pe.Status, pe.RetryAfter, pe.Retryable(), tt.wantStatus, tt.wantAfter, tt.retryable)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("server saw %d requests, want 1 (SDK retries must be off)", n)
			}
		})
	}
}

func TestBrokenStreams(t *testing.T) {
	first := `{"candidates": [{"content": {"parts": [{"text": "Hel"}],"role": "model"},"index": 0}]}`
	tests := []struct {
		name       string
		reply      func(w http.ResponseWriter, r *http.Request)
		wantStatus int
	}{
		{
			name: "connection dropped",
			reply: func(w http.ResponseWriter, r *http.Request) {
				sse(w, first)
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close() // mid chunked body, no terminating chunk
				}
			},
		},
		{
			name:  "clean end without finish reason",
			reply: func(w http.ResponseWriter, r *http.Request) { sse(w, first) },
		},
		{
			name: "error event mid-stream",
			reply: func(w http.ResponseWriter, r *http.Request) {
				sse(w, first, `{"error": {"code": 503,"message": "The model is overloaded. Please try again later.","status": "UNAVAILABLE"}}`)
			},
			wantStatus: 503,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.reply)
			evs, err := collect(t, newProvider(t, f.URL).Stream(context.Background(), providers.Request{
				Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
			}))
			if len(evs) != 1 || evs[0].Text != "Hel" {
				t.Errorf("events before the error = %+v, want the first delta", evs)
			}
			var pe *providers.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (%T), want *providers.Error", err, err)
			}
			if pe.Status != tt.wantStatus || !pe.Retryable() {
				t.Errorf("status %d retryable %v, want %d and retryable", pe.Status, pe.Retryable(), tt.wantStatus)
			}
		})
	}
}

func TestPromptBlocked(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, `{"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},"usageMetadata": {"promptTokenCount": 8,"totalTokenCount": 8},"modelVersion": "gemini-2.5-flash"}`)
	})
	_, err := collect(t, newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "something forbidden"}},
	}))
	if !errors.Is(err, gemini.ErrPromptBlocked) || !strings.Contains(err.Error(), "PROHIBITED_CONTENT") {
		t.Fatalf("err = %v, want ErrPromptBlocked naming the reason", err)
	}
	var pe *providers.Error
	if errors.As(err, &pe) {
		t.Errorf("a blocked prompt must not be a *providers.Error (it would be retried): %v", err)
	}
}

// blockingFake sends one chunk, then holds the stream open until the client
// goes away, and reports that on gone.
func blockingFake(t *testing.T) (*fakeGemini, <-chan struct{}) {
	gone := make(chan struct{})
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, `{"candidates": [{"content": {"parts": [{"text": "Hel"}],"role": "model"},"index": 0}]}`)
		<-r.Context().Done()
		close(gone)
	})
	return f, gone
}

func awaitGone(t *testing.T, gone <-chan struct{}) {
	t.Helper()
	select {
	case <-gone:
	case <-time.After(10 * time.Second): // a guard against hanging, not a timing assertion
		t.Fatal("the server never saw the client go away: the response body was not closed")
	}
}

func TestCancellation(t *testing.T) {
	f, gone := blockingFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var evs []providers.Event
	var errs []error
	for ev, err := range newProvider(t, f.URL).Stream(ctx, providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
	}) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		evs = append(evs, ev)
		cancel()
	}
	if len(evs) != 1 || len(errs) != 1 {
		t.Fatalf("got events %+v and errors %v; want one delta, then one error and nothing else", evs, errs)
	}
	var pe *providers.Error
	if !errors.As(errs[0], &pe) || !errors.Is(errs[0], context.Canceled) || pe.Retryable() {
		t.Errorf("err = %v, want a non-retryable *providers.Error wrapping context.Canceled", errs[0])
	}
	awaitGone(t, gone)
}

func TestConsumerStops(t *testing.T) {
	f, gone := blockingFake(t)
	n := 0
	for range newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
	}) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("ranged %d times", n)
	}
	awaitGone(t, gone)
}

// headerTransport marks the requests that went through it.
type headerTransport struct{ next http.RoundTripper }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Through", "operator-client")
	return h.next.RoundTrip(r)
}

func TestUsesConfiguredHTTPClient(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		apiError(w, 429, `{"error": {"code": 429,"message": "slow down","status": "RESOURCE_EXHAUSTED"}}`)
	})
	client := &http.Client{Transport: headerTransport{next: http.DefaultTransport}}
	p, err := gemini.New(providers.Config{Name: "gem", BaseURL: f.URL + "/", APIKey: "k", Model: "m", HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	_, err = collect(t, p.Stream(context.Background(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
	}))
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.RetryAfter != 3*time.Second {
		t.Errorf("err = %v, want Retry-After read through the operator's client", err)
	}
	if got := f.requests()[0].Header.Get("X-Through"); got != "operator-client" {
		t.Errorf("request did not go through cfg.HTTPClient (X-Through = %q)", got)
	}
	if _, ok := client.Transport.(headerTransport); !ok {
		t.Errorf("the caller's client was modified: transport is %T", client.Transport)
	}
}

func TestUnreachableServer(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {})
	url := f.URL
	f.Close()
	_, err := collect(t, newProvider(t, url).Stream(context.Background(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
	}))
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Status != 0 || !pe.Retryable() {
		t.Errorf("err = %v, want a retryable *providers.Error with status 0", err)
	}
}

// A request over the model's context window is refused as Gemini refuses
// it ("exceeds the maximum number of tokens"): ErrContextTooLong; another
// invalid argument is not.
func TestContextTooLong(t *testing.T) {
	for body, want := range map[string]bool{
		`{"error": {"code": 400,"message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status": "INVALID_ARGUMENT"}}`: true,
		`{"error": {"code": 400,"message": "Invalid JSON payload received.","status": "INVALID_ARGUMENT"}}`:                                                          false,
	} {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request) { apiError(w, http.StatusBadRequest, body) })
		_, err := collect(t, newProvider(t, f.URL).Stream(context.Background(), providers.Request{
			Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}},
		}))
		if got := errors.Is(err, providers.ErrContextTooLong); got != want {
			t.Errorf("%s: errors.Is(%v, ErrContextTooLong) = %v, want %v", body, err, got, want)
		}
	}
}

// A user message's pictures go after its text as inline data; a file
// without a picture is known by the text alone.
func TestImagesGoAsInlineData(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, `{"candidates": [{"content": {"parts": [{"text": "A chart."}],"role": "model"},"finishReason": "STOP","index": 0}]}`)
	})
	png := []byte("\x89PNG\r\n\x1a\nfake")
	_, err := collect(t, newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "What is this?", Files: []switchboard.File{
			{Name: "chart.png", Path: "uploads/chart.png", Type: "image/png", Size: 12},
			{Name: "data.csv", Path: "uploads/data.csv", Type: "text/csv", Size: 9},
		}}},
		Images: map[string]providers.Image{"uploads/chart.png": {Type: "image/png", Data: png}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "contents", f.requests()[0].Body["contents"], `[{"role":"user","parts":[
		{"text":"What is this?"},
		{"inlineData":{"mimeType":"image/png","data":"`+base64.StdEncoding.EncodeToString(png)+`"}}]}]`)
}

// Gemini counts cached content inside promptTokenCount and says how much
// in cachedContentTokenCount: the usage keeps both.
func TestCachedTokens(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			`{"candidates": [{"content": {"parts": [{"text": "Again."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 4200,"cachedContentTokenCount": 4096,"candidatesTokenCount": 30,"totalTokenCount": 4230,"cacheTokensDetails": [{"modality": "TEXT","tokenCount": 4096}]},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`,
		)
	})
	evs, err := collect(t, newProvider(t, f.URL).Stream(context.Background(), providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "again"}},
	}))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	want := []providers.Event{
		{Kind: providers.EventTextDelta, Text: "Again."},
		{Kind: providers.EventUsage, Usage: switchboard.Usage{PromptTokens: 4200, CompletionTokens: 30, TotalTokens: 4230, CachedTokens: 4096}},
		{Kind: providers.EventDone, StopReason: "STOP", Model: "gemini-2.5-flash"},
	}
	if !reflect.DeepEqual(evs, want) {
		t.Errorf("events:\n got %+v\nwant %+v", evs, want)
	}
}
