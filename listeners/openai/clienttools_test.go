package openai_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	listener "github.com/switchboard-gw/switchboard/listeners/openai"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// lookup is the client's own tool in these tests.
var lookup = sdk.ChatCompletionFunctionTool(sdk.FunctionDefinitionParam{
	Name: "lookup_order", Description: sdk.String("Finds an order by its number"),
	Parameters: sdk.FunctionParameters{"type": "object", "properties": map[string]any{"number": map[string]any{"type": "string"}}},
})

// offered lists the tools a model request offered.
func offered(req openaitest.Request) []string {
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// The official function-calling loop, stateless and streamed: the model
// calls the client's tool (and, in the same reply, a guide tool that runs
// on the gateway); the stream ends with the client's call only and
// finish_reason tool_calls; the client sends the conversation back with
// its result, and the model's next request holds the call and the result.
func TestClientToolRoundTrip(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	a.gw.LLM.Push(
		openaitest.Reply{Text: []string{"Let me look."}, ToolCalls: []openaitest.ToolCall{
			{ID: "call_guide", Name: "calculator", Args: `{"expression":"2*3"}`},
			{ID: "call_client", Name: "lookup_order", Args: `{"number":"A-17"}`},
		}},
		openaitest.Reply{Text: []string{"Order A-17 shipped yesterday."}},
	)
	msgs := []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Where is order A-17?")}
	stream := a.client(allKey).Chat.Completions.NewStreaming(ctx, sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: msgs, Tools: []sdk.ChatCompletionToolUnionParam{lookup},
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	})
	var acc sdk.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	c := acc.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("finish %q, calls %+v: want the client's one call", c.FinishReason, c.Message.ToolCalls)
	}
	call := c.Message.ToolCalls[0]
	if call.ID != "call_client" || call.Function.Name != "lookup_order" || call.Function.Arguments != `{"number":"A-17"}` {
		t.Errorf("call %+v", call)
	}
	if c.Message.Content != "Let me look." || acc.Usage.TotalTokens == 0 {
		t.Errorf("content %q, usage %+v", c.Message.Content, acc.Usage)
	}
	if got := offered(a.gw.LLM.Requests()[0]); !slices.Contains(got, "lookup_order") || !slices.Contains(got, "calculator") {
		t.Errorf("the model was offered %q: want the guide's tools and the client's", got)
	}
	a.gone() // the stateless session is deleted while the client runs its tool

	msgs = append(msgs, c.Message.ToParam(), sdk.ToolMessage("Shipped 2026-11-26 by DHL.", call.ID))
	res, err := a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: msgs, Tools: []sdk.ChatCompletionToolUnionParam{lookup},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0]; got.Message.Content != "Order A-17 shipped yesterday." || got.FinishReason != "stop" || len(got.Message.ToolCalls) != 0 {
		t.Errorf("answer %+v", got)
	}
	reqs := a.gw.LLM.Requests()
	second := reqs[len(reqs)-1]
	var calls, results []string
	for _, m := range second.Messages {
		for _, c := range m.ToolCalls {
			calls = append(calls, c.ID+" "+c.Function.Name)
		}
		if m.Role == "tool" {
			results = append(results, m.ToolCallID+": "+openaitest.Text(m.Content))
		}
	}
	if !slices.Contains(calls, "call_client lookup_order") || !slices.Contains(results, "call_client: Shipped 2026-11-26 by DHL.") {
		t.Errorf("the model's second request holds calls %q and results %q: want the client's call and its result", calls, results)
	}
	a.gone()
}

