package sessions_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/telemetry"
	"github.com/switchboard-gw/switchboard/telemetry/otlptest"
)

// The turns of these tests are traced by the real telemetry package,
// exporting over OTLP/HTTP to a receiver on loopback that decodes what it
// is sent, and writing the trace log to a file read back line by line.

type traced struct {
	*otlptest.Traced
	log string
}

// newTraced is a harness whose turns are traced, with content or not,
// and opts.
func newTraced(t *testing.T, content bool, opts ...option) (*traced, *harness) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	tr := otlptest.StartTraced(t, telemetry.Config{Sampler: 1, CaptureContent: content,
		TraceLog: telemetry.TraceLogConfig{Path: path, MaxBytes: 1 << 20, MaxFiles: 2}})
	return &traced{tr, path}, newHarness(t, append(opts, func(c *sessions.Config) {
		c.Tracer = tr.Telemetry
		c.Providers["main"].Kind, c.Providers["main"].Model = "openai", "gpt-test"
	})...)
}

// flush stops the sessions, then exports every span and writes every
// line, and reads them back (every field of every line in the schema).
func (tr *traced) flush(t *testing.T, h *harness) ([]otlptest.Span, []telemetry.Line) {
	t.Helper()
	h.shutdown()
	spans := tr.Flush(t)
	lines, err := telemetry.ReadLogFile(tr.log)
	if err != nil {
		t.Fatal(err)
	}
	return spans, lines
}

// toolAndApproval has the model call an auto tool (calculator) and an ask
// tool (current_time) at once, then answer.
func toolAndApproval(h *harness) {
	h.llm.Push(openaitest.Reply{Text: []string{"Checking."}, ToolCalls: []openaitest.ToolCall{
		{ID: "call_calc", Name: "calculator", Args: `{"expression":"6*7"}`},
		{ID: "call_time", Name: "current_time", Args: `{"timezone":"UTC"}`},
	}})
	h.llm.Push(openaitest.Reply{Text: []string{"It is 42 o'clock."}})
}

func one(t *testing.T, spans []otlptest.Span, name string) otlptest.Span {
	t.Helper()
	got := otlptest.Named(spans, name)
	if len(got) != 1 {
		t.Fatalf("%d spans %q, want 1; have %s", len(got), name, otlptest.Names(spans))
	}
	return got[0]
}

// twoTurns are the two invoke_agent spans of a turn that went on after
// an approval or a restart: the first, then the one that went on.
func twoTurns(t *testing.T, spans []otlptest.Span) (otlptest.Span, otlptest.Span) {
	t.Helper()
	turns := otlptest.Named(spans, "invoke_agent tester")
	if len(turns) != 2 {
		t.Fatalf("%d invoke_agent spans, want the turn and the one that went on; have %s", len(turns), otlptest.Names(spans))
	}
	if turns[0].Attrs["switchboard.turn.resumed"] != nil {
		return turns[1], turns[0]
	}
	return turns[0], turns[1]
}

func wantAttrs(t *testing.T, s otlptest.Span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got, ok := s.Attrs[k]; !ok || !equalAttr(got, v) {
			t.Errorf("span %q: %s = %#v, want %#v", s.Name, k, got, v)
		}
	}
}

func equalAttr(got, want any) bool {
	if w, ok := want.(int); ok {
		want = int64(w)
	}
	if w, ok := want.([]string); ok {
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if g[i] != w[i] {
				return false
			}
		}
		return true
	}
	return got == want
}

// contentKeys are the attributes that hold what people and tools said.
var contentKeys = []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
	"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}

