package places

import (
	"fmt"
	"slices"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/tools"
)

// ShownPlan is the plan a place shows for the turn under way (the plan
// tool's EventPlan), with the turn's tool runs as tasks under it. A chat
// app keeps one per place, from the turn's first plan to its end (state
// idle), and renders it natively each time it changes: a Slack plan, a
// Discord container, edited in place.
type ShownPlan struct {
	Steps []switchboard.PlanStep
	Tasks []PlanTask
}

// PlanTask is a tool run shown as a task of the plan: its call id, the
// tool's name, and its status (switchboard.PlanInProgress, PlanDone or
// PlanFailed).
type PlanTask struct {
	ID, Name, Status string
}

// MaxPlanTasks is how many tool runs a plan shows, the latest: a turn
// may run many tools, a checklist stays short.
const MaxPlanTasks = 10

// Task takes what a tool event (*switchboard.ToolCallData or
// *switchboard.ToolResponseData) says of a run, and reports whether it is
// a task of the plan: a run of the plan tool itself is not, nor a card's
// (tools.ShownAsCard); a call replayed is noted once.
func (p *ShownPlan) Task(ev any) bool {
	switch d := ev.(type) {
	case *switchboard.ToolCallData:
		if tools.ShownAsCard(d.Name) {
			return false
		}
		if !slices.ContainsFunc(p.Tasks, func(t PlanTask) bool { return t.ID == d.ID }) {
			p.Tasks = append(p.Tasks, PlanTask{ID: d.ID, Name: d.Name, Status: switchboard.PlanInProgress})
			if len(p.Tasks) > MaxPlanTasks {
				p.Tasks = slices.Delete(p.Tasks, 0, len(p.Tasks)-MaxPlanTasks)
			}
		}
		return true
	case *switchboard.ToolResponseData:
		if tools.ShownAsCard(d.Name) {
			return false
		}
		i := slices.IndexFunc(p.Tasks, func(t PlanTask) bool { return t.ID == d.ToolCallID })
		if i < 0 {
			return true // called before the plan, or no longer shown
		}
		p.Tasks[i].Status = switchboard.PlanDone
		if d.IsError {
			p.Tasks[i].Status = switchboard.PlanFailed
		}
		return true
	}
	return false
}

// Take notes what an event says of the turn's plan, and reports whether
// the plan shown changes: a new version (*switchboard.PlanData) replaces
// its steps; once there are steps, a tool run is a task of it (Task).
func (p *ShownPlan) Take(ev any) bool {
	if d, ok := ev.(*switchboard.PlanData); ok {
		p.Steps = d.Steps
		return true
	}
	return len(p.Steps) > 0 && p.Task(ev)
}

// Heading is the plan's title with its progress: "Plan · 1/3 done".
func (p *ShownPlan) Heading() string {
	done := 0
	for _, st := range p.Steps {
		if st.Status == switchboard.PlanDone {
			done++
		}
	}
	return fmt.Sprintf("Plan · %d/%d done", done, len(p.Steps))
}
