package sessions_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/telemetry"
	"github.com/switchboard-gw/switchboard/telemetry/otlptest"
)

// The guides of a help desk that pass conversations around: support hands
// off to billing and sales, and so on down to legal, which hands off to no
// one.
var helpDesk = map[string]string{
	"support.md": "---\ndescription: Answers product questions\ntools: [current_time]\napproval: { default: ask }\nhandoffs: [billing, sales]\n---\nYou are support.\n",
	"billing.md": "---\ndescription: Invoices and refunds\ntools: [calculator]\napproval: { default: auto }\nmemory: { window: 40 }\nhandoffs: [support, sales, refunds]\n---\nYou are billing.\n",
	"sales.md":   "---\ndescription: Plans and prices\nhandoffs: [refunds, billing]\n---\nYou are sales.\n",
	"refunds.md": "---\ndescription: Money back\nhandoffs: [legal, support]\n---\nYou are refunds.\n",
	"legal.md":   "---\ndescription: Contracts\n---\nYou are legal.\n",
}

// withHelpDesk runs the sessions with the help desk's guides, support
// first.
func withHelpDesk(t *testing.T) option {
	dir := t.TempDir()
	for name, body := range helpDesk {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	catalog, err := guides.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *sessions.Config) { c.Guides, c.DefaultGuide = catalog, "support" }
}

func handoffCall(id, guide, reason string) openaitest.ToolCall {
	args, _ := json.Marshal(map[string]string{"guide": guide, "reason": reason})
	return openaitest.ToolCall{ID: id, Name: "handoff", Args: string(args)}
}

// resultsIn are the tool results a request carried.
func resultsIn(r openaitest.Request) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "tool" {
			out = append(out, openaitest.Text(m.Content))
		}
	}
	return out
}

// handoffs are the handoff events c got.
func handoffs(t *testing.T, evs []switchboard.Event) []switchboard.HandoffData {
	t.Helper()
	var out []switchboard.HandoffData
	for _, ev := range evs {
		if ev.Type != switchboard.EventHandoff {
			continue
		}
		p, err := ev.Payload()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *p.(*switchboard.HandoffData))
	}
	return out
}

func (c *client) storedEvents() []switchboard.Event {
	c.t.Helper()
	evs, err := c.h.db.EventsAfter(context.Background(), c.id, 0, 1000)
	if err != nil {
		c.t.Fatal(err)
	}
	return evs
}

func (c *client) guide() string {
	c.t.Helper()
	rec, err := c.h.db.Session(context.Background(), c.id)
	if err != nil {
		c.t.Fatal(err)
	}
	return rec.Guide
}

