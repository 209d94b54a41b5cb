package openai_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gws "github.com/gorilla/websocket"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	listener "github.com/switchboard-gw/switchboard/listeners/openai"
	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

const (
	allKey     = "sk-test-all-guides-0123456789"
	supportKey = "sk-test-support-only-0123456789"
	viewerKey  = "sk-test-viewer-0123456789abcd"
	slowKey    = "sk-test-one-a-minute-0123456789"
)

type api struct {
	t    *testing.T
	gw   *sessionstest.Gateway
	url  string
	ws   string // the /ws endpoint's URL
	seen *seen
}

// seen is the session manager, noting the sessions the API opens and
// telling each one it deletes.
type seen struct {
	*sessions.Manager
	mu      sync.Mutex
	opened  []string
	deleted chan string
}

func (s *seen) Attach(ctx context.Context, opts sessions.AttachOptions) (*sessions.Subscription, error) {
	sub, err := s.Manager.Attach(ctx, opts)
	if err == nil {
		s.mu.Lock()
		s.opened = append(s.opened, sub.Ready.Session)
		s.mu.Unlock()
	}
	return sub, err
}

func (s *seen) Delete(ctx context.Context, id string) error {
	err := s.Manager.Delete(ctx, id)
	if err == nil {
		s.deleted <- id
	}
	return err
}

// newAPI serves the API on 127.0.0.1 over a session manager with the
// project's guides and a scripted model.
func newAPI(t *testing.T, cfg listener.Config) *api {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gw := sessionstest.New(t, "../../guides", log)
	if cfg.Keys == nil {
		cfg.Keys = []listener.Key{
			{Name: "all", Secret: allKey},
			{Name: "support-bot", Secret: supportKey, Guides: []string{"support"}},
			{Name: "dashboard", Secret: viewerKey, Role: collaboration.Viewer},
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	mux := http.NewServeMux()
	rec := &seen{Manager: gw.Manager, deleted: make(chan string, 100)}
	mux.Handle("/v1/", listener.New(ctx, cfg, rec, guideNames{"assistant", "support"}, log))
	mux.Handle("GET /ws", websocket.New(ctx, websocket.Config{}, gw.Manager, log)) // another channel of the same sessions
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); cancel() })
	return &api{t: t, gw: gw, url: srv.URL + "/v1", ws: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws", seen: rec}
}

type guideNames []string

func (g guideNames) Names() []string { return g }

// client is the official SDK pointed at the API, without retries.
func (a *api) client(key string) *sdk.Client {
	c := sdk.NewClient(option.WithBaseURL(a.url), option.WithAPIKey(key), option.WithMaxRetries(0))
	return &c
}

