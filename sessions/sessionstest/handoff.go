package sessionstest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// WithHandoffGuides, as NewTuned's tune, runs the manager with two guides
// for the tests of a handoff: assistant (the default), which hands off to
// billing, and billing. Script the model with Handoff to pass the
// conversation.
func WithHandoffGuides(t testing.TB) func(*sessions.Config) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"assistant.md": "---\ndescription: Front desk\nhandoffs: [billing]\n---\nYou are the front desk.\n",
		"billing.md":   "---\ndescription: Invoices\n---\nYou are billing.\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	catalog, err := guides.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *sessions.Config) { c.Guides, c.DefaultGuide = catalog, "assistant" }
}

// Handoff is a model's reply that passes the conversation to guide.
func Handoff(guide, reason string) openaitest.Reply {
	args, _ := json.Marshal(map[string]string{"guide": guide, "reason": reason}) // strings: cannot fail
	return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_handoff", Name: "handoff", Args: string(args)}}}
}