// Support passes the conversation to billing, and billing answers in the
// same turn: its request carries billing's prompt and tools, the session
// is billing's from then on, and every channel is told.
func TestHandoffPassesTheTurnToTheOtherGuide(t *testing.T) {
	h := newHarness(t, withHelpDesk(t))
	h.llm.Push(
		openaitest.Reply{Text: []string{"Let me pass you on."}, ToolCalls: []openaitest.ToolCall{handoffCall("h1", "billing", "an invoice question")}},
		openaitest.Reply{Text: []string{"Billing here: your invoice is paid."}},
	)
	c := h.newSession(alice)
	c.say("Was my invoice paid?")
	if got := c.reply().Content; got != "Let me pass you on." {
		t.Fatalf("first reply %q", got)
	}
	if got := c.reply().Content; got != "Billing here: your invoice is paid." {
		t.Fatalf("billing answered %q", got)
	}
	c.idle()

	reqs := h.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	if s := systemOf(reqs[0]); !strings.HasPrefix(s, "You are support.") {
		t.Errorf("the first request's prompt is %q, want support's", s)
	}
	if got := offeredIn(reqs[0]); !slices.Equal(got, []string{"current_time", "handoff"}) {
		t.Errorf("support's request offered %v", got)
	}
	if s := systemOf(reqs[1]); !strings.HasPrefix(s, "You are billing.") {
		t.Errorf("the request after the handoff has the prompt %q, want billing's", s)
	}
	if got := offeredIn(reqs[1]); !slices.Equal(got, []string{"calculator", "handoff"}) {
		t.Errorf("billing's request offered %v, want its calculator and handoff", got)
	}
	if res := resultsIn(lastRequest(t, h.llm)); len(res) != 1 || !strings.HasPrefix(res[0], "Passed to billing.") {
		t.Errorf("the handoff's result was %q", res)
	}

	want := []switchboard.HandoffData{{From: "support", To: "billing", Reason: "an invoice question"}}
	if got := handoffs(t, c.got); !slices.Equal(got, want) {
		t.Errorf("the listener was shown handoffs %+v, want %+v", got, want)
	}
	stored := c.storedEvents()
	if got := handoffs(t, stored); !slices.Equal(got, want) {
		t.Errorf("stored handoffs %+v, want %+v", got, want)
	}
	for _, ev := range stored {
		if ev.Type == switchboard.EventHandoff && ev.Agent != "billing" {
			t.Errorf("the handoff event is billing's, not %q's", ev.Agent)
		}
	}
	if g := c.guide(); g != "billing" {
		t.Errorf("the session's guide is %q after the handoff, want billing", g)
	}

	// /guide says who has the conversation, and to whom it passes.
	c.say("/guide")
	if m := c.until(switchboard.EventMessage, func(p any) bool {
		return p.(*switchboard.MessageData).Role == switchboard.RoleSystem
	}).(*switchboard.MessageData); !strings.HasPrefix(m.Content, "Guide: billing") || !strings.Contains(m.Content, "passes to: support, sales, refunds") {
		t.Errorf("/guide says %q", m.Content)
	}

	// The next message is billing's too.
	h.llm.Push(openaitest.Reply{Text: []string{"Still billing."}})
	c.say("And the next one?")
	c.reply()
	if s := systemOf(lastRequest(t, h.llm)); !strings.HasPrefix(s, "You are billing.") {
		t.Errorf("the next turn's prompt is %q, want billing's", s)
	}
}

// support → billing → support goes round in a circle: refused, the model
// is told why, and billing keeps the conversation.
func TestHandoffBackToAGuideOfTheTurnIsRefused(t *testing.T) {
	h := newHarness(t, withHelpDesk(t))
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h1", "billing", "invoices")}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h2", "support", "not mine after all")}},
		openaitest.Reply{Text: []string{"Billing answers after all."}},
	)
	c := h.newSession(alice)
	c.say("Was my invoice paid?")
	c.reply()
	c.idle()
	res := resultsIn(lastRequest(t, h.llm))
	if len(res) != 2 || !strings.Contains(res[1], "support → billing → support would go round in a circle") {
		t.Fatalf("tool results %q, want the second refused as a circle", res)
	}
	if g := c.guide(); g != "billing" {
		t.Errorf("the guide is %q after a refused handoff back, want billing", g)
	}
	if s := systemOf(lastRequest(t, h.llm)); !strings.HasPrefix(s, "You are billing.") {
		t.Errorf("the turn went on with the prompt %q, want billing's", s)
	}
	if got := handoffs(t, c.storedEvents()); len(got) != 1 {
		t.Errorf("stored handoffs %+v, want the one made", got)
	}

	// In a new turn, passing back is a new pass, not a circle.
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h3", "support", "a product question")}},
		openaitest.Reply{Text: []string{"Support again."}},
	)
	c.say("How do I export my data?")
	c.reply()
	if g := c.guide(); g != "support" {
		t.Errorf("a new turn's handoff back left the guide %q, want support", g)
	}
}

// A turn passes three times at most: the fourth handoff is refused.
func TestTheFourthHandoffOfATurnIsRefused(t *testing.T) {
	h := newHarness(t, withHelpDesk(t))
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h1", "billing", "1")}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h2", "sales", "2")}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h3", "refunds", "3")}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h4", "legal", "4")}},
		openaitest.Reply{Text: []string{"Refunds answers."}},
	)
	c := h.newSession(alice)
	c.say("Who handles this?")
	if got := c.reply().Content; got != "Refunds answers." {
		t.Fatalf("answered %q", got)
	}
	res := resultsIn(lastRequest(t, h.llm))
	if len(res) != 4 || !strings.Contains(res[3], "passed on 3 times already (support → billing → sales → refunds), the most a turn allows") {
		t.Fatalf("tool results %q, want the fourth refused", res)
	}
	if g := c.guide(); g != "refunds" {
		t.Errorf("the guide is %q, want refunds", g)
	}
	if got := handoffs(t, c.storedEvents()); len(got) != 3 {
		t.Errorf("%d handoffs stored, want 3: %+v", len(got), got)
	}
}

