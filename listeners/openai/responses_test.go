package openai_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/switchboard-gw/switchboard"
	listener "github.com/switchboard-gw/switchboard/listeners/openai"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// input is a request's input list: a turn of history, as a client sends
// back an earlier response's output, and the question.
func input(question string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("I bought a Widget Mini.", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfOutputMessage([]responses.ResponseOutputMessageContentUnionParam{{
			OfOutputText: &responses.ResponseOutputTextParam{Text: "Good choice! How can I help?", Annotations: []responses.ResponseOutputTextAnnotationUnionParam{}},
		}}, "msg_earlier", responses.ResponseOutputMessageStatusCompleted),
		responses.ResponseInputItemParamOfInputMessage(responses.ResponseInputMessageContentListParam{
			responses.ResponseInputContentParamOfInputText(question)}, "user"),
	}}
}

// stored is the response's store field (which the SDK's type leaves
// out).
func stored(res *responses.Response) bool {
	var r struct {
		Store *bool `json:"store"`
	}
	if err := json.Unmarshal([]byte(res.RawJSON()), &r); err != nil || r.Store == nil {
		panic("a response without its store field: " + res.RawJSON())
	}
	return *r.Store
}

// text is a string input.
func text(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: sdk.String(s)}
}

// checkResponse fails unless res is a whole completed response, with the
// text and the provider's usage, as the SDK decodes it.
func checkResponse(t *testing.T, res *responses.Response, want string) {
	t.Helper()
	if got := res.OutputText(); got != want {
		t.Errorf("output text %q, want %q", got, want)
	}
	if !strings.HasPrefix(res.ID, "resp_") || res.Object != "response" || res.Status != responses.ResponseStatusCompleted ||
		res.CreatedAt == 0 || res.CompletedAt == 0 || !res.JSON.Error.Valid() && res.JSON.Error.Raw() != "null" {
		t.Errorf("response: id %q object %q status %q created %v completed %v error %s",
			res.ID, res.Object, res.Status, res.CreatedAt, res.CompletedAt, res.JSON.Error.Raw())
	}
	if len(res.Output) != 1 {
		t.Fatalf("output: %d items, want one message", len(res.Output))
	}
	m := res.Output[0].AsMessage()
	if m.Type != "message" || !strings.HasPrefix(m.ID, "msg_") || m.Role != "assistant" || m.Status != responses.ResponseOutputMessageStatusCompleted ||
		len(m.Content) != 1 || m.Content[0].Type != "output_text" || !m.Content[0].JSON.Annotations.Valid() {
		t.Errorf("output message: %s", res.Output[0].RawJSON())
	}
	u := res.Usage
	if u.InputTokens != 10 || u.OutputTokens != 5 || u.TotalTokens != 15 ||
		!u.InputTokensDetails.JSON.CachedTokens.Valid() || !u.OutputTokensDetails.JSON.ReasoningTokens.Valid() {
		t.Errorf("usage: %s, want the provider's 10/5/15 with the details", u.RawJSON())
	}
}

func TestResponse(t *testing.T) {
	a := newAPI(t, listener.Config{})
	a.gw.LLM.Push(openaitest.Reply{Text: []string{"It ships ", "free above 50 EUR."}})
	res, err := a.client(supportKey).Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "support", Instructions: sdk.String("Answer in English."), Input: input("Is shipping free?"),
		Temperature: sdk.Float(0.2), Metadata: map[string]string{"ticket": "42"},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkResponse(t, res, "It ships free above 50 EUR.")
	if res.Model != "support" || stored(res) || res.PreviousResponseID != "" || res.Instructions.OfString != "Answer in English." ||
		res.Metadata["ticket"] != "42" {
		t.Errorf("response: model %q store %v previous %q instructions %s metadata %v", res.Model, stored(res), res.PreviousResponseID,
			res.JSON.Instructions.Raw(), res.Metadata)
	}
	// The instructions follow the guide's prompt, as a client's system
	// message does.
	a.checkModelGot("Is shipping free?")
	a.gone()
}

