package openai

import (
	"net/http"
	"strconv"

	"github.com/switchboard-gw/switchboard"
)

// The conversations a key's author may continue, for clients that let
// people go back to one: GET /v1/sessions, an extension of this gateway
// (OpenAI's API has no such list), in the list shape of /v1/models.

// sessionList is GET /v1/sessions' answer.
type sessionList struct {
	Object string        `json:"object"`
	Data   []sessionItem `json:"data"`
}

// sessionItem is one stored session: the id to send as
// X-Switchboard-Session, its guide (the model to send), the key author's
// role there, and when it was created and last active (Unix seconds).
type sessionItem struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Model     string `json:"model"`
	Role      string `json:"role"`
	CreatedAt int64  `json:"created_at"`
	ActiveAt  int64  `json:"active_at"`
}

// maxListed bounds limit.
const maxListed = 100

// sessions lists the stored sessions the key's author is a member of,
// the most recently active first (limit: 20 by default, at most 100),
// whose guide the key may use.
func (h *Handler) sessions(w http.ResponseWriter, r *http.Request) {
	k := keyOf(r)
	limit := 20
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListed {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "limit", "invalid_request",
				"limit must be a whole number from 1 to "+strconv.Itoa(maxListed)+".")
			return
		}
		limit = n
	}
	author := switchboard.Author{Channel: Channel, ID: k.Name, Name: k.Name}
	found, err := h.mgr.SessionsOf(r.Context(), author, limit)
	if err != nil {
		h.sessionError(w, err)
		return
	}
	list := sessionList{Object: "list", Data: []sessionItem{}}
	for _, s := range found {
		if k.allows(s.Guide) {
			list.Data = append(list.Data, sessionItem{ID: s.ID, Object: "switchboard.session", Model: s.Guide, Role: s.Role,
				CreatedAt: s.CreatedAt.Unix(), ActiveAt: s.ActiveAt.Unix()})
		}
	}
	writeJSON(w, http.StatusOK, list)
}
