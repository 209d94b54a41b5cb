package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/switchboard-gw/switchboard"
)

// chat answers POST /v1/chat/completions.
func (h *Handler) chat(w http.ResponseWriter, r *http.Request) {
	k, req, progress, ok := readRequest(h, w, r, decodeRequest, func(c chatRequest) string { return c.Model })
	if !ok {
		return
	}
	h.runTurn(w, r, k, turnRequest{Model: req.Model, History: req.History, Text: req.Text, Results: req.Results, Tools: req.Tools,
		Session: r.Header.Get(SessionHeader), Progress: progress},
		func(id string, stored bool) answer {
			if stored {
				w.Header().Set(SessionHeader, id)
			}
			return &reply{w: w, rc: http.NewResponseController(w), stream: req.Stream, includeUsage: req.IncludeUsage,
				id: "chatcmpl-" + strings.TrimPrefix(id, "s_"), created: h.cfg.Now().Unix(), model: req.Model}
		})
}

// ProgressHeader, sent as "X-Switchboard-Progress: tools", asks for the
// guide's tools' progress in the answer (docs/openai-api.md): chunks of
// their own in a stream, a list in a completion, under the field
// "switchboard", which standard clients ignore.
const ProgressHeader = "X-Switchboard-Progress"

// wantsProgress reads ProgressHeader.
func wantsProgress(r *http.Request) (bool, error) {
	switch v := r.Header.Get(ProgressHeader); v {
	case "":
		return false, nil
	case "tools":
		return true, nil
	default:
		return false, bad("", "%s: %q is not a value it takes: send tools, or leave the header out.", ProgressHeader, clip(v))
	}
}

// reply writes a chat completion: one JSON completion, or server-sent
// chunks as the text arrives.
type reply struct {
	w                    http.ResponseWriter
	rc                   *http.ResponseController
	stream, includeUsage bool
	id, model            string
	created              int64

	buf     strings.Builder     // the whole text, when not streaming
	events  []switchboard.Event // the progress shown, when not streaming
	used    usage
	calls   []switchboard.ToolCall // the client's tools the model called
	started bool                   // the stream's headers and first chunk are sent
	gone    bool                   // the client went away: nothing more is written
}

// text adds text to the answer.
func (o *reply) text(s string) {
	if !o.stream {
		o.buf.WriteString(s)
		return
	}
	if s == "" {
		return
	}
	o.start()
	o.chunk([]chunkChoice{{Delta: delta{Content: s}}}, nil)
}

func (o *reply) usage(u switchboard.Usage) {
	o.used = usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
}

// toolCalls ends the answer with calls of the client's tools: the
// client runs them and sends their results.
func (o *reply) toolCalls(calls []switchboard.ToolCall) {
	o.calls = calls
	if o.stream {
		o.start()
		o.chunk([]chunkChoice{{Delta: delta{ToolCalls: wireCalls(calls, true)}}}, nil)
	}
}

// progress shows a tool's event: a chunk of its own (no choices) while
// streaming, the completion's list otherwise.
func (o *reply) progress(ev switchboard.Event) {
	if !o.stream {
		o.events = append(o.events, ev)
		return
	}
	o.start()
	o.event(chunk{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: o.model, Choices: []chunkChoice{}, Switchboard: &ev})
}

// keepAlive sends a comment down a stream.
func (o *reply) keepAlive() {
	if !o.stream || o.gone {
		return
	}
	o.start()
	o.gone = !sendComment(o.w, o.rc)
}

// start sends the stream's headers and its first chunk, once.
func (o *reply) start() {
	if o.started {
		return
	}
	o.started = true
	startStream(o.w)
	o.chunk([]chunkChoice{{Delta: delta{Role: "assistant"}}}, nil)
}

func (o *reply) finishReason() string {
	if o.calls != nil {
		return "tool_calls"
	}
	return "stop"
}

// startStream sends the headers of a server-sent event stream.
func startStream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold the chunks
	w.WriteHeader(http.StatusOK)
}

func (o *reply) chunk(choices []chunkChoice, u *usage) {
	o.event(chunk{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: o.model, Choices: choices, Usage: u})
}

// event writes one server-sent event and flushes it.
func (o *reply) event(v any) {
	if o.gone {
		return
	}
	o.gone = !sendEvent(o.w, o.rc, "", v)
}

// sendComment writes a server-sent event comment, which clients skip,
// and flushes it; false when the client is gone.
func sendComment(w io.Writer, rc *http.ResponseController) bool {
	_, err := io.WriteString(w, ": waiting\n\n")
	if err == nil {
		err = rc.Flush()
	}
	return err == nil
}

// sendEvent writes one server-sent event, named when name is set, and
// flushes it; false when the client is gone.
func sendEvent(w io.Writer, rc *http.ResponseController, name string, v any) bool {
	data, err := json.Marshal(v)
	if err == nil && name != "" {
		_, err = fmt.Fprintf(w, "event: %s\n", name)
	}
	if err == nil {
		_, err = fmt.Fprintf(w, "data: %s\n\n", data)
	}
	if err == nil {
		err = rc.Flush()
	}
	return err == nil
}

// finish ends the answer: the completion, or the stream's last chunks
// and [DONE]; or the error, as a status when nothing was streamed yet and
// as an error event in the stream otherwise. It reports whether the
// client went away before the end.
func (o *reply) finish(f *failure) bool {
	switch {
	case f != nil && !o.started:
		f.write(o.w)
	case f != nil:
		code := f.code
		o.event(errorBody{Error: errorDetail{Message: f.text, Type: f.typ, Code: &code}})
	case !o.stream:
		m := replyMessage{Role: "assistant"}
		if text := o.buf.String(); text != "" || o.calls == nil {
			m.Content = &text
		}
		if o.calls != nil {
			m.ToolCalls = wireCalls(o.calls, false)
		}
		c := completion{
			ID: o.id, Object: "chat.completion", Created: o.created, Model: o.model, Usage: o.used,
			Choices: []choice{{Message: m, FinishReason: o.finishReason()}},
		}
		if o.events != nil {
			c.Switchboard = &progressList{Events: o.events}
		}
		writeJSON(o.w, http.StatusOK, c)
	default:
		o.start()
		stop := o.finishReason()
		o.chunk([]chunkChoice{{Delta: delta{}, FinishReason: &stop}}, nil)
		if o.includeUsage {
			u := o.used
			o.chunk([]chunkChoice{}, &u)
		}
		if !o.gone {
			_, err := io.WriteString(o.w, "data: [DONE]\n\n")
			if err == nil {
				err = o.rc.Flush()
			}
			o.gone = err != nil
		}
	}
	return o.gone
}
