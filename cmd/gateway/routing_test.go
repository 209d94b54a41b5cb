package main

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// The doctor lists the routing rules in order, with the router and the
// default, and flags what no conversation can reach.
func TestDoctorRouting(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", `routing:
  rules:
    - { channel: slack, place: C_SUPPORT, guide: support }
    - { channel: slack, guide: assistant }
    - { channel: slack, place: C_FINANCE, guide: support }
    - { match: '(?i)refund', guide: support }
  router: assistant
  candidates: [support]
  router_timeout: 2s
`)
	out, _ := s.doctor(t, nil)
	text := wantRow(t, out, "routing", "WARN",
		"rules[0]: channel slack, place C_SUPPORT → support",
		"rules[1]: channel slack → assistant",
		"rules[2]: channel slack, place C_FINANCE → support  (unreachable: rule 1 (guide assistant)",
		"rules[3]: match (?i)refund → support",
		"then the router assistant picks (within 2s)",
		"else assistant")
	if strings.Contains(text, "rules[3]: match (?i)refund → support  (unreachable") {
		t.Errorf("a reachable rule is flagged:\n%s", text)
	}

	// No rules: OK, and says what decides.
	out, _ = newDoctorSetup(t, "  - name: main\n    kind: demo", "").doctor(t, nil)
	wantRow(t, out, "routing", "OK", "no rules", "guides.default (assistant)")
}

// A rule naming no guide is a PROBLEM for the doctor and refuses start-up.
func TestRoutingToAnUnknownGuideIsRefused(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "routing:\n  rules:\n    - { place: C1, guide: billing }\n")
	out, err := s.doctor(t, nil)
	if err == nil {
		t.Fatalf("doctor passed a rule naming no guide:\n%s", out)
	}
	wantRow(t, out, "routing", "PROBLEM", `routing.rules[0].guide: no guide "billing"`, "assistant, support")
}

// The gateway routes a new conversation by its channel: the terminal's
// first message goes to the guide a stdin rule names, and /guide says so.
// A rule naming no guide stops start-up, saying which.
func TestRoutingInTheGateway(t *testing.T) {
	g := newGateway(t, "  - name: main\n    kind: demo", "routing:\n  rules:\n    - { channel: stdin, match: '(?i)widget', guide: support }\n")
	out, logs, err := g.run("my widget is broken\n/guide\n")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, logs)
	}
	if !strings.Contains(out, "Guide: support — Answers customer questions for Acme Widgets") {
		t.Fatalf("the terminal's conversation is not support's:\n%s\n%s", out, logs)
	}

	bad := newGateway(t, "  - name: main\n    kind: demo", "routing:\n  rules:\n    - { channel: stdin, guide: billing }\n")
	if _, logs, err := bad.run("hello\n"); err == nil || !strings.Contains(logs, `routing.rules[0].guide: no guide "billing"`) {
		t.Fatalf("started with a rule naming no guide: %v\n%s", err, logs)
	}
}

// SIGHUP puts new routing rules in force for the next new conversation;
// rules naming no guide refuse the reload and keep the running ones.
func TestSIGHUPSwapsTheRouting(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	g, _ := editableGateway(t, llm)
	s := g.serve([]string{"TEST_OPENAI_KEY=k"})
	// support answers a new conversation about a widget, or not.
	support := func(when string, want bool) {
		t.Helper()
		wsTurn(t, wsClient(t, s), "m1", "my widget is broken")
		if p := lastSystemPrompt(t, llm); strings.Contains(p, "Acme Widgets") != want {
			t.Fatalf("%s, a new conversation about a widget got %q", when, p)
		}
	}
	support("before any rule", false)

	replaceIn(t, g.config, "guides:\n", "routing:\n  rules:\n    - { match: '(?i)widget', guide: support }\nguides:\n")
	s.hup()
	s.waitReloads("config", "ok", 1)
	support("after the reload", true)

	replaceIn(t, g.config, "guide: support", "guide: billing")
	s.hup()
	s.waitReloads("config", "error", 1)
	support("after a refused reload", true)
	s.stop()
	if logs := s.logs.String(); !strings.Contains(logs, `routing.rules[0].guide: no guide \"billing\"`) {
		t.Fatalf("the refused reload does not name the rule:\n%s", logs)
	}
}