func TestATurnWithAToolAndAnApprovalIsTraced(t *testing.T) {
	tr, h := newTraced(t, false)
	toolAndApproval(h)
	c := h.newSession(alice)
	c.say("what is 6*7, and the time?")
	req := c.confirmation()
	c.until(switchboard.EventState, func(p any) bool {
		return p.(*switchboard.StateData).State == switchboard.StateAwaitingConfirmation
	})
	c.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	if got := c.reply().Content; got != "It is 42 o'clock." {
		t.Fatalf("reply = %q", got)
	}
	c.idle()
	spans, lines := tr.flush(t, h)

	first, cont := twoTurns(t, spans)
	if first.ParentID != "" {
		t.Errorf("the turn's span has a parent %s, want a root", first.ParentID)
	}
	wantAttrs(t, first, map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "tester",
		"gen_ai.conversation.id": c.id, "switchboard.turn.outcome": "awaiting_approval"})
	wantAttrs(t, cont, map[string]any{"switchboard.turn.resumed": "approval", "switchboard.turn.outcome": "answered",
		"gen_ai.conversation.id": c.id, "switchboard.turn.id": first.Attrs["switchboard.turn.id"]})
	if cont.TraceID != first.TraceID || cont.ParentID != first.SpanID {
		t.Errorf("the continuation is not the turn's child: trace %s parent %s, want %s %s", cont.TraceID, cont.ParentID, first.TraceID, first.SpanID)
	}

	chats := otlptest.Named(spans, "chat gpt-test")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2; have %s", len(chats), otlptest.Names(spans))
	}
	for _, ch := range chats {
		if ch.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("chat span kind %v, want client", ch.Kind)
		}
		wantAttrs(t, ch, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
			"gen_ai.request.model": "gpt-test", "gen_ai.response.model": "gpt-test", "gen_ai.request.temperature": 0.2,
			"gen_ai.conversation.id": c.id})
		if n, ok := ch.Attrs["gen_ai.usage.input_tokens"].(int64); !ok || n <= 0 {
			t.Errorf("chat span input tokens = %v", ch.Attrs["gen_ai.usage.input_tokens"])
		}
		if _, ok := ch.Attrs["gen_ai.usage.output_tokens"].(int64); !ok {
			t.Errorf("chat span has no output tokens: %v", ch.Attrs)
		}
	}
	byParent := map[string][]string{}
	for _, s := range spans {
		byParent[s.ParentID] = append(byParent[s.ParentID], s.Name)
	}
	for _, want := range []struct {
		parent otlptest.Span
		names  []string
	}{
		{first, []string{"approval current_time", "chat gpt-test", "execute_tool calculator", "invoke_agent tester"}},
		{cont, []string{"chat gpt-test", "execute_tool current_time"}},
	} {
		got := byParent[want.parent.SpanID]
		slices.Sort(got)
		if !slices.Equal(got, want.names) {
			t.Errorf("children of %s (%s) = %v, want %v", want.parent.Name, want.parent.Attrs["switchboard.turn.resumed"], got, want.names)
		}
	}
	finish := map[any]int{}
	for _, ch := range chats {
		finish[strings.Join(anyStrings(ch.Attrs["gen_ai.response.finish_reasons"]), ",")]++
	}
	if finish["tool_calls"] != 1 || finish["stop"] != 1 {
		t.Errorf("finish reasons = %v, want one tool_calls and one stop", finish)
	}

	calc := one(t, spans, "execute_tool calculator")
	wantAttrs(t, calc, map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "calculator",
		"gen_ai.tool.call.id": "call_calc", "gen_ai.tool.type": "function"})
	wantAttrs(t, one(t, spans, "execute_tool current_time"), map[string]any{"gen_ai.tool.call.id": "call_time"})
	approval := one(t, spans, "approval current_time")
	wantAttrs(t, approval, map[string]any{"switchboard.approval.decision": "approved", "switchboard.approval.by": "Alice",
		"switchboard.approval.channel": "web", "switchboard.approval.id": req.ConfirmationID, "gen_ai.tool.call.id": "call_time"})
	if approval.Start.Before(first.Start) || approval.End.Before(approval.Start) || cont.Start.Before(approval.End) {
		t.Errorf("the approval's wait (%v to %v) is not between the turn's start %v and its continuation %v", approval.Start, approval.End, first.Start, cont.Start)
	}
	if ev := first.Events; len(ev) != 1 || ev[0].Name != "approval_requested" {
		t.Errorf("the turn's events = %+v, want approval_requested", ev)
	}
	for _, s := range spans {
		for _, k := range contentKeys {
			if _, ok := s.Attrs[k]; ok {
				t.Errorf("span %q records %s without capture_content", s.Name, k)
			}
		}
		if s.Resource["service.name"] != "switchboard" {
			t.Errorf("service.name = %v", s.Resource["service.name"])
		}
		if s.StatusCode == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("span %q failed: %s", s.Name, s.StatusMessage)
		}
	}

	// The trace log: the same turn, step by step, in order.
	var types []string
	turnID := first.Attrs["switchboard.turn.id"]
	for _, l := range lines {
		types = append(types, l.Type)
		if l.Session != c.id || l.Turn != turnID || l.TraceID != first.TraceID || l.SpanID == "" || l.Time.IsZero() {
			t.Errorf("line %s: session %s turn %s trace %s span %s, want %s %v %s", l.Type, l.Session, l.Turn, l.TraceID, l.SpanID, c.id, turnID, first.TraceID)
		}
		if l.System != "" || l.Input != "" || l.Output != "" || l.Args != nil || l.Result != nil {
			t.Errorf("line %s holds content without capture_content: %+v", l.Type, l)
		}
	}
	// The calculator's two lines may come before or after the model's
	// response line's neighbours only where they run: after it.
	want := []string{"turn_start", "model_request", "model_response", "tool_call", "tool_result", "approval_requested", "turn_end",
		"approval_decided", "turn_start", "tool_call", "tool_result", "model_request", "model_response", "turn_end"}
	if !slices.Equal(types, want) {
		t.Fatalf("trace log types =\n%v\nwant\n%v", types, want)
	}
	at := func(i int) telemetry.Line { return lines[i] }
	if l := at(2); l.Usage == nil || l.Usage.InputTokens <= 0 || l.FinishReason != "tool_calls" || l.ToolCalls != 2 || l.Model != "gpt-test" || l.DurationMS <= 0 {
		t.Errorf("model_response = %+v", l)
	}
	if l := at(1); l.Provider != "main" || l.ProviderKind != "openai" || l.Model != "gpt-test" || l.Messages != 1 || l.Temperature == nil {
		t.Errorf("model_request = %+v", l)
	}
	if l := at(4); l.Tool != "calculator" || l.CallID != "call_calc" || l.IsError {
		t.Errorf("tool_result = %+v", l)
	}
	if l := at(5); l.Confirmation != req.ConfirmationID || l.Tool != "current_time" || l.ExpiresAt.IsZero() {
		t.Errorf("approval_requested = %+v", l)
	}
	if l := at(6); l.Outcome != "awaiting_approval" {
		t.Errorf("first turn_end = %+v", l)
	}
	if l := at(7); l.Decision != "approved" || l.By != "Alice" || l.Channel != "web" || l.SpanID != approval.SpanID {
		t.Errorf("approval_decided = %+v", l)
	}
	if l := at(8); l.Resumed != "approval" || l.SpanID != cont.SpanID {
		t.Errorf("second turn_start = %+v", l)
	}
	if l := at(13); l.Outcome != "answered" || l.Usage == nil || l.Usage.InputTokens <= 0 {
		t.Errorf("last turn_end = %+v", l)
	}
}

