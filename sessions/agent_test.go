package sessions_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/tools"
)

func TestTextTurnStreamsStoresAndBuildsContext(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(openaitest.Reply{Text: []string{"Hel", "lo ", "Alice"}})
	c := h.newSession(alice)
	c.say("hi there")

	user := c.until(switchboard.EventMessage, nil).(*switchboard.MessageData)
	if user.Role != switchboard.RoleUser || user.Content != "hi there" || user.Author != "Alice" {
		t.Fatalf("first message = %+v", user)
	}
	// Tokens that arrive together may be sent as one delta (readAhead);
	// the text, in order, is what counts.
	var deltas strings.Builder
	for deltas.Len() < len("Hello Alice") {
		d := c.until(switchboard.EventDelta, nil).(*switchboard.DeltaData)
		if d.Content == "" || d.MessageID == "" {
			t.Fatalf("delta %+v", d)
		}
		deltas.WriteString(d.Content)
	}
	if deltas.String() != "Hello Alice" {
		t.Fatalf("deltas add up to %q", deltas.String())
	}
	reply := c.reply()
	if reply.Content != "Hello Alice" || reply.Model != "gpt-test" || reply.Format != switchboard.FormatMarkdown {
		t.Fatalf("reply = %+v", reply)
	}
	usage := c.until(switchboard.EventUsage, nil).(*switchboard.UsageData)
	if usage.TotalTokens != 15 || usage.Session.TotalTokens != 15 {
		t.Fatalf("usage = %+v", usage)
	}
	c.idle()
	for i, ev := range c.got {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: seqs must start at 1 and have no gap", i, ev.Seq)
		}
	}

	req := lastRequest(t, h.llm)
	if req.Messages[0].Role != "system" || !strings.Contains(openaitest.Text(req.Messages[0].Content), "You are the test assistant.") ||
		!strings.Contains(openaitest.Text(req.Messages[0].Content), "The shop opens at 9.") {
		t.Fatalf("system message = %+v", req.Messages[0])
	}
	if got := openaitest.Text(req.Messages[len(req.Messages)-1].Content); got != "hi there" {
		t.Fatalf("last message sent = %q", got)
	}
	if req.Temperature == nil || *req.Temperature != 0.2 {
		t.Fatalf("temperature = %v, want the guide's 0.2", req.Temperature)
	}
	w := c.window()
	if len(w) != 2 || w[0].Content != "hi there" || w[1].Content != "Hello Alice" {
		t.Fatalf("stored window = %+v", w)
	}
}

func TestAutoToolsRunInParallelAndResultsGoBack(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{
			{ID: "call_a", Name: "calculator", Args: `{"expression":"2*(3+4)"}`},
			{ID: "call_b", Name: "calculator", Args: `{"expression":"10/4"}`},
		}},
		openaitest.Reply{Text: []string{"14 and 2.5"}},
	)
	c := h.newSession(alice)
	c.say("compute two things")
	results := map[string]string{}
	for range 2 {
		r := c.until(switchboard.EventToolResponse, nil).(*switchboard.ToolResponseData)
		if r.IsError {
			t.Fatalf("tool error: %+v", r)
		}
		results[r.ToolCallID] = r.ContentPreview
	}
	if results["call_a"] != "14" || results["call_b"] != "2.5" {
		t.Fatalf("results = %v", results)
	}
	if got := c.reply().Content; got != "14 and 2.5" {
		t.Fatalf("reply = %q", got)
	}
	c.idle()
	req := lastRequest(t, h.llm)
	n := len(req.Messages)
	if req.Messages[n-3].Role != "assistant" || len(req.Messages[n-3].ToolCalls) != 2 ||
		req.Messages[n-2].ToolCallID != "call_a" || req.Messages[n-1].ToolCallID != "call_b" ||
		openaitest.Text(req.Messages[n-2].Content) != "14" {
		t.Fatalf("second request did not carry the calls and results: %+v", req.Messages)
	}
	w := c.window()
	if len(w) != 5 || w[1].Role != switchboard.RoleAssistant || w[2].Role != switchboard.RoleTool || w[3].Role != switchboard.RoleTool {
		t.Fatalf("stored history = %+v", w)
	}
}

