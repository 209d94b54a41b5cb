package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/sessions"
)

// This file is what both endpoints (chat completions, the Responses API)
// share: a request for a turn is checked, its session opened (ephemeral,
// or a stored one), its input submitted, and the turn's events followed
// until it ends, into an answer written in the endpoint's format.

// deleteTimeout bounds deleting a request's session once it is answered.
const deleteTimeout = 10 * time.Second

// turnRequest is a request for one turn, whichever endpoint it came by.
type turnRequest struct {
	Model   string
	History []switchboard.Message // stateless: the conversation before Text (or Results)
	Text    string                // the user's message answered
	// Results are the client's results of its tools the turn waits for,
	// sent instead of Text: the turn goes on (stateless: History ends
	// with the assistant message that called them).
	Results []switchboard.ToolResult
	// Tools are the client's own tools, offered beside the guide's.
	Tools []switchboard.ClientTool
	// Session is the stored session the turn continues: "" for a
	// stateless request, NewSession to open one.
	Session string
	// Progress: the client asked to be shown the guide's tools as they
	// run (ProgressHeader).
	Progress bool
	// NotFound answers a request whose Session is none the key may use;
	// nil: the session header's 404.
	NotFound func(w http.ResponseWriter)
}

// An answer writes a turn's answer in an endpoint's format. Its methods
// are called from the request's goroutine only, in the events' order.
type answer interface {
	// text adds the model's words as they arrive.
	text(s string)
	// usage notes the turn's tokens (the last report wins).
	usage(u switchboard.Usage)
	// progress shows an event of the guide's tools, for a client that
	// asked for it (ProgressHeader).
	progress(ev switchboard.Event)
	// keepAlive is called every Config.KeepAlive while the turn runs: a
	// stream sends something its clients skip, so that proxies and
	// clients do not give up on a long wait (an approval).
	keepAlive()
	// toolCalls ends the answer with the model's calls of the client's
	// tools: the client runs them and sends the results.
	toolCalls(calls []switchboard.ToolCall)
	// finish ends the answer, whole or with the failure (nil when the
	// turn was answered), and reports whether the client went away
	// before its end.
	finish(f *failure) (gone bool)
}

// readTurnRequest checks that the request's key may run turns and reads
// its body; when it may not or the body is too large, it answers the
// request itself and returns false.
func (h *Handler) readTurnRequest(w http.ResponseWriter, r *http.Request) (*key, []byte, bool) {
	k := keyOf(r)
	if !k.Role.CanWrite() {
		writeError(w, http.StatusForbidden, "permission_error", "", "permission_denied",
			"This key may list the models only (role "+string(k.Role)+").")
		return nil, nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "", "request_too_large",
			fmt.Sprintf("The request body is larger than this gateway takes (%d bytes): send a shorter conversation.", tooBig.Limit))
		return nil, nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid_body", "The request body could not be read to its end.")
		return nil, nil, false
	}
	return k, body, true
}

// readRequest reads, decodes and checks a request for a turn: its key
// may run turns, its body decodes, its model is a guide the key may use,
// and the progress header (ProgressHeader) is one it takes. When not, it
// answers the request itself and returns false.
func readRequest[R any](h *Handler, w http.ResponseWriter, r *http.Request, decode func([]byte) (R, error), model func(R) string) (k *key, req R, progress, ok bool) {
	k, body, ok := h.readTurnRequest(w, r)
	if !ok {
		return nil, req, false, false
	}
	req, err := decode(body)
	if err != nil {
		writeRequestError(w, err)
		return nil, req, false, false
	}
	if !h.modelAllowed(w, k, model(req)) {
		return nil, req, false, false
	}
	if progress, err = wantsProgress(r); err != nil {
		writeRequestError(w, err)
		return nil, req, false, false
	}
	return k, req, progress, true
}

// writeRequestError answers a request that decoding refused.
func writeRequestError(w http.ResponseWriter, err error) {
	var re *requestError
	if !errors.As(err, &re) {
		re = &requestError{msg: "The request could not be read."}
	}
	writeError(w, http.StatusBadRequest, "invalid_request_error", re.param, "invalid_request", re.msg)
}

// modelAllowed checks that the model is a guide the key may use; when
// not, it answers the request itself and returns false.
func (h *Handler) modelAllowed(w http.ResponseWriter, k *key, model string) bool {
	if !slices.Contains(h.guides.Names(), model) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model", "model_not_found",
			fmt.Sprintf("The model %q does not exist: GET /v1/models lists the guides you may use.", clip(model)))
		return false
	}
	if !k.allows(model) {
		writeError(w, http.StatusForbidden, "invalid_request_error", "model", "model_not_allowed",
			fmt.Sprintf("This key may not use the model %q: GET /v1/models lists the guides it may use.", model))
		return false
	}
	return true
}