func anyStrings(v any) []string {
	var out []string
	if a, ok := v.([]any); ok {
		for _, x := range a {
			s, _ := x.(string)
			out = append(out, s)
		}
	}
	return out
}

func TestCapturedContentIsRecordedOnlyWhenAskedFor(t *testing.T) {
	tr, h := newTraced(t, true)
	h.llm.Push(openaitest.Reply{Text: []string{"Computing."}, ToolCalls: []openaitest.ToolCall{
		{ID: "call_calc", Name: "calculator", Args: `{"expression":"6*7"}`},
	}})
	h.llm.Push(openaitest.Reply{Text: []string{"The answer is 42."}})
	c := h.newSession(alice)
	c.say("what is 6*7?")
	c.until(switchboard.EventMessage, func(p any) bool { return p.(*switchboard.MessageData).Content == "The answer is 42." })
	c.idle()
	spans, lines := tr.flush(t, h)

	chats := otlptest.Named(spans, "chat gpt-test")
	if len(chats) != 2 {
		t.Fatalf("chat spans: %s", otlptest.Names(spans))
	}
	in, _ := chats[0].Attrs["gen_ai.input.messages"].(string)
	if !strings.Contains(in, "what is 6*7?") || !json.Valid([]byte(in)) {
		t.Errorf("gen_ai.input.messages = %q", in)
	}
	if sys, _ := chats[0].Attrs["gen_ai.system_instructions"].(string); !strings.Contains(sys, "You are the test assistant.") {
		t.Errorf("gen_ai.system_instructions = %q", sys)
	}
	out, _ := chats[1].Attrs["gen_ai.output.messages"].(string)
	if !strings.Contains(out, "The answer is 42.") {
		t.Errorf("gen_ai.output.messages = %q", out)
	}
	tool := one(t, spans, "execute_tool calculator")
	if args := tool.Attrs["gen_ai.tool.call.arguments"]; args != `{"expression":"6*7"}` {
		t.Errorf("arguments = %v", args)
	}
	if res, _ := tool.Attrs["gen_ai.tool.call.result"].(string); !strings.Contains(res, "42") {
		t.Errorf("result = %q", res)
	}
	var sawArgs, sawResult, sawInput bool
	for _, l := range lines {
		switch l.Type {
		case "tool_call":
			sawArgs = string(l.Args) == `{"expression":"6*7"}`
		case "tool_result":
			sawResult = l.Result != nil && strings.Contains(*l.Result, "42")
		case "model_request":
			sawInput = sawInput || strings.Contains(l.Input, "what is 6*7?")
		}
	}
	if !sawArgs || !sawResult || !sawInput {
		t.Errorf("trace log content: args %v result %v input %v", sawArgs, sawResult, sawInput)
	}
}