func TestBadToolCallsGoBackToTheModelAsErrors(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{
			{ID: "c1", Name: "rm_rf", Args: `{}`},
			{ID: "c2", Name: "calculator", Args: `{"expr":"1+1"}`},
			{ID: "c3", Name: "boom", Args: `{}`},
		}},
		openaitest.Reply{Text: []string{"Sorry, let me fix that."}},
	)
	c := h.newSession(alice)
	c.say("do it")
	errs := map[string]string{}
	for range 3 {
		r := c.until(switchboard.EventToolResponse, nil).(*switchboard.ToolResponseData)
		if !r.IsError {
			t.Fatalf("expected an error result, got %+v", r)
		}
		errs[r.ToolCallID] = r.ContentPreview
	}
	if !strings.Contains(errs["c1"], `unknown tool "rm_rf"`) {
		t.Errorf("unknown tool result = %q", errs["c1"])
	}
	if !strings.Contains(errs["c2"], "invalid arguments") {
		t.Errorf("schema failure result = %q", errs["c2"])
	}
	if !strings.Contains(errs["c3"], "panicked") {
		t.Errorf("panicking tool result = %q", errs["c3"])
	}
	c.reply()
	c.idle()
	req := lastRequest(t, h.llm)
	tools := 0
	for _, m := range req.Messages {
		if m.Role == "tool" {
			tools++
		}
	}
	if tools != 3 {
		t.Fatalf("the model got %d tool results, want 3: %+v", tools, req.Messages)
	}
}

func TestMaxIterationsEndsWithASummaryWithoutTools(t *testing.T) {
	h := newHarness(t)
	h.llm.Respond(func(r openaitest.Request) openaitest.Reply {
		if len(r.Tools) == 0 {
			return openaitest.Reply{Text: []string{"Summary: I added numbers."}}
		}
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "x", Name: "calculator", Args: `{"expression":"1+1"}`}}}
	})
	c := h.newSession(alice)
	c.say("loop forever")
	if got := c.reply().Content; got != "Summary: I added numbers." {
		t.Fatalf("reply = %q", got)
	}
	c.idle()
	reqs := h.llm.Requests()
	if len(reqs) != 4 { // max_iterations 3, then the summary
		t.Fatalf("model called %d times, want 4", len(reqs))
	}
	last := reqs[3]
	if len(last.Tools) != 0 || !strings.Contains(openaitest.Text(last.Messages[0].Content), "Do not call tools") {
		t.Fatalf("the last call must offer no tools and ask for a summary: %+v", last)
	}
}

func TestPresentCardAndClickBecomesTheNextMessage(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "p1", Name: "present", Args: `{"title":"Order #7","buttons":[{"label":"Confirm","value":"yes"},{"label":"Cancel","value":"no"}]}`}}},
		openaitest.Reply{Text: []string{"Please choose."}},
		openaitest.Reply{Text: []string{"Confirmed!"}},
	)
	c := h.newSession(alice)
	c.say("show my order")
	ui := c.until(switchboard.EventUI, nil).(*switchboard.UI)
	if ui.Title != "Order #7" || len(ui.Buttons) != 2 || ui.Buttons[0].ActionID == "" {
		t.Fatalf("ui = %+v", ui)
	}
	c.idle()
	c.send(switchboard.Input{Kind: switchboard.InputAction, ActionID: ui.Buttons[0].ActionID, Value: "yes"})
	msg := c.until(switchboard.EventMessage, func(p any) bool { return p.(*switchboard.MessageData).Role == switchboard.RoleUser }).(*switchboard.MessageData)
	if !strings.Contains(msg.Content, `Confirm`) || !strings.Contains(msg.Content, "Order #7") {
		t.Fatalf("click became %q", msg.Content)
	}
	if got := c.reply().Content; got != "Confirmed!" {
		t.Fatalf("reply = %q", got)
	}
	c.send(switchboard.Input{Kind: switchboard.InputAction, ActionID: "ui_nope:button:0"})
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeNotFound {
		t.Fatalf("unknown control error = %+v", e)
	}
}