// runTurn runs the request's turn and writes its answer, made by
// newAnswer once the session is known (stored: a session that outlives
// the request).
func (h *Handler) runTurn(w http.ResponseWriter, r *http.Request, k *key, req turnRequest, newAnswer func(session string, stored bool) answer) {
	// The body is read: the server's read deadline must not end the
	// request while the answer streams.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})

	// The gateway's context, not the request's: a client that goes away
	// stops the delivery, not the turn, which is stored (and, stateless,
	// then deleted).
	ctx := h.ctx
	author := switchboard.Author{Channel: Channel, ID: k.Name, Name: k.Name}
	stored := req.Session != ""
	var sub *sessions.Subscription
	var err error
	if !stored {
		sub, err = h.mgr.Attach(ctx, sessions.AttachOptions{
			Ephemeral: true, Guide: req.Model, Author: author, History: req.History, AfterSeq: -1,
		})
	} else {
		sub, err = h.openStored(ctx, w, k, author, req)
		if sub == nil && err == nil {
			return // refused: answered
		}
	}
	if err != nil {
		h.sessionError(w, err)
		return
	}
	id := sub.Ready.Session
	// The input: the user's message, or the client's tool results. Its
	// id is the request's own, by which the listener knows its turn in a
	// session others write in too.
	in := switchboard.Input{Kind: switchboard.InputText, ClientID: "oai_" + randomHex(12), Author: author,
		Text: req.Text, Plain: true, ClientTools: req.Tools, WaitTimeout: h.cfg.ApprovalTimeout}
	if req.Results != nil {
		in.Kind, in.Text, in.ToolResults = switchboard.InputToolResults, "", req.Results
	}
	if _, err := h.mgr.Submit(ctx, id, in); err != nil {
		h.end(sub, id, stored)
		h.sessionError(w, err)
		return
	}
	out := newAnswer(id, stored)
	var mine *turnOf
	if stored {
		// Tool results go on the turn that waits for them: it is the
		// request's from the start (the session takes nothing else
		// meanwhile).
		mine = &turnOf{author: author, clientID: in.ClientID, started: req.Results != nil, gone: r.Context().Done()}
	}
	failure := h.follow(ctx, sub, k, author, mine, out, req.Progress)
	// A stateless session is deleted before the answer ends: a client
	// told it is done is told nothing of it is kept.
	h.end(sub, id, stored)
	if out.finish(failure) {
		h.log.Debug("the client went away before the answer's end; the turn ran to its end", "key", k.Name)
	}
}

// SessionHeader names the stored session a request continues
// (docs/openai-api.md); the response carries it back.
const SessionHeader = "X-Switchboard-Session"

// NewSession is SessionHeader's value that opens a new stored session.
const NewSession = "new"

// openStored attaches the key's author to the stored session the request
// names, or to a new one for NewSession. The sessions' own rules decide
// who may: the author must be a member already (MembersOnly), and
// Submit then checks that their role may write. A session that does not
// exist and one the key's author is not a member of get the same 404, so
// that another key learns nothing from an id it tries. When it refuses,
// it answers the request itself and returns neither a subscription nor an
// error.
func (h *Handler) openStored(ctx context.Context, w http.ResponseWriter, k *key, author switchboard.Author, req turnRequest) (*sessions.Subscription, error) {
	named, model := req.Session, req.Model
	if named == NewSession {
		return h.mgr.Attach(ctx, sessions.AttachOptions{Guide: model, Author: author, AfterSeq: -1})
	}
	sub, err := h.mgr.Attach(ctx, sessions.AttachOptions{SessionID: named, Author: author, AfterSeq: -1, MembersOnly: true})
	switch {
	case errors.Is(err, switchboard.ErrNotFound), errors.Is(err, sessions.ErrForbidden):
		if req.NotFound != nil {
			req.NotFound(w)
			return nil, nil
		}
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "session_not_found",
			fmt.Sprintf("No session %q that this key may use: send %s: %s to start one, or an id this key's responses named.", clip(named), SessionHeader, NewSession))
		return nil, nil
	case err != nil:
		return sub, err
	}
	guide := sub.Ready.Guide
	if guide != model || !k.allows(guide) {
		sub.Close()
		msg := fmt.Sprintf("The session %s answers with the model %q: send that model.", named, guide)
		if !k.allows(guide) {
			msg = fmt.Sprintf("The session %s answers with the model %q, which this key may not use.", named, guide)
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "model", "model_mismatch", msg)
		return nil, nil
	}
	return sub, nil
}

