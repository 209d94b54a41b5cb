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
	// Earlier names the first user or assistant item before the last
	// ("" when none): a stored conversation takes none (its history is
	// the session's own).
	Earlier string
}

// wireResponsesRequest is the JSON of a Responses API request, as the
// OpenAI API documents it: the fields the gateway reads or refuses.
type wireResponsesRequest struct {
	Model              *string         `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	Stream             *bool           `json:"stream"`
	Store              *bool           `json:"store"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Metadata           json.RawMessage `json:"metadata"`
	Tools              json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Background         *bool           `json:"background"`
	Conversation       json.RawMessage `json:"conversation"`
	Prompt             json.RawMessage `json:"prompt"`
	Text               *struct {
		Format *struct {
			Type string `json:"type"`
		} `json:"format"`
	} `json:"text"`
}

// wireInputItem is one item of a request's input list. Messages only:
// an easy input message ({role, content}, type optional), an input
// message, or an earlier response's output message sent back.
type wireInputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
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
	case hasValue(w.Tools) && !bytes.Equal(bytes.TrimSpace(w.Tools), []byte("[]")):
		return r, bad("tools", "Client-supplied tools are not supported yet: the guide's own tools run on the gateway. Send the request without tools.")
	case hasValue(w.ToolChoice) && !isString(w.ToolChoice, "auto", "none"):
		return r, bad("tool_choice", "tool_choice is not supported: the guide's tools run on the gateway. Send auto, or leave it out.")
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
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
		case "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output":
			return r, bad(param+".type", "Input items of type %q are not supported yet (client-supplied tools are not).", it.Type)
		default:
			return r, bad(param+".type", "Input items of type %q are not supported: only messages (role user, system, developer or assistant) with text.", clip(it.Type))
		}
		text, err := contentText(it.Content, param+".content", inputTextTypes...)
		if err != nil {
			return r, err
		}
		role, err := textRole(it.Role, param)
		if err != nil {
			return r, err
		}
		if i == len(items)-1 {
			if err := answerable(it.Role, text, param); err != nil {
				return r, err
			}
			r.Text = text
			continue
		}
		if role != switchboard.RoleSystem && r.Earlier == "" {
			r.Earlier = param
		}
		r.History = append(r.History, switchboard.Message{Role: role, Content: text})
	}
	return r, nil
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
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	CompletedAt        *int64          `json:"completed_at"`
	Status             string          `json:"status"`
	Error              *responseError  `json:"error"`
	IncompleteDetails  *struct{}       `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	Model              string          `json:"model"`
	Output             []outputMessage `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Store              bool            `json:"store"`
	Background         bool            `json:"background"`
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
	OutputIndex int           `json:"output_index"`
	Item        outputMessage `json:"item"`
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
