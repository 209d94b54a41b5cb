package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-gw/switchboard"
)

// PlanTool is the name of the built-in tool with which the model shows
// its plan for the work under way: each call replaces the plan, which
// every channel shows natively (a Slack plan, a Discord container, a
// checklist). Like a card, the plan is its output (ShownAsCard): a
// channel shows neither its call nor its result.
const PlanTool = "plan"

// The bounds of a plan: the steps a person can follow at a glance, and
// titles that fit one line of every channel's checklist (Slack's task
// titles, a Discord text display).
const (
	MaxPlanSteps = 20
	MaxPlanTitle = 120
)

// planResult is what the model reads after a call: short, the plan is
// for people.
const planResult = "Plan updated."

// planSchema is what the providers offer the model; ParsePlan checks the
// same bounds again, so a plan that reaches a channel fits it whoever
// sent it.
var planSchema = fmt.Sprintf(`{
	"type": "object",
	"properties": {
		"steps": {
			"type": "array", "minItems": 1, "maxItems": %d,
			"description": "The whole plan, in order; each call replaces the last.",
			"items": {
				"type": "object",
				"properties": {
					"title": {"type": "string", "minLength": 1, "maxLength": %d, "description": "What the step does, in a few words"},
					"status": {"type": "string", "enum": ["pending", "in_progress", "done", "failed"]}
				},
				"required": ["title", "status"],
				"additionalProperties": false
			}
		}
	},
	"required": ["steps"],
	"additionalProperties": false
}`, MaxPlanSteps, MaxPlanTitle)

// Plan is the plan tool. Its result carries the plan (Result.Plan), which
// the session shows as an EventPlan.
func Plan() Tool {
	return Tool{
		Name: PlanTool,
		Description: "Shows the user your plan for work of several steps, as a checklist in their chat app, and updates it as you go. " +
			"Send the whole plan each time (it replaces the last): every step with a short title and its status " +
			"(pending, in_progress, done, failed). Call it before you start, then again whenever a step starts, ends or fails. " +
			"Do not use it for a simple question.",
		Parameters: json.RawMessage(planSchema),
		Execute: func(ctx context.Context, args json.RawMessage) (Result, error) {
			plan, err := ParsePlan(args)
			if err != nil {
				return Result{}, err
			}
			return Result{Content: planResult, Plan: &plan}, nil
		},
	}
}

// ParsePlan decodes and checks a plan tool call's arguments: 1 to
// MaxPlanSteps steps, each with a title of 1 to MaxPlanTitle characters on
// one line and a known status. Its errors are worded for the model, which
// reads them and corrects its call.
func ParsePlan(args json.RawMessage) (switchboard.PlanData, error) {
	var in switchboard.PlanData
	if err := json.Unmarshal(args, &in); err != nil {
		return switchboard.PlanData{}, fmt.Errorf("decode arguments: %w", err)
	}
	switch n := len(in.Steps); {
	case n == 0:
		return switchboard.PlanData{}, errors.New("steps: a plan needs at least one step")
	case n > MaxPlanSteps:
		return switchboard.PlanData{}, fmt.Errorf("steps: %d steps, at most %d: merge some", n, MaxPlanSteps)
	}
	for i := range in.Steps {
		st := &in.Steps[i]
		// A title is one line: a line break would break every checklist.
		st.Title = strings.Join(strings.Fields(st.Title), " ")
		switch n := utf8.RuneCountInString(st.Title); {
		case n == 0:
			return switchboard.PlanData{}, fmt.Errorf("steps[%d].title: empty; say what the step does", i)
		case n > MaxPlanTitle:
			return switchboard.PlanData{}, fmt.Errorf("steps[%d].title: %d characters, at most %d", i, n, MaxPlanTitle)
		}
		switch st.Status {
		case switchboard.PlanPending, switchboard.PlanInProgress, switchboard.PlanDone, switchboard.PlanFailed:
		default:
			return switchboard.PlanData{}, fmt.Errorf("steps[%d].status: %q is not one of pending, in_progress, done, failed", i, st.Status)
		}
	}
	return in, nil
}