func TestStreamedResponse(t *testing.T) {
	a := newAPI(t, listener.Config{})
	a.gw.LLM.Push(openaitest.Reply{Text: []string{"Mon", "day to ", "Friday."}})
	stream := a.client(allKey).Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "support", Instructions: sdk.String("Answer in English."), Input: input("When are you open?"),
	})
	var types []string
	var deltas strings.Builder
	var last responses.ResponseStreamEventUnion
	itemID := ""
	for i := 0; stream.Next(); i++ {
		ev := stream.Current()
		if ev.SequenceNumber != int64(i) {
			t.Errorf("event %d (%s): sequence_number %d", i, ev.Type, ev.SequenceNumber)
		}
		if ev.Type != "response.output_text.delta" || types[len(types)-1] != ev.Type {
			types = append(types, ev.Type)
		}
		switch ev.Type {
		case "response.output_item.added":
			itemID = ev.Item.ID
		case "response.output_text.delta":
			d := ev.AsResponseOutputTextDelta()
			if d.ItemID != itemID || d.OutputIndex != 0 || d.ContentIndex != 0 {
				t.Errorf("delta %s: want item %s, output and content index 0", ev.RawJSON(), itemID)
			}
			deltas.WriteString(d.Delta)
		case "response.output_text.done":
			if d := ev.AsResponseOutputTextDone(); d.Text != "Monday to Friday." || d.ItemID != itemID {
				t.Errorf("text done: %s", ev.RawJSON())
			}
		}
		last = ev
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed"}
	if !slices.Equal(types, want) {
		t.Errorf("events (deltas as one):\n%q\nwant\n%q", types, want)
	}
	if got := deltas.String(); got != "Monday to Friday." {
		t.Errorf("streamed text %q", got)
	}
	done := last.AsResponseCompleted().Response
	checkResponse(t, &done, "Monday to Friday.")
	if done.Output[0].ID != itemID {
		t.Errorf("the completed response's message %q, want the streamed %q", done.Output[0].ID, itemID)
	}
	a.checkModelGot("When are you open?")
	a.gone()
}

