package sessionstest

import (
	"testing"

	"github.com/switchboard-gw/switchboard/routing"
	"github.com/switchboard-gw/switchboard/sessions"
)

// Routed routes new conversations by rules, then the manager's default
// guide (docs/routing.md): for NewTuned.
func Routed(t testing.TB, rules ...routing.RuleSpec) func(*sessions.Config) {
	return func(cfg *sessions.Config) {
		table, err := routing.New(rules, nil, cfg.DefaultGuide)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Router = table
	}
}
