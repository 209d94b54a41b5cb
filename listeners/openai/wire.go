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

// chatRequest is what the gateway takes of a chat-completions request.
// Sampling parameters (temperature, max_tokens, …) are the guide's and are
// ignored; what it cannot honour (images, n > 1, a forced tool choice) is
// refused with a 400 rather than ignored.
type chatRequest struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	// History is every message before the one answered; when the request
	// ends with tool results, it ends with the assistant message that
	// called those tools.
	History []switchboard.Message
	// Text is the last message, the user's; empty when the request ends
	// with Results instead.
	Text string
	// Results are the tool messages the request ends with: the client's
	// results of the tools the model called, for the turn to go on.
	Results []switchboard.ToolResult
	// Tools are the client's own tools (tools, of type function), offered
	// to the model beside the guide's.
	Tools []switchboard.ClientTool
}

// wireRequest is the JSON of a request, as the OpenAI API documents it.
type wireRequest struct {
	Model         *string       `json:"model"`
	Messages      []wireMessage `json:"messages"`
	Stream        *bool         `json:"stream"`
	StreamOptions *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools      []wireTool      `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	N          *int            `json:"n"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// wireTool is an entry of a request's tools.
type wireTool struct {
	Type     string        `json:"type"`
	Function *wireFunction `json:"function"`
}

type wireFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// wireToolCall is a tool call, in an assistant message of a request and
// in a response.
type wireToolCall struct {
	// Index is the call's place among the message's calls, in a stream's
	// delta only.
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
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
	offer, err := toolChoice(w.ToolChoice)
	if err != nil {
		return r, err
	}
	if r.Tools, err = decodeTools(w.Tools, ".function"); err != nil {
		return r, err
	}
	if !offer {
		r.Tools = nil // tool_choice none: the model is offered the guide's own only
	}
	msgs, err := decodeMessages(w.Messages, messageParam, "tool_call_id", "text")
	if err != nil {
		return r, err
	}
	r.History, r.Text, r.Results, err = splitLast(msgs, messageParam)
	return r, err
}

func messageParam(i int) string { return fmt.Sprintf("messages[%d]", i) }

// splitLast splits a conversation at what is answered: the last message,
// the user's; or the tool results it ends with, the history then ending
// with the assistant message that called them. param names a message in
// errors.
func splitLast(msgs []switchboard.Message, param func(int) string) (history []switchboard.Message, text string, results []switchboard.ToolResult, err error) {
	last := len(msgs) - 1
	switch m := msgs[last]; m.Role {
	case switchboard.RoleUser:
		if err := answerable("user", m.Content, param(last)); err != nil {
			return nil, "", nil, err
		}
		return msgs[:last], m.Content, nil, nil
	case switchboard.RoleTool:
		first := last
		for first > 0 && msgs[first-1].Role == switchboard.RoleTool {
			first--
		}
		calls := msgs[first-1].ToolCalls // decodeMessages: a tool message follows its call
		if len(calls) != last-first+1 {
			return nil, "", nil, bad(param(first-1), "The assistant's tool calls must each be followed by their result (%d calls, %d results).", len(calls), last-first+1)
		}
		for _, m := range msgs[first:] {
			results = append(results, switchboard.ToolResult{CallID: m.ToolCallID, Content: m.Content})
		}
		return msgs[:first], "", results, nil
	default:
		return nil, "", nil, bad(param(last)+".role", "The last message must be the user's (role user) or tool results, not %s: it is the one answered.", m.Role)
	}
}

// toolChoice reads tool_choice: whether the client's tools are offered.
// The gateway cannot make the model call a tool: "required" and a named
// function are refused.
func toolChoice(raw json.RawMessage) (bool, error) {
	if !hasValue(raw) {
		return true, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch s {
		case "auto":
			return true, nil
		case "none":
			return false, nil
		}
	}
	return false, bad("tool_choice", "tool_choice may be \"auto\" or \"none\": this gateway cannot make the model call a tool.")
}

// decodeTools reads the client's tools: functions, each with a name.
// nest is where a tool's function fields are in its JSON (".function" in
// chat completions, "" in the Responses API), for the params of errors.
func decodeTools(tools []wireTool, nest string) ([]switchboard.ClientTool, error) {
	var out []switchboard.ClientTool
	seen := map[string]bool{}
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type != "function":
			return nil, bad(param+".type", "Tools of type %q are not supported: only function.", clip(t.Type))
		case t.Function == nil || t.Function.Name == "":
			return nil, bad(param+nest+".name", "A function tool needs a name.")
		case !validToolName(t.Function.Name):
			return nil, bad(param+nest+".name", "%q is not a valid function name: letters, digits, _ and -, at most 64.", clip(t.Function.Name))
		case seen[t.Function.Name]:
			return nil, bad(param+nest+".name", "The function %q is offered twice.", t.Function.Name)
		}
		seen[t.Function.Name] = true
		params := t.Function.Parameters
		if !hasValue(params) {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if bytes.TrimSpace(params)[0] != '{' {
			return nil, bad(param+nest+".parameters", "parameters must be a JSON Schema object.")
		}
		out = append(out, switchboard.ClientTool{Name: t.Function.Name, Description: t.Function.Description, Parameters: params})
	}
	return out, nil
}