// The stream's events are named: each one's event: line is its data's
// type, as the SDKs of other languages dispatch on.
func TestStreamedResponseEventNames(t *testing.T) {
	a := newAPI(t, listener.Config{})
	req, err := http.NewRequest(http.MethodPost, a.url+"/responses",
		strings.NewReader(`{"model": "assistant", "stream": true, "input": "Hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+allKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("status %d, content type %q", res.StatusCode, ct)
	}
	sc := bufio.NewScanner(res.Body)
	name, n := "", 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d struct{ Type string }
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil || d.Type != name {
				t.Errorf("event %q with data %s", name, line)
			}
			name = ""
			n++
		}
	}
	if n < 9 {
		t.Errorf("%d events, want the nine kinds at least", n)
	}
}

// A conversation kept on the gateway: store: true opens a session, the
// response's id continues it, and the model is given the stored
// exchange. Any response of the conversation continues it at its end.
func TestResponsesConversationStored(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	a.gw.LLM.Push(openaitest.Reply{Text: []string{"Hello, Ann."}}, openaitest.Reply{Text: []string{"Your ", "name is Ann."}},
		openaitest.Reply{Text: []string{"Widgets."}})
	var raw *http.Response
	first, err := a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{
		Model: "support", Input: text("I am Ann."), Store: sdk.Bool(true),
	}, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	checkResponse(t, first, "Hello, Ann.")
	session := raw.Header.Get(listener.SessionHeader)
	if !stored(first) || !strings.HasPrefix(session, "s_") || !strings.Contains(first.ID, strings.TrimPrefix(session, "s_")) {
		t.Fatalf("stored response %q (store %v) in session %q: want it stored, its id naming the session", first.ID, stored(first), session)
	}
	if _, err := a.gw.DB.Session(ctx, session); err != nil {
		t.Fatalf("the session after the response: %v, want it stored", err)
	}

	// Continued, streamed; the instructions are the guide's (ignored).
	stream := a.client(allKey).Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "support", Input: text("What is my name?"), PreviousResponseID: sdk.String(first.ID),
		Instructions: sdk.String("Ignored: the session's guide instructs."),
	})
	var second responses.Response
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" {
			second = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	checkResponse(t, &second, "Your name is Ann.")
	if got := second.JSON.Instructions.Raw(); got != "null" {
		t.Errorf("the continued response's instructions %s, want null (the guide's instruct the session)", got)
	}
	if second.PreviousResponseID != first.ID || second.ID == first.ID || !stored(&second) ||
		!strings.Contains(second.ID, strings.TrimPrefix(session, "s_")) {
		t.Errorf("second response %q, previous %q, store %v: want a new id in the same session, after %q", second.ID, second.PreviousResponseID, stored(&second), first.ID)
	}
	want := []string{"user: I am Ann.", "assistant: Hello, Ann.", "user: What is my name?"}
	if got := a.modelGot(); !slices.Equal(got, want) {
		t.Fatalf("the second request's model was given\n%q\nwant the first exchange, then the question:\n%q", got, want)
	}

	// The first response again: the conversation goes on at its end, not
	// from there.
	third, err := a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{
		Model: "support", Input: text("What do you sell?"), PreviousResponseID: sdk.String(first.ID),
	})
	if err != nil {
		t.Fatal(err)
	}
	checkResponse(t, third, "Widgets.")
	want = append(want, "assistant: Your name is Ann.", "user: What do you sell?")
	if got := a.modelGot(); !slices.Equal(got, want) {
		t.Fatalf("the third request's model was given\n%q\nwant\n%q", got, want)
	}
}

// The session header works on the Responses API as on chat
// completions, and its responses are stored.
func TestResponsesWithTheSessionHeader(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	_, id, err := a.ask(allKey, "new", "support", sdk.UserMessage("I am Ann."))
	if err != nil {
		t.Fatal(err)
	}
	var raw *http.Response
	res, err := a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{Model: "support", Input: text("Who am I?")},
		option.WithHeader(listener.SessionHeader, id), option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if !stored(res) || raw.Header.Get(listener.SessionHeader) != id || !strings.Contains(res.ID, strings.TrimPrefix(id, "s_")) {
		t.Errorf("response %q store %v, header %q: want it stored in %s", res.ID, stored(res), raw.Header.Get(listener.SessionHeader), id)
	}
	if got := a.modelGot(); len(got) != 3 || got[0] != "user: I am Ann." || got[2] != "user: Who am I?" {
		t.Errorf("the model was given %q", got)
	}
	// Naming another conversation with previous_response_id is refused.
	other, err := a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{Model: "support", Input: text("Hi."), Store: sdk.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{Model: "support", Input: text("Hi."), PreviousResponseID: sdk.String(other.ID)},
		option.WithHeader(listener.SessionHeader, id))
	if e := apiError(t, err, http.StatusBadRequest, "invalid_request"); e.Param != "previous_response_id" {
		t.Errorf("param %q, want previous_response_id", e.Param)
	}
}

// Another key's response id, a stateless response's and a made-up one
// are refused alike: 404, the same sentence, nothing joined, the model
// not called.
func TestResponseOfAnotherKey(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	mine, err := a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{Model: "support", Input: text("Mine."), Store: sdk.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	stateless, err := a.client(supportKey).Responses.New(ctx, responses.ResponseNewParams{Model: "support", Input: text("Not kept.")})
	if err != nil {
		t.Fatal(err)
	}
	calls := len(a.gw.LLM.Requests())
	sentence := ""
	for _, tried := range []string{mine.ID, stateless.ID, "resp_0123456789abcdef0123_00", "resp_nothing", "s_" + mine.ID} {
		_, err := a.client(supportKey).Responses.New(ctx, responses.ResponseNewParams{Model: "support", Input: text("Let me in."), PreviousResponseID: sdk.String(tried)})
		e := apiError(t, err, http.StatusNotFound, "response_not_found")
		if e.Param != "previous_response_id" {
			t.Errorf("param %q, want previous_response_id", e.Param)
		}
		s := strings.Replace(e.Message, tried, "ID", 1)
		if sentence == "" {
			sentence = s
		} else if s != sentence {
			t.Errorf("refusal of %s:\n%s\nwant the same as the first:\n%s", tried, s, sentence)
		}
	}
	if got := len(a.gw.LLM.Requests()); got != calls {
		t.Errorf("the model was called %d times for refused requests", got-calls)
	}
	// The model of a continued response must be the session's.
	_, err = a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{Model: "assistant", Input: text("Hi."), PreviousResponseID: sdk.String(mine.ID)})
	apiError(t, err, http.StatusBadRequest, "model_mismatch")
}

func TestResponsesErrors(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	body := func(s string) option.RequestOption { return option.WithRequestBody("application/json", []byte(s)) }
	for _, c := range []struct {
		name, body, param string
	}{
		{"no input", `{"model": "support"}`, "input"},
		{"an image", `{"model": "support", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]}]}`, "input[0].content[0].type"},
		{"a file", `{"model": "support", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}`, "input[0].content[0].type"},
		{"a function call output with no call", `{"model": "support", "input": [{"type": "function_call_output", "call_id": "c", "output": "1"}, {"role": "user", "content": "Hi"}]}`, "input[0].call_id"},
		{"a reasoning item", `{"model": "support", "input": [{"type": "reasoning", "summary": []}, {"role": "user", "content": "Hi"}]}`, "input[0].type"},
		{"the last not the user's", `{"model": "support", "input": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}`, "input[1].role"},
		{"an empty input", `{"model": "support", "input": "  "}`, "input"},
		{"a hosted tool", `{"model": "support", "input": "Hi", "tools": [{"type": "web_search"}]}`, "tools[0].type"},
		{"background", `{"model": "support", "input": "Hi", "background": true}`, "background"},
		{"structured output", `{"model": "support", "input": "Hi", "text": {"format": {"type": "json_schema"}}}`, "text.format"},
		{"store false continued", `{"model": "support", "input": "Hi", "store": false, "previous_response_id": "resp_00_00"}`, "store"},
		{"history in a stored conversation", `{"model": "support", "input": [{"role": "user", "content": "Earlier"}, {"role": "user", "content": "Hi"}], "store": true}`, "input[0]"},
		{"malformed", `{"model": "support", "input": [`, ""},
	} {
		_, err := a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{}, body(c.body))
		if e := apiError(t, err, http.StatusBadRequest, "invalid_request"); e.Param != c.param {
			t.Errorf("%s: param %q, want %q (%s)", c.name, e.Param, c.param, e.Message)
		}
	}
	_, err := a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-5", Input: text("Hi")})
	apiError(t, err, http.StatusNotFound, "model_not_found")
	_, err = a.client(supportKey).Responses.New(ctx, responses.ResponseNewParams{Model: "assistant", Input: text("Hi")})
	apiError(t, err, http.StatusForbidden, "model_not_allowed")
	_, err = a.client(viewerKey).Responses.New(ctx, responses.ResponseNewParams{Model: "support", Input: text("Hi")})
	apiError(t, err, http.StatusForbidden, "permission_denied")
	// Responses are not kept for retrieval.
	_, err = a.client(allKey).Responses.Get(ctx, "resp_0123_45", responses.ResponseGetParams{})
	if e := apiError(t, err, http.StatusNotFound, "unknown_url"); !strings.Contains(e.Message, "previous_response_id") {
		t.Errorf("refusal %q: want it to say how a conversation goes on", e.Message)
	}
	if n := len(a.gw.LLM.Requests()); n != 0 {
		t.Errorf("the model was called %d times for refused requests", n)
	}
}

// A provider failure before any text is the OpenAI error with its
// status; after the stream started, a response.failed event with the
// error and the text so far.
func TestResponseFailed(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	a.gw.LLM.Push(openaitest.Reply{Status: http.StatusInternalServerError})
	_, err := a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{Model: "assistant", Input: text("Hi")})
	apiError(t, err, http.StatusBadGateway, "provider_error")

	a.gw.LLM.Push(
		openaitest.Reply{Text: []string{"Let me work it out. "}, ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "calculator", Args: `{"expression":"6*7"}`}}},
		openaitest.Reply{Status: http.StatusInternalServerError},
	)
	stream := a.client(allKey).Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "assistant", Input: text("6*7?")})
	var last responses.ResponseStreamEventUnion
	for stream.Next() {
		last = stream.Current()
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if last.Type != "response.failed" {
		t.Fatalf("last event %s, want response.failed", last.RawJSON())
	}
	res := last.AsResponseFailed().Response
	if res.Status != responses.ResponseStatusFailed || res.Error.Code != "provider_error" || res.Error.Message == "" ||
		res.OutputText() != "Let me work it out. " || res.Output[0].Status != "incomplete" {
		t.Errorf("failed response: %s", res.RawJSON())
	}
	a.gone()
}

// A client that goes away mid-stream stops the delivery, not the turn:
// a stored response's answer is stored whole in its session.
func TestStoredResponseClientGoneMidStream(t *testing.T) {
	a := newAPI(t, listener.Config{})
	gate := make(chan struct{})
	a.gw.LLM.Push(openaitest.Reply{Text: []string{"first ", "second"}, Gate: gate})
	ctx, cancel := context.WithCancel(context.Background())
	var raw *http.Response
	stream := a.client(allKey).Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "assistant", Input: text("Hi"), Store: sdk.Bool(true)}, option.WithResponseInto(&raw))
	for stream.Next() {
		if stream.Current().Type == "response.output_text.delta" {
			break // the first text: the model waits at the gate
		}
	}
	session := raw.Header.Get(listener.SessionHeader)
	// Go away while the model is mid-reply, then let it finish.
	cancel()
	_ = stream.Close()
	close(gate)
	owner := a.gw.Open(switchboard.Author{Channel: listener.Channel, ID: "all", Name: "all"}, sessions.AttachOptions{SessionID: session, AfterSeq: 0})
	owner.Await("the whole answer stored", func(ev switchboard.Event) bool {
		p, _ := ev.Payload()
		d, ok := p.(*switchboard.MessageData)
		return ok && d.Role == switchboard.RoleAssistant && d.Content == "first second"
	})
}

// With the progress header, a streamed response carries the guide's
// tool call and result as switchboard.progress events, which the official
// SDK passes through as events of a type it does not know; without it,
// none.
func TestStreamedResponseProgress(t *testing.T) {
	a := newAPI(t, listener.Config{})
	for _, asked := range []bool{true, false} {
		a.gw.LLM.Push(
			openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "calculator", Args: `{"expression":"6*7"}`}}},
			openaitest.Reply{Text: []string{"42."}},
		)
		var opts []option.RequestOption
		if asked {
			opts = append(opts, option.WithHeader(listener.ProgressHeader, "tools"))
		}
		stream := a.client(allKey).Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
			Model: "assistant", Input: input("6*7?"),
		}, opts...)
		var shown []string
		var text strings.Builder
		for stream.Next() {
			ev := stream.Current()
			switch ev.Type {
			case "switchboard.progress":
				var p struct{ Event switchboard.Event }
				if err := json.Unmarshal([]byte(ev.RawJSON()), &p); err != nil {
					t.Fatal(err)
				}
				shown = append(shown, string(p.Event.Type))
			case "response.output_text.delta":
				text.WriteString(ev.AsResponseOutputTextDelta().Delta)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		want := []string{"tool_call", "tool_response"}
		if !asked {
			want = nil
		}
		if !slices.Equal(shown, want) || text.String() != "42." {
			t.Errorf("asked %v: progress %q, text %q; want %q and the answer", asked, shown, text.String(), want)
		}
	}
}