func TestModelsAreTheGuidesAKeyMayUse(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	for key, want := range map[string][]string{allKey: {"assistant", "support"}, supportKey: {"support"}} {
		page, err := a.client(key).Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range page.Data {
			if m.Object != "model" || m.OwnedBy != "switchboard" || m.Created == 0 {
				t.Errorf("model %+v: want object model, owned_by switchboard, created set", m)
			}
			got = append(got, m.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("models: %v, want %v", got, want)
		}
	}
}

// conversation is a request's messages: a system message of the client's,
// a turn of history, and the question.
func conversation(question string) []sdk.ChatCompletionMessageParamUnion {
	return []sdk.ChatCompletionMessageParamUnion{
		sdk.SystemMessage("Answer in English."),
		sdk.UserMessage("I bought a Widget Mini."),
		sdk.AssistantMessage("Good choice! How can I help?"),
		sdk.UserMessage(question),
	}
}

// checkModelGot fails unless the model was given the guide's prompt, then
// the request's messages in order.
func (a *api) checkModelGot(question string) {
	a.t.Helper()
	reqs := a.gw.LLM.Requests()
	if len(reqs) == 0 {
		a.t.Fatal("the model was not called")
	}
	var got []string
	for _, m := range reqs[len(reqs)-1].Messages {
		got = append(got, m.Role+": "+openaitest.Text(m.Content))
	}
	if len(got) != 5 || !strings.HasPrefix(got[0], "system: ") || !strings.Contains(got[0], "Acme Widgets") ||
		got[1] != "system: Answer in English." || got[2] != "user: I bought a Widget Mini." ||
		got[3] != "assistant: Good choice! How can I help?" || got[4] != "user: "+question {
		a.t.Fatalf("the model was given:\n%s", strings.Join(got, "\n"))
	}
}

// gone fails unless nothing of the sessions the requests opened is
// stored: neither the session nor its events.
func (a *api) gone() {
	a.t.Helper()
	ctx := context.Background()
	a.seen.mu.Lock()
	opened := slices.Clone(a.seen.opened)
	a.seen.mu.Unlock()
	if len(opened) == 0 {
		a.t.Fatal("no session was opened")
	}
	for _, id := range opened {
		if _, err := a.gw.DB.Session(ctx, id); !errors.Is(err, switchboard.ErrNotFound) {
			a.t.Errorf("session %s after its request: %v, want not found (stateless)", id, err)
		}
		if evs, err := a.gw.DB.EventsAfter(ctx, id, 0, 10); err != nil || len(evs) != 0 {
			a.t.Errorf("session %s after its request: %d events stored (%v), want none", id, len(evs), err)
		}
	}
}

func TestCompletion(t *testing.T) {
	a := newAPI(t, listener.Config{})
	a.gw.LLM.Push(openaitest.Reply{Text: []string{"It ships ", "free above 50 EUR."}})
	res, err := a.client(supportKey).Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model: "support", Messages: conversation("Is shipping free?"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 1 || res.Choices[0].Message.Content != "It ships free above 50 EUR." || res.Choices[0].FinishReason != "stop" ||
		res.Choices[0].Message.Role != "assistant" {
		t.Fatalf("choices: %+v", res.Choices)
	}
	if res.Object != "chat.completion" || res.Model != "support" || !strings.HasPrefix(res.ID, "chatcmpl-") || res.Created == 0 {
		t.Errorf("completion: id %q object %q model %q created %d", res.ID, res.Object, res.Model, res.Created)
	}
	if u := res.Usage; u.PromptTokens != 10 || u.CompletionTokens != 5 || u.TotalTokens != 15 {
		t.Errorf("usage: %+v, want the provider's 10/5/15", u)
	}
	a.checkModelGot("Is shipping free?")
	a.gone()
}

func TestStreamedCompletion(t *testing.T) {
	a := newAPI(t, listener.Config{})
	a.gw.LLM.Push(openaitest.Reply{Text: []string{"Mon", "day to ", "Friday."}})
	stream := a.client(allKey).Chat.Completions.NewStreaming(context.Background(), sdk.ChatCompletionNewParams{
		Model: "support", Messages: conversation("When are you open?"),
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	})
	var acc sdk.ChatCompletionAccumulator
	var chunks []sdk.ChatCompletionChunk
	for stream.Next() {
		c := stream.Current()
		acc.AddChunk(c)
		chunks = append(chunks, c)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 3 || chunks[0].Choices[0].Delta.Role != "assistant" {
		t.Fatalf("want a first chunk with role assistant; got %d chunks: %+v", len(chunks), chunks)
	}
	last := chunks[len(chunks)-1]
	if len(last.Choices) != 0 || last.Usage.TotalTokens != 15 || last.Usage.PromptTokens != 10 || last.Usage.CompletionTokens != 5 {
		t.Errorf("last chunk: %+v, want no choices and the usage 10/5/15", last)
	}
	finish := chunks[len(chunks)-2]
	if len(finish.Choices) != 1 || finish.Choices[0].FinishReason != "stop" {
		t.Errorf("the chunk before the usage: %+v, want finish_reason stop", finish)
	}
	if got := acc.Choices[0].Message.Content; got != "Monday to Friday." {
		t.Errorf("streamed text %q", got)
	}
	for _, c := range chunks {
		if c.Object != "chat.completion.chunk" || c.Model != "support" || c.ID != chunks[0].ID {
			t.Errorf("chunk: object %q model %q id %q", c.Object, c.Model, c.ID)
		}
	}
	a.checkModelGot("When are you open?")
	a.gone()
}

// A streamed completion without stream_options ends with the finish
// chunk: no usage chunk.
func TestStreamWithoutUsage(t *testing.T) {
	a := newAPI(t, listener.Config{})
	stream := a.client(allKey).Chat.Completions.NewStreaming(context.Background(), sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Hi")},
	})
	var last sdk.ChatCompletionChunk
	for stream.Next() {
		last = stream.Current()
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(last.Choices) != 1 || last.Choices[0].FinishReason != "stop" || last.JSON.Usage.Valid() {
		t.Errorf("last chunk %s: want the finish chunk, without usage", last.RawJSON())
	}
}

// apiError fails unless err is the SDK's *Error with that status and
// code, and returns it.
func apiError(t *testing.T, err error, status int, code string) *sdk.Error {
	t.Helper()
	var e *sdk.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want an *openai.Error with status %d", err, status)
	}
	if e.StatusCode != status || e.Code != code || e.Message == "" || e.Type == "" {
		t.Fatalf("error %d %q (type %q): %q; want %d %q with a message and a type", e.StatusCode, e.Code, e.Type, e.Message, status, code)
	}
	return e
}

func TestErrors(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	hi := []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Hi")}

	_, err := a.client("sk-wrong").Models.List(ctx)
	apiError(t, err, http.StatusUnauthorized, "invalid_api_key")
	_, err = a.client("").Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "support", Messages: hi})
	apiError(t, err, http.StatusUnauthorized, "invalid_api_key")

	_, err = a.client(supportKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "assistant", Messages: hi})
	e := apiError(t, err, http.StatusForbidden, "model_not_allowed")
	if e.Param != "model" {
		t.Errorf("param %q, want model", e.Param)
	}
	_, err = a.client(viewerKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "support", Messages: hi})
	apiError(t, err, http.StatusForbidden, "permission_denied")

	_, err = a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "gpt-4o", Messages: hi})
	apiError(t, err, http.StatusNotFound, "model_not_found")

	_, err = a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "support"})
	e = apiError(t, err, http.StatusBadRequest, "invalid_request")
	if e.Param != "messages" {
		t.Errorf("param %q, want messages", e.Param)
	}
	_, err = a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "support"},
		option.WithRequestBody("application/json", []byte(`{"model": "support", "messages": [`)))
	apiError(t, err, http.StatusBadRequest, "invalid_request")
	_, err = a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "support"},
		option.WithRequestBody("application/json", []byte(`{"model": "support", "messages": [{"role": "wizard", "content": "Hi"}]}`)))
	e = apiError(t, err, http.StatusBadRequest, "invalid_request")
	if e.Param != "messages[0].role" {
		t.Errorf("param %q, want messages[0].role", e.Param)
	}
	_, err = a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "support", Messages: hi,
		Tools: []sdk.ChatCompletionToolUnionParam{sdk.ChatCompletionFunctionTool(sdk.FunctionDefinitionParam{Name: "look up"})}})
	e = apiError(t, err, http.StatusBadRequest, "invalid_request")
	if e.Param != "tools[0].function.name" {
		t.Errorf("param %q, want tools[0].function.name", e.Param)
	}
	_, err = a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "support",
		Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage(strings.Repeat("long ", 300_000))}})
	apiError(t, err, http.StatusRequestEntityTooLarge, "request_too_large")

	_, err = a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "support"},
		option.WithRequestBody("application/json", []byte(`{"model": "support", "messages": [{"role": "user", "content": "Hi"}]}`)),
		option.WithBaseURL(strings.TrimSuffix(a.url, "/v1")+"/v1/embeddings/"))
	apiError(t, err, http.StatusNotFound, "unknown_url")
	if n := len(a.gw.LLM.Requests()); n != 0 {
		t.Errorf("the model was called %d times for refused requests", n)
	}
}