// validToolName is OpenAI's rule for a function's name.
func validToolName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// decodeMessages reads the conversation. A tool message must answer a
// call of the assistant message before it (or of the tool messages that
// follow that one), once. param names a message in errors, callID the
// field of a tool message's call id; textTypes are the content parts
// taken.
func decodeMessages(wms []wireMessage, param func(int) string, callID string, textTypes ...string) ([]switchboard.Message, error) {
	var msgs []switchboard.Message
	var open map[string]string // the calls of the last assistant message not answered yet: id → name
	for i, m := range wms {
		param := param(i)
		text, err := contentText(m.Content, param+".content", textTypes...)
		if err != nil {
			return nil, err
		}
		msg := switchboard.Message{Content: text}
		if m.Role != "tool" && len(open) > 0 {
			return nil, bad(param, "The tool calls of the assistant message before need their tool messages first.")
		}
		switch m.Role {
		case "tool":
			name, ok := open[m.ToolCallID]
			if !ok {
				return nil, bad(param+"."+callID, "A tool message must answer a call of the assistant message before it: %q is not one (or is answered twice).", clip(m.ToolCallID))
			}
			delete(open, m.ToolCallID)
			msg.Role, msg.ToolCallID, msg.ToolName = switchboard.RoleTool, m.ToolCallID, name
		case "function":
			return nil, bad(param+".role", "Messages with role function (the deprecated function calling) are not supported: use tools and tool messages.")
		default:
			if msg.Role, err = textRole(m.Role, param); err != nil {
				return nil, err
			}
			if msg.Role != switchboard.RoleAssistant {
				break
			}
			open = map[string]string{}
			for j, c := range m.ToolCalls {
				cp := fmt.Sprintf("%s.tool_calls[%d]", param, j)
				switch {
				case c.Type != "" && c.Type != "function":
					return nil, bad(cp+".type", "Tool calls of type %q are not supported: only function.", clip(c.Type))
				case c.ID == "":
					return nil, bad(cp+".id", "A tool call needs its id.")
				case c.Function.Name == "":
					return nil, bad(cp+".function.name", "A tool call needs the function's name.")
				}
				if _, dup := open[c.ID]; dup {
					return nil, bad(cp+".id", "Two tool calls have the id %q.", clip(c.ID))
				}
				open[c.ID] = c.Function.Name
				msg.ToolCalls = append(msg.ToolCalls, switchboard.ToolCall{ID: c.ID, Name: c.Function.Name, Args: arguments(c.Function.Arguments)})
			}
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// arguments is a call's arguments as the model wrote them: JSON, or the
// text as a JSON string when it is not.
func arguments(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s) // a string always encodes
	return b
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
		return "", bad(param+".role", "Each message needs a role: system, developer, user or assistant (tool results answer the assistant's tool calls).")
	default:
		return "", bad(param+".role", "Unknown role %q: want system, developer, user or assistant (tool results answer the assistant's tool calls).", clip(role))
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
	// Switchboard is the progress a client asked for (ProgressHeader).
	Switchboard *progressList `json:"switchboard,omitempty"`
}

// progressList is a completion's progress: the events of the guide's
// tools, as the WebSocket protocol sends them.
type progressList struct {
	Events []switchboard.Event `json:"events"`
}

type choice struct {
	Index        int          `json:"index"`
	Message      replyMessage `json:"message"`
	FinishReason string       `json:"finish_reason"`
	Logprobs     *struct{}    `json:"logprobs"`
}

type replyMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"` // null when the model only called tools
	Refusal   *string        `json:"refusal"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage,omitempty"`
	// Switchboard is one event of progress, in a chunk of its own with no
	// choices (ProgressHeader).
	Switchboard *switchboard.Event `json:"switchboard,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role      string         `json:"role,omitempty"`
	Content   string         `json:"content,omitempty"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

// wireCalls are calls as a response gives them; in a stream's delta
// (indexed), each whole in one chunk.
func wireCalls(calls []switchboard.ToolCall, indexed bool) []wireToolCall {
	out := make([]wireToolCall, len(calls))
	for i, c := range calls {
		out[i] = wireToolCall{ID: c.ID, Type: "function"}
		out[i].Function.Name, out[i].Function.Arguments = c.Name, string(c.Args)
		if indexed {
			out[i].Index = &i
		}
	}
	return out
}
