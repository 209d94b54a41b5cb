package metrics

import "github.com/prometheus/client_golang/prometheus"

// ReloadCounter registers switchboard_config_reloads_total and returns
// the function that counts one reload: what was reloaded (config, guides)
// and how it went (ok; error: nothing, or for guides not every file, was
// taken). The gateway calls it once, where reloads are wired; every
// combination is there from the start at 0, so an alert on errors has a
// series to watch before the first one.
func (m *Metrics) ReloadCounter() func(what, result string) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_config_reloads_total",
		Help: "Reloads of config.yaml (SIGHUP) and of the guides (their files changed, or SIGHUP), by what and result (ok, error: kept what was running, the log says why).",
	}, []string{"what", "result"})
	for _, what := range []string{"config", "guides"} {
		for _, result := range []string{"ok", "error"} {
			c.WithLabelValues(what, result)
		}
	}
	m.reg.MustRegister(c)
	return func(what, result string) { c.WithLabelValues(what, result).Inc() }
}

// RemoveComponent deletes a part's switchboard_component_up series: a
// provider or MCP server a reload took out.
func (m *Metrics) RemoveComponent(name, kind string) {
	if m == nil {
		return
	}
	m.componentUp.DeleteLabelValues(name, kind)
}
