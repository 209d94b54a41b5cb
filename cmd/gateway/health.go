package main

// Health: what each listener, provider and MCP server says of itself, on
// GET /readyz, on switchboard_component_up, and through `gateway status`.
// /healthz stays a liveness check (the process answers); /readyz says
// whether the gateway can do its job: it is not ready while a configured
// listener is down or still connecting. A provider or an MCP server that
// is down degrades the gateway without making it unready: the guides that
// use it fail over or tell their users, the others go on.

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/switchboard-gw/switchboard/health"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/tools/mcp"
)

// newHealth is the registry of the gateway's parts; every change is set
// on switchboard_component_up.
func newHealth(mets *metrics.Metrics) *health.Registry {
	return health.New(func(s health.Status) {
		v := 0.0
		switch s.State {
		case health.Up:
			v = 1
		case health.Degraded:
			v = 0.5
		}
		mets.Component(s.Name, s.Kind, v)
	})
}

// readiness is GET /readyz's answer.
type readiness struct {
	Ready bool            `json:"ready"`
	Parts []health.Status `json:"components"`
}

// readyz answers GET /readyz: 200 with every part's status when the
// gateway is ready, 503 with the same when not.
func readyz(reg *health.Registry) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		parts := reg.Snapshot()
		body := readiness{Ready: health.Ready(parts), Parts: parts}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !body.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(body)
	}
}

// followMCP reports each MCP server's state as it changes, until ctx
// ends: a server that keeps failing is down, with its last error.
func followMCP(ctx context.Context, m *mcp.Manager, reg *health.Registry) {
	reporters := map[string]*health.Reporter{}
	for _, name := range m.Servers() {
		reporters[name] = reg.Add("mcp "+name, "mcp", false)
	}
	for {
		watch := m.Watch()
		for _, st := range m.Status() {
			p := reporters[st.Name]
			switch st.State {
			case mcp.StateRunning:
				p.Up()
			case mcp.StateRestarting:
				p.Down(st.LastError, "it is started again with backoff; `gateway doctor` checks it and says why it stops")
			case mcp.StateStopped:
				p.Down("stopped", "")
			}
		}
		select {
		case <-watch:
		case <-ctx.Done():
			return
		}
	}
}
