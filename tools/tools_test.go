package tools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func newTestRegistry(t *testing.T, extra ...Tool) *Registry {
	t.Helper()
	r, err := NewRegistry(append(Builtins(time.Now), extra...)...)
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	return r
}

func echo(name string) Tool {
	return Tool{
		Name: name,
		Execute: func(ctx context.Context, args json.RawMessage) (Result, error) {
			return Result{Content: string(args)}, nil
		},
	}
}

func TestNewRegistryRejects(t *testing.T) {
	tests := []struct {
		name  string
		tools []Tool
		want  string
	}{
		{"duplicate", []Tool{echo("dup"), echo("dup")}, `tool "dup": registered twice`},
		{"bad schema type", []Tool{{Name: "bad", Parameters: json.RawMessage(`{"type": 5}`), Execute: echo("x").Execute}}, `tool "bad": schema:`},
		{"schema not JSON", []Tool{{Name: "broken", Parameters: json.RawMessage(`{type`), Execute: echo("x").Execute}}, `tool "broken": schema: not JSON`},
		{"external ref", []Tool{{Name: "remote", Parameters: json.RawMessage(`{"$ref": "https://example.com/s.json"}`), Execute: echo("x").Execute}}, `tool "remote": schema:`},
		{"no execute", []Tool{{Name: "lazy"}}, `tool "lazy": no Execute func`},
		{"bad name", []Tool{echo("has space")}, `tool "has space": name must be`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRegistry(tt.tools...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewRegistry error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestRegistryNamesAndLookup(t *testing.T) {
	r := newTestRegistry(t, echo("zeta"), echo("alpha"))
	want := []string{"alpha", "calculator", "current_time", "plan", "present", "zeta"}
	if got := r.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	r.Names()[0] = "mutated"
	if r.Names()[0] != "alpha" {
		t.Fatal("Names() exposes the registry's own slice")
	}
	tool, ok := r.Lookup("alpha")
	if !ok || tool.Name != "alpha" {
		t.Fatalf("Lookup(alpha) = %v, %v", tool.Name, ok)
	}
	// A tool without Parameters offers the providers an object schema.
	var schema map[string]any
	if err := json.Unmarshal(tool.Parameters, &schema); err != nil || schema["type"] != "object" {
		t.Fatalf("default Parameters = %s (%v), want an object schema", tool.Parameters, err)
	}
	if _, ok := r.Lookup("nope"); ok {
		t.Fatal("Lookup(nope) found a tool")
	}
}

func TestRunUnknownTool(t *testing.T) {
	r := newTestRegistry(t)
	_, err := r.Run(context.Background(), "weather", json.RawMessage(`{}`))
	if !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("err = %v, want ErrUnknownTool", err)
	}
	if want := `unknown tool "weather"; available: calculator, current_time, plan, present`; err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}
	if err := r.Validate("weather", nil); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("Validate err = %v, want ErrUnknownTool", err)
	}
}

func TestRunInvalidArgs(t *testing.T) {
	r := newTestRegistry(t)
	tests := []struct {
		name, tool, args, want string
	}{
		{"wrong type", "calculator", `{"expression": 5}`,
			`invalid arguments for calculator: at /expression: got number, want string`},
		{"missing", "calculator", `{}`,
			`invalid arguments for calculator: at (root): missing property 'expression'`},
		{"null is {}", "calculator", `null`,
			`invalid arguments for calculator: at (root): missing property 'expression'`},
		{"empty is {}", "calculator", ``,
			`invalid arguments for calculator: at (root): missing property 'expression'`},
		{"extra", "calculator", `{"expression": "1", "precision": 2}`,
			`invalid arguments for calculator: at (root): additional properties 'precision' not allowed`},
		{"not an object", "calculator", `"1+1"`,
			`invalid arguments for calculator: at (root): got string, want object`},
		{"not JSON", "calculator", `{"expression": 1+1}`,
			`invalid arguments for calculator: not valid JSON: invalid character '+' after object key:value pair`},
		{"trailing data", "calculator", `{"expression": "1"} {}`,
			`invalid arguments for calculator: not valid JSON: invalid character after top-level value`},
		{"nested pointer", "present", `{"buttons": [{"label": "ok"}, {"label": "no", "style": "blue"}]}`,
			`invalid arguments for present: at /buttons/1/style: value must be one of 'primary', 'danger'`},
		{"several faults", "present", `{"title": "", "buttons": [{}]}`,
			`invalid arguments for present: at /buttons/0: missing property 'label'; at /title: minLength: got 0, want 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Run(context.Background(), tt.tool, json.RawMessage(tt.args))
			if !errors.Is(err, ErrInvalidArgs) {
				t.Fatalf("err = %v, want ErrInvalidArgs", err)
			}
			if err.Error() != tt.want {
				t.Fatalf("err\n got: %s\nwant: %s", err, tt.want)
			}
			if verr := r.Validate(tt.tool, json.RawMessage(tt.args)); verr == nil || verr.Error() != err.Error() {
				t.Fatalf("Validate = %v, want the same error as Run", verr)
			}
		})
	}
}

func TestValidationMessagesAreCapped(t *testing.T) {
	r := newTestRegistry(t)
	args := `{"fields": [{}, {}, {}, {}, {}, {}, {}, {}]}`
	err := r.Validate("present", json.RawMessage(args))
	if err == nil {
		t.Fatal("Validate accepted fields without labels")
	}
	if got := strings.Count(err.Error(), "at /fields/"); got != maxValidationMessages {
		t.Fatalf("error lists %d faults, want %d: %s", got, maxValidationMessages, err)
	}
	if !strings.HasSuffix(err.Error(), "; and 3 more") {
		t.Fatalf("error does not say how many were left out: %s", err)
	}
}

func TestValidationAlternatives(t *testing.T) {
	r, err := NewRegistry(Tool{
		Name:       "either",
		Parameters: json.RawMessage(`{"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}`),
		Execute:    echo("x").Execute,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Validate("either", json.RawMessage(`{"v": true}`))
	want := `invalid arguments for either: none of the alternatives match: at /v: got boolean, want string or at /v: got boolean, want integer`
	if err == nil || err.Error() != want {
		t.Fatalf("err\n got: %v\nwant: %s", err, want)
	}
}

func TestRunPassesNormalisedArgs(t *testing.T) {
	r := newTestRegistry(t, echo("echo"))
	for _, args := range []string{"", "null", "  "} {
		res, err := r.Run(context.Background(), "echo", json.RawMessage(args))
		if err != nil || res.Content != "{}" {
			t.Fatalf("Run(echo, %q) = %q, %v; want {}", args, res.Content, err)
		}
	}
}

func TestRunToolError(t *testing.T) {
	r := newTestRegistry(t)
	_, err := r.Run(context.Background(), "calculator", json.RawMessage(`{"expression": "1/0"}`))
	if err == nil || err.Error() != "calculator: division by zero at position 2" {
		t.Fatalf("err = %v", err)
	}
	if errors.Is(err, ErrInvalidArgs) || errors.Is(err, ErrUnknownTool) {
		t.Fatalf("a failing tool is reported as the model's mistake: %v", err)
	}
}

func TestRunRecoversPanic(t *testing.T) {
	boom := Tool{
		Name: "boom",
		Execute: func(ctx context.Context, args json.RawMessage) (Result, error) {
			panic("kaboom")
		},
	}
	r := newTestRegistry(t, boom)
	_, err := r.Run(context.Background(), "boom", nil)
	if err == nil || err.Error() != "tool boom panicked: kaboom" {
		t.Fatalf("err = %v, want the recovered panic", err)
	}
	// The registry keeps working afterwards.
	if res, err := r.Run(context.Background(), "calculator", json.RawMessage(`{"expression": "1+1"}`)); err != nil || res.Content != "2" {
		t.Fatalf("Run after panic = %q, %v", res.Content, err)
	}
}

// stubborn returns a tool that ignores ctx and blocks until the test ends.
func stubborn(t *testing.T) (Tool, <-chan struct{}) {
	started := make(chan struct{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return Tool{
		Name: "stubborn",
		Execute: func(ctx context.Context, args json.RawMessage) (Result, error) {
			close(started)
			<-release
			return Result{Content: "too late"}, nil
		},
	}, started
}

func TestRunReturnsOnDeadlineWhenToolIgnoresCtx(t *testing.T) {
	tool, _ := stubborn(t)
	r := newTestRegistry(t, tool)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := r.Run(ctx, "stubborn", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if err.Error() != "tool stubborn: context deadline exceeded" {
		t.Fatalf("err = %q, want it to name the tool", err)
	}
}

func TestRunReturnsOnCancelWhenToolIgnoresCtx(t *testing.T) {
	tool, started := stubborn(t)
	r := newTestRegistry(t, tool)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	_, err := r.Run(ctx, "stubborn", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want Canceled", err)
	}
}

func TestRunDoesNotStartWithDoneCtx(t *testing.T) {
	ran := false
	r := newTestRegistry(t, Tool{
		Name: "flag",
		Execute: func(ctx context.Context, args json.RawMessage) (Result, error) {
			ran = true
			return Result{}, nil
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Run(ctx, "flag", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want Canceled", err)
	}
	if ran {
		t.Fatal("the tool ran although ctx was already done")
	}
}

// A group's tools (an MCP server's) come and go while the built-ins stay;
// a tool with a broken schema or a name outside the group is left out,
// named, and the rest are in place.
func TestSetGroupReplacesOneServersTools(t *testing.T) {
	r, err := NewRegistry(Builtins(time.Now)...)
	if err != nil {
		t.Fatal(err)
	}
	echo := func(name, schema string) Tool {
		return Tool{Name: name, Parameters: json.RawMessage(schema), Execute: func(ctx context.Context, args json.RawMessage) (Result, error) {
			return Result{Content: name + " " + string(args)}, nil
		}}
	}
	err = r.SetGroup("github", []Tool{
		echo("github.create_issue", `{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`),
		echo("github.broken", `{"type":"nonsense"}`),
		echo("docs.search", `{"type":"object"}`),
		echo("github.list", ``),
	})
	if err == nil || !strings.Contains(err.Error(), `"github.broken"`) || !strings.Contains(err.Error(), `"docs.search"`) {
		t.Fatalf("SetGroup error = %v; want github.broken and docs.search named", err)
	}
	if got := r.Group("github"); strings.Join(got, ",") != "github.create_issue,github.list" {
		t.Fatalf("github's tools: %v", got)
	}
	res, err := r.Run(context.Background(), "github.create_issue", json.RawMessage(`{"title":"bug"}`))
	if err != nil || res.Content != `github.create_issue {"title":"bug"}` {
		t.Fatalf("run: %+v, %v", res, err)
	}
	if err := r.Validate("github.create_issue", json.RawMessage(`{}`)); !errors.Is(err, ErrInvalidArgs) {
		t.Fatalf("the server's schema is not applied: %v", err)
	}
	if err := r.SetGroup("github", []Tool{echo("github.list", `{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup("github.create_issue"); ok {
		t.Error("a tool the server dropped is still there")
	}
	if _, ok := r.Lookup("calculator"); !ok {
		t.Error("a built-in went with the group")
	}
	if err := r.SetGroup("github", nil); err != nil || len(r.Group("github")) != 0 || slices.Contains(r.Names(), "github.list") {
		t.Errorf("removing the group: %v, %v", err, r.Names())
	}
}