func TestAResumedTurnLinksToTheInterruptedOne(t *testing.T) {
	tr, h := newTraced(t, false)
	c, _ := h.midStream("question", []string{"Half an ", "answer"}, openaitest.Reply{Text: []string{"The whole answer."}})
	h.restart() // the turn is cut, as by a crash
	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: 0})
	if got := c2.reply().Content; got != "The whole answer." {
		t.Fatalf("answer after restart = %q", got)
	}
	c2.idle()
	spans, lines := tr.flush(t, h)

	cut, again := twoTurns(t, spans)
	wantAttrs(t, cut, map[string]any{"switchboard.turn.outcome": "interrupted", "error.type": "interrupted"})
	wantAttrs(t, again, map[string]any{"switchboard.turn.resumed": "restart", "switchboard.turn.outcome": "answered",
		"switchboard.turn.id": cut.Attrs["switchboard.turn.id"]})
	if again.TraceID == cut.TraceID || again.ParentID != "" {
		t.Errorf("the resumed turn is not a new trace's root: trace %s parent %q", again.TraceID, again.ParentID)
	}
	if len(again.Links) != 1 || again.Links[0].TraceID != cut.TraceID || again.Links[0].SpanID != cut.SpanID {
		t.Fatalf("the resumed turn links to %+v, want the interrupted span %s/%s", again.Links, cut.TraceID, cut.SpanID)
	}
	var start *telemetry.Line
	for i, l := range lines {
		if l.Type == "turn_start" && l.Resumed == "restart" {
			start = &lines[i]
		}
	}
	if start == nil || start.Link == nil || start.Link.SpanID != cut.SpanID || start.TraceID != again.TraceID {
		t.Fatalf("the trace log's resumed turn_start = %+v", start)
	}
}

