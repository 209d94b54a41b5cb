package sessions_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// planningGuide asks before every tool but the calculator: the plan runs
// without approval all the same.
const planningGuide = `---
name: planning
tools: [plan, calculator]
approval: { default: ask, auto: [calculator] }
---
You plan your work.
`

// withPlanningGuide makes the planning guide the default.
func withPlanningGuide(t *testing.T) option {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "planning.md"), []byte(planningGuide), 0o644); err != nil {
		t.Fatal(err)
	}
	catalog, err := guides.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *sessions.Config) { c.Guides, c.DefaultGuide = catalog, "planning" }
}

func TestPlanToolShowsThePlanWithoutApproval(t *testing.T) {
	h := newHarness(t, withPlanningGuide(t))
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{
			{ID: "p1", Name: "plan", Args: `{"steps":[{"title":"Add  the\nnumbers","status":"in_progress"},{"title":"Answer","status":"pending"}]}`},
			{ID: "c1", Name: "calculator", Args: `{"expression":"2+2"}`},
		}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{
			{ID: "p2", Name: "plan", Args: `{"steps":[{"title":"Add the numbers","status":"done"},{"title":"Answer","status":"done"}]}`},
		}},
		openaitest.Reply{Text: []string{"4"}},
	)
	c := h.newSession(alice)
	c.say("2+2, with a plan")
	first := c.until(switchboard.EventPlan, nil).(*switchboard.PlanData)
	want := []switchboard.PlanStep{{Title: "Add the numbers", Status: switchboard.PlanInProgress}, {Title: "Answer", Status: switchboard.PlanPending}}
	if !slices.Equal(first.Steps, want) {
		t.Fatalf("first plan = %+v, want %+v (a title is one line)", first.Steps, want)
	}
	second := c.until(switchboard.EventPlan, nil).(*switchboard.PlanData)
	if second.Steps[0].Status != switchboard.PlanDone || second.Steps[1].Status != switchboard.PlanDone {
		t.Fatalf("second plan = %+v", second.Steps)
	}
	if got := c.reply().Content; got != "4" {
		t.Fatalf("reply = %q", got)
	}
	c.idle()
	if slices.Contains(c.types(), string(switchboard.EventConfirmationRequest)) {
		t.Fatalf("the plan asked for approval: %v", c.types())
	}
	// The plan is shown before the calculator runs: its run is a task
	// of the plan.
	order := strings.Join(c.types(), " ")
	if i, j := strings.Index(order, "plan"), strings.Index(order, "tool_response"); i < 0 || j < i {
		t.Fatalf("events %s: the plan must come before the tools' results", order)
	}
	// The model read a short result.
	req := h.llm.Requests()[1]
	var result string
	for _, m := range req.Messages {
		if m.ToolCallID == "p1" {
			result = openaitest.Text(m.Content)
		}
	}
	if result != "Plan updated." {
		t.Fatalf("the model read %q for the plan", result)
	}
	offered := false
	for _, tool := range req.Tools {
		offered = offered || tool.Function.Name == "plan"
	}
	if !offered {
		t.Fatal("the plan tool is not offered to a guide that lists it")
	}

	// Stored: a listener attaching from the start sees both plans again,
	// after a restart too.
	h.restart()
	again := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice})
	replayed := again.until(switchboard.EventPlan, nil).(*switchboard.PlanData)
	if !slices.Equal(replayed.Steps, want) {
		t.Fatalf("replayed plan = %+v", replayed.Steps)
	}
	if p := again.until(switchboard.EventPlan, nil).(*switchboard.PlanData); p.Steps[0].Status != switchboard.PlanDone {
		t.Fatalf("second replayed plan = %+v", p.Steps)
	}
}

func TestPlanToolRefusesABadPlan(t *testing.T) {
	long := strings.Repeat("x", 121)
	var many []string
	for range 21 {
		many = append(many, `{"title":"s","status":"pending"}`)
	}
	for name, tt := range map[string]struct{ args, want string }{
		"no steps":       {`{"steps":[]}`, "steps"},
		"too many":       {`{"steps":[` + strings.Join(many, ",") + `]}`, "steps"},
		"empty title":    {`{"steps":[{"title":"   ","status":"pending"}]}`, "title"},
		"long title":     {`{"steps":[{"title":"` + long + `","status":"pending"}]}`, "title"},
		"unknown status": {`{"steps":[{"title":"a","status":"maybe"}]}`, "status"},
		"not an object":  {`[1]`, "invalid arguments"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, withPlanningGuide(t))
			h.llm.Push(
				openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "p1", Name: "plan", Args: tt.args}}},
				openaitest.Reply{Text: []string{"Sorry."}},
			)
			c := h.newSession(alice)
			c.say("plan something")
			res := c.until(switchboard.EventToolResponse, nil).(*switchboard.ToolResponseData)
			if !res.IsError || !strings.Contains(res.ContentPreview, tt.want) {
				t.Fatalf("result = %+v, want an error naming %q", res, tt.want)
			}
			c.idle()
			if slices.Contains(c.types(), string(switchboard.EventPlan)) {
				t.Fatalf("a bad plan was shown: %v", c.types())
			}
			// The model read the error and what to fix.
			for _, m := range lastRequest(t, h.llm).Messages {
				if m.ToolCallID == "p1" && !strings.Contains(openaitest.Text(m.Content), tt.want) {
					t.Fatalf("the model read %q", openaitest.Text(m.Content))
				}
			}
		})
	}
}

func TestPlanToolNotOfferedUnlessListed(t *testing.T) {
	h := newHarness(t) // the tester guide does not list plan
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "p1", Name: "plan", Args: `{"steps":[{"title":"a","status":"pending"}]}`}}},
		openaitest.Reply{Text: []string{"ok"}},
	)
	c := h.newSession(alice)
	c.say("plan")
	res := c.until(switchboard.EventToolResponse, nil).(*switchboard.ToolResponseData)
	if !res.IsError || !strings.Contains(res.ContentPreview, "unknown tool") {
		t.Fatalf("result = %+v", res)
	}
	c.idle()
	if slices.Contains(c.types(), string(switchboard.EventPlan)) {
		t.Fatal("a guide without the plan tool showed a plan")
	}
}