func TestRateLimitPerKey(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	a := newAPI(t, listener.Config{RequestsPerMinute: 1, Now: func() time.Time { return now },
		Keys: []listener.Key{{Name: "slow", Secret: slowKey}, {Name: "other", Secret: allKey}}})
	ctx := context.Background()
	if _, err := a.client(slowKey).Models.List(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := a.client(slowKey).Models.List(ctx)
	e := apiError(t, err, http.StatusTooManyRequests, "rate_limit_exceeded")
	if got := e.Response.Header.Get("Retry-After"); got != "60" {
		t.Errorf("Retry-After %q, want 60 (a request a minute)", got)
	}
	if _, err := a.client(allKey).Models.List(ctx); err != nil {
		t.Fatalf("another key is limited too: %v", err)
	}
}

// A stateless request's ask tool, from a key that may not approve: no
// one else can reach its session to answer, so it is denied at once, and
// the model answers without it.
func TestAskToolIsDenied(t *testing.T) {
	a := newAPI(t, listener.Config{})
	a.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "calculator", Args: `{"expression":"2*49+19"}`}}},
		openaitest.Reply{Text: []string{"That is 117 EUR."}},
	)
	res, err := a.client(allKey).Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model: "support", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("2 Pros and a Mini?")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; got != "That is 117 EUR." {
		t.Errorf("answer %q", got)
	}
	results := a.gw.LLM.ToolResults()
	if len(results) != 1 || !strings.Contains(strings.ToLower(results[0]), "denied") {
		t.Errorf("the model was told %q, want the call denied", results)
	}
	a.gone()
}

