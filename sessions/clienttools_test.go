package sessions_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// lookupOrder is a tool the caller offers and runs itself.
var lookupOrder = switchboard.ClientTool{
	Name: "lookup_order", Description: "Finds an order by its number",
	Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`),
}

// askWithTools sends text offering the caller's lookup_order, and returns
// once the turn waits (or has ended).
func (c *client) askWithTools(text string, wait time.Duration) {
	c.t.Helper()
	c.send(switchboard.Input{Kind: switchboard.InputText, Text: text, ClientTools: []switchboard.ClientTool{lookupOrder}, WaitTimeout: wait})
}

func (c *client) toolsRequested() *switchboard.ToolsRequestedData {
	c.t.Helper()
	return c.until(switchboard.EventToolsRequested, nil).(*switchboard.ToolsRequestedData)
}

// results returns the caller's results; the error is Submit's.
func (c *client) results(who switchboard.Author, rs ...switchboard.ToolResult) error {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.h.m.Submit(ctx, c.id, switchboard.Input{Kind: switchboard.InputToolResults, Author: who, ToolResults: rs})
	if err != nil {
		return err
	}
	if _, err := r.Wait(ctx); err != nil {
		c.t.Fatalf("waiting for the results: %v", err)
	}
	return nil
}

// requestHas checks that a request to the model offered the tool and
// ends with the assistant's call id followed by its result content.
func requestHas(t *testing.T, req openaitest.Request, tool, callID, result string) {
	t.Helper()
	offered := false
	for _, tl := range req.Tools {
		offered = offered || tl.Function.Name == tool
	}
	if !offered {
		t.Fatalf("the request did not offer %s", tool)
	}
	for i, m := range req.Messages {
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		for _, c := range m.ToolCalls {
			if c.ID != callID {
				continue
			}
			for _, r := range req.Messages[i+1:] {
				if r.Role == "tool" && r.ToolCallID == callID {
					if got := openaitest.Text(r.Content); got != result {
						t.Fatalf("the result of %s the model read = %q, want %q", callID, got, result)
					}
					return
				}
			}
			t.Fatalf("the call %s has no result in the request", callID)
		}
	}
	t.Fatalf("the request holds no assistant call %s", callID)
}

// orderAsked opens a session for Alice and asks, offering lookup_order,
// a model that calls it (k1) and then answers "Order 7 has shipped.".
func (h *harness) orderAsked() *client {
	h.t.Helper()
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "k1", Name: "lookup_order", Args: `{"id":7}`}}},
		openaitest.Reply{Text: []string{"Order 7 has shipped."}},
	)
	c := h.newSession(alice)
	c.askWithTools("where is order 7?", 0)
	return c
}

// A stored session: the model calls the caller's tool, the caller is
// asked for it (tools_requested, and executing_tool for the other
// channels), its result goes back to the model with the call, and the
// step is stored like any.
func TestClientToolRoundTrip(t *testing.T) {
	h := newHarness(t)
	c := h.orderAsked()
	// What the turn spent so far is reported before the caller is asked:
	// its request ends there.
	first := c.until(switchboard.EventUsage, nil).(*switchboard.UsageData)
	req := c.toolsRequested()
	if first.TotalTokens == 0 || first.Session != first.Usage {
		t.Fatalf("usage before the caller was asked = %+v", first)
	}
	if req.For != alice.Key() || len(req.Calls) != 1 || req.Calls[0].ID != "k1" || req.Calls[0].Name != "lookup_order" || string(req.Calls[0].Args) != `{"id":7}` || req.ExpiresAt.IsZero() {
		t.Fatalf("tools requested = %+v", req)
	}
	st := c.until(switchboard.EventState, nil).(*switchboard.StateData)
	if st.State != switchboard.StateExecutingTool || st.Tool != "lookup_order" {
		t.Fatalf("state while the caller runs its tool = %+v", st)
	}
	if err := c.results(alice, switchboard.ToolResult{CallID: "k1", Content: "shipped on Monday"}); err != nil {
		t.Fatal(err)
	}
	if got := c.reply().Content; got != "Order 7 has shipped." {
		t.Fatalf("answer = %q", got)
	}
	// The rest of the turn is reported on its own, and both parts are
	// charged, once each.
	second := c.until(switchboard.EventUsage, nil).(*switchboard.UsageData)
	if second.TotalTokens == 0 || second.Session != first.Usage.Add(second.Usage) {
		t.Fatalf("usage at the end = %+v after %+v", second, first)
	}
	c.idle()
	rows, err := h.db.Spending(context.Background(), switchboard.SpendQuery{Session: c.id})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Usage != second.Session {
		t.Fatalf("charged %+v, want %+v in all", rows, second.Session)
	}
	reqs := h.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was called %d times, want 2", len(reqs))
	}
	requestHas(t, reqs[1], "lookup_order", "k1", "shipped on Monday")
	if got := messagesOf(c.window()); got != "user:where is order 7? | assistant: | tool:shipped on Monday | assistant:Order 7 has shipped." {
		t.Fatalf("stored context = %s", got)
	}
	checkHistory(t, c.stored(), c.got)
	if unfinished, err := h.db.Unfinished(context.Background()); err != nil || len(unfinished) != 0 {
		t.Fatalf("unfinished after the answer: %v, %v", unfinished, err)
	}
}

// Stateless: the caller sends the whole conversation, the last step of
// which is the calls it ran; the session opens awaiting their results,
// which the caller then gives. A history whose calls have their results
// is just history.
func TestClientToolStateless(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(openaitest.Reply{Text: []string{"Order 7 has shipped."}})
	history := []switchboard.Message{
		{Role: switchboard.RoleUser, Content: "where is order 7?"},
		{Role: switchboard.RoleAssistant, ToolCalls: []switchboard.ToolCall{{ID: "k1", Name: "lookup_order", Args: json.RawMessage(`{"id":7}`)}}},
	}
	c := h.attach(sessions.AttachOptions{Ephemeral: true, Author: alice, History: history})
	ctx := context.Background()
	r, err := h.m.Submit(ctx, c.id, switchboard.Input{Kind: switchboard.InputToolResults, Author: alice,
		ClientTools: []switchboard.ClientTool{lookupOrder}, ToolResults: []switchboard.ToolResult{{CallID: "k1", Content: "shipped on Monday"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.reply().Content; got != "Order 7 has shipped." {
		t.Fatalf("answer = %q", got)
	}
	c.idle()
	req := lastRequest(t, h.llm)
	requestHas(t, req, "lookup_order", "k1", "shipped on Monday")
	var roles []string
	for _, m := range req.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool" {
		t.Fatalf("the model was given %s: the calls' message must be there once", got)
	}
	if err := h.m.Delete(ctx, c.id); err != nil {
		t.Fatal(err)
	}

	// The calls with their results: history, and a message is answered.
	h.llm.Push(openaitest.Reply{Text: []string{"You are welcome."}})
	done := append(history, switchboard.Message{Role: switchboard.RoleTool, ToolCallID: "k1", ToolName: "lookup_order", Content: "shipped on Monday"},
		switchboard.Message{Role: switchboard.RoleAssistant, Content: "Order 7 has shipped."})
	d := h.attach(sessions.AttachOptions{Ephemeral: true, Author: alice, History: done[:3]})
	if err := d.results(alice, switchboard.ToolResult{CallID: "k1", Content: "again"}); !errors.Is(err, sessions.ErrBadInput) {
		t.Fatalf("results for a step whose results are in the history: %v, want ErrBadInput", err)
	}
	d.say("thanks")
	if got := d.reply().Content; got != "You are welcome." {
		t.Fatalf("answer = %q", got)
	}
	roles = nil
	for _, m := range lastRequest(t, h.llm).Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,user" {
		t.Fatalf("the model was given %s", got)
	}
}

// One reply calls a guide's auto tool and the caller's: the guide's runs
// on the gateway, only the caller's is asked for, and the model then
// reads both results.
func TestClientToolWithAGuideToolInOneReply(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{
			{ID: "g1", Name: "calculator", Args: `{"expression":"6*7"}`},
			{ID: "k1", Name: "lookup_order", Args: `{"id":7}`},
		}},
		openaitest.Reply{Text: []string{"42, and shipped."}},
	)
	c := h.newSession(alice)
	c.askWithTools("6*7, and where is order 7?", 0)
	ran := c.until(switchboard.EventToolResponse, nil).(*switchboard.ToolResponseData)
	if ran.ToolCallID != "g1" || ran.IsError || !strings.Contains(ran.ContentPreview, "42") {
		t.Fatalf("the guide's tool = %+v", ran)
	}
	req := c.toolsRequested()
	if len(req.Calls) != 1 || req.Calls[0].ID != "k1" {
		t.Fatalf("asked the caller for %+v, want k1 alone", req.Calls)
	}
	if err := c.results(alice, switchboard.ToolResult{CallID: "k1", Content: "shipped"}); err != nil {
		t.Fatal(err)
	}
	c.reply()
	last := lastRequest(t, h.llm)
	requestHas(t, last, "lookup_order", "k1", "shipped")
	var g1 string
	for _, m := range last.Messages {
		if m.Role == "tool" && m.ToolCallID == "g1" {
			g1 = openaitest.Text(m.Content)
		}
	}
	if !strings.Contains(g1, "42") {
		t.Fatalf("the guide tool's result the model read = %q", g1)
	}
}

// Only the turn's author returns results; others are refused and told
// why, and their messages get the busy answer; results for unknown calls,
// or short of one, are refused and change nothing; then the right ones
// are taken.
func TestClientToolResultsAreChecked(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{
			{ID: "k1", Name: "lookup_order", Args: `{"id":7}`},
			{ID: "k2", Name: "lookup_order", Args: `{"id":8}`},
		}},
		openaitest.Reply{Text: []string{"Both shipped."}},
	)
	c := h.newSession(alice)
	guest := h.attach(sessions.AttachOptions{SessionID: c.id, Author: bob})
	c.askWithTools("where are orders 7 and 8?", 0)
	c.toolsRequested()

	err := c.results(bob, switchboard.ToolResult{CallID: "k1", Content: "x"}, switchboard.ToolResult{CallID: "k2", Content: "y"})
	if !errors.Is(err, sessions.ErrForbidden) || !strings.Contains(sessions.Reason(err, ""), "Alice") {
		t.Fatalf("results from another: %v", err)
	}
	guest.say("hello?")
	if e := guest.errorEvent(); e.Code != switchboard.ErrCodeBusy || !strings.Contains(e.Message, "Alice") || !strings.Contains(e.Message, "lookup_order") {
		t.Fatalf("a message while the caller's tools run got %+v", e)
	}
	for _, bad := range [][]switchboard.ToolResult{
		{{CallID: "k1", Content: "x"}, {CallID: "nope", Content: "y"}},
		{{CallID: "k1", Content: "x"}},
		{{CallID: "k1", Content: "x"}, {CallID: "k1", Content: "x"}, {CallID: "k2", Content: "y"}},
	} {
		err := c.results(alice, bad...)
		if !errors.Is(err, sessions.ErrBadInput) || !strings.Contains(sessions.Reason(err, ""), "k") {
			t.Fatalf("results %+v: %v, want ErrBadInput with the ids", bad, err)
		}
	}
	if n := len(h.llm.Requests()); n != 1 {
		t.Fatalf("the model was called %d times while results were refused", n)
	}
	if err := c.results(alice, switchboard.ToolResult{CallID: "k2", Content: "on its way"}, switchboard.ToolResult{CallID: "k1", Content: "delivered", IsError: false}); err != nil {
		t.Fatal(err)
	}
	if got := c.reply().Content; got != "Both shipped." {
		t.Fatalf("answer = %q", got)
	}
	last := lastRequest(t, h.llm)
	requestHas(t, last, "lookup_order", "k1", "delivered")
	requestHas(t, last, "lookup_order", "k2", "on its way")
	if err := c.results(alice, switchboard.ToolResult{CallID: "k1", Content: "late"}); !errors.Is(err, sessions.ErrBadInput) {
		t.Fatalf("results once nothing waits: %v", err)
	}
	c.say("thanks") // the session is usable
	c.reply()
	if got := messagesOf(c.window()); !strings.HasSuffix(got, "user:thanks | assistant:ok") {
		t.Fatalf("context = %s", got)
	}
}

// A wait on the caller can be stopped, by its author too: the calls get
// a "cancelled" result and the turn ends.
func TestClientToolWaitIsStopped(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "k1", Name: "lookup_order", Args: `{"id":7}`}}})
	c := h.newSession(alice)
	c.askWithTools("where is order 7?", 0)
	c.toolsRequested()
	c.say("/stop")
	tr := c.until(switchboard.EventToolResponse, nil).(*switchboard.ToolResponseData)
	if tr.ToolCallID != "k1" || !tr.IsError || !strings.Contains(tr.ContentPreview, "cancelled") {
		t.Fatalf("the stopped call's result = %+v", tr)
	}
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeCancelled {
		t.Fatalf("stopped turn: %+v", e)
	}
	c.idle()
	if err := c.results(alice, switchboard.ToolResult{CallID: "k1", Content: "late"}); !errors.Is(err, sessions.ErrBadInput) {
		t.Fatalf("results after /stop: %v", err)
	}
}

// Results not back in time: each call gets an error result the model
// reads, and the turn ends with an answer. The wait is the input's
// WaitTimeout, not a moment shorter.
func TestClientToolResultsExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const wait = 2 * time.Minute
		h := newBubbleHarness(t, func(c *sessions.Config) { c.ApprovalTimeout = time.Hour })
		h.model.Push(
			openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "k1", Name: "lookup_order", Args: `{"id":7}`}}},
			openaitest.Reply{Text: []string{"I could not look it up."}},
		)
		c := h.newSession(alice)
		c.askWithTools("where is order 7?", wait)
		asked := time.Now()
		req := c.already(switchboard.EventToolsRequested).(*switchboard.ToolsRequestedData)
		if got := req.ExpiresAt.Sub(asked); got != wait {
			t.Fatalf("the results are awaited for %s, want %s", got, wait)
		}
		time.Sleep(wait - time.Nanosecond)
		if n := len(h.model.Requests()); n != 1 {
			t.Fatalf("the model was called again %d times before the wait was over", n-1)
		}
		time.Sleep(time.Nanosecond)
		tr := c.already(switchboard.EventToolResponse).(*switchboard.ToolResponseData)
		if !tr.IsError || tr.ToolCallID != "k1" {
			t.Fatalf("the expired call's result = %+v", tr)
		}
		if got := c.already(switchboard.EventMessage).(*switchboard.MessageData).Content; got != "I could not look it up." {
			t.Fatalf("answer = %q", got)
		}
		if got := lastMessage(t, h.model); got.Role != switchboard.RoleTool || got.Content != "the caller did not return this tool's result in time" || !got.IsError {
			t.Fatalf("the model read %+v", got)
		}
	})
}

// WaitTimeout bounds an approval's wait too.
func TestWaitTimeoutShortensAnApproval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const wait = 30 * time.Second
		h := newBubbleHarness(t, func(c *sessions.Config) { c.ApprovalTimeout = time.Hour })
		askForTime(h)
		c := h.newSession(alice)
		c.send(switchboard.Input{Kind: switchboard.InputText, Text: "what time is it?", WaitTimeout: wait})
		asked := time.Now()
		req := c.already(switchboard.EventConfirmationRequest).(*switchboard.ConfirmationRequestData)
		if got := req.ExpiresAt.Sub(asked); got != wait {
			t.Fatalf("the request expires %s after it was asked, want %s", got, wait)
		}
		time.Sleep(wait)
		res := c.already(switchboard.EventConfirmationResolved).(*switchboard.ConfirmationResolvedData)
		if res.Approved || res.Why() != switchboard.ReasonExpired {
			t.Fatalf("resolved = %+v", res)
		}
	})
}

// A restart while the caller's results are awaited: the step waits
// again, the results are taken, and the turn's later requests still offer
// the caller's tools.
func TestClientToolResultsAfterARestart(t *testing.T) {
	h := newHarness(t)
	c := h.orderAsked()
	c.toolsRequested()

	h.restart()

	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: -1})
	if err := c2.results(alice, switchboard.ToolResult{CallID: "k1", Content: "shipped"}); err != nil {
		t.Fatal(err)
	}
	if got := c2.reply().Content; got != "Order 7 has shipped." {
		t.Fatalf("answer = %q", got)
	}
	reqs := h.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was called %d times, want 2", len(reqs))
	}
	requestHas(t, reqs[1], "lookup_order", "k1", "shipped")
}

// Tools a provider would refuse, or that the guide's would shadow, are
// refused with the reason, before anything is stored or asked.
func TestClientToolsAreChecked(t *testing.T) {
	h := newHarness(t)
	c := h.newSession(alice)
	for _, tc := range []struct {
		tools []switchboard.ClientTool
		says  string
	}{
		{[]switchboard.ClientTool{{Name: "calculator"}}, "guide's own"},
		{[]switchboard.ClientTool{{Name: "find_tools"}}, "guide's own"},
		{[]switchboard.ClientTool{{Name: "look up"}}, "not valid"},
		{[]switchboard.ClientTool{{Name: strings.Repeat("x", 65)}}, "not valid"},
		{[]switchboard.ClientTool{lookupOrder, lookupOrder}, "twice"},
		{[]switchboard.ClientTool{{Name: "lookup", Parameters: json.RawMessage(`[1]`)}}, "JSON object"},
		{[]switchboard.ClientTool{{Name: "lookup", Parameters: json.RawMessage(`null`)}}, "JSON object"},
	} {
		_, err := h.m.Submit(context.Background(), c.id, switchboard.Input{Kind: switchboard.InputText, Author: alice, Text: "hi", ClientTools: tc.tools})
		if !errors.Is(err, sessions.ErrBadInput) || !strings.Contains(sessions.Reason(err, ""), tc.says) {
			t.Fatalf("tools %+v: %v, want ErrBadInput saying %q", tc.tools, err, tc.says)
		}
	}
	if n := len(h.llm.Requests()); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
	if w := c.window(); len(w) != 0 {
		t.Fatalf("stored: %s", messagesOf(w))
	}
}

// A stateless session deleted while its turn waits (for an approval
// here) has its tokens charged all the same.
func TestDeletedWhileWaitingIsCharged(t *testing.T) {
	h := newHarness(t)
	askForTime(h)
	c := h.attach(sessions.AttachOptions{Ephemeral: true, Author: alice})
	c.say("what time is it?")
	c.confirmation()
	ctx := context.Background()
	if err := h.m.Delete(ctx, c.id); err != nil {
		t.Fatal(err)
	}
	rows, err := h.db.Spending(ctx, switchboard.SpendQuery{Session: c.id})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Usage.TotalTokens == 0 {
		t.Fatalf("charged %+v after the delete, want the model call's tokens", rows)
	}
}
