package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/switchboard-gw/switchboard"
)

// responsesRequest is what the gateway takes of a Responses API request
// (POST /v1/responses). Sampling parameters are the guide's and ignored,
// as for chat completions; what it cannot honour (client tools, images,
// files, background runs, prompt templates, structured output) is
// refused with a 400 rather than ignored.
type responsesRequest struct {
	Model  string
	Stream bool
	// Store is store: true; StoreSent says store was sent at all (an
	// explicit false cannot apply to a stored conversation).
	Store, StoreSent bool
	Previous         string // previous_response_id
	Instructions     *string
	// Metadata is the request's metadata object, echoed in the response.
	Metadata json.RawMessage
	// History is the conversation before Text: the instructions as a
	// system message, then every input item but the last.
	History []switchboard.Message
	Text    string // the last input item, the user's
	// Results are the function_call_output items the input ends with: the
	// client's results of its tools, for the turn to go on (History then
	// ends with the assistant's calls, from the function_call items).
	Results []switchboard.ToolResult
	// Tools are the client's function tools.
	Tools []switchboard.ClientTool
	// Earlier names the first user or assistant item before the last
	// ("" when none): a stored conversation takes none (its history is
	// the session's own).
	Earlier string
}

// wireResponsesRequest is the JSON of a Responses API request, as the
// OpenAI API documents it: the fields the gateway reads or refuses.
type wireResponsesRequest struct {
	Model              *string             `json:"model"`
	Input              json.RawMessage     `json:"input"`
	Instructions       *string             `json:"instructions"`
	Stream             *bool               `json:"stream"`
	Store              *bool               `json:"store"`
	PreviousResponseID *string             `json:"previous_response_id"`
	Metadata           json.RawMessage     `json:"metadata"`
	Tools              []wireResponsesTool `json:"tools"`
	ToolChoice         json.RawMessage     `json:"tool_choice"`
	Background         *bool               `json:"background"`
	Conversation       json.RawMessage     `json:"conversation"`
	Prompt             json.RawMessage     `json:"prompt"`
	Text               *struct {
		Format *struct {
			Type string `json:"type"`
		} `json:"format"`
	} `json:"text"`
}

// wireResponsesTool is an entry of a request's tools: the Responses API
// has a function's fields at the top.
type wireResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// wireInputItem is one item of a request's input list: a message (an
// easy input message, {role, content} with the type optional; an input
// message; an earlier response's output message sent back), a
// function_call sent back, or a function_call_output, the client's result
// of one.
type wireInputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// function_call and function_call_output
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// inputTextTypes are the content parts taken: the user's text and an
// earlier answer's.
var inputTextTypes = []string{"input_text", "output_text"}

