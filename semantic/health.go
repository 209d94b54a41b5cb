package semantic

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/switchboard-gw/switchboard/providers"
)

// Backoff after failed embedding calls: doubling from firstBackoff up to
// maxBackoff, or longer when the provider says when to come back
// (Retry-After), up to maxRetryAfter.
const (
	firstBackoff  = 2 * time.Second
	maxBackoff    = 5 * time.Minute
	maxRetryAfter = time.Hour
)

// health is what the last embedding calls said of the provider, shared
// by the indexer and the searches. After a failure nothing calls it until
// the backoff has passed; then one call tries (a search's or the
// indexer's), and the others keep waiting until it has answered.
type health struct {
	mu       sync.Mutex
	down     bool
	failures int       // in a row
	retryAt  time.Time // while down: when the next call may try
	trying   bool      // while down: a call is trying
	timeout  time.Duration
}

// try reports whether a call may be made now; if the provider is down and
// its backoff has passed, the caller is the one that tries, and must
// report how it went (ok or failed). wait is how long until a call may be
// made, when it may not.
func (h *health) try(now time.Time) (ok bool, wait time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.down:
		return true, 0
	case h.trying:
		// A trial is under way; if it hangs, its timeout ends it.
		return false, h.timeout
	case now.Before(h.retryAt):
		return false, h.retryAt.Sub(now)
	}
	h.trying = true
	return true, 0
}

// wait is how long until a call may be made (0: now), without taking the
// trial.
func (h *health) wait(now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.down:
		return 0
	case h.trying:
		return h.timeout
	}
	return max(h.retryAt.Sub(now), 0)
}

// ok notes a call that succeeded. It reports whether the provider was
// down until now.
func (h *health) ok() (recovered bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	recovered = h.down
	h.down, h.failures, h.trying = false, 0, false
	return recovered
}

// cancelled notes a call given up by its caller, which says nothing of
// the provider: another may try.
func (h *health) cancelled() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.trying = false
}

// failed notes a failed call and returns how long nothing may call the
// provider.
func (h *health) failed(err error, now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures++
	wait := firstBackoff << min(h.failures-1, 10)
	wait = min(wait, maxBackoff)
	var pe *providers.Error
	if errors.As(err, &pe) && pe.RetryAfter > wait {
		wait = min(pe.RetryAfter, maxRetryAfter)
	}
	h.down, h.trying, h.retryAt = true, false, now.Add(wait)
	return wait
}

// up reports whether the last call succeeded (or none was made yet).
func (h *health) up() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.down
}

// advice says what an operator can do about a failed embedding call.
func advice(err error) string {
	var pe *providers.Error
	status := 0
	if errors.As(err, &pe) {
		status = pe.Status
	}
	switch kind := providers.Classify(err); {
	case status == http.StatusUnauthorized:
		return "the provider refused the API key: check the key of the provider embeddings.provider names (its api_key or api_key_env)"
	case status == http.StatusForbidden:
		return "the key may not use the model: check the key's project and permissions, or choose another embeddings.model"
	case status == http.StatusNotFound:
		return "the provider has no such model (or base_url is not its API): check embeddings.model (for Ollama: ollama pull <model>) and the provider's base_url"
	case kind == providers.KindRefused:
		return "the provider refused the request: check embeddings.model and embeddings.dimensions (a model that cannot shorten its vectors needs dimensions: 0); gateway doctor makes the same call"
	case kind == providers.KindRateLimited:
		return "rate-limited or out of quota: check the account's quota and billing; the gateway waits and tries again"
	case kind == providers.KindBroken:
		return "the answer could not be read: check that the provider's base_url is the embedding API and not a proxy's page"
	}
	return "the provider is unreachable, slow or failing: check its base_url and the network from this machine; the gateway waits and tries again"
}
