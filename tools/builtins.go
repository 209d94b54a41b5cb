package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	_ "time/tzdata" // zones must resolve on a bare machine or container
)

// Builtins returns the tools every gateway has: current_time, calculator,
// present and plan. now is the clock current_time reads, so tests can fix
// it.
func Builtins(now func() time.Time) []Tool {
	return []Tool{currentTime(now), calculator(), present(), Plan()}
}

func currentTime(now func() time.Time) Tool {
	return Tool{
		Name:        "current_time",
		Description: "Returns the current date, time and weekday. Use it whenever the answer depends on today's date or the time of day.",
		Parameters: json.RawMessage(`{
			"type": "object",
			"properties": {
				"timezone": {
					"type": "string",
					"description": "IANA time zone name such as Europe/Berlin or America/New_York. Defaults to UTC."
				}
			},
			"additionalProperties": false
		}`),
		Execute: func(ctx context.Context, args json.RawMessage) (Result, error) {
			var in struct {
				Timezone string `json:"timezone"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return Result{}, fmt.Errorf("decode arguments: %w", err)
			}
			loc := time.UTC
			if in.Timezone != "" {
				var err error
				// "Local" is the server's zone, which means nothing to the
				// person asking.
				if in.Timezone == "Local" {
					err = fmt.Errorf("not an IANA name")
				} else {
					loc, err = time.LoadLocation(in.Timezone)
				}
				if err != nil {
					return Result{}, fmt.Errorf("unknown time zone %q: use an IANA name such as Europe/Berlin or America/New_York", in.Timezone)
				}
			}
			t := now().In(loc)
			return Result{Content: fmt.Sprintf("%s (%s, %s)", t.Format(time.RFC3339), t.Weekday(), loc)}, nil
		},
	}
}

func calculator() Tool {
	return Tool{
		Name: "calculator",
		Description: "Evaluates an arithmetic expression exactly; use it instead of doing arithmetic in your head. " +
			"Operators: + - * / % ^ (power, right-associative), unary minus, parentheses, numbers like 1.5 or 1e3. " +
			"Functions: sqrt, abs, round(x) or round(x, digits), floor, ceil, ln, log10, sin, cos, tan (radians), min, max, pow(x, y). " +
			"Constants: pi, e.",
		Parameters: json.RawMessage(`{
			"type": "object",
			"properties": {
				"expression": {
					"type": "string",
					"minLength": 1,
					"maxLength": 1000,
					"description": "The expression, e.g. 2 * (3 + 4) ^ 2 / 7"
				}
			},
			"required": ["expression"],
			"additionalProperties": false
		}`),
		Execute: func(ctx context.Context, args json.RawMessage) (Result, error) {
			var in struct {
				Expression string `json:"expression"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return Result{}, fmt.Errorf("decode arguments: %w", err)
			}
			v, err := calculate(in.Expression)
			if err != nil {
				return Result{}, err
			}
			return Result{Content: formatNumber(v)}, nil
		},
	}
}
