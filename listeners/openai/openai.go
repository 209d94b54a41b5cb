// Package openai serves the OpenAI-compatible API under /v1 of the
// gateway's HTTP server: any OpenAI client, SDK or chat app uses a guide
// as a model (docs/openai-api.md).
//
// API keys, GET /v1/models, POST /v1/chat/completions and POST
// /v1/responses (the Responses API), streamed or not. By default
// stateless: each request runs in an ephemeral session
// (sessions.AttachOptions.Ephemeral): the guide's system prompt, tools and
// approval policy apply, the request's messages are the conversation, and
// the session is deleted once answered. With the header
// X-Switchboard-Session (or, on the Responses API, store: true or
// previous_response_id) a request continues a stored session instead, an
// ordinary one (turn.go's openStored), and only its last message is
// submitted. Client-supplied tools and approvals while a request waits
// are not served yet: a guide's ask tool is denied at once.
package openai

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/sessions"
)

// Channel is the channel name of the API's authors ("openai:<key name>").
const Channel = "openai"

// Sessions is what the API needs of the session manager.
type Sessions interface {
	Attach(ctx context.Context, opts sessions.AttachOptions) (*sessions.Subscription, error)
	Submit(ctx context.Context, sessionID string, in switchboard.Input) (*sessions.Receipt, error)
	Delete(ctx context.Context, sessionID string) error
	SessionsOf(ctx context.Context, author switchboard.Author, limit int) ([]switchboard.MemberSession, error)
}

// Guides are the models: the guide catalog's names, read at each request
// (the catalog reloads).
type Guides interface {
	Names() []string
}

// Key is one accepted API key.
type Key struct {
	// Name is who the key stands for: its sessions' author, and what logs
	// say. Never the key.
	Name   string
	Secret string
	// Role: member (default); approver, whose turns' approval requests
	// the key answers itself, approved (automation accounts; in a stored
	// session only where its author's role there may approve too); or
	// viewer, which may only list the models.
	Role collaboration.Role
	// Guides the key may use; empty: all.
	Guides []string
}

// Config configures the API.
type Config struct {
	Keys []Key
	// RequestsPerMinute bounds each key's requests, with a burst of as
	// many (60 when 0).
	RequestsPerMinute int
	// MaxBodyBytes bounds a request's body (1 MiB when 0).
	MaxBodyBytes int64
	// ApprovalTimeout bounds how long a request's turn waits for someone
	// to answer an approval request (5 minutes when 0); then the model is
	// told the tool was not approved.
	ApprovalTimeout time.Duration
	// KeepAlive is how often a stream that has nothing to send sends a
	// comment (15 s when 0).
	KeepAlive time.Duration
	// Created is the time /v1/models gives as each model's created (the
	// gateway's start); Now stamps completions. Zero: time.Now.
	Created time.Time
	Now     func() time.Time
}

// Handler serves /v1/.
type Handler struct {
	ctx    context.Context
	cfg    Config
	mgr    Sessions
	guides Guides
	log    *slog.Logger
	keys   []key
	mux    *http.ServeMux
}

// key is a Key as checked: its secret's hash, and its rate.
type key struct {
	Key
	hash    [sha256.Size]byte
	limiter *rate.Limiter
}

// New makes the handler. ctx is the gateway's: a completion whose client
// went away still runs to its end (and is deleted) unless ctx ends.
func New(ctx context.Context, cfg Config, mgr Sessions, guides Guides, log *slog.Logger) *Handler {
	if cfg.RequestsPerMinute <= 0 {
		cfg.RequestsPerMinute = 60
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = 5 * time.Minute
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Created.IsZero() {
		cfg.Created = cfg.Now()
	}
	h := &Handler{ctx: ctx, cfg: cfg, mgr: mgr, guides: guides, log: log.With("listener", "openai"), mux: http.NewServeMux()}
	for _, k := range cfg.Keys {
		if k.Role == "" {
			k.Role = collaboration.Member
		}
		h.keys = append(h.keys, key{Key: k, hash: sha256.Sum256([]byte(k.Secret)),
			limiter: rate.NewLimiter(rate.Every(time.Minute/time.Duration(cfg.RequestsPerMinute)), cfg.RequestsPerMinute)})
	}
	h.mux.HandleFunc("GET /v1/models", h.models)
	h.mux.HandleFunc("GET /v1/sessions", h.sessions)
	h.mux.HandleFunc("POST /v1/chat/completions", h.chat)
	h.mux.HandleFunc("POST /v1/responses", h.responses)
	notKept := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "unknown_url",
			"Unknown request URL: "+r.Method+" "+clip(r.URL.Path)+". Responses are not kept for retrieval: a stored one's conversation goes on with previous_response_id, and every other channel shows it.")
	}
	h.mux.HandleFunc("/v1/responses", notKept) // other methods than POST, without a redirect
	h.mux.HandleFunc("/v1/responses/", notKept)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "unknown_url",
			"Unknown request URL: "+r.Method+" "+clip(r.URL.Path)+". This gateway serves GET /v1/models, POST /v1/chat/completions, POST /v1/responses and GET /v1/sessions.")
	})
	return h
}