// The user's words are never a command, even with a leading slash.
func TestSlashTextIsAMessage(t *testing.T) {
	a := newAPI(t, listener.Config{})
	_, err := a.client(allKey).Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("/reset my password?")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !a.gw.LLM.Asked("/reset my password?") {
		t.Fatal("the model was not asked")
	}
}

// A provider failure is an error in the OpenAI shape, not an empty
// answer.
func TestProviderFailure(t *testing.T) {
	a := newAPI(t, listener.Config{})
	a.gw.LLM.Push(openaitest.Reply{Status: http.StatusInternalServerError})
	_, err := a.client(allKey).Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Hi")},
	})
	apiError(t, err, http.StatusBadGateway, "provider_error")
	a.gone()
}

// A client that goes away mid-stream stops the delivery, not the turn:
// the answer is stored whole, then the session deleted.
func TestClientGoneMidStream(t *testing.T) {
	a := newAPI(t, listener.Config{})
	gate := make(chan struct{})
	a.gw.LLM.Push(openaitest.Reply{Text: []string{"first ", "second"}, Gate: gate})
	ctx, cancel := context.WithCancel(context.Background())
	stream := a.client(allKey).Chat.Completions.NewStreaming(ctx, sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Hi")},
	})
	for stream.Next() {
		if stream.Current().Choices[0].Delta.Content != "" {
			break // the first text: the model waits at the gate
		}
	}
	// Go away while the model is mid-reply, then let it finish.
	cancel()
	_ = stream.Close()
	close(gate)
	// The turn runs to its end, then its session is deleted: Delete is
	// queued behind it.
	select {
	case <-a.seen.deleted:
	case <-time.After(15 * time.Second):
		t.Fatal("the session was not deleted after its client left")
	}
	a.gone()
	if reqs := a.gw.LLM.Requests(); len(reqs) != 1 {
		t.Errorf("the model was called %d times", len(reqs))
	}
}

// While the gateway drains, a completion is refused with 503 and a
// Retry-After: the client sends it again to the gateway that follows.
func TestDrainingGateway(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.gw.Manager.Drain(ctx)
	_, err := a.client(allKey).Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Hi")},
	})
	e := apiError(t, err, http.StatusServiceUnavailable, "restarting")
	if e.Response.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
}

// ask sends a completion on the session the header names and returns the
// answer and the session the response names.
func (a *api) ask(key, session, model string, msgs ...sdk.ChatCompletionMessageParamUnion) (string, string, error) {
	a.t.Helper()
	var res *http.Response
	c, err := a.client(key).Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{Model: model, Messages: msgs},
		option.WithHeader(listener.SessionHeader, session), option.WithResponseInto(&res))
	if err != nil {
		return "", "", err
	}
	return c.Choices[0].Message.Content, res.Header.Get(listener.SessionHeader), nil
}

// modelGot is what the model was given in its last request, after the
// guide's prompt.
func (a *api) modelGot() []string {
	reqs := a.gw.LLM.Requests()
	var got []string
	for _, m := range reqs[len(reqs)-1].Messages[1:] {
		got = append(got, m.Role+": "+openaitest.Text(m.Content))
	}
	return got
}

