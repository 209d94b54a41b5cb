package discord_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// planMessage is the bot's message in the thread that shows the plan.
func planMessage(msgs []discordtest.Message) (discordtest.Message, int) {
	var plan discordtest.Message
	n := 0
	for _, m := range msgs {
		if strings.Contains(string(m.Components)+string(m.Embeds), "Plan · ") {
			plan = m
			n++
		}
	}
	return plan, n
}

// planTurn runs openaitest.PlanTurn in a new thread and returns the
// bot's messages there once it is answered.
func (r *rig) planTurn() []discordtest.Message {
	r.t.Helper()
	r.gw.LLM.Push(openaitest.PlanTurn("Refunded nothing, sorry.")...)
	_, thread := r.mention(alice, "refund my order")
	r.eventually("the answer", func() bool {
		return strings.Contains(allContent(r.botMessages(thread)), "Refunded nothing, sorry.")
	})
	return r.botMessages(thread)
}

// The plan in Discord: a Components V2 container edited in place as the
// plan changes, the calculator's run a task of it and no tool line under
// the answer; Discord's limits checked by the fake on every send and
// edit.
func TestPlanInDiscord(t *testing.T) {
	r := newRig(t, nil)
	msgs := r.planTurn()
	plan, n := planMessage(msgs)
	if n != 1 {
		t.Fatalf("%d plan messages, want one edited in place: %s", n, allContent(msgs))
	}
	if plan.Flags&discordtest.FlagIsComponentsV2 == 0 || plan.Content != "" || len(plan.Embeds) > 2 {
		t.Fatalf("the plan is not a V2 message: flags %d, content %q, embeds %s", plan.Flags, plan.Content, plan.Embeds)
	}
	comps := string(plan.Components)
	for _, want := range []string{`"type":17`, "Plan · 1/3 done", "1. ✅ Find the order", "2. ❌ Refund the payment", "3. ⏳ **Tell the customer**", "✅ `calculator`"} {
		if !strings.Contains(comps, want) {
			t.Errorf("the container lacks %q: %s", want, comps)
		}
	}
	if plan.Edits() < 2 {
		t.Errorf("the plan was edited %d times, want it edited in place as it changed", plan.Edits())
	}
	for _, m := range msgs {
		if m.ID != plan.ID && strings.Contains(m.Content, "calculator") {
			t.Errorf("the calculator is shown outside the plan: %q", m.Content)
		}
	}
	if err := discordtest.ValidateMessage(json.RawMessage(`{"flags":32768,"components":` + comps + `}`)); err != nil {
		t.Fatal(err)
	}
}

// Where Discord refuses Components V2, plans are embeds, edited in place.
func TestPlanInDiscordWithoutComponentsV2(t *testing.T) {
	r := newRig(t, nil)
	r.fake.FailNext(discordtest.RouteCreateMessage, 400,
		`{"code":50035,"message":"Invalid Form Body","errors":{"flags":{"_errors":[{"code":"MESSAGE_FLAGS_INVALID","message":"Invalid flags"}]}}}`)
	msgs := r.planTurn()
	plan, n := planMessage(msgs)
	if n != 1 || plan.Flags&discordtest.FlagIsComponentsV2 != 0 {
		t.Fatalf("%d plan messages, flags %d: %s", n, plan.Flags, allContent(msgs))
	}
	embeds := string(plan.Embeds)
	for _, want := range []string{`"title":"Plan · 1/3 done"`, "2. ❌ Refund the payment", "✅ `calculator`"} {
		if !strings.Contains(embeds, want) {
			t.Errorf("the embed lacks %q: %s", want, embeds)
		}
	}
}

// A plan at its bounds (20 steps of 120 characters Discord Markdown must
// escape, ten tool runs) is a container Discord takes.
func TestPlanAtItsBoundsFitsDiscord(t *testing.T) {
	r := newRig(t, nil)
	var steps []string
	for range 20 {
		steps = append(steps, `{"title":"`+strings.Repeat(`*_~`, 40)+`","status":"in_progress"}`)
	}
	calls := []openaitest.ToolCall{{ID: "call_plan", Name: "plan", Args: `{"steps":[` + strings.Join(steps, ",") + `]}`}}
	for i := range 12 {
		calls = append(calls, openaitest.ToolCall{ID: "call_calc_" + string(rune('a'+i)), Name: "calculator", Args: `{"expression":"1+1"}`})
	}
	r.gw.LLM.Push(openaitest.Reply{ToolCalls: calls}, openaitest.Reply{Text: []string{"Planned."}})
	_, thread := r.mention(alice, "plan big")
	r.eventually("the answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Planned.") })
	plan, n := planMessage(r.botMessages(thread))
	if n != 1 || plan.Flags&discordtest.FlagIsComponentsV2 == 0 {
		t.Fatalf("%d plans, flags %d", n, plan.Flags)
	}
	if c := string(plan.Components); strings.Count(c, "⏳") < 10 || strings.Count(c, "calculator") != 10 {
		t.Fatalf("the container shows %d steps under way and %d tool runs: %s", strings.Count(c, "⏳"), strings.Count(c, "calculator"), c)
	}
}
