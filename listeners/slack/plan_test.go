package slack_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// planMessage is the bot's message in the thread that shows the plan: a
// stream in plan display, or a posted checklist.
func planMessage(msgs []slacktest.Message) (slacktest.Message, bool) {
	for _, m := range msgs {
		if m.TaskDisplayMode == "plan" || strings.HasPrefix(m.Text, "Plan · ") {
			return m, true
		}
	}
	return slacktest.Message{}, false
}

// The plan in Slack: where the place streams natively, a stream of its
// own in Slack's plan display, a task a step and a task the calculator's
// run, updated as the plan changes and stopped as the turn ends; where it
// does not, a Block Kit checklist edited in place. Either way the
// calculator is a task of the plan, not a tool line under the answer.
func TestPlanInSlack(t *testing.T) {
	for _, mode := range streamModes {
		t.Run(mode.name, func(t *testing.T) {
			r := newModeRig(t, mode.native, nil)
			r.gw.LLM.Push(openaitest.PlanTurn("Refunded nothing, sorry.")...)
			ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "refund my order"})
			r.send(ev)
			root := ev["ts"].(string)
			msgs := r.answered("C1", root, "Refunded nothing, sorry.")
			plan, ok := planMessage(msgs)
			if !ok {
				t.Fatalf("no plan in the thread:%s", shown(msgs))
			}
			if mode.native {
				want := []slacktest.Task{
					{ID: "step_1", Title: "Find the order", Status: "complete"},
					{ID: "step_2", Title: "Refund the payment", Status: "error"},
					{ID: "step_3", Title: "Tell the customer", Status: "in_progress"},
					{ID: "call_calc_1", Title: "calculator", Status: "complete"},
				}
				if plan.Streaming || plan.PlanTitle != "Plan · 1/3 done" || fmt.Sprint(plan.Tasks) != fmt.Sprint(want) {
					t.Fatalf("the plan's stream: streaming %v, title %q, tasks %+v\nwant stopped, \"Plan · 1/3 done\", %+v", plan.Streaming, plan.PlanTitle, plan.Tasks, want)
				}
				if n := len(r.fake.Requests("chat.appendStream")); n == 0 {
					t.Fatal("the plan was never appended to")
				}
			} else {
				blocks := string(plan.Blocks)
				for _, want := range []string{"Plan · 1/3 done", "1. :white_check_mark: Find the order", "2. :x: Refund the payment", "3. :hourglass_flowing_sand: Tell the customer", ":white_check_mark: `calculator`"} {
					if !strings.Contains(blocks, want) {
						t.Errorf("the checklist lacks %q: %s", want, blocks)
					}
				}
				if plan.Edits() < 2 { // the calculator's run, the second plan
					t.Errorf("the checklist was edited %d times, want it edited in place as the plan changed", plan.Edits())
				}
			}
			plans := 0
			for _, m := range msgs {
				if _, ok := planMessage([]slacktest.Message{m}); ok {
					plans++
				}
				if m.TS != plan.TS && strings.Contains(m.Text+string(m.Blocks), "calculator") {
					t.Errorf("the calculator is shown outside the plan: %q %s", m.Text, m.Blocks)
				}
			}
			if plans != 1 {
				t.Fatalf("%d plan messages, want one updated in place:%s", plans, shown(msgs))
			}
		})
	}
}

// A plan at its bounds (20 steps of 120 characters that mrkdwn must
// escape) is a checklist Slack takes: the fake validates every block.
func TestPlanAtItsBoundsFitsSlack(t *testing.T) {
	r := newModeRig(t, false, nil)
	var steps []string
	for range 20 {
		steps = append(steps, `{"title":"`+strings.Repeat("<&>", 40)+`","status":"in_progress"}`)
	}
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_plan", Name: "plan", Args: `{"steps":[` + strings.Join(steps, ",") + `]}`}}},
		openaitest.Reply{Text: []string{"Planned."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "plan big"})
	r.send(ev)
	msgs := r.answered("C1", ev["ts"].(string), "Planned.")
	plan, ok := planMessage(msgs)
	if !ok || len(plan.Blocks) == 0 {
		t.Fatalf("no checklist in blocks:%s", shown(msgs))
	}
	if err := slacktest.ValidateBlocks(plan.Blocks); err != nil {
		t.Fatal(err)
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(plan.Blocks, &blocks); err != nil || len(blocks) > 50 {
		t.Fatalf("%d blocks (%v)", len(blocks), err)
	}
	if n := strings.Count(string(plan.Blocks), ":hourglass_flowing_sand:"); n != 20 {
		t.Fatalf("%d steps shown, want 20", n)
	}
}