// A conversation continued over two requests: the second is answered
// from the stored session (the request's own history is not used), is
// streamed, and another channel's person then sees both exchanges.
func TestConversationContinuedWithTheSessionHeader(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	a.gw.LLM.Push(openaitest.Reply{Text: []string{"Hello, Ann."}}, openaitest.Reply{Text: []string{"Your ", "name is Ann."}})

	answer, id, err := a.ask(allKey, "new", "support",
		sdk.SystemMessage("Ignored: the session's own."), sdk.UserMessage("Ignored too."), sdk.UserMessage("I am Ann."))
	if err != nil {
		t.Fatal(err)
	}
	if answer != "Hello, Ann." || !strings.HasPrefix(id, "s_") {
		t.Fatalf("first answer %q, session %q: want the answer and the new session's id", answer, id)
	}
	if got := a.modelGot(); !slices.Equal(got, []string{"user: I am Ann."}) {
		t.Fatalf("a new session's model was given %q: want the last message only", got)
	}

	var res *http.Response
	stream := a.client(allKey).Chat.Completions.NewStreaming(ctx, sdk.ChatCompletionNewParams{
		Model: "support", Messages: []sdk.ChatCompletionMessageParamUnion{
			sdk.UserMessage("Not what I said."), sdk.AssistantMessage("Not what you said."), sdk.UserMessage("What is my name?")},
	}, option.WithHeader(listener.SessionHeader, id), option.WithResponseInto(&res))
	var acc sdk.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != "Your name is Ann." {
		t.Errorf("second answer %q", got)
	}
	if got := res.Header.Get(listener.SessionHeader); got != id {
		t.Errorf("the streamed response names session %q, want %q", got, id)
	}
	want := []string{"user: I am Ann.", "assistant: Hello, Ann.", "user: What is my name?"}
	if got := a.modelGot(); !slices.Equal(got, want) {
		t.Fatalf("the second request's model was given\n%q\nwant the session's first exchange, then the question:\n%q", got, want)
	}

	if _, err := a.gw.DB.Session(ctx, id); err != nil {
		t.Fatalf("the session after its requests: %v, want it stored", err)
	}
	// The owner (the key's author, from another place) shares the
	// session, and a /ws client joins with the code: it is shown both
	// exchanges, as stored.
	owner := a.gw.Open(switchboard.Author{Channel: listener.Channel, ID: "all", Name: "all"}, sessions.AttachOptions{SessionID: id, AfterSeq: -1})
	code := owner.Share("member")
	ws, _, err := gws.DefaultDialer.Dial(a.ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteJSON(map[string]any{"type": "hello", "invite": code, "user": map[string]string{"id": "dan", "name": "Dan"}}); err != nil {
		t.Fatal(err)
	}
	var shown []string
	guide := ""
	for len(shown) < 4 {
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		var ev switchboard.Event
		if err := ws.ReadJSON(&ev); err != nil {
			t.Fatalf("the /ws client, shown %q so far: %v", shown, err)
		}
		switch p, _ := ev.Payload(); d := p.(type) {
		case *switchboard.ReadyData:
			if d.Session != id {
				t.Fatalf("the /ws client joined %s, want %s", d.Session, id)
			}
			guide = d.Guide
		case *switchboard.MessageData:
			shown = append(shown, string(d.Role)+": "+d.Content)
		}
	}
	if want := []string{"user: I am Ann.", "assistant: Hello, Ann.", "user: What is my name?", "assistant: Your name is Ann."}; !slices.Equal(shown, want) {
		t.Errorf("the /ws client was shown %q, want %q", shown, want)
	}
	if guide != "support" {
		t.Errorf("the session's guide %q, want support", guide)
	}
}

// Another key tries a session's id: refused as a session that does not
// exist, so the id tells it nothing; it is not made a member, and the
// model is not called. A member whose role may not write is refused too.
func TestSessionOfAnotherKey(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	_, id, err := a.ask(allKey, "new", "support", sdk.UserMessage("Mine."))
	if err != nil {
		t.Fatal(err)
	}
	calls := len(a.gw.LLM.Requests())
	for _, tried := range []string{id, "s_does-not-exist", "../" + id} {
		_, _, err := a.ask(supportKey, tried, "support", sdk.UserMessage("Let me in."))
		e := apiError(t, err, http.StatusNotFound, "session_not_found")
		if !strings.Contains(e.Message, "new") {
			t.Errorf("refusal %q: want it to say how to start a session", e.Message)
		}
	}
	bot := switchboard.Author{Channel: listener.Channel, ID: "support-bot", Name: "support-bot"}
	members, err := a.gw.DB.Members(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.Key == bot.Key() {
			t.Errorf("the other key was made a member: %+v", m)
		}
	}
	if got := len(a.gw.LLM.Requests()); got != calls {
		t.Errorf("the model was called %d times for the other key, want 0", got-calls)
	}

	// Made a viewer of the session by its owner: it may attach, not write.
	sub, err := a.gw.Manager.Attach(ctx, sessions.AttachOptions{SessionID: id, Author: bot, Role: collaboration.Viewer, AfterSeq: -1})
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
	_, _, err = a.ask(supportKey, id, "support", sdk.UserMessage("Let me write."))
	if e := apiError(t, err, http.StatusForbidden, "permission_denied"); !strings.Contains(e.Message, "viewer") {
		t.Errorf("refusal %q: want it to say the key is a viewer there", e.Message)
	}
	if got := len(a.gw.LLM.Requests()); got != calls {
		t.Errorf("the model was called for a viewer")
	}
}

// A session answers with its own guide: a request naming another model
// is refused, and a key may not use a session whose guide it may not.
func TestSessionModelMismatch(t *testing.T) {
	a := newAPI(t, listener.Config{})
	_, id, err := a.ask(allKey, "new", "assistant", sdk.UserMessage("Hi."))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = a.ask(allKey, id, "support", sdk.UserMessage("Hi again."))
	if e := apiError(t, err, http.StatusBadRequest, "model_mismatch"); !strings.Contains(e.Message, `"assistant"`) {
		t.Errorf("refusal %q: want it to name the session's model", e.Message)
	}
	var e *sdk.Error
	if errors.As(err, &e) && e.Param != "model" {
		t.Errorf("param %q, want model", e.Param)
	}
}

// Others write in a stored session too: a request that comes while
// another person's turn streams is answered with its own turn, never with
// the other's words.
func TestSessionSharedWithAnotherWriter(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	gate := make(chan struct{})
	a.gw.LLM.Push(
		openaitest.Reply{Text: []string{"Hello."}},
		openaitest.Reply{Text: []string{"Dan's ", "answer."}, Gate: gate},
		openaitest.Reply{Text: []string{"The key's answer."}},
	)
	_, id, err := a.ask(allKey, "new", "support", sdk.UserMessage("Hi."))
	if err != nil {
		t.Fatal(err)
	}
	dan := a.gw.Open(switchboard.Author{Channel: "web", ID: "dan", Name: "Dan"}, sessions.AttachOptions{SessionID: id, AfterSeq: -1})
	if _, err := a.gw.Manager.Submit(ctx, id, switchboard.Input{Kind: switchboard.InputText, Author: dan.Author, Text: "Dan asks."}); err != nil {
		t.Fatal(err)
	}
	dan.Await("Dan's turn streaming", func(ev switchboard.Event) bool { return ev.Type == switchboard.EventDelta })

	type result struct {
		answer string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		answer, _, err := a.ask(allKey, id, "support", sdk.UserMessage("The key asks."))
		done <- result{answer, err}
	}()
	// The request is attached (its subscription sees Dan's turn end)
	// before Dan's reply goes on.
	for {
		a.seen.mu.Lock()
		n := len(a.seen.opened)
		a.seen.mu.Unlock()
		if n == 2 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the request ended before Dan's turn did: %+v", r)
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(gate)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.answer != "The key's answer." {
		t.Errorf("the key was answered %q, want its own turn's answer", r.answer)
	}
}

// A session whose turn waits for an approval takes no message: the
// request is told so (409), not left waiting.
func TestSessionBusyWithAnApproval(t *testing.T) {
	a := newAPI(t, listener.Config{})
	a.gw.LLM.Push(
		openaitest.Reply{Text: []string{"Hello."}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "calculator", Args: `{"expression":"2*3"}`}}},
	)
	_, id, err := a.ask(allKey, "new", "support", sdk.UserMessage("Hi."))
	if err != nil {
		t.Fatal(err)
	}
	dan := a.gw.Open(switchboard.Author{Channel: "web", ID: "dan", Name: "Dan"}, sessions.AttachOptions{SessionID: id, AfterSeq: -1})
	dan.Say("What is 2*3?") // returns once the turn waits for its approval
	_, _, err = a.ask(allKey, id, "support", sdk.UserMessage("Anyone there?"))
	if e := apiError(t, err, http.StatusConflict, "session_busy"); !strings.Contains(e.Message, "approval") {
		t.Errorf("refusal %q: want it to say an approval waits", e.Message)
	}
}

