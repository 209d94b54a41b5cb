package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard-gw/switchboard"
)

// chatRequest is what this slice takes of a chat-completions request.
// Sampling parameters (temperature, max_tokens, …) are the guide's and are
// ignored; what the slice cannot honour (client tools, images, n > 1) is
// refused with a 400 rather than ignored.
type chatRequest struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	History      []switchboard.Message // every message but the last
	Text         string                // the last, the user's
}

// wireRequest is the JSON of a request, as the OpenAI API documents it.
type wireRequest struct {
	Model         *string       `json:"model"`
	Messages      []wireMessage `json:"messages"`
	Stream        *bool         `json:"stream"`
	StreamOptions *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools      json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	N          *int            `json:"n"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// requestError is a 400 for the client: what is wrong, and which
// parameter.
type requestError struct {
	msg, param string
}

func (e *requestError) Error() string { return e.msg }

func bad(param, format string, args ...any) error {
	return &requestError{msg: fmt.Sprintf(format, args...), param: param}
}

// decodeRequest parses and checks a chat-completions body. Every error is
// a *requestError.
func decodeRequest(body []byte) (chatRequest, error) {
	var w wireRequest
	if err := decodeJSON(body, &w, "chat completions"); err != nil {
		return chatRequest{}, err
	}
	var r chatRequest
	switch {
	case w.Model == nil || *w.Model == "":
		return r, bad("model", "You must provide a model parameter: the name of a guide (GET /v1/models lists them).")
	case len(w.Messages) == 0:
		return r, bad("messages", "messages must hold at least one message.")
	case hasValue(w.Tools) || hasValue(w.ToolChoice):
		return r, bad("tools", "Client-supplied tools are not supported yet: the guide's own tools run on the gateway. Send the request without tools.")
	case w.N != nil && *w.N != 1:
		return r, bad("n", "Only one choice (n: 1) is supported.")
	}
	r.Model = *w.Model
	r.Stream = w.Stream != nil && *w.Stream
	if w.StreamOptions != nil && w.StreamOptions.IncludeUsage != nil {
		if !r.Stream {
			return r, bad("stream_options", "stream_options is only allowed when stream is true.")
		}
		r.IncludeUsage = *w.StreamOptions.IncludeUsage
	}
	for i, m := range w.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		text, err := contentText(m.Content, param+".content", "text")
		if err != nil {
			return r, err
		}
		switch {
		case m.Role == "assistant" && hasValue(m.ToolCalls):
			return r, bad(param+".tool_calls", "Tool calls in the conversation are not supported yet (client-supplied tools are not).")
		case m.Role == "tool" || m.Role == "function":
			return r, bad(param+".role", "Messages with role %q are not supported yet (client-supplied tools are not).", m.Role)
		}
		role, err := textRole(m.Role, param)
		if err != nil {
			return r, err
		}
		if i == len(w.Messages)-1 {
			if err := answerable(m.Role, text, param); err != nil {
				return r, err
			}
			r.Text = text
			continue
		}
		r.History = append(r.History, switchboard.Message{Role: role, Content: text})
	}
	return r, nil
}

// textRole is a text message's role in the conversation: system (or
// developer), user or assistant; any other is refused.
func textRole(role, param string) (switchboard.MessageRole, error) {
	switch role {
	case "system", "developer":
		return switchboard.RoleSystem, nil
	case "user":
		return switchboard.RoleUser, nil
	case "assistant":
		return switchboard.RoleAssistant, nil
	case "":
		return "", bad(param+".role", "Each message needs a role: system, developer, user or assistant.")
	default:
		return "", bad(param+".role", "Unknown role %q: want system, developer, user or assistant.", clip(role))
	}
}

// answerable checks the last message, the one answered: the user's, and
// not empty.
func answerable(role, text, param string) error {
	if role != "user" {
		return bad(param+".role", "The last message must be the user's (role user), not %s: it is the one answered.", role)
	}
	if strings.TrimSpace(text) == "" {
		return bad(param+".content", "The last message is empty: there is nothing to answer.")
	}
	return nil
}

// decodeJSON parses a request's body, one JSON value, into v; what
// names the endpoint in the error, a *requestError.
func decodeJSON(body []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return bad("", "The request body is not valid JSON for %s: %s", what, jsonProblem(err))
	}
	if dec.More() {
		return bad("", "The request body holds more than one JSON value.")
	}
	return nil
}

// contentText is a message's content: a string, null, or a list of parts
// of the text types (the endpoint's: "text" for chat completions);
// images, audio and files are refused.
func contentText(raw json.RawMessage, param string, textTypes ...string) (string, error) {
	if !hasValue(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", bad(param, "Content must be a string or a list of parts.")
	}
	var b strings.Builder
	for i, p := range parts {
		switch {
		case !slices.Contains(textTypes, p.Type):
			return "", bad(fmt.Sprintf("%s[%d].type", param, i), "Content parts of type %q are not supported: only %s.", clip(p.Type), strings.Join(textTypes, " and "))
		case p.Text == nil:
			return "", bad(fmt.Sprintf("%s[%d].text", param, i), "A text part needs its text.")
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// hasValue reports whether a field was sent with a value other than null.
func hasValue(raw json.RawMessage) bool {
	v := bytes.TrimSpace(raw)
	return len(v) > 0 && !bytes.Equal(v, []byte("null"))
}

// jsonProblem says where a body failed to parse, without echoing it.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("syntax error at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("%s must be of type %s", typ.Field, typ.Type)
	default:
		return "the body ended early"
	}
}

// clip cuts a client's value that a message quotes.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Responses, as the OpenAI API sends them.

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string  `json:"object"`
	Data   []model `json:"data"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   usage    `json:"usage"`
}

type choice struct {
	Index        int          `json:"index"`
	Message      replyMessage `json:"message"`
	FinishReason string       `json:"finish_reason"`
	Logprobs     *struct{}    `json:"logprobs"`
}

type replyMessage struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
}
