package demo

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/tools"
)

// now is 10:30 UTC on Sunday 22 November 2026: 11:30 in Berlin.
var now = time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)

// assistantTools are the assistant guide's.
var assistantTools = []string{"current_time", "calculator", "present"}

// reply is one model response: its text, the tool it called, its model.
type reply struct {
	text  string
	call  *switchboard.ToolCall
	model string
}

func ask(t *testing.T, p *Provider, toolNames []string, msgs ...switchboard.Message) reply {
	t.Helper()
	req := providers.Request{Messages: msgs}
	for _, n := range toolNames {
		req.Tools = append(req.Tools, providers.ToolSpec{Name: n})
	}
	var r reply
	var b strings.Builder
	for ev, err := range p.Stream(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case providers.EventTextDelta:
			b.WriteString(ev.Text)
		case providers.EventToolCall:
			if r.call != nil {
				t.Fatalf("two tool calls: %+v and %+v", *r.call, ev.ToolCall)
			}
			c := ev.ToolCall
			r.call = &c
		case providers.EventDone:
			r.model = ev.Model
		}
	}
	r.text = b.String()
	return r
}

func user(text string) switchboard.Message {
	return switchboard.Message{Role: switchboard.RoleUser, Content: text}
}

// turn is one user message answered the way the gateway's agent loop does
// it: the demo's tool call runs through the real built-in tools (or is
// refused with the gateway's words for a denial when deny is set), and
// the demo answers the result. It returns what the user reads: the text
// before the call and the answer after it.
type turn struct {
	before, after string
	call          *switchboard.ToolCall
	result        tools.Result
	history       []switchboard.Message
}

func converse(t *testing.T, p *Provider, toolNames []string, history []switchboard.Message, text string, deny bool) turn {
	t.Helper()
	reg, err := tools.NewRegistry(tools.Builtins(func() time.Time { return now })...)
	if err != nil {
		t.Fatal(err)
	}
	msgs := append(slices.Clone(history), user(text))
	first := ask(t, p, toolNames, msgs...)
	if first.model != Model {
		t.Errorf("model = %q, want %q", first.model, Model)
	}
	tr := turn{before: first.text, call: first.call}
	msgs = append(msgs, switchboard.Message{Role: switchboard.RoleAssistant, Content: first.text})
	if first.call == nil {
		tr.history = msgs
		return tr
	}
	msgs[len(msgs)-1].ToolCalls = []switchboard.ToolCall{*first.call}
	res := switchboard.Message{Role: switchboard.RoleTool, ToolCallID: first.call.ID, ToolName: first.call.Name}
	if deny {
		res.Content, res.IsError = "the user denied this tool call", true
	} else if out, err := reg.Run(context.Background(), first.call.Name, first.call.Args); err != nil {
		res.Content, res.IsError = err.Error(), true
	} else {
		res.Content, tr.result = out.Content, out
	}
	msgs = append(msgs, res)
	second := ask(t, p, toolNames, msgs...)
	if second.call != nil {
		t.Errorf("a second tool call after the result: %+v", *second.call)
	}
	tr.after = second.text
	tr.history = append(msgs, switchboard.Message{Role: switchboard.RoleAssistant, Content: second.text})
	return tr
}

func args(t *testing.T, c *switchboard.ToolCall) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(c.Args, &m); err != nil {
		t.Fatalf("args %s: %v", c.Args, err)
	}
	return m
}

// The README's terminal session: the question asks for Berlin's time, so
// the call names Berlin's zone, and the answer reads like the README's.
func TestReadmeQuestionAsksForBerlinsZone(t *testing.T) {
	p := &Provider{Hint: "Set OPENAI_API_KEY to use a real model."}
	tr := converse(t, p, assistantTools, nil, "what time is it in Berlin?", false)
	if tr.call == nil || tr.call.Name != "current_time" {
		t.Fatalf("call = %+v, want current_time", tr.call)
	}
	if got := args(t, tr.call); !maps.Equal(got, map[string]any{"timezone": "Europe/Berlin"}) {
		t.Errorf("args = %s, want {\"timezone\":\"Europe/Berlin\"}", tr.call.Args)
	}
	if tr.before != "I am the offline demo model. Let me check the clock." {
		t.Errorf("before the call: %q", tr.before)
	}
	if tr.after != "It is 11:30 on Sunday in Berlin (Europe/Berlin)." {
		t.Errorf("after the result %q: %q", tr.result.Content, tr.after)
	}
}