// ServeHTTP authenticates, rate-limits and routes a request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k := h.authenticate(r)
	if k == nil {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "", "invalid_api_key",
			"Incorrect or missing API key: send the key you were given as Authorization: Bearer <key>.")
		return
	}
	if wait, ok := k.take(h.cfg.Now()); !ok {
		secs := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		writeError(w, http.StatusTooManyRequests, "rate_limit_error", "", "rate_limit_exceeded",
			"Rate limit reached for this key ("+strconv.Itoa(h.cfg.RequestsPerMinute)+" requests a minute): try again in "+strconv.Itoa(max(secs, 1))+" s.")
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), keyCtx{}, k))
	h.mux.ServeHTTP(w, r)
}

type keyCtx struct{}

func keyOf(r *http.Request) *key { return r.Context().Value(keyCtx{}).(*key) }

// authenticate finds the request's key, comparing its hash with every
// key's in constant time (no early exit: how long it takes says nothing
// of which key came close).
func (h *Handler) authenticate(r *http.Request) *key {
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	var found *key
	for i := range h.keys {
		if subtle.ConstantTimeCompare(sum[:], h.keys[i].hash[:]) == 1 {
			found = &h.keys[i]
		}
	}
	return found
}

// take spends one of the key's requests, or says how long until one is
// available.
func (k *key) take(now time.Time) (time.Duration, bool) {
	res := k.limiter.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, false
	}
	return 0, true
}

// allows reports whether the key may use a guide.
func (k *key) allows(guide string) bool {
	return len(k.Guides) == 0 || slices.Contains(k.Guides, guide)
}

// models lists the guides the key may use.
func (h *Handler) models(w http.ResponseWriter, r *http.Request) {
	k := keyOf(r)
	list := modelList{Object: "list", Data: []model{}}
	for _, g := range h.guides.Names() {
		if k.allows(g) {
			list.Data = append(list.Data, model{ID: g, Object: "model", Created: h.cfg.Created.Unix(), OwnedBy: "switchboard"})
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// writeError answers in the OpenAI error shape.
func writeError(w http.ResponseWriter, status int, typ, param, code, msg string) {
	d := errorDetail{Message: msg, Type: typ}
	if param != "" {
		d.Param = &param
	}
	if code != "" {
		d.Code = &code
	}
	writeJSON(w, status, errorBody{Error: d})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a client gone away: nothing to tell
}

// sessionError answers a refusal of the session manager.
func (h *Handler) sessionError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, sessions.ErrDraining), errors.Is(err, sessions.ErrClosed):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "restarting", "The gateway is restarting: send the request again in a moment.")
	case errors.Is(err, sessions.ErrFull), errors.Is(err, sessions.ErrBusy):
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "overloaded", "The gateway has too many conversations open: try again in a little while.")
	case errors.Is(err, sessions.ErrBadInput):
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid_request", sessions.Reason(err, "The request cannot be run")+".")
	case errors.Is(err, sessions.ErrForbidden):
		writeError(w, http.StatusForbidden, "permission_error", "", "permission_denied",
			"This key may not write in that session: "+sessions.Reason(err, "its role there does not allow it")+".")
	case errors.Is(err, switchboard.ErrNotFound):
		writeError(w, http.StatusNotFound, "invalid_request_error", "model", "model_not_found", "That model does not exist: GET /v1/models lists the guides you may use.")
	default:
		ref := reference()
		h.log.Error("an API request failed", "ref", ref, "err", err)
		writeError(w, http.StatusInternalServerError, "server_error", "", "internal_error", "The gateway failed to run the request (reference "+ref+" in its log).")
	}
}

// reference is a short random id a log line and an answer share.
func reference() string { return randomHex(4) }
