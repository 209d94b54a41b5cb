package openai

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// This file is the Responses API (POST /v1/responses), the one the
// official SDKs now default to, over the same turns as chat completions
// (turn.go): a stateless request runs in an ephemeral session; one with
// store: true, previous_response_id or the session header on a stored
// session.
//
// A stored response's id names its session, so that previous_response_id
// finds it without a table of its own: "resp_<session id without s_>_<a
// random part>". A stateless response's id is "resp_<its deleted session
// id without s_>", which names nothing that can be continued.

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}

// responsePrefix begins every response id.
const responsePrefix = "resp_"

// storedResponseID is the id of a response in the stored session id.
func storedResponseID(session string) string {
	return responsePrefix + strings.TrimPrefix(session, "s_") + "_" + randomHex(6)
}

// sessionOfResponse is the stored session a response id names, if it is
// one's: "s_" and the id's hex part. It says nothing of whether that
// session exists or the key may use it (openStored does).
func sessionOfResponse(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, responsePrefix)
	hex, suffix, cut := strings.Cut(rest, "_")
	if !ok || !cut || !isHex(hex) || !isHex(suffix) {
		return "", false
	}
	return "s_" + hex, true
}

func isHex(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// responseNotFound answers a previous_response_id that names no response
// the key may continue: the same answer for one of another key's, one
// never stored, and one made up, so that an id tells a key nothing.
func responseNotFound(id string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "previous_response_id", "response_not_found",
			fmt.Sprintf("No response %q that this key may continue: only a response made with store: true (or on a stored session) by this key's conversations can be.", clip(id)))
	}
}

// responses answers POST /v1/responses.
func (h *Handler) responses(w http.ResponseWriter, r *http.Request) {
	k, req, progress, ok := readRequest(h, w, r, decodeResponsesRequest, func(q responsesRequest) string { return q.Model })
	if !ok {
		return
	}
	turn := turnRequest{Model: req.Model, History: req.History, Text: req.Text, Results: req.Results, Tools: req.Tools, Progress: progress}
	if turn.Session, ok = responseSession(w, r, req); !ok {
		return
	}
	if turn.Session != "" {
		// The session's history is the conversation; the instructions
		// are its guide's (and the response names none).
		turn.History = nil
		req.Instructions = nil
		turn.NotFound = responseNotFound(req.Previous)
		if req.Previous == "" {
			turn.NotFound = nil // the header's own 404
		}
	}
	created := h.cfg.Now().Unix()
	h.runTurn(w, r, k, turn, func(id string, stored bool) answer {
		a := &responseAnswer{w: w, rc: http.NewResponseController(w), stream: req.Stream, now: h.cfg.Now,
			msgID: "msg_" + randomHex(12)}
		a.resp = response{
			ID: responsePrefix + strings.TrimPrefix(id, "s_"), Object: "response", CreatedAt: created, Status: "in_progress",
			Instructions: req.Instructions, Model: req.Model, Output: []any{}, ParallelToolCalls: true,
			Store: stored, ToolChoice: "auto", Tools: []struct{}{}, Truncation: "disabled", Metadata: json.RawMessage("{}"),
		}
		a.resp.Text.Format.Type = "text"
		if req.Metadata != nil {
			a.resp.Metadata = req.Metadata
		}
		if req.Previous != "" {
			a.resp.PreviousResponseID = &req.Previous
		}
		if stored {
			a.resp.ID = storedResponseID(id)
			w.Header().Set(SessionHeader, id)
		}
		return a
	})
}