func TestZoneIn(t *testing.T) {
	for _, tc := range []struct {
		text, zone, name string
	}{
		{"what time is it in Berlin?", "Europe/Berlin", "Berlin"},
		{"WHAT TIME IS IT IN BERLIN", "Europe/Berlin", "Berlin"},
		{"time in paris please", "Europe/Paris", "Paris"},
		{"and in New York?", "America/New_York", "New York"},
		{"the time in new york city", "America/New_York", "New York City"},
		{"what's the time in San Francisco", "America/Los_Angeles", "San Francisco"},
		{"time in Washington, D.C.?", "America/New_York", "Washington D.C."},
		{"Uhrzeit in São Paulo", "America/Sao_Paulo", "São Paulo"},
		{"time in Rio de Janeiro", "America/Sao_Paulo", "Rio de Janeiro"},
		{"what time is it in Japan", "Asia/Tokyo", "Japan"},
		{"time in Sydney and Tokyo", "Australia/Sydney", "Sydney"}, // the first named
		// An IANA zone written out, in any case; it wins over a city.
		{"time in Europe/Berlin", "Europe/Berlin", "Berlin"},
		{"time in america/new_york", "America/New_York", "New York"},
		{"time in America/Argentina/Buenos_Aires", "America/Argentina/Buenos_Aires", "Buenos Aires"},
		{"London time, or rather Asia/Tokyo", "Asia/Tokyo", "Tokyo"},
		{"what time is it in UTC", "UTC", "UTC"},
		{"time in GMT", "UTC", "UTC"},
		{"time at UTC+2", "Etc/GMT-2", "UTC+2"},
		{"time at UTC-5", "Etc/GMT+5", "UTC-5"},
		// None.
		{"what time is it?", "", ""},
		{"what time is it in Atlantis?", "", ""},
		{"time in Mars/Olympus", "", ""},
		{"time in Local", "", ""},
		{"what time should the turkey go in?", "", ""},
		{"is it nice and sunny", "", ""},
		{"his timezone and/or hers", "", ""},
	} {
		zone, name := zoneIn(tc.text)
		if zone != tc.zone || name != tc.name {
			t.Errorf("zoneIn(%q) = %q, %q; want %q, %q", tc.text, zone, name, tc.zone, tc.name)
		}
	}
}

func TestEveryPlaceHasAZone(t *testing.T) {
	for _, p := range places {
		if _, err := time.LoadLocation(p.zone); err != nil {
			t.Errorf("%s: %v", p.name, err)
		}
		if z, n := zoneIn("what time is it in " + strings.ToLower(p.name) + "?"); z != p.zone || n != p.name {
			t.Errorf("%s: zoneIn = %q, %q", p.name, z, n)
		}
	}
}

