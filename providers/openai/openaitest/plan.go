package openaitest

// PlanTurn is the script of a turn that shows a plan (the plan tool) and
// works through it: the plan with its first step under way and the
// calculator called with it; the plan again, the first step done and the
// second failed; then the answer, answer. The channels' tests push it to
// see a plan rendered, with a tool run as a task of it.
func PlanTurn(answer string) []Reply {
	return []Reply{
		{ToolCalls: []ToolCall{
			{ID: "call_plan_1", Name: "plan", Args: `{"steps":[{"title":"Find the order","status":"in_progress"},{"title":"Refund the payment","status":"pending"},{"title":"Tell the customer","status":"pending"}]}`},
			{ID: "call_calc_1", Name: "calculator", Args: `{"expression":"19.99*2"}`},
		}},
		{ToolCalls: []ToolCall{
			{ID: "call_plan_2", Name: "plan", Args: `{"steps":[{"title":"Find the order","status":"done"},{"title":"Refund the payment","status":"failed"},{"title":"Tell the customer","status":"in_progress"}]}`},
		}},
		{Text: []string{answer}},
	}
}