// responseSession is the stored session a request continues: "" when
// stateless, NewSession for store: true, else the one its
// previous_response_id or session header names. When the request cannot
// be run so, it answers it itself and returns false.
func responseSession(w http.ResponseWriter, r *http.Request, req responsesRequest) (string, bool) {
	session := r.Header.Get(SessionHeader)
	if req.Previous != "" {
		named, ok := sessionOfResponse(req.Previous)
		if !ok {
			responseNotFound(req.Previous)(w)
			return "", false
		}
		if session != "" && session != named {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "previous_response_id", "invalid_request",
				fmt.Sprintf("previous_response_id and the %s header name different conversations: send one of them.", SessionHeader))
			return "", false
		}
		session = named
	}
	if session == "" && req.Store {
		session = NewSession
	}
	if session == "" {
		return "", true
	}
	switch {
	case req.StoreSent && !req.Store:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "store", "invalid_request",
			"A continued conversation is stored on the gateway: send store true (or leave it out) with previous_response_id or the session header, or neither for a stateless request.")
		return "", false
	case req.Earlier != "":
		writeError(w, http.StatusBadRequest, "invalid_request_error", req.Earlier, "invalid_request",
			"A stored conversation takes the user's new message, or the function_call_output items of the calls it waits for, only: its history (the calls included) is the one stored on the gateway. Send the earlier items in a stateless request (without store, previous_response_id and the session header), or leave them out.")
		return "", false
	}
	return session, true
}

// responseAnswer writes a Responses API answer: one response object, or
// its stream of semantic events as the text arrives.
type responseAnswer struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	stream bool
	now    func() time.Time

	resp    response // the object, its output filled at the end
	msgID   string   // the output message's id
	buf     strings.Builder
	used    responseUsage
	calls   []functionCall // the client's tools the model called
	seq     int64          // the next event's sequence_number
	started bool           // the stream's headers and opening events are sent
	msg     msgState       // the output message, in a stream
	gone    bool           // the client went away: nothing more is written
}

// msgState is where a stream is with its output message.
type msgState int

const (
	msgNone msgState = iota
	msgOpen
	msgClosed
)

func (a *responseAnswer) text(s string) {
	a.buf.WriteString(s)
	if !a.stream || s == "" {
		return
	}
	a.openMessage()
	a.event(&textEvent{eventHead: eventHead{Type: "response.output_text.delta"}, ItemID: a.msgID, Delta: &s, Logprobs: []struct{}{}})
}

func (a *responseAnswer) usage(u switchboard.Usage) {
	a.used = responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	a.used.InputTokensDetails.CachedTokens = u.CachedTokens
}

// progress shows a tool's event: an event of its own,
// switchboard.progress, in a stream; the response's list otherwise.
func (a *responseAnswer) progress(ev switchboard.Event) {
	if !a.stream {
		if a.resp.Switchboard == nil {
			a.resp.Switchboard = &progressList{}
		}
		a.resp.Switchboard.Events = append(a.resp.Switchboard.Events, ev)
		return
	}
	a.start()
	a.event(&progressEvent{eventHead: eventHead{Type: "switchboard.progress"}, Event: ev})
}

// keepAlive sends a comment down a stream.
func (a *responseAnswer) keepAlive() {
	if !a.stream || a.gone {
		return
	}
	a.start()
	a.gone = !sendComment(a.w, a.rc)
}

// message is the output item with the text so far.
func (a *responseAnswer) message(status string, content ...outputText) outputMessage {
	if content == nil {
		content = []outputText{}
	}
	return outputMessage{ID: a.msgID, Type: "message", Status: status, Role: "assistant", Content: content}
}

// part is the output text part with the text so far.
func (a *responseAnswer) part() outputText {
	return outputText{Type: "output_text", Text: a.buf.String(), Annotations: []struct{}{}, Logprobs: []struct{}{}}
}

// start sends the stream's headers and its opening events, once: the
// response created and in progress.
func (a *responseAnswer) start() {
	if a.started {
		return
	}
	a.started = true
	startStream(a.w)
	created := a.resp
	a.event(&lifecycleEvent{eventHead: eventHead{Type: "response.created"}, Response: &created})
	a.event(&lifecycleEvent{eventHead: eventHead{Type: "response.in_progress"}, Response: &created})
}

// openMessage adds the output message and its text part to the stream,
// once, before its first text.
func (a *responseAnswer) openMessage() {
	if a.msg != msgNone {
		return
	}
	a.msg = msgOpen
	a.start()
	a.event(&itemEvent{eventHead: eventHead{Type: "response.output_item.added"}, Item: a.message("in_progress")})
	a.event(&partEvent{eventHead: eventHead{Type: "response.content_part.added"}, ItemID: a.msgID,
		Part: outputText{Type: "output_text", Text: "", Annotations: []struct{}{}, Logprobs: []struct{}{}}})
}