// A key with the approver role answers its own turns' approval requests:
// the ask tool runs, approved by the key, and a client that asked for
// progress is shown the call, the approval and the result.
func TestApproverKeyApprovesItsAskTool(t *testing.T) {
	const robotKey = "sk-test-robot-approver-0123456789"
	a := newAPI(t, listener.Config{Keys: []listener.Key{{Name: "robot", Secret: robotKey, Role: collaboration.Approver}}})
	a.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "calculator", Args: `{"expression":"2*49+19"}`}}},
		openaitest.Reply{Text: []string{"That is 117 EUR."}},
	)
	var res *http.Response
	c, err := a.client(robotKey).Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model: "support", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("2 Pros and a Mini?")},
	}, option.WithHeader(listener.ProgressHeader, "tools"), option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Choices[0].Message.Content; got != "That is 117 EUR." {
		t.Errorf("answer %q", got)
	}
	if results := a.gw.LLM.ToolResults(); len(results) != 1 || !strings.Contains(results[0], "117") {
		t.Errorf("the model was told %q, want the calculator's result", results)
	}
	var body struct {
		Switchboard struct {
			Events []switchboard.Event `json:"events"`
		} `json:"switchboard"`
	}
	if err := json.Unmarshal([]byte(c.RawJSON()), &body); err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, ev := range body.Switchboard.Events {
		switch p, _ := ev.Payload(); d := p.(type) {
		case *switchboard.ToolCallData:
			shown = append(shown, "call "+d.Name)
		case *switchboard.ConfirmationRequestData:
			shown = append(shown, "asked "+d.ToolName)
		case *switchboard.ConfirmationResolvedData:
			shown = append(shown, fmt.Sprintf("approved=%v by %s", d.Approved, d.By))
		case *switchboard.ToolResponseData:
			shown = append(shown, "result "+d.ContentPreview)
		}
	}
	if want := []string{"call calculator", "asked calculator", "approved=true by robot", "result 117"}; !slices.Equal(shown, want) {
		t.Errorf("progress %q, want %q", shown, want)
	}
	a.gone()
}