// end lets go of the request's session: a stored one stays, a stateless
// one is deleted.
func (h *Handler) end(sub *sessions.Subscription, id string, stored bool) {
	if stored {
		sub.Close()
		return
	}
	h.discard(sub, id)
}

// discard ends the request's session: nothing of it is kept.
func (h *Handler) discard(sub *sessions.Subscription, id string) {
	sub.Close()
	ctx, cancel := context.WithTimeout(h.ctx, deleteTimeout)
	defer cancel()
	if err := h.mgr.Delete(ctx, id); err != nil {
		h.log.Warn("a completion's session was not deleted: retention will delete it", "session", id, "err", err)
	}
}

// failure is how a turn failed, told to the client as an error.
type failure struct {
	status          int
	typ, code, text string
}

// turnOf recognizes the turn a request on a stored session started, in a
// session others may be writing in: its user message is the author's,
// with the request's client id. Until it starts, the events are others'.
type turnOf struct {
	author   switchboard.Author
	clientID string
	started  bool
	// gone is the request's end: a client that goes away before its turn
	// started (queued behind others') is waited for no longer; the turn
	// runs when its time comes, as any queued message.
	gone <-chan struct{}
}

// waitingFor reports whether the request waits for its turn to start
// (others' turns run first): nothing of its answer is sent meanwhile.
func (t *turnOf) waitingFor() bool { return t != nil && !t.started }

// waiting is gone while the turn has not started, nil after.
func (t *turnOf) waiting() <-chan struct{} {
	if t == nil || t.started {
		return nil
	}
	return t.gone
}

// before reports whether ev comes before the request's turn (and is not
// its to show), noting the turn's start; and returns the failure of a
// notice for the author that refused the input before its turn started.
func (t *turnOf) before(p any) (bool, *failure) {
	if t == nil || t.started {
		return false, nil
	}
	switch d := p.(type) {
	case *switchboard.MessageData:
		if d.Role == switchboard.RoleUser && d.Channel == t.author.Channel && d.AuthorID == t.author.ID && d.ClientID == t.clientID {
			t.started = true
		}
	case *switchboard.ErrorData:
		if d.For == t.author.Key() && (d.Code == switchboard.ErrCodeBusy || d.Code == switchboard.ErrCodeBudget || d.Code == switchboard.ErrCodeGuardrail) {
			return true, turnFailure(d)
		}
	}
	return true, nil
}

// follow reads the turn's events until it ends: text to out, usage
// noted, the guide's tools' progress to out when the client asked for it
// (ProgressHeader). With mine (a stored session), what comes before the
// request's own turn is skipped. It returns how the turn failed, or nil.
//
// An approval request of the turn (a guide's ask tool) is answered by the
// key when it may approve (role approver, and a role in the session that
// may: recorded as approved by the key's author); otherwise a stateless
// request's is denied at once (no one else can reach its session), and a
// stored session's waits for someone who may approve, in any channel of
// the session, until the turn's WaitTimeout. While it waits, a stream
// gets a comment every KeepAlive (which SDKs skip) so that proxies keep
// the connection.
func (h *Handler) follow(ctx context.Context, sub *sessions.Subscription, k *key, author switchboard.Author, mine *turnOf, out answer, progress bool) *failure {
	var failed *failure
	running := false // the turn started: its states came
	streamed := streamedText{}
	tick := time.NewTicker(h.cfg.KeepAlive)
	defer tick.Stop()
	stored := mine != nil
	for {
		var ev switchboard.Event
		var ok bool
		select {
		case ev, ok = <-sub.Events():
		case <-ctx.Done():
			ok = false
		case <-mine.waiting():
			return &failure{http.StatusRequestTimeout, "invalid_request_error", "client_gone", "The request ended before its turn started."}
		case <-tick.C:
			if !mine.waitingFor() {
				out.keepAlive()
			}
			continue
		}
		if !ok {
			return restarting()
		}
		p, err := ev.Payload()
		if err != nil {
			continue // a type this listener does not show
		}
		if skip, f := mine.before(p); f != nil {
			return f
		} else if skip {
			continue
		}
		if progress && shownAsProgress(ev.Type) {
			out.progress(ev)
		}
		switch d := p.(type) {
		case *switchboard.DeltaData:
			out.text(d.Content)
			streamed.delta(d)
		case *switchboard.MessageData:
			if rest := streamed.rest(d); rest != "" {
				out.text(rest) // replaced.go
			}
		case *switchboard.UsageData:
			out.usage(d.Usage)
		case *switchboard.ToolsRequestedData:
			if d.For == author.Key() {
				// The turn waits for the client's tools: the answer ends
				// here with the calls (the guide's own calls of the same
				// step are not the client's to see).
				out.toolCalls(d.Calls)
				return failed
			}
		case *switchboard.ConfirmationRequestData:
			if err := h.approval(ctx, sub, k, author, stored, ev.Session, d); err != nil {
				h.log.Warn("answering an approval request failed", "tool", d.ToolName, "err", err)
				return restarting()
			}
		case *switchboard.ErrorData:
			if d.For == author.Key() && (d.Code == switchboard.ErrCodeBadInput || d.Code == switchboard.ErrCodeForbidden) {
				// Tool results the session would not take: nothing ran.
				return resultsRefused(d)
			}
			if d.For == author.Key() && (d.Code == switchboard.ErrCodeGuardrail || d.Code == switchboard.ErrCodeBudget && !running) {
				// The message was refused before its turn: none runs,
				// and no idle follows (docs/guardrails.md). (A budget
				// reached during the turn ends it, with an idle.)
				return turnFailure(d)
			}
			if f := turnFailure(d); f != nil {
				if d.Code == switchboard.ErrCodeRestarting {
					return f // the turn was cut: no idle follows
				}
				failed = f
			}
		case *switchboard.StateData:
			running = true
			if d.State == switchboard.StateIdle {
				return failed
			}
		}
	}
}

