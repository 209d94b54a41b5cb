package discord

// HTTP interactions: with public_key set, Discord may send interactions to
// the gateway's /discord/interactions instead of over the Gateway (the
// application's Interactions Endpoint URL). Each request is verified
// against the application's Ed25519 public key before it is read, and
// answered in its HTTP response (Discord waits for it up to 3 s).

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"
)

// InteractionsPath is where Discord posts interactions in HTTP mode.
const InteractionsPath = "/discord/interactions"

// maxInteraction is the largest request body read.
const maxInteraction = 1 << 20

// Handler serves InteractionsPath; it answers 404 when no public key is
// configured.
func (l *Listener) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != InteractionsPath || l.publicKey == nil {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInteraction))
		if err != nil {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		if why := verify(l.publicKey, r.Header, body, time.Now()); why != "" {
			l.log.Info("discord: interaction refused", "reason", why)
			http.Error(w, "invalid request signature", http.StatusUnauthorized)
			return
		}
		var i discordgo.Interaction
		if err := json.Unmarshal(body, &i); err != nil {
			http.Error(w, "not an interaction", http.StatusBadRequest)
			return
		}
		if i.Type != discordgo.InteractionPing && !l.places.Live() {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		// The work goes on after the response: under Run's context, not
		// the request's.
		ctx := l.places.Context()
		if ctx == nil {
			ctx = r.Context()
		}
		answered := make(chan *discordgo.InteractionResponse, 1)
		l.onInteraction(ctx, &i, func(resp *discordgo.InteractionResponse) {
			select {
			case answered <- resp:
			default: // answered once
			}
		})
		select {
		case resp := <-answered:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(resp)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
}

// verify checks an interaction's Ed25519 signature over timestamp+body,
// and that the timestamp is within 5 minutes (a replayed request is
// refused); it returns why not, or "".
func verify(key ed25519.PublicKey, h http.Header, body []byte, now time.Time) string {
	sig, err := hex.DecodeString(h.Get("X-Signature-Ed25519"))
	if err != nil || len(sig) != ed25519.SignatureSize {
		return "no signature"
	}
	ts := h.Get("X-Signature-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "no timestamp"
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return "timestamp more than 5 minutes from now"
	}
	if !ed25519.Verify(key, append([]byte(ts), body...), sig) {
		return "signature does not match"
	}
	return ""
}