// decodeResponsesRequest parses and checks a Responses API body. Every
// error is a *requestError.
func decodeResponsesRequest(body []byte) (responsesRequest, error) {
	var w wireResponsesRequest
	if err := decodeJSON(body, &w, "the Responses API"); err != nil {
		return responsesRequest{}, err
	}
	var r responsesRequest
	switch {
	case w.Model == nil || *w.Model == "":
		return r, bad("model", "You must provide a model parameter: the name of a guide (GET /v1/models lists them).")
	case !hasValue(w.Input):
		return r, bad("input", "You must provide input: a string, or a list of messages whose last is the user's.")
	case w.Background != nil && *w.Background:
		return r, bad("background", "Background responses are not supported: send the request with stream true to follow a long answer.")
	case hasValue(w.Conversation):
		return r, bad("conversation", "The Conversations API is not supported: continue a conversation with previous_response_id.")
	case hasValue(w.Prompt):
		return r, bad("prompt", "Prompt templates are not supported: the guide is the prompt.")
	case w.Text != nil && w.Text.Format != nil && w.Text.Format.Type != "text":
		return r, bad("text.format", "Only text output is supported, not %q.", clip(w.Text.Format.Type))
	case hasValue(w.Metadata) && !bytes.HasPrefix(bytes.TrimSpace(w.Metadata), []byte("{")):
		return r, bad("metadata", "metadata must be an object.")
	}
	r.Model = *w.Model
	offer, err := toolChoice(w.ToolChoice)
	if err != nil {
		return r, err
	}
	wt := make([]wireTool, len(w.Tools))
	for i, t := range w.Tools {
		wt[i].Type = t.Type
		wt[i].Function = &wireFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	if r.Tools, err = decodeTools(wt, ""); err != nil {
		return r, err
	}
	if !offer {
		r.Tools = nil
	}
	r.Stream = w.Stream != nil && *w.Stream
	r.StoreSent = w.Store != nil
	r.Store = w.Store != nil && *w.Store
	if w.PreviousResponseID != nil {
		r.Previous = *w.PreviousResponseID
	}
	if hasValue(w.Metadata) {
		r.Metadata = w.Metadata
	}
	if w.Instructions != nil {
		r.Instructions = w.Instructions
		if strings.TrimSpace(*w.Instructions) != "" {
			r.History = append(r.History, switchboard.Message{Role: switchboard.RoleSystem, Content: *w.Instructions})
		}
	}
	var s string
	if err := json.Unmarshal(w.Input, &s); err == nil {
		if strings.TrimSpace(s) == "" {
			return r, bad("input", "The input is empty: there is nothing to answer.")
		}
		r.Text = s
		return r, nil
	}
	var items []wireInputItem
	if err := json.Unmarshal(w.Input, &items); err != nil {
		return r, bad("input", "input must be a string or a list of messages.")
	}
	if len(items) == 0 {
		return r, bad("input", "input must hold at least one message.")
	}
	if onlyOutputs(items) {
		// Results alone: for a stored conversation, which holds the calls
		// (a stateless request must send them back before their results).
		for _, it := range items {
			out, err := contentText(it.Output, "input[0].output", inputTextTypes...)
			if err != nil {
				return r, err
			}
			r.Results = append(r.Results, switchboard.ToolResult{CallID: it.CallID, Content: out})
		}
		return r, nil
	}
	wms, at, err := itemMessages(items)
	if err != nil {
		return r, err
	}
	param := func(i int) string { return fmt.Sprintf("input[%d]", at[i]) }
	msgs, err := decodeMessages(wms, param, "call_id", inputTextTypes...)
	if err != nil {
		return r, err
	}
	var history []switchboard.Message
	if history, r.Text, r.Results, err = splitLast(msgs, param); err != nil {
		return r, err
	}
	for i, m := range history {
		if m.Role != switchboard.RoleSystem && r.Earlier == "" {
			r.Earlier = param(i)
		}
	}
	r.History = append(r.History, history...)
	return r, nil
}

// onlyOutputs reports whether the input is function_call_output items
// alone.
func onlyOutputs(items []wireInputItem) bool {
	for _, it := range items {
		if it.Type != "function_call_output" {
			return false
		}
	}
	return true
}

// itemMessages turns input items into chat messages, checked as those
// are (decodeMessages): function_call items join the assistant message
// before them (or make one), a function_call_output is a tool message.
// at is each message's first item, for the params of errors.
func itemMessages(items []wireInputItem) (wms []wireMessage, at []int, err error) {
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			wms, at = append(wms, wireMessage{Role: it.Role, Content: it.Content}), append(at, i)
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, nil, bad(param, "A function_call item needs its call_id and name.")
			}
			if n := len(wms); n == 0 || wms[n-1].Role != "assistant" {
				wms, at = append(wms, wireMessage{Role: "assistant"}), append(at, i)
			}
			c := wireToolCall{ID: it.CallID, Type: "function"}
			c.Function.Name, c.Function.Arguments = it.Name, it.Arguments
			wms[len(wms)-1].ToolCalls = append(wms[len(wms)-1].ToolCalls, c)
		case "function_call_output":
			wms, at = append(wms, wireMessage{Role: "tool", ToolCallID: it.CallID, Content: it.Output}), append(at, i)
		default:
			return nil, nil, bad(param+".type", "Input items of type %q are not supported: only messages, function_call and function_call_output.", clip(it.Type))
		}
	}
	return wms, at, nil
}