// approval answers an approval request of the request's turn, or leaves
// it to the session's approvers (see follow).
func (h *Handler) approval(ctx context.Context, sub *sessions.Subscription, k *key, author switchboard.Author, stored bool, session string, d *switchboard.ConfirmationRequestData) error {
	in := switchboard.Input{Kind: switchboard.InputConfirm, Author: author, ConfirmationID: d.ConfirmationID}
	switch {
	case k.Role.CanApprove() && collaboration.Role(sub.Ready.Role).CanApprove():
		in.Approved = true
		h.log.Info("a guide's ask tool was approved by the key", "tool", d.ToolName, "key", k.Name)
	case !stored:
		h.log.Info("a guide's ask tool was denied: no one may approve it in a stateless request", "tool", d.ToolName, "key", k.Name)
	default:
		h.log.Debug("a guide's ask tool waits for an approver", "tool", d.ToolName, "key", k.Name, "session", session)
		return nil
	}
	_, err := h.mgr.Submit(ctx, session, in)
	return err
}

// shownAsProgress are the events a client that asked for progress is
// shown: the guide's tools as they run, approvals asked and answered,
// the conversation passed to another guide, and the plan.
func shownAsProgress(t switchboard.EventType) bool {
	switch t {
	case switchboard.EventToolCall, switchboard.EventToolResponse,
		switchboard.EventConfirmationRequest, switchboard.EventConfirmationResolved, switchboard.EventHandoff, switchboard.EventPlan:
		return true
	}
	return false
}

// turnFailure is what the client is told of an error event; nil for
// those that do not end the turn.
func turnFailure(d *switchboard.ErrorData) *failure {
	switch d.Code {
	case switchboard.ErrCodeInterrupted, switchboard.ErrCodeDuplicate:
		return nil // the turn goes on
	case switchboard.ErrCodeRestarting:
		return restarting()
	case switchboard.ErrCodeBusy:
		return &failure{http.StatusConflict, "invalid_request_error", "session_busy", d.Message}
	case switchboard.ErrCodeBudget:
		return &failure{http.StatusTooManyRequests, "insufficient_quota", "budget_exceeded", d.Message}
	case switchboard.ErrCodeGuardrail:
		// The guide's guardrails refused the message (docs/guardrails.md).
		return &failure{http.StatusBadRequest, "invalid_request_error", "guardrail_blocked", d.Message}
	case switchboard.ErrCodeStorage:
		return &failure{http.StatusServiceUnavailable, "server_error", "storage_unavailable", d.Message}
	case switchboard.ErrCodeProvider:
		return &failure{http.StatusBadGateway, "server_error", "provider_error", d.Message}
	default:
		return &failure{http.StatusInternalServerError, "server_error", d.Code, d.Message}
	}
}

// resultsRefused is the failure of tool results the session did not take.
func resultsRefused(d *switchboard.ErrorData) *failure {
	if d.Code == switchboard.ErrCodeForbidden {
		return &failure{http.StatusForbidden, "permission_error", "permission_denied", d.Message}
	}
	return &failure{http.StatusBadRequest, "invalid_request_error", "invalid_request", d.Message}
}

// write answers the request with the failure, when nothing of the
// answer was sent yet.
func (f *failure) write(w http.ResponseWriter) {
	if f.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	writeError(w, f.status, f.typ, "", f.code, f.text)
}

func restarting() *failure {
	return &failure{http.StatusServiceUnavailable, "server_error", "restarting", "The gateway is restarting: send the request again in a moment."}
}
