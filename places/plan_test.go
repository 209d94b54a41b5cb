package places

import (
	"fmt"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// A plan takes its versions and, once it has steps, the turn's tool runs
// as tasks: the plan tool's and a card's runs are not tasks, a replayed
// call is one task, and only the latest MaxPlanTasks are kept.
func TestShownPlanTakesStepsAndTasks(t *testing.T) {
	var p ShownPlan
	calc := &switchboard.ToolCallData{ID: "c0", Name: "calculator"}
	if p.Take(calc) || len(p.Tasks) != 0 {
		t.Fatal("a tool run before any plan became a task")
	}
	steps := []switchboard.PlanStep{{Title: "a", Status: switchboard.PlanDone}, {Title: "b", Status: switchboard.PlanPending}}
	if !p.Take(&switchboard.PlanData{Steps: steps}) || p.Heading() != "Plan · 1/2 done" {
		t.Fatalf("plan = %+v, heading %q", p, p.Heading())
	}
	for _, ev := range []any{&switchboard.ToolCallData{ID: "p", Name: "plan"}, &switchboard.ToolCallData{ID: "u", Name: "present"},
		&switchboard.ToolResponseData{ToolCallID: "p", Name: "plan"}, &switchboard.StateData{State: switchboard.StateIdle}} {
		if p.Take(ev) {
			t.Errorf("%T %+v changed the plan", ev, ev)
		}
	}
	if !p.Take(calc) || !p.Take(calc) || len(p.Tasks) != 1 || p.Tasks[0].Status != switchboard.PlanInProgress {
		t.Fatalf("tasks = %+v, want the calculator in progress once", p.Tasks)
	}
	if !p.Take(&switchboard.ToolResponseData{ToolCallID: "c0", Name: "calculator", IsError: true}) || p.Tasks[0].Status != switchboard.PlanFailed {
		t.Fatalf("tasks = %+v, want the calculator failed", p.Tasks)
	}
	for i := 1; i <= MaxPlanTasks; i++ {
		p.Take(&switchboard.ToolCallData{ID: fmt.Sprint("c", i), Name: "calculator"})
	}
	if len(p.Tasks) != MaxPlanTasks || p.Tasks[0].ID != "c1" {
		t.Fatalf("%d tasks from %s, want the latest %d", len(p.Tasks), p.Tasks[0].ID, MaxPlanTasks)
	}
}