// isString reports whether raw is one of the JSON strings.
func isString(raw json.RawMessage, want ...string) bool {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	for _, w := range want {
		if s == w {
			return true
		}
	}
	return false
}

// Responses, as the OpenAI API sends them (the official SDKs'
// responses.Response and its stream events).

// response is a Responses API response object.
type response struct {
	ID                 string         `json:"id"`
	Object             string         `json:"object"`
	CreatedAt          int64          `json:"created_at"`
	CompletedAt        *int64         `json:"completed_at"`
	Status             string         `json:"status"`
	Error              *responseError `json:"error"`
	IncompleteDetails  *struct{}      `json:"incomplete_details"`
	Instructions       *string        `json:"instructions"`
	Model              string         `json:"model"`
	Output             []any          `json:"output"` // outputMessage, functionCall
	ParallelToolCalls  bool           `json:"parallel_tool_calls"`
	PreviousResponseID *string        `json:"previous_response_id"`
	Store              bool           `json:"store"`
	Background         bool           `json:"background"`
	// Temperature and TopP are the guide's, not told: null.
	Temperature *float64        `json:"temperature"`
	TopP        *float64        `json:"top_p"`
	ToolChoice  string          `json:"tool_choice"`
	Tools       []struct{}      `json:"tools"`
	Text        textConfig      `json:"text"`
	Truncation  string          `json:"truncation"`
	Metadata    json.RawMessage `json:"metadata"`
	Usage       *responseUsage  `json:"usage"`
	// Switchboard is the progress a client asked for (ProgressHeader).
	Switchboard *progressList `json:"switchboard,omitempty"`
}

type textConfig struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// outputMessage is the answer's one output item.
type outputMessage struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
}

type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// Stream events. Each is sent as a server-sent event named by its type,
// numbered by its sequence_number.

type eventHead struct {
	Type           string `json:"type"`
	SequenceNumber int64  `json:"sequence_number"`
}

func (h *eventHead) head() *eventHead { return h }

// streamEvent is one of the events below.
type streamEvent interface{ head() *eventHead }

// progressEvent: switchboard.progress, an event of the guide's tools
// for a client that asked (ProgressHeader).
type progressEvent struct {
	eventHead
	Event switchboard.Event `json:"event"`
}

// lifecycleEvent: response.created, .in_progress, .completed, .failed.
type lifecycleEvent struct {
	eventHead
	Response *response `json:"response"`
}

// itemEvent: response.output_item.added and .done.
type itemEvent struct {
	eventHead
	OutputIndex int `json:"output_index"`
	Item        any `json:"item"` // outputMessage, functionCall
}

// functionCall is an output item: the model's call of one of the
// client's tools.
type functionCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// argumentsEvent: response.function_call_arguments.delta (Delta) and
// .done (Arguments, Name).
type argumentsEvent struct {
	eventHead
	ItemID      string  `json:"item_id"`
	OutputIndex int     `json:"output_index"`
	Delta       *string `json:"delta,omitempty"`
	Name        string  `json:"name,omitempty"`
	Arguments   *string `json:"arguments,omitempty"`
}

// partEvent: response.content_part.added and .done.
type partEvent struct {
	eventHead
	ItemID       string     `json:"item_id"`
	OutputIndex  int        `json:"output_index"`
	ContentIndex int        `json:"content_index"`
	Part         outputText `json:"part"`
}

// textEvent: response.output_text.delta (Delta) and .done (Text).
type textEvent struct {
	eventHead
	ItemID       string     `json:"item_id"`
	OutputIndex  int        `json:"output_index"`
	ContentIndex int        `json:"content_index"`
	Delta        *string    `json:"delta,omitempty"`
	Text         *string    `json:"text,omitempty"`
	Logprobs     []struct{} `json:"logprobs"`
}