func TestRepeatedClientIDIsIgnored(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)
	in := switchboard.Input{Kind: switchboard.InputText, Text: "once", ClientID: "m-1"}
	c.send(in)
	c.send(in)
	c.idle()
	if n := len(h.llm.Requests()); n != 1 {
		t.Fatalf("model called %d times for one client id", n)
	}
	if w := c.window(); len(w) != 2 {
		t.Fatalf("window = %+v", w)
	}
}

func TestSlashCommands(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)
	system := func() string {
		return c.until(switchboard.EventMessage, func(p any) bool {
			return p.(*switchboard.MessageData).Role == switchboard.RoleSystem
		}).(*switchboard.MessageData).Content
	}
	c.say("/help")
	if got := system(); !strings.Contains(got, "/reset") {
		t.Fatalf("/help = %q", got)
	}
	c.say("/tools")
	if got := system(); !strings.Contains(got, "current_time") || !strings.Contains(got, "[ask]") || !strings.Contains(got, "[auto]") {
		t.Fatalf("/tools = %q", got)
	}
	c.say(`/calculator {"expression":"6*7"}`)
	if r := c.until(switchboard.EventToolResponse, nil).(*switchboard.ToolResponseData); r.ContentPreview != "42" {
		t.Fatalf("/calculator = %+v", r)
	}
	c.say(`/current_time {"timezone":"UTC"}`) // "ask" tool, run by the user's own command: no approval
	if r := c.until(switchboard.EventToolResponse, nil).(*switchboard.ToolResponseData); r.IsError {
		t.Fatalf("/current_time = %+v", r)
	}
	c.say("/usage")
	if got := system(); !strings.Contains(got, "0 total") {
		t.Fatalf("/usage = %q", got)
	}
	c.say("/frobnicate")
	if e := c.errorEvent(); !strings.Contains(e.Message, "/help") {
		t.Fatalf("unknown command error = %+v", e)
	}
	c.say("/guide other")
	if got := system(); !strings.Contains(got, "other") {
		t.Fatalf("/guide other = %q", got)
	}
	c.say(`/calculator {"expression":"1"}`) // the other guide denies every tool
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeForbidden {
		t.Fatalf("denied tool by command = %+v", e)
	}
	if n := len(h.llm.Requests()); n != 0 {
		t.Fatalf("commands called the model %d times", n)
	}
	h.restart()
	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice})
	if c2.sub.Ready.Guide != "other" {
		t.Fatalf("guide after restart = %q", c2.sub.Ready.Guide)
	}
}

func TestResetStartsANewSessionForTheKey(t *testing.T) {
	h := newHarness(t)
	c := h.attach(sessions.AttachOptions{Key: "stdin", Author: alice})
	c.say("remember me")
	r := c.send(switchboard.Input{Kind: switchboard.InputText, Text: "/reset"})
	if r.NewSession == "" || r.NewSession == c.id {
		t.Fatalf("reset gave session %q", r.NewSession)
	}
	again := h.attach(sessions.AttachOptions{Key: "stdin", Author: alice})
	if again.id != r.NewSession {
		t.Fatalf("key stdin now opens %s, want the new %s", again.id, r.NewSession)
	}
	again.say("who am I")
	again.idle()
	req := lastRequest(t, h.llm)
	for _, m := range req.Messages {
		if strings.Contains(openaitest.Text(m.Content), "remember me") {
			t.Fatal("the new session still carries the old conversation")
		}
	}
}

func TestArgsOfToolCallEventsAreJSON(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "k", Name: "calculator", Args: `{"expression":"1+2"}`}}}, openaitest.Reply{Text: []string{"3"}})
	c := h.newSession(alice)
	c.say("1+2?")
	tc := c.until(switchboard.EventToolCall, nil).(*switchboard.ToolCallData)
	var args map[string]string
	if err := json.Unmarshal(tc.Args, &args); err != nil || args["expression"] != "1+2" {
		t.Fatalf("tool_call args = %s (%v)", tc.Args, err)
	}
}