// Without the header, a completion carries no progress: the answer is
// the standard shape only.
func TestNoProgressUnlessAskedFor(t *testing.T) {
	a := newAPI(t, listener.Config{})
	a.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "calculator", Args: `{"expression":"1+1"}`}}},
		openaitest.Reply{Text: []string{"2."}},
	)
	c, err := a.client(allKey).Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("1+1?")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.RawJSON(), "switchboard") {
		t.Errorf("a completion without the header carries progress: %s", c.RawJSON())
	}
	_, err = a.client(allKey).Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("1+1?")},
	}, option.WithHeader(listener.ProgressHeader, "everything"))
	apiError(t, err, http.StatusBadRequest, "invalid_request")
}

// An ask tool in a stored session waits for someone who may approve, in
// another channel: the stream stays open (with comments the SDK skips),
// shows the wait to a client that asked for progress, and goes on once a
// /ws client with the approver role approves.
func TestAskToolApprovedFromAWebSocketClient(t *testing.T) {
	a := newAPI(t, listener.Config{KeepAlive: time.Millisecond, ApprovalTimeout: 7 * time.Minute})
	ctx := context.Background()
	a.gw.LLM.Push(
		openaitest.Reply{Text: []string{"Hello."}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "calculator", Args: `{"expression":"2*3"}`}}},
		openaitest.Reply{Text: []string{"It is 6."}},
	)
	_, id, err := a.ask(allKey, "new", "support", sdk.UserMessage("Hi."))
	if err != nil {
		t.Fatal(err)
	}
	owner := a.gw.Open(switchboard.Author{Channel: listener.Channel, ID: "all", Name: "all"}, sessions.AttachOptions{SessionID: id, AfterSeq: -1})
	code := owner.Share("approver")
	ws, _, err := gws.DefaultDialer.Dial(a.ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteJSON(map[string]any{"type": "hello", "invite": code, "user": map[string]string{"id": "dan", "name": "Dan"}}); err != nil {
		t.Fatal(err)
	}
	// Dan approves the request as his /ws client is shown it.
	approved := make(chan error, 1)
	go func() {
		for {
			_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
			var ev switchboard.Event
			if err := ws.ReadJSON(&ev); err != nil {
				approved <- err
				return
			}
			if d, ok := mustPayload(ev).(*switchboard.ConfirmationRequestData); ok {
				approved <- ws.WriteJSON(map[string]any{"type": "confirm", "confirmation_id": d.ConfirmationID, "approved": true})
				return
			}
		}
	}()

	stream := a.client(allKey).Chat.Completions.NewStreaming(ctx, sdk.ChatCompletionNewParams{
		Model: "support", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("What is 2*3?")},
	}, option.WithHeader(listener.SessionHeader, id), option.WithHeader(listener.ProgressHeader, "tools"))
	var acc sdk.ChatCompletionAccumulator
	var shown []string
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		var raw struct {
			Switchboard *switchboard.Event `json:"switchboard"`
		}
		if err := json.Unmarshal([]byte(ch.RawJSON()), &raw); err != nil {
			t.Fatal(err)
		}
		if raw.Switchboard != nil {
			if len(ch.Choices) != 0 {
				t.Errorf("a progress chunk with choices: %s", ch.RawJSON())
			}
			shown = append(shown, string(raw.Switchboard.Type))
			// The request's approval_timeout bounds the wait, not the
			// sessions' (10 minutes): counted from the request's event,
			// whatever the machine's speed.
			if d, ok := mustPayload(*raw.Switchboard).(*switchboard.ConfirmationRequestData); ok {
				if wait := d.ExpiresAt.Sub(raw.Switchboard.Time); wait < 7*time.Minute-time.Second || wait > 7*time.Minute+time.Second {
					t.Errorf("the approval expires %s after it was asked, want listeners.openai.approval_timeout (7m)", wait)
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-approved; err != nil {
		t.Fatalf("the /ws approver: %v", err)
	}
	if got := acc.Choices[0].Message.Content; got != "It is 6." {
		t.Errorf("answer %q", got)
	}
	if want := []string{"tool_call", "confirmation_request", "confirmation_resolved", "tool_response"}; !slices.Equal(shown, want) {
		t.Errorf("progress %q, want %q", shown, want)
	}
	if results := a.gw.LLM.ToolResults(); len(results) != 1 || !strings.Contains(results[0], "6") {
		t.Errorf("the model was told %q, want the calculator's result", results)
	}
}

func mustPayload(ev switchboard.Event) any {
	p, _ := ev.Payload()
	return p
}

// A stream that waits for an approval sends comments, which clients
// skip, so that proxies in front keep the connection; it goes on when the
// session's owner approves from elsewhere.
func TestAWaitingStreamSendsComments(t *testing.T) {
	a := newAPI(t, listener.Config{KeepAlive: time.Millisecond})
	ctx := context.Background()
	a.gw.LLM.Push(
		openaitest.Reply{Text: []string{"Hello."}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "calculator", Args: `{"expression":"2*3"}`}}},
		openaitest.Reply{Text: []string{"It is 6."}},
	)
	_, id, err := a.ask(allKey, "new", "support", sdk.UserMessage("Hi."))
	if err != nil {
		t.Fatal(err)
	}
	who := switchboard.Author{Channel: listener.Channel, ID: "all", Name: "all"}
	owner := a.gw.Open(who, sessions.AttachOptions{SessionID: id, AfterSeq: -1})
	req, _ := http.NewRequest(http.MethodPost, a.url+"/chat/completions", strings.NewReader(
		`{"model": "support", "stream": true, "messages": [{"role": "user", "content": "What is 2*3?"}]}`))
	req.Header.Set("Authorization", "Bearer "+allKey)
	req.Header.Set(listener.SessionHeader, id)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	asked := owner.Await("the approval request", func(ev switchboard.Event) bool { return ev.Type == switchboard.EventConfirmationRequest })
	lines := bufio.NewScanner(res.Body)
	for lines.Scan() && lines.Text() != ": waiting" {
	}
	if lines.Err() != nil {
		t.Fatal(lines.Err())
	}
	// The stream waits: the owner (the key's author) approves from the
	// session manager directly, as another channel would.
	d := mustPayload(asked).(*switchboard.ConfirmationRequestData)
	if _, err := a.gw.Manager.Submit(ctx, id, switchboard.Input{Kind: switchboard.InputConfirm, Author: who, ConfirmationID: d.ConfirmationID, Approved: true}); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	done := false
	for lines.Scan() {
		line, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			break
		}
		var ch sdk.ChatCompletionChunk
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatal(err)
		}
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if !done || text.String() != "It is 6." {
		t.Errorf("stream ended (done %v) with %q", done, text.String())
	}
}

// A budget reached refuses a stateless request at once, with 429
// budget_exceeded: its turn never starts, and the request does not wait
// for one.
func TestBudgetRefusesAStatelessRequest(t *testing.T) {
	a := newAPI(t, listener.Config{})
	a.gw.Manager.SetSpending(&sessions.Spending{Budgets: []sessions.Budget{
		{Scope: switchboard.ScopePerson, Period: switchboard.PeriodDay, Tokens: 1},
	}})
	a.gw.LLM.Push(openaitest.Reply{Text: []string{"Spent."}})
	if _, err := a.client(allKey).Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Hi")},
	}); err != nil {
		t.Fatal(err) // the first turn is under the budget when it starts
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Again")},
	})
	apiError(t, err, http.StatusTooManyRequests, "budget_exceeded")
	if n := len(a.gw.LLM.Requests()); n != 1 {
		t.Errorf("the model was called %d times, want once: the second turn was refused", n)
	}
}
