package sessionstest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/sessions"
)

// GuardedGuide blocks a codename in its answers and passwords in what
// people send (docs/guardrails.md): a guide for the tests of what each
// channel shows of a guardrail's decision.
const GuardedGuide = `---
name: guarded
description: Keeps a secret
guardrails:
  input:
    block:
      - { name: password, pattern: '(?i)password\s*[:=]', message: Please never send passwords here. }
  output:
    block:
      - { name: codename, pattern: 'PROJECT [A-Z]{5}', message: That answer cannot be shown. }
---
You keep a secret.
`

// GuardedMessage is what GuardedGuide says instead of a blocked answer.
const GuardedMessage = "That answer cannot be shown."

// OnlyGuide makes the manager's guides the one guide body, its default:
// for NewTuned.
func OnlyGuide(t testing.TB, name, body string) func(*sessions.Config) {
	return func(cfg *sessions.Config) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		catalog, err := guides.LoadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Guides, cfg.DefaultGuide = catalog, name
	}
}