// awaitingApproval is a traced turn waiting for the approval of
// current_time.
func awaitingApproval(t *testing.T) (*traced, *harness, *client, *switchboard.ConfirmationRequestData) {
	t.Helper()
	tr, h := newTraced(t, false)
	askForTime(h)
	c := h.newSession(alice)
	c.say("what time is it?")
	req := c.confirmation()
	c.idleOrAwaiting()
	return tr, h, c, req
}

func TestAnApprovalAnsweredAfterARestartIsTracedUnderItsTurn(t *testing.T) {
	tr, h, c, req := awaitingApproval(t)
	h.restart() // the turn's span context is stored with the waiting turn
	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: 0})
	c2.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	c2.until(switchboard.EventMessage, func(p any) bool { return strings.HasPrefix(p.(*switchboard.MessageData).Content, "Result: ") })
	c2.idle()
	spans, _ := tr.flush(t, h)

	first, cont := twoTurns(t, spans)
	approval := one(t, spans, "approval current_time")
	if approval.TraceID != first.TraceID || approval.ParentID != first.SpanID || cont.ParentID != first.SpanID {
		t.Fatalf("after the restart the approval (parent %s) and the continuation (parent %s) are not under the turn %s", approval.ParentID, cont.ParentID, first.SpanID)
	}
	if !approval.Start.Before(approval.End) || approval.Start.Before(first.Start) {
		t.Errorf("the approval's wait = %v to %v, want it from the request, before the restart (turn began %v)", approval.Start, approval.End, first.Start)
	}
	wantAttrs(t, approval, map[string]any{"switchboard.approval.decision": "approved", "switchboard.approval.channel": "web", "switchboard.approval.by": "Alice"})
}

// A model call that fails is an error on its span and the turn's, in the
// words people are shown (with the log line's reference), never in the
// provider's: its answer may quote the request.
func TestAFailedModelCallIsAnErrorOnItsSpan(t *testing.T) {
	tr, h := newTraced(t, false)
	h.llm.Push(openaitest.Reply{Status: 400})
	c := h.newSession(alice)
	c.say("hello")
	shown := c.errorEvent()
	c.idle()
	spans, lines := tr.flush(t, h)
	chat := one(t, spans, "chat gpt-test")
	turn := one(t, spans, "invoke_agent tester")
	for _, s := range []otlptest.Span{chat, turn} {
		if s.StatusCode != tracepb.Status_STATUS_CODE_ERROR || s.StatusMessage != shown.Message || s.Attrs["error.type"] != "refused" {
			t.Errorf("span %q: status %v %q, error.type %v; want Error, %q, refused", s.Name, s.StatusCode, s.StatusMessage, s.Attrs["error.type"], shown.Message)
		}
		if strings.Contains(s.StatusMessage, "scripted failure") {
			t.Errorf("span %q quotes the provider's answer: %q", s.Name, s.StatusMessage)
		}
	}
	if len(chat.Events) != 1 || chat.Events[0].Name != "exception" || chat.Events[0].Attrs["exception.message"] != shown.Message {
		t.Errorf("chat span events = %+v", chat.Events)
	}
	var types []string
	for _, l := range lines {
		types = append(types, l.Type)
		if l.Type == "error" && (l.Step != "model" || l.ErrorType != "refused" || l.Error != shown.Message) {
			t.Errorf("error line = %+v", l)
		}
	}
	if got := strings.Join(types, " "); got != "turn_start model_request model_response error turn_end" {
		t.Errorf("trace log = %s", got)
	}
}

