package slack

// HTTP mode: Slack POSTs events, clicks and slash commands to the
// gateway's own HTTP server. Every request is checked against the signing
// secret before a byte of it is parsed; what passes goes into the same
// inbound code as Socket Mode's envelopes.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
)

// The request URLs to give Slack (the app's Event Subscriptions,
// Interactivity and Slash Commands settings), under the gateway's
// http.public_url.
const (
	EventsPath        = "/slack/events"
	InteractivityPath = "/slack/interactivity"
	CommandsPath      = "/slack/commands"
)

// maxBodyBytes caps a request's body. Slack's payloads are a few KiB; a
// message with many blocks stays far under this.
const maxBodyBytes = 1 << 20

// Handler serves Slack's requests in http mode: POST EventsPath (the
// Events API), InteractivityPath (clicks) and CommandsPath (slash
// commands). Mount it at "/slack/" of the gateway's mux; anything else
// under it is 404, another method 405. In socket mode every path is 404.
//
// A request whose signature (X-Slack-Signature, v0 HMAC-SHA256 with the
// signing secret) does not match its body, or whose
// X-Slack-Request-Timestamp is more than five minutes from now, is refused
// with 401; a body over 1 MiB with 413. Until Run has connected (and after
// it ends) requests get 503 with Retry-After: 1, so Slack sends them again.
//
// It may be called before Run, so the gateway can build its mux first.
func (l *Listener) Handler() http.Handler {
	return http.HandlerFunc(l.serveHTTP)
}

func (l *Listener) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var serve func(ctx context.Context, w http.ResponseWriter, r *http.Request, body []byte)
	switch r.URL.Path {
	case EventsPath:
		serve = l.serveEvents
	case InteractivityPath:
		serve = l.serveInteractivity
	case CommandsPath:
		serve = l.serveCommand
	}
	if serve == nil || l.cfg.Mode != "http" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			l.log.Info("slack: request refused", "path", r.URL.Path, "reason", "body over 1 MiB")
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		l.log.Debug("slack: reading a request", "path", r.URL.Path, "err", err)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	// Nothing of the body is looked at before this.
	if reason := l.verify(r.Header, body); reason != "" {
		l.log.Info("slack: request refused", "path", r.URL.Path, "reason", reason)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	ctx, ok := l.ready()
	if !ok {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the slack listener is not connected yet", http.StatusServiceUnavailable)
		return
	}
	serve(ctx, w, r, body)
}

// verify checks a request's signature and timestamp; it returns why they
// are refused, "" when they pass. The reason never holds the request's
// headers, body or the secret.
func (l *Listener) verify(h http.Header, body []byte) string {
	sv, err := slackapi.NewSecretsVerifier(h, l.cfg.SigningSecret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	var num *strconv.NumError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, slackapi.ErrMissingHeaders):
		return "no signature or timestamp"
	case errors.Is(err, slackapi.ErrExpiredTimestamp):
		return "timestamp more than five minutes from now"
	case errors.As(err, &num):
		return "malformed timestamp"
	case errors.Is(err, slackapi.ErrInvalidConfiguration):
		return "no signing secret configured"
	default:
		return "signature does not match"
	}
}

// ready returns Run's context once Run has connected (who the bot is, the
// workers), false before that and after Run ends.
func (l *Listener) ready() (context.Context, bool) {
	// Run sets botUserID and teamID before it starts the place layer.
	ctx := l.places.Context()
	if ctx == nil || ctx.Err() != nil || l.teamID == "" {
		return nil, false
	}
	return ctx, true
}

// serveEvents answers the Events API: the URL's challenge, and callbacks,
// acknowledged at once. A callback is queued on its place's worker before
// the acknowledgement (that only queues), so an event Slack sends after
// another's 200 is handled after it; the work runs after the response,
// under Run's context. A redelivery (X-Slack-Retry-Num) is acknowledged
// and handled like the first delivery: a message's ts is its input id, so
// it is answered once.
func (l *Listener) serveEvents(ctx context.Context, w http.ResponseWriter, r *http.Request, body []byte) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		http.Error(w, "not an Events API payload", http.StatusBadRequest)
		return
	}
	ev, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
	if err != nil {
		// Signed by Slack, so a redelivery would not read better: say
		// 200, or Slack retries and in the end turns the events off.
		l.log.Warn("slack: an event that could not be read", "type", head.Type, "err", err)
		w.WriteHeader(http.StatusOK)
		return
	}
	switch ev.Type {
	case slackevents.URLVerification:
		uv, _ := ev.Data.(*slackevents.EventsAPIURLVerificationEvent)
		if uv == nil {
			http.Error(w, "no challenge", http.StatusBadRequest)
			return
		}
		l.writeJSON(w, map[string]string{"challenge": uv.Challenge})
	case slackevents.CallbackEvent:
		if n := r.Header.Get("X-Slack-Retry-Num"); n != "" {
			l.log.Debug("slack: event redelivered", "retry", n, "reason", r.Header.Get("X-Slack-Retry-Reason"))
		}
		l.onEventsAPI(ctx, ev)
		w.WriteHeader(http.StatusOK)
	case slackevents.AppRateLimited:
		l.log.Warn("slack: Slack is not sending some events: the app passed the Events API's rate limit")
		w.WriteHeader(http.StatusOK)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// serveInteractivity answers a click or a modal's submission: the form
// field payload holds the interaction's JSON. The response (within Slack's
// 3 s) is what onInteraction returns, empty when nothing.
func (l *Listener) serveInteractivity(ctx context.Context, w http.ResponseWriter, r *http.Request, body []byte) {
	form, err := url.ParseQuery(string(body))
	payload := form.Get("payload")
	if err != nil || payload == "" {
		http.Error(w, "no payload", http.StatusBadRequest)
		return
	}
	var cb slackapi.InteractionCallback
	if err := json.Unmarshal([]byte(payload), &cb); err != nil {
		l.log.Warn("slack: an interaction that could not be read", "err", err)
		http.Error(w, "bad payload", http.StatusBadRequest)
		return
	}
	if resp := l.onInteraction(ctx, cb); resp != nil {
		l.writeJSON(w, resp)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// serveCommand answers a slash command with onCommand's message.
func (l *Listener) serveCommand(ctx context.Context, w http.ResponseWriter, r *http.Request, body []byte) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		http.Error(w, "bad command", http.StatusBadRequest)
		return
	}
	r.PostForm = form // the body is read already: ParseForm takes these
	cmd, err := slackapi.SlashCommandParse(r)
	if err != nil {
		http.Error(w, "bad command", http.StatusBadRequest)
		return
	}
	if resp := l.onCommand(ctx, cmd); resp != nil {
		l.writeJSON(w, resp)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// writeJSON sends v as a 200 application/json response.
func (l *Listener) writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		l.log.Error("slack: encoding a response", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