// On a stored session the calls wait in the session: the next request
// sends the tool message alone (the session holds the call), non-streamed.
func TestClientToolOnAStoredSession(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	a.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "lookup_order", Args: `{"number":"B-2"}`}}},
		openaitest.Reply{Text: []string{"B-2 is on its way."}},
	)
	var hdr *http.Response
	res, err := a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{
		Model: "assistant", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Where is B-2?")},
		Tools: []sdk.ChatCompletionToolUnionParam{lookup},
	}, option.WithHeader(listener.SessionHeader, listener.NewSession), option.WithResponseInto(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	id := hdr.Header.Get(listener.SessionHeader)
	c := res.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].ID != "call_1" || c.Message.Content != "" {
		t.Fatalf("first answer %+v", c)
	}
	if !strings.Contains(res.RawJSON(), `"content":null`) {
		t.Errorf("a message of tool calls only has content %s, want null", res.RawJSON())
	}
	// Another key cannot answer the calls.
	_, err = a.client(supportKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{
		Model: "support", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("x")},
	}, option.WithHeader(listener.SessionHeader, id))
	apiError(t, err, http.StatusNotFound, "session_not_found")

	// A result for a call the session does not wait for is refused, and
	// changes nothing.
	wrong := []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Where is B-2?"), c.Message.ToParam(), sdk.ToolMessage("?", "call_1")}
	wrong[1].OfAssistant.ToolCalls[0].OfFunction.ID = "call_9"
	wrong[2] = sdk.ToolMessage("?", "call_9")
	_, err = a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "assistant", Messages: wrong},
		option.WithHeader(listener.SessionHeader, id))
	if e := apiError(t, err, http.StatusBadRequest, "invalid_request"); !strings.Contains(e.Message, "call_9") {
		t.Errorf("refusal %q: want it to name the call", e.Message)
	}

	msgs := []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Where is B-2?"), c.Message.ToParam(), sdk.ToolMessage("In transit.", "call_1")}
	res, err = a.client(allKey).Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "assistant", Messages: msgs},
		option.WithHeader(listener.SessionHeader, id))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; got != "B-2 is on its way." {
		t.Errorf("answer %q", got)
	}
	if got := a.gw.LLM.ToolResults(); !slices.Contains(got, "In transit.") {
		t.Errorf("the model was given results %q", got)
	}
}

// The Responses API's function calling: stateless (the client sends back
// the output items with its function_call_output), streamed, then stored
// with previous_response_id (the output item alone).
func TestResponsesFunctionCalling(t *testing.T) {
	a := newAPI(t, listener.Config{})
	ctx := context.Background()
	tool := responses.ToolParamOfFunction("lookup_order", map[string]any{"type": "object", "properties": map[string]any{}}, false)
	a.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_r1", Name: "lookup_order", Args: `{"number":"C-3"}`}}},
		openaitest.Reply{Text: []string{"C-3 arrives Monday."}},
	)
	stream := a.client(allKey).Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "assistant", Input: input("Where is C-3?"), Tools: []responses.ToolUnionParam{tool},
	})
	var types []string
	var done responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.Type == "response.completed" {
			done = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if !slices.Equal(types, want) {
		t.Errorf("events %q, want %q", types, want)
	}
	if len(done.Output) != 1 || done.Output[0].Type != "function_call" || done.Output[0].CallID != "call_r1" || done.Output[0].Arguments.OfString != `{"number":"C-3"}` {
		t.Fatalf("output %+v", done.Output)
	}
	items := []responses.ResponseInputItemUnionParam{
		responses.ResponseInputItemParamOfMessage("Where is C-3?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(done.Output[0].Arguments.OfString, done.Output[0].CallID, done.Output[0].Name),
		output("call_r1", "Shipped Friday."),
	}
	res, err := a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{
		Model: "assistant", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}, Tools: []responses.ToolUnionParam{tool},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.OutputText() != "C-3 arrives Monday." {
		t.Errorf("answer %q", res.OutputText())
	}
	if got := a.gw.LLM.ToolResults(); !slices.Contains(got, "Shipped Friday.") {
		t.Errorf("the model was given results %q", got)
	}

	// Stored: the call waits in the session; the next request sends its
	// output alone, with previous_response_id.
	a.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_r2", Name: "lookup_order", Args: `{}`}}},
		openaitest.Reply{Text: []string{"Found it."}},
	)
	first, err := a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{
		Model: "assistant", Input: responses.ResponseNewParamsInputUnion{OfString: sdk.String("And D-4?")}, Tools: []responses.ToolUnionParam{tool}, Store: sdk.Bool(true),
	})
	if err != nil {
		t.Fatalf("%v %s", err, rawBody(err))
	}
	if len(first.Output) != 1 || first.Output[0].CallID != "call_r2" {
		t.Fatalf("stored output %+v", first.Output)
	}
	second, err := a.client(allKey).Responses.New(ctx, responses.ResponseNewParams{
		Model: "assistant", PreviousResponseID: sdk.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: []responses.ResponseInputItemUnionParam{
			output("call_r2", "D-4: delivered."),
		}},
	})
	if err != nil {
		t.Fatalf("%v %s", err, rawBody(err))
	}
	if second.OutputText() != "Found it." {
		t.Errorf("answer %q", second.OutputText())
	}
	if got := a.gw.LLM.ToolResults(); !slices.Contains(got, "D-4: delivered.") {
		t.Errorf("the model was given results %q", got)
	}
}

// output is a function_call_output item.
func output(callID, result string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(result)
	item.OfFunctionCallOutput.CallID = sdk.String(callID)
	return item
}

func rawBody(err error) string {
	var e *sdk.Error
	if errors.As(err, &e) {
		return e.RawJSON()
	}
	return ""
}