// A stop while a call waits for approval is that approval's end, by
// whoever stopped.
func TestAStopEndsTheApprovalItWaitsFor(t *testing.T) {
	tr, h, c, _ := awaitingApproval(t)
	c.send(switchboard.Input{Kind: switchboard.InputText, Text: "/stop"})
	c.until(switchboard.EventConfirmationResolved, nil)
	c.idle()
	spans, lines := tr.flush(t, h)
	approval := one(t, spans, "approval current_time")
	wantAttrs(t, approval, map[string]any{"switchboard.approval.decision": "cancelled", "switchboard.approval.by": "Alice"})
	_, cont := twoTurns(t, spans)
	wantAttrs(t, cont, map[string]any{"switchboard.turn.outcome": "stopped"})
	var decided int
	for _, l := range lines {
		if l.Type == "approval_decided" {
			decided++
		}
	}
	if decided != 1 {
		t.Errorf("%d approval_decided lines, want 1", decided)
	}
}

// A compaction is a line and an event on its turn's span, and the summary
// it asks for a chat span under the turn.
func TestACompactionIsTraced(t *testing.T) {
	tr, h := newTraced(t, false)
	h.llm.Respond(func(r openaitest.Request) openaitest.Reply {
		if isSummaryRequest(r) {
			return openaitest.Reply{Text: []string{"NOTES: facts noted."}}
		}
		return openaitest.Reply{Text: []string{"Noted."}}
	})
	c := h.attach(sessions.AttachOptions{Author: alice, Guide: "compacting"})
	for i := range 5 {
		c.say(fmt.Sprintf("fact %d", i))
		c.reply()
	}
	c.idle()
	spans, lines := tr.flush(t, h)
	var compaction *telemetry.Line
	for i, l := range lines {
		if l.Type == "compaction" {
			compaction = &lines[i]
			break
		}
	}
	if compaction == nil || compaction.Summarised <= 0 || compaction.Kept <= 0 {
		t.Fatalf("compaction line = %+v", compaction)
	}
	var turn otlptest.Span
	for _, s := range spans {
		if s.SpanID == compaction.SpanID {
			turn = s
		}
	}
	if turn.Name != "invoke_agent compacting" || !slices.ContainsFunc(turn.Events, func(e otlptest.Event) bool { return e.Name == "compaction" }) {
		t.Fatalf("the compaction's span is %q with events %+v, want the turn's with a compaction event", turn.Name, turn.Events)
	}
	var chats int
	for _, s := range spans {
		if s.Name == "chat gpt-test" && s.ParentID == turn.SpanID {
			chats++
		}
	}
	if chats != 2 {
		t.Errorf("%d chat spans under the compacting turn, want 2 (the summary and the answer)", chats)
	}
}

// A model call after a reload swapped the providers is traced as the new
// provider's: its kind and model, not those the gateway started with.
func TestAModelCallAfterAReloadIsTracedAsTheNewProvider(t *testing.T) {
	tr, h := newTraced(t, false)
	adapter, err := openai.New(providers.Config{Name: "main", Kind: "openai", BaseURL: h.llm.BaseURL(), APIKey: "sk-2", Model: "local-model"})
	if err != nil {
		t.Fatal(err)
	}
	h.m.SetProviders(map[string]*providers.Resilient{"main": {Name: "main", Kind: "ollama", Model: "local-model", Provider: adapter,
		Policy: providers.Policy{IdleTimeout: 5 * time.Second}}}, "main")
	c := h.newSession(alice)
	c.say("hello")
	c.reply()
	c.idle()
	spans, _ := tr.flush(t, h)
	var chats []otlptest.Span
	for _, sp := range spans {
		if strings.HasPrefix(sp.Name, "chat ") {
			chats = append(chats, sp)
		}
	}
	if len(chats) != 1 {
		t.Fatalf("%d chat spans, want 1; have %s", len(chats), otlptest.Names(spans))
	}
	wantAttrs(t, chats[0], map[string]any{"gen_ai.provider.name": "ollama", "switchboard.provider": "main"})
}