func TestExpressionIn(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"what is 2*(3+4)?", "2*(3+4)"},
		{"What is 2 * (3 + 4)?", "2 * (3 + 4)"},
		{"What is 2^10?", "2^10"},
		{"sqrt(2) * 10, please", "sqrt(2) * 10"},
		{"what is pi * 2", "pi * 2"},
		{"2 × 3 ÷ 4", "2 × 3 ÷ 4"},
		{"1e3 + 2", "1e3 + 2"},
		{"1,000,000 / 4", "1000000 / 4"},
		{"max(1, 2) + 1", "max(1, 2) + 1"},
		{"2+2, and then 3*3?", "2+2"}, // a comma ends it; of two as long, the first
		{"(roughly 2+3)", "2+3"},
		{"Total for 2 Widget Pros and a Mini: 2*49 + 19 EUR?", "2*49 + 19"},
		{"version 2.0", ""},
		{"15% of 80", ""},
		{"on 2026-11-22", ""},
		{"-5", ""},
		{"what time is it in Berlin?", ""},
	} {
		if got := expressionIn(tc.text); got != tc.want {
			t.Errorf("expressionIn(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// Each kind of message, through a whole turn: what the user reads before
// the call and after its result.
func TestTurns(t *testing.T) {
	p := &Provider{}
	for _, tc := range []struct {
		text          string
		tool          string
		args          string
		deny          bool
		before, after string
	}{
		{text: "What time is it in Tokyo?", tool: "current_time", args: `{"timezone":"Asia/Tokyo"}`,
			after: "It is 19:30 on Sunday in Tokyo (Asia/Tokyo)."},
		{text: "time in san francisco?", tool: "current_time", args: `{"timezone":"America/Los_Angeles"}`,
			after: "It is 02:30 on Sunday in San Francisco (America/Los_Angeles)."},
		{text: "what time is it in America/New_York", tool: "current_time", args: `{"timezone":"America/New_York"}`,
			after: "It is 05:30 on Sunday in New York (America/New_York)."},
		{text: "what time is it in UTC?", tool: "current_time", args: `{"timezone":"UTC"}`,
			after: "It is 10:30 UTC on Sunday."},
		{text: "What's the date in Sydney?", tool: "current_time", args: `{"timezone":"Australia/Sydney"}`,
			after: "It is 21:30 on Sunday, 22 November 2026, in Sydney (Australia/Sydney)."},
		{text: "what day is it today?", tool: "current_time", args: `{}`,
			after: "It is 10:30 UTC on Sunday, 22 November 2026. Name a city or a time zone for its local time."},
		{text: "which timezone is Mumbai in?", tool: "current_time", args: `{"timezone":"Asia/Kolkata"}`,
			after: "It is 16:00 on Sunday in Mumbai (Asia/Kolkata)."},
		{text: "what's the time?", tool: "current_time", args: `{}`,
			after: "It is 10:30 UTC on Sunday. Name a city or a time zone for its local time."},
		{text: "what time is it in Berlin?", tool: "current_time", args: `{"timezone":"Europe/Berlin"}`, deny: true,
			after: "You did not approve current_time, so I can't look it up; ask again if you change your mind."},
		{text: "What is 2*(3+4)?", tool: "calculator", args: `{"expression":"2*(3+4)"}`,
			before: "Let me work that out.", after: "2*(3+4) = 14"},
		{text: "what is 2*3*4", tool: "calculator", args: `{"expression":"2*3*4"}`,
			after: "`2*3*4` = 24"},
		{text: "what is 1/0?", tool: "calculator", args: `{"expression":"1/0"}`,
			after: "I could not work out 1/0: division by zero."},
		{text: "what is 2+2", tool: "calculator", args: `{"expression":"2+2"}`, deny: true,
			after: "You did not approve calculator, so I can't work it out; ask again if you change your mind."},
		{text: "Show me some options", tool: "present",
			before: "Here are a few things I can do without an API key.", after: "Pick one above."},
	} {
		tr := converse(t, p, assistantTools, []switchboard.Message{user("hi"), {Role: switchboard.RoleAssistant, Content: "Hello!"}}, tc.text, tc.deny)
		if tr.call == nil || tr.call.Name != tc.tool {
			t.Errorf("%q: call = %+v, want %s", tc.text, tr.call, tc.tool)
			continue
		}
		if tc.args != "" && string(tr.call.Args) != tc.args {
			t.Errorf("%q: args = %s, want %s", tc.text, tr.call.Args, tc.args)
		}
		if tc.before != "" && tr.before != tc.before {
			t.Errorf("%q: before the call %q, want %q", tc.text, tr.before, tc.before)
		}
		if tr.after != tc.after {
			t.Errorf("%q: after %q: %q, want %q", tc.text, tr.result.Content, tr.after, tc.after)
		}
	}
}

// The words a tool addresses to the model never reach the user.
func TestPresentResultIsNotRepeated(t *testing.T) {
	tr := converse(t, &Provider{}, assistantTools, nil, "show me some options", false)
	if tr.result.UI == nil || len(tr.result.UI.Buttons) == 0 {
		t.Fatalf("no card with buttons: %+v", tr.result)
	}
	if !strings.Contains(tr.result.Content, "wait for it") {
		t.Fatalf("the tool's message changed (%q): check that this test still tests something", tr.result.Content)
	}
	for _, leak := range []string{"Shown to the user", "wait for it", "The tool", "says:"} {
		if strings.Contains(tr.after, leak) {
			t.Errorf("the reply %q repeats the tool's %q", tr.after, leak)
		}
	}
	// A button leads somewhere: its label is a request the demo answers.
	for _, b := range tr.result.UI.Buttons {
		text, err := tools.DescribeAction(*tr.result.UI, b.ActionID, "")
		if err != nil {
			t.Fatal(err)
		}
		click := converse(t, &Provider{}, assistantTools, tr.history, text, false)
		if click.call == nil || click.call.Name == "present" || unanswered(click.after) {
			t.Errorf("clicking %q: call %+v, then %q", b.Label, click.call, click.after)
		}
	}
}

// "show me a form" shows a form with every kind of field, valid by the
// present tool's own schema; what the form sends back is read back.
func TestDemoForm(t *testing.T) {
	tr := converse(t, &Provider{}, assistantTools, nil, "show me a form", false)
	if tr.call == nil || tr.call.Name != "present" || tr.result.UI == nil || tr.result.UI.Form == nil {
		t.Fatalf("no form: call %+v, result %+v", tr.call, tr.result)
	}
	types := map[string]bool{}
	for _, in := range tr.result.UI.Form.Inputs {
		types[cmp.Or(in.Type, "text")] = true
	}
	if len(types) != 4 {
		t.Fatalf("the form's field types: %v, want text, email, number and textarea", types)
	}
	text, err := tools.DescribeAction(*tr.result.UI, tr.result.UI.Form.ActionID, `{"email":"ann@example.com","name":"Ann","seats":"3"}`)
	if err != nil {
		t.Fatal(err)
	}
	sent := converse(t, &Provider{}, assistantTools, tr.history, text, false)
	if !strings.Contains(sent.after+sent.before, `name "Ann"`) {
		t.Fatalf("the submission's answer: %q / %q", sent.before, sent.after)
	}
}

// What a click, a choice or a form sends back is answered as such; a
// label that asks for something is that request.
func TestCardAnswers(t *testing.T) {
	history := []switchboard.Message{user("hi"), {Role: switchboard.RoleAssistant, Content: "Hello!"}}
	for _, tc := range []struct{ text, want, tool string }{
		{`Clicked "Yes" on "Shall we?"`, "You picked Yes.", ""},
		{`Chose "Berlin" in "Your city"`, "You picked Berlin.", ""},
		{`Clicked "Time in New York" on "Try the demo"`, "Let me check the clock.", "current_time"},
		{`Submitted "Contact": {"email":"ann@example.com","name":"Ann","note":""}`, `Thanks, I got email "ann@example.com" and name "Ann".`, ""},
		{`Submitted the form: {"time":"noon"}`, `Thanks, I got time "noon".`, ""},
	} {
		r := ask(t, &Provider{}, assistantTools, append(history, user(tc.text))...)
		if r.text != tc.want || (r.call == nil) != (tc.tool == "") || r.call != nil && r.call.Name != tc.tool {
			t.Errorf("%s: %q, %+v; want %q and %q", tc.text, r.text, r.call, tc.want, tc.tool)
		}
	}
}

func TestFailuresAreSaidForPeople(t *testing.T) {
	timeCall := switchboard.ToolCall{ID: "c1", Name: "current_time", Args: json.RawMessage(`{"timezone":"Mars/Base"}`)}
	for _, tc := range []struct {
		call    switchboard.ToolCall
		content string
		want    string
	}{
		{timeCall, "the user denied this tool call",
			"You did not approve current_time, so I can't look it up; ask again if you change your mind."},
		{timeCall, "nobody approved this tool call in time, so it did not run",
			"Nobody approved current_time in time, so I couldn't look it up; ask again when someone can approve it."},
		{timeCall, `the tool "current_time" is not allowed in this conversation`,
			"current_time is not allowed in this conversation, so I can't look it up."},
		{timeCall, "timed out after 30s",
			"current_time took too long, so I gave up; try again in a moment."},
		{timeCall, `current_time: unknown time zone "Mars/Base": use an IANA name such as Europe/Berlin or America/New_York`,
			`I don't know the time zone "Mars/Base"; try a city such as Berlin or a zone such as Europe/Berlin.`},
		{switchboard.ToolCall{ID: "c1", Name: "present", Args: json.RawMessage(`{}`)}, "the user denied this tool call",
			"You did not approve present, so I can't show you the card; ask again if you change your mind."},
		{switchboard.ToolCall{ID: "c1", Name: "lookup", Args: json.RawMessage(`{}`)}, "lookup: the index is offline.\nretry later",
			"Sorry, lookup did not work: the index is offline."},
	} {
		msgs := []switchboard.Message{
			user("question"),
			{Role: switchboard.RoleAssistant, Content: "Let me see.", ToolCalls: []switchboard.ToolCall{tc.call}},
			{Role: switchboard.RoleTool, ToolCallID: "c1", ToolName: tc.call.Name, Content: tc.content, IsError: true},
		}
		if got := ask(t, &Provider{}, assistantTools, msgs...).text; got != tc.want {
			t.Errorf("%s %q:\n got %q\nwant %q", tc.call.Name, tc.content, got, tc.want)
		}
	}
}

// The demo says what it is: in the model name of every reply, in the text
// of a conversation's first reply, and whenever it cannot help, with the
// hint that enables a real model; later replies do not repeat it.
func TestLabelledAsTheOfflineDemoModel(t *testing.T) {
	p := &Provider{Hint: "Set OPENAI_API_KEY to use a real model."}
	hello := ask(t, p, assistantTools, user("hello"))
	for _, want := range []string{"offline demo model", "Set OPENAI_API_KEY", "what time is it in Tokyo?", "/help"} {
		if !strings.Contains(hello.text, want) {
			t.Errorf("hello: %q lacks %q", hello.text, want)
		}
	}
	if hello.model != Model || !strings.Contains(Model, "demo") {
		t.Errorf("model = %q", hello.model)
	}
	if strings.Count(hello.text, "offline demo model") != 1 {
		t.Errorf("labelled twice: %q", hello.text)
	}
	history := []switchboard.Message{user("hello"), {Role: switchboard.RoleAssistant, Content: hello.text}}
	if tr := converse(t, p, assistantTools, history, "what time is it in Paris?", false); strings.Contains(tr.before+tr.after, "demo") {
		t.Errorf("a later reply is labelled again: %q / %q", tr.before, tr.after)
	}
	other := ask(t, p, assistantTools, append(history, user("tell me a joke"))...)
	if !unanswered(other.text) || !strings.Contains(other.text, "offline demo model") || !strings.Contains(other.text, `"tell me a joke"`) ||
		!strings.Contains(other.text, "OPENAI_API_KEY") || !strings.Contains(other.text, "what time is it in Tokyo?") {
		t.Errorf("an unknown request: %q", other.text)
	}
	// Without tools (the last call of a turn) it never calls one.
	if r := ask(t, p, nil, user("what time is it in Berlin?")); r.call != nil || !strings.Contains(r.text, "offline demo model") {
		t.Errorf("without tools: %q, %+v", r.text, r.call)
	}
}

// The shipped guides' suggestions are what a newcomer tries first: each
// one that is not a command gets a tool the guide has, and an answer.
func TestShippedSuggestionsWork(t *testing.T) {
	c, err := guides.LoadDir(filepath.Join("..", "..", "guides"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range c.Names() {
		g, _ := c.Get(name)
		if len(g.Suggestions) == 0 || g.Greeting == "" {
			t.Errorf("%s: no greeting or suggestions for a newcomer", name)
		}
		for _, s := range g.Suggestions {
			if strings.HasPrefix(s, "/") {
				continue // a command: the gateway answers it
			}
			tr := converse(t, &Provider{}, g.Tools, nil, s, false)
			if tr.call == nil || !slices.Contains(g.Tools, tr.call.Name) {
				t.Errorf("%s: %q calls %+v, not one of %v", name, s, tr.call, g.Tools)
				continue
			}
			if unanswered(tr.after) || strings.Contains(tr.after, "Sorry") || strings.Contains(tr.after, "could not") {
				t.Errorf("%s: %q is answered %q", name, s, tr.after)
			}
			t.Logf("%s: %q\n  %s\n  → %s %s\n  ← %s\n  %s", name, s, tr.before, tr.call.Name, tr.call.Args, tr.result.Content, tr.after)
		}
	}
}

// unanswered: the demo did not understand.
func unanswered(reply string) bool {
	return reply == "" || strings.Contains(reply, "can't answer") || strings.Contains(reply, "only echo")
}