// A tool's images are shown to the people, one card each, and the tool
// knows which session it ran for.
func TestToolImagesAreShown(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "d1", Name: "draw", Args: `{}`}}},
		openaitest.Reply{Text: []string{"Here are your charts."}},
	)
	c := h.newSession(alice)
	c.say("draw me something")
	var alts []string
	for range 2 {
		ui := c.until(switchboard.EventUI, nil).(*switchboard.UI)
		if ui.Image == nil || ui.Image.Data == "" || ui.ID == "" {
			t.Fatalf("an image card without its image: %+v", ui)
		}
		alts = append(alts, ui.Image.Alt+" "+ui.Image.MIMEType)
	}
	if strings.Join(alts, ", ") != "chart.png image/png, plot.svg image/svg+xml" {
		t.Errorf("images shown: %v", alts)
	}
	res := c.until(switchboard.EventToolResponse, nil).(*switchboard.ToolResponseData)
	if res.ContentPreview != "drew 2 images for "+c.id {
		t.Errorf("the tool's result: %q; want it to know its session", res.ContentPreview)
	}
}

// A guide's "server.*" offers the tools an MCP server has at the moment of
// each turn, under the policies the guide gives the server and its tools.
func TestServerToolsFollowTheRegistry(t *testing.T) {
	var reg *tools.Registry
	h := newHarness(t, func(c *sessions.Config) { reg = c.Tools })
	echo := func(name string) tools.Tool {
		return tools.Tool{Name: name, Parameters: json.RawMessage(`{"type":"object"}`), Execute: func(ctx context.Context, args json.RawMessage) (tools.Result, error) {
			return tools.Result{Content: "pong from " + name}, nil
		}}
	}
	if err := reg.SetGroup("echo", []tools.Tool{echo("echo.ping")}); err != nil {
		t.Fatal(err)
	}
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "e1", Name: "echo__ping", Args: `{}`}}},
		openaitest.Reply{Text: []string{"It answered."}},
	)
	c := h.attach(sessions.AttachOptions{Author: alice, Guide: "servers"})
	c.say("ping it")
	if res := c.until(switchboard.EventToolResponse, nil).(*switchboard.ToolResponseData); res.ContentPreview != "pong from echo.ping" || res.Name != "echo.ping" {
		t.Fatalf("echo.ping (auto) ran as %+v", res)
	}
	c.idle()
	offered := func() []string {
		var names []string
		for _, tl := range lastRequest(t, h.llm).Tools {
			names = append(names, tl.Function.Name)
		}
		return names
	}
	if got := strings.Join(offered(), ","); got != "calculator,echo__ping" {
		t.Errorf("tools offered: %s", got)
	}
	// The server gains a tool: offered from the next turn, asked for by
	// the server's policy.
	if err := reg.SetGroup("echo", []tools.Tool{echo("echo.ping"), echo("echo.wipe")}); err != nil {
		t.Fatal(err)
	}
	h.llm.Push(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "e2", Name: "echo__wipe", Args: `{}`}}})
	c.say("wipe it")
	if req := c.confirmation(); req.ToolName != "echo.wipe" {
		t.Errorf("asked about %q", req.ToolName)
	}
	if got := strings.Join(offered(), ","); got != "calculator,echo__ping,echo__wipe" {
		t.Errorf("tools offered after the change: %s", got)
	}
}

// A person's message carries the id its client sent it with, for every
// listener of the session: a client recognises its own message (and the
// turn answering it) among two identical ones from the same person.
func TestUserMessageCarriesItsClientID(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)
	other := h.attach(sessions.AttachOptions{SessionID: c.id, Author: bob})
	c.send(switchboard.Input{Kind: switchboard.InputText, Text: "hi", ClientID: "req-1"})
	c.send(switchboard.Input{Kind: switchboard.InputText, Text: "hi", ClientID: "req-2"})
	c.send(switchboard.Input{Kind: switchboard.InputText, Text: "hi"})
	var ids []string
	for range 3 {
		m := other.until(switchboard.EventMessage, func(p any) bool { return p.(*switchboard.MessageData).Role == switchboard.RoleUser }).(*switchboard.MessageData)
		ids = append(ids, m.ClientID)
	}
	if got := strings.Join(ids, ","); got != "req-1,req-2," {
		t.Fatalf("the messages' client ids as another member saw them = %q", got)
	}
}