// closeMessage ends the output message in the stream: its text done,
// its part and the item; it returns the item.
func (a *responseAnswer) closeMessage() outputMessage {
	item := a.message("completed", a.part())
	if a.msg != msgOpen {
		return item
	}
	a.msg = msgClosed
	text := a.buf.String()
	a.event(&textEvent{eventHead: eventHead{Type: "response.output_text.done"}, ItemID: a.msgID, Text: &text, Logprobs: []struct{}{}})
	a.event(&partEvent{eventHead: eventHead{Type: "response.content_part.done"}, ItemID: a.msgID, Part: a.part()})
	a.event(&itemEvent{eventHead: eventHead{Type: "response.output_item.done"}, Item: item})
	return item
}

// toolCalls ends the answer with the model's calls of the client's
// tools: function_call output items after the message (if any text came).
func (a *responseAnswer) toolCalls(calls []switchboard.ToolCall) {
	for _, c := range calls {
		a.calls = append(a.calls, functionCall{ID: "fc_" + randomHex(12), Type: "function_call", Status: "completed",
			CallID: c.ID, Name: c.Name, Arguments: string(c.Args)})
	}
	if !a.stream {
		return
	}
	a.start()
	index := 0
	if a.msg != msgNone {
		a.closeMessage()
		index = 1
	}
	for i, fc := range a.calls {
		added := fc
		added.Status, added.Arguments = "in_progress", ""
		a.event(&itemEvent{eventHead: eventHead{Type: "response.output_item.added"}, OutputIndex: index + i, Item: added})
		a.event(&argumentsEvent{eventHead: eventHead{Type: "response.function_call_arguments.delta"}, ItemID: fc.ID, OutputIndex: index + i, Delta: &fc.Arguments})
		a.event(&argumentsEvent{eventHead: eventHead{Type: "response.function_call_arguments.done"}, ItemID: fc.ID, OutputIndex: index + i, Name: fc.Name, Arguments: &fc.Arguments})
		a.event(&itemEvent{eventHead: eventHead{Type: "response.output_item.done"}, OutputIndex: index + i, Item: fc})
	}
}

// output is the response's output items: the message, unless the model
// only called tools, then the calls.
func (a *responseAnswer) output(msg outputMessage) []any {
	out := []any{}
	if a.buf.Len() > 0 || a.calls == nil {
		out = append(out, msg)
	}
	for _, c := range a.calls {
		out = append(out, c)
	}
	return out
}

// event writes one stream event, named by its type, with the next
// sequence number.
func (a *responseAnswer) event(e streamEvent) {
	if a.gone {
		return
	}
	h := e.head()
	h.SequenceNumber = a.seq
	a.seq++
	a.gone = !sendEvent(a.w, a.rc, h.Type, e)
}

// finish ends the answer: the response object, or the stream's closing
// events and response.completed; or the failure, as a status when
// nothing was streamed yet and as response.failed (status failed, its
// error, the text so far) otherwise. It reports whether the client went
// away before the end.
func (a *responseAnswer) finish(f *failure) bool {
	done := a.now().Unix()
	u := a.used
	a.resp.Usage = &u
	switch {
	case f != nil && !a.started:
		f.write(a.w)
	case f != nil:
		a.resp.Status = "failed"
		a.resp.Error = &responseError{Code: f.code, Message: f.text}
		a.resp.Output = []any{a.message("incomplete", a.part())}
		a.event(&lifecycleEvent{eventHead: eventHead{Type: "response.failed"}, Response: &a.resp})
	case !a.stream:
		a.resp.Status, a.resp.CompletedAt = "completed", &done
		a.resp.Output = a.output(a.message("completed", a.part()))
		writeJSON(a.w, http.StatusOK, a.resp)
	default:
		if a.calls == nil {
			a.openMessage() // an answer, even an empty one, is a message
		}
		item := a.closeMessage()
		a.resp.Status, a.resp.CompletedAt = "completed", &done
		a.resp.Output = a.output(item)
		a.event(&lifecycleEvent{eventHead: eventHead{Type: "response.completed"}, Response: &a.resp})
	}
	return a.gone
}