// A guide passes only to the guides it lists; the tool takes only those.
func TestAHandoffToAGuideNotListedIsRefused(t *testing.T) {
	h := newHarness(t, withHelpDesk(t))
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h1", "legal", "contract")}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h2", "support", "myself")}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "h3", Name: "handoff", Args: `{"reason":"no guide"}`}}},
		openaitest.Reply{Text: []string{"Support answers."}},
	)
	c := h.newSession(alice)
	c.say("Is my contract valid?")
	c.reply()
	res := resultsIn(lastRequest(t, h.llm))
	wants := []string{
		`"legal" is not an assistant you can pass to; you can pass to billing, sales`,
		"you are support already",
		`handoff takes {"guide": one of billing, sales`,
	}
	if len(res) != len(wants) {
		t.Fatalf("tool results %q", res)
	}
	for i, want := range wants {
		if !strings.Contains(res[i], want) {
			t.Errorf("result %d = %q, want %q", i, res[i], want)
		}
	}
	if g := c.guide(); g != "support" {
		t.Errorf("the guide is %q, want support", g)
	}

	// A guide without handoffs is offered no handoff tool.
	h.llm.Push(openaitest.Reply{Text: []string{"Legal here."}})
	l := h.attach(sessions.AttachOptions{Author: alice, Guide: "legal"})
	l.say("hello")
	l.reply()
	if got := offeredIn(lastRequest(t, h.llm)); slices.Contains(got, "handoff") {
		t.Errorf("legal, which hands off to no one, was offered %v", got)
	}
}

// The guide a handoff passed to is stored: after a restart the
// conversation is still billing's.
func TestAHandoffOutlivesARestart(t *testing.T) {
	h := newHarness(t, withHelpDesk(t))
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h1", "billing", "invoices")}},
		openaitest.Reply{Text: []string{"Billing here."}},
	)
	c := h.newSession(alice)
	c.say("Was my invoice paid?")
	c.reply()
	c.idle()
	h.restart()

	h.llm.Push(openaitest.Reply{Text: []string{"Billing, after the restart."}})
	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: -1})
	if c2.sub.Ready.Guide != "billing" {
		t.Errorf("after a restart the session is %q's, want billing's", c2.sub.Ready.Guide)
	}
	c2.say("And now?")
	c2.reply()
	if s := systemOf(lastRequest(t, h.llm)); !strings.HasPrefix(s, "You are billing.") {
		t.Errorf("after a restart the prompt is %q, want billing's", s)
	}
}

// A handoff made in the step of a call waiting for approval waits with
// it, across a restart: the approval is support's to ask, and billing
// answers once it is given.
func TestAHandoffWaitsForTheStepsApproval(t *testing.T) {
	h := newHarness(t, withHelpDesk(t))
	h.llm.Push(openaitest.Reply{ToolCalls: []openaitest.ToolCall{
		{ID: "t1", Name: "current_time", Args: `{}`}, handoffCall("h1", "billing", "invoices"),
	}})
	c := h.newSession(alice)
	c.send(switchboard.Input{Kind: switchboard.InputText, Text: "What time is it, and was my invoice paid?"})
	req := c.until(switchboard.EventConfirmationRequest, nil).(*switchboard.ConfirmationRequestData)
	if g := c.guide(); g != "support" {
		t.Fatalf("while the step waits the guide is %q, want support", g)
	}
	h.restart()

	h.llm.Push(openaitest.Reply{Text: []string{"Billing: it is paid."}})
	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: -1})
	c2.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	if got := c2.reply().Content; got != "Billing: it is paid." {
		t.Fatalf("answered %q", got)
	}
	if g := c2.guide(); g != "billing" {
		t.Errorf("after the approval the guide is %q, want billing", g)
	}
	if s := systemOf(lastRequest(t, h.llm)); !strings.HasPrefix(s, "You are billing.") {
		t.Errorf("the request after the approval has the prompt %q, want billing's", s)
	}
	if got := handoffs(t, c.storedEvents()); len(got) != 1 || got[0].To != "billing" {
		t.Errorf("stored handoffs %+v", got)
	}
}

