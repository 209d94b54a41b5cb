// Package metrics is the gateway's Prometheus instrumentation, served at
// /metrics. It owns its registry (no global state), and every method is safe
// on a nil *Metrics so packages and tests that do not care pass nil.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the gateway's collectors.
type Metrics struct {
	reg *prometheus.Registry

	events      *prometheus.CounterVec
	turns       *prometheus.CounterVec
	turnSeconds prometheus.Histogram
	resumed     *prometheus.CounterVec
	refused     *prometheus.CounterVec
	writeFails  prometheus.Counter

	wsConnections prometheus.Gauge
	wsFrames      *prometheus.CounterVec
	wsClosed      *prometheus.CounterVec

	circuitOpen *prometheus.GaugeVec
	componentUp *prometheus.GaugeVec

	// What turns spent, and budgets refused (spend.go).
	tokens, cost, unpriced, budgetRefusals *prometheus.CounterVec
	// Guardrails' decisions (guardrails.go).
	guardrails *prometheus.CounterVec

	// Registered by Cluster, on PostgreSQL only.
	leasesLost prometheus.Counter
	takenOver  prometheus.Counter
}

// New makes the collectors and registers them, with the Go runtime and
// process collectors, on a registry of its own.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_events_total", Help: "Session events emitted (and stored), by type.",
		}, []string{"type"}),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_turns_total", Help: "Agent turns ended, by outcome (answered, error, stopped, refused: by a budget before a further model call, interrupted: cut by a shutdown or a failed write, and resumed later).",
		}, []string{"outcome"}),
		turnSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_turn_duration_seconds",
			Help:    "Time from a user's input to the end of the agent turn it started (model and tools, not approval waits).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_limit_refusals_total",
			Help: "Connections and sessions refused by a limit, by limit (conns_per_ip, new_sessions_per_ip, max_live, new_per_minute).",
		}, []string{"limit"}),
		resumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_turns_resumed_total", Help: "Interrupted turns taken up again, by why they were cut (restart, storage).",
		}, []string{"reason"}),
		writeFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_storage_write_failures_total",
			Help: "Writes a session could not store (disk full, I/O error): each pauses the session's turn until storage works again.",
		}),
		wsConnections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_websocket_connections", Help: "Open /ws connections.",
		}),
		wsFrames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_websocket_frames_received_total", Help: "Client frames received on /ws, by type (invalid for undecodable ones).",
		}, []string{"type"}),
		wsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_websocket_closed_total", Help: "/ws connections closed, by reason.",
		}, []string{"reason"}),
		circuitOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_provider_circuit_open",
			Help: "1 while a provider's circuit breaker is open (it failed too many turns in a row and calls skip it), else 0.",
		}, []string{"provider"}),
		componentUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_component_up",
			Help: "What each listener, provider and MCP server, and on PostgreSQL the database, says of itself (/readyz): 1 up, 0.5 degraded, 0 down or still starting.",
		}, []string{"component", "kind"}),
		leasesLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_leases_lost_total",
			Help: "Conversations this replica stopped running because another replica took them over: its leases ran out unrenewed (the database unreachable for a lease time, or this replica paused).",
		}),
		takenOver: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_sessions_taken_over_total",
			Help: "Conversations with work left that this replica took over from a replica gone (their lease ran out): interrupted turns are run again.",
		}),
	}
	m.tokens, m.cost, m.unpriced, m.budgetRefusals = spendCounters()
	m.guardrails = guardrailCounter()
	m.reg.MustRegister(
		m.tokens, m.cost, m.unpriced, m.budgetRefusals, m.guardrails,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.events, m.turns, m.turnSeconds, m.resumed, m.refused, m.writeFails, m.wsConnections, m.wsFrames, m.wsClosed,
		m.circuitOpen, m.componentUp,
	)
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// GaugeFunc registers a gauge read at scrape time, e.g. the number of live
// sessions, so the hot path pays nothing for it.
func (m *Metrics) GaugeFunc(name, help string, f func() float64) {
	if m == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// CounterFunc registers a counter read at scrape time from a total kept
// elsewhere, which only grows.
func (m *Metrics) CounterFunc(name, help string, f func() float64) {
	if m == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
}

// Event counts one emitted session event.
func (m *Metrics) Event(typ string) {
	if m == nil {
		return
	}
	m.events.WithLabelValues(typ).Inc()
}

// TurnEnded records an agent turn.
func (m *Metrics) TurnEnded(outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.turns.WithLabelValues(outcome).Inc()
	m.turnSeconds.Observe(d.Seconds())
}

// TurnResumed counts an interrupted turn taken up again.
func (m *Metrics) TurnResumed(reason string) {
	if m == nil {
		return
	}
	m.resumed.WithLabelValues(reason).Inc()
}

// Refused counts a connection or session a limit refused.
func (m *Metrics) Refused(limit string) {
	if m == nil {
		return
	}
	m.refused.WithLabelValues(limit).Inc()
}

// WriteFailed counts a session write that storage refused.
func (m *Metrics) WriteFailed() {
	if m == nil {
		return
	}
	m.writeFails.Inc()
}

// Connected counts a /ws connection in; the returned func counts it out
// with the reason it closed.
func (m *Metrics) Connected() (closed func(reason string)) {
	if m == nil {
		return func(string) {}
	}
	m.wsConnections.Inc()
	return func(reason string) {
		m.wsConnections.Dec()
		m.wsClosed.WithLabelValues(reason).Inc()
	}
}

// Frame counts a client frame by type.
func (m *Metrics) Frame(typ string) {
	if m == nil {
		return
	}
	m.wsFrames.WithLabelValues(typ).Inc()
}

// Component sets how a listener, provider or MCP server is doing: 1 up,
// 0.5 degraded, 0 down or starting (switchboard_component_up).
func (m *Metrics) Component(name, kind string, up float64) {
	if m == nil {
		return
	}
	m.componentUp.WithLabelValues(name, kind).Set(up)
}

// ProviderCircuit sets whether a provider's circuit breaker is open. Its
// signature is what providers.NewCircuit takes as onChange.
func (m *Metrics) ProviderCircuit(provider string, open bool) {
	if m == nil {
		return
	}
	v := 0.0
	if open {
		v = 1
	}
	m.circuitOpen.WithLabelValues(provider).Set(v)
}
