package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchboard-gw/switchboard/health"
)

// /readyz tells a client on this machine why a part is down and what to
// do; a probe from elsewhere gets the states alone, as /metrics is kept
// from it.
func TestReadyzKeepsReasonsOnThisMachine(t *testing.T) {
	reg := health.New(nil)
	reg.Add("slack", "listener", true).Down("Slack refused the bot token in the environment variable SLACK_BOT_TOKEN", "put the bot token there")
	for _, tc := range []struct {
		remote  string
		reasons bool
	}{{"127.0.0.1:5000", true}, {"[::1]:5000", true}, {"203.0.113.7:5000", false}} {
		req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		readyz(reg)(rec, req)
		var body readiness
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusServiceUnavailable || body.Ready || len(body.Parts) != 1 || body.Parts[0].State != health.Down {
			t.Fatalf("from %s: %d %+v", tc.remote, rec.Code, body)
		}
		if got := body.Parts[0].Reason != "" && body.Parts[0].Fix != ""; got != tc.reasons {
			t.Errorf("from %s: reasons shown %v, want %v: %+v", tc.remote, got, tc.reasons, body.Parts[0])
		}
	}
}