// A handoff made and one refused are lines of the trace log and events on
// their turn's span: from, to, why one was refused; the model's reason
// only with captured content.
func TestHandoffsAreTraced(t *testing.T) {
	for _, content := range []bool{false, true} {
		tr, h := newTraced(t, content, withHelpDesk(t))
		h.llm.Push(
			openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h1", "billing", "invoices")}},
			openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h2", "support", "back")}},
			openaitest.Reply{Text: []string{"Billing answers."}},
		)
		c := h.newSession(alice)
		c.say("Was my invoice paid?")
		c.reply()
		c.idle()
		spans, lines := tr.flush(t, h)
		var got []telemetry.Line
		for _, l := range lines {
			if l.Type == "handoff" {
				got = append(got, l)
			}
		}
		reason := ""
		if content {
			reason = "invoices"
		}
		if len(got) != 2 ||
			got[0].From != "support" || got[0].To != "billing" || got[0].Guide != "billing" || got[0].Refused != "" || got[0].Reason != reason ||
			got[1].From != "billing" || got[1].To != "support" || got[1].Refused != "cycle" || got[1].Reason != "" {
			t.Fatalf("content %v: handoff lines %+v", content, got)
		}
		var turn otlptest.Span
		for _, s := range spans {
			if s.SpanID == got[0].SpanID {
				turn = s
			}
		}
		var events []map[string]any
		for _, e := range turn.Events {
			if e.Name == "handoff" {
				events = append(events, e.Attrs)
			}
		}
		if len(events) != 2 || events[0]["switchboard.handoff.to"] != "billing" || events[1]["switchboard.handoff.refused"] != "cycle" {
			t.Fatalf("the turn's span %q has handoff events %v", turn.Name, events)
		}
	}
}

// writesSeen is a store that keeps a copy of every turn write.
type writesSeen struct {
	sessions.Store
	mu     sync.Mutex
	writes []switchboard.TurnWrite
}

func (w *writesSeen) WriteTurn(ctx context.Context, sessionID string, tw switchboard.TurnWrite) (bool, error) {
	w.mu.Lock()
	w.writes = append(w.writes, tw)
	w.mu.Unlock()
	return w.Store.WriteTurn(ctx, sessionID, tw)
}

// A handoff is stored in the write of the step that made it, the new
// guide with the step's messages and its event: a crash leaves both or
// neither, never a new guide without the step (or the step without it).
func TestAHandoffIsStoredWithItsStep(t *testing.T) {
	h := newHarness(t, withHelpDesk(t))
	seen := &writesSeen{}
	h.wrap = func(s sessions.Store) sessions.Store { seen.Store = s; return seen }
	h.restart()
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{handoffCall("h1", "billing", "invoices")}},
		openaitest.Reply{Text: []string{"Billing here."}},
	)
	c := h.newSession(alice)
	c.say("Was my invoice paid?")
	c.reply()
	c.idle()
	seen.mu.Lock()
	defer seen.mu.Unlock()
	var with []switchboard.TurnWrite
	for _, w := range seen.writes {
		if w.Guide != "" {
			with = append(with, w)
		}
	}
	if len(with) != 1 {
		t.Fatalf("%d writes changed the guide, want the step's one", len(with))
	}
	w := with[0]
	hasResult := slices.ContainsFunc(w.Messages, func(m switchboard.Message) bool { return m.ToolCallID == "h1" })
	hasEvent := slices.ContainsFunc(w.Events, func(ev switchboard.Event) bool { return ev.Type == switchboard.EventHandoff && ev.Agent == "billing" })
	if w.Guide != "billing" || !hasResult || !hasEvent || w.Turn == nil {
		t.Errorf("the guide's write: guide %q, the call's result %v, the handoff event %v, the turn's progress %v; want all in one",
			w.Guide, hasResult, hasEvent, w.Turn != nil)
	}
}
