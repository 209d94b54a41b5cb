package stdin

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// A plan in the terminal: numbered lines with a status mark, printed
// whole each time it changes; neither the plan's call nor its result is
// printed, the calculator's run is.
func TestPlanInTheTerminal(t *testing.T) {
	gw := newGateway(t)
	gw.LLM.Push(openaitest.PlanTurn("Refunded nothing, sorry.")...)
	tm := startTerm(t, gw.Manager)
	tm.send("refund my order")
	tm.expect("  Plan (0/3 done)\n  1. [>] Find the order\n  2. [ ] Refund the payment\n  3. [ ] Tell the customer\n")
	tm.expect("  → calculator")
	tm.expect("  Plan (1/3 done)\n  1. [x] Find the order\n  2. [!] Refund the payment\n  3. [>] Tell the customer\n")
	tm.expect("Refunded nothing, sorry.")
	if out := tm.out.String(); strings.Contains(out, "→ plan") || strings.Contains(out, "Plan updated") {
		t.Errorf("the plan's call or result is printed:\n%s", out)
	}
	tm.quit()
}

func TestPlanTextMarksEveryStatus(t *testing.T) {
	got := planText(&switchboard.PlanData{Steps: []switchboard.PlanStep{
		{Title: "a", Status: switchboard.PlanPending}, {Title: "b", Status: switchboard.PlanInProgress},
		{Title: "c", Status: switchboard.PlanDone}, {Title: "d", Status: switchboard.PlanFailed}, {Title: "e", Status: "later"},
	}})
	want := "  Plan (1/5 done)\n  1. [ ] a\n  2. [>] b\n  3. [x] c\n  4. [!] d\n  5. [?] e\n"
	if got != want {
		t.Fatalf("planText = %q, want %q", got, want)
	}
}
