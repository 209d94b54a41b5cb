package tools

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard"
)

// FuzzParsePlan: whatever the model sends, a plan that passes fits every
// channel (1..20 steps, titles of one line within bounds, known
// statuses), and a plan that passes once passes again unchanged.
func FuzzParsePlan(f *testing.F) {
	f.Add(`{"steps":[{"title":"Find the order","status":"done"},{"title":"Refund","status":"in_progress"}]}`)
	f.Add(`{"steps":[{"title":" a\n\tb ","status":"failed"}]}`)
	f.Add(`{"steps":[]}`)
	f.Add(`{"steps":null}`)
	f.Add(`{"steps":[{"title":"x","status":"pending","extra":1}]}`)
	f.Fuzz(func(t *testing.T, args string) {
		plan, err := ParsePlan(json.RawMessage(args))
		if err != nil {
			return
		}
		if n := len(plan.Steps); n < 1 || n > MaxPlanSteps {
			t.Fatalf("%d steps passed", n)
		}
		for _, st := range plan.Steps {
			if n := utf8.RuneCountInString(st.Title); n < 1 || n > MaxPlanTitle || strings.ContainsAny(st.Title, "\r\n") {
				t.Fatalf("title %q passed", st.Title)
			}
			switch st.Status {
			case switchboard.PlanPending, switchboard.PlanInProgress, switchboard.PlanDone, switchboard.PlanFailed:
			default:
				t.Fatalf("status %q passed", st.Status)
			}
		}
		b, _ := json.Marshal(plan)
		again, err := ParsePlan(b)
		if err != nil || len(again.Steps) != len(plan.Steps) {
			t.Fatalf("a valid plan did not pass again: %v", err)
		}
	})
}
