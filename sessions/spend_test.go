package sessions_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// Every call of the scripted model spends 10 prompt and 5 completion
// tokens (openaitest), of the model gpt-test.

// noonClock runs from today's noon (UTC) on, as time passes: a test's
// turns fall in one day, whenever it runs.
func noonClock(c *sessions.Config) {
	start := time.Now()
	noon := time.Date(start.Year(), start.Month(), start.Day(), 12, 0, 0, 0, time.UTC)
	c.Now = func() time.Time { return noon.Add(time.Since(start)) }
}

// spending sets the prices and budgets turns start with.
func spending(sp *sessions.Spending) option {
	return func(c *sessions.Config) { noonClock(c); c.Spending = sp }
}

// gptTest costs $1 per million input tokens and $2 per million output:
// a call, $0.00002.
var gptTest = map[string]switchboard.Price{"gpt-test": {Input: 1, Output: 2}}

const callCost = (10*1 + 5*2) / 1e6

// recordingMetrics is sessions.Metrics that keeps what Spent and
// BudgetRefused were told.
type recordingMetrics struct {
	mu      sync.Mutex
	spent   []string // guide/model
	cost    float64
	refused []string
}

func (m *recordingMetrics) Event(string)                             {}
func (m *recordingMetrics) TurnEnded(string, time.Duration)          {}
func (m *recordingMetrics) TurnResumed(string)                       {}
func (m *recordingMetrics) Refused(string)                           {}
func (m *recordingMetrics) WriteFailed()                             {}
func (m *recordingMetrics) GaugeFunc(string, string, func() float64) {}
func (m *recordingMetrics) Spent(guide, model string, u switchboard.Usage, cost float64, priced bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spent = append(m.spent, guide+"/"+model)
	m.cost += cost
}
func (m *recordingMetrics) BudgetRefused(scope string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refused = append(m.refused, scope)
}

func (h *harness) spendingBy(by string) []switchboard.SpendRow {
	h.t.Helper()
	rows, err := h.db.Spending(context.Background(), switchboard.SpendQuery{By: by})
	if err != nil {
		h.t.Fatal(err)
	}
	return rows
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// A turn's charge is stored with its end: who, with which guide, model
// and channel, its tokens (both model calls of a turn with a tool) and its
// cost at the price in force; the metrics count it by guide and model.
func TestTurnsAreChargedWithTheirEnd(t *testing.T) {
	mets := &recordingMetrics{}
	h := newHarness(t, spending(&sessions.Spending{Prices: gptTest}), func(c *sessions.Config) { c.Metrics = mets })
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_a", Name: "calculator", Args: `{"expression":"2+2"}`}}},
		openaitest.Reply{Text: []string{"4"}},
		openaitest.Reply{Text: []string{"Hello Bob"}},
	)
	c := h.newSession(alice)
	c.answered("what is 2+2?")
	b := h.attach(sessions.AttachOptions{SessionID: c.id, Author: bob})
	b.answered("hi")

	byPerson := h.spendingBy(switchboard.ByPerson)
	if len(byPerson) != 2 || byPerson[0].Key != alice.Key() || byPerson[0].Turns != 1 || byPerson[0].Usage.TotalTokens != 30 ||
		!near(byPerson[0].CostUSD, 2*callCost) || byPerson[1].Key != bob.Key() || byPerson[1].Usage.TotalTokens != 15 {
		t.Fatalf("spending by person = %+v", byPerson)
	}
	for by, want := range map[string]string{switchboard.ByGuide: "tester", switchboard.ByModel: "gpt-test"} {
		if rows := h.spendingBy(by); len(rows) != 1 || rows[0].Key != want || rows[0].Turns != 2 || rows[0].Unpriced != 0 {
			t.Errorf("spending by %s = %+v, want all of it %s's", by, rows, want)
		}
	}
	if rows := h.spendingBy(switchboard.ByChannel); len(rows) != 2 || rows[0].Key != "web" || rows[1].Key != "slack" {
		t.Errorf("spending by channel = %+v", rows)
	}
	mets.mu.Lock()
	defer mets.mu.Unlock()
	if strings.Join(mets.spent, " ") != "tester/gpt-test tester/gpt-test" || !near(mets.cost, 3*callCost) {
		t.Errorf("metrics were told %v and $%g", mets.spent, mets.cost)
	}
}

// A turn stopped while it waits for an approval is charged what its model
// call spent; a model with no price has a cost that is not known, and
// /usage says so rather than $0.
func TestAStoppedTurnIsChargedAndAnUnpricedOneIsUnknown(t *testing.T) {
	h := newHarness(t, spending(&sessions.Spending{Prices: map[string]switchboard.Price{"another-model": {Input: 1}}}))
	askForTime(h)
	c := h.newSession(alice)
	c.say("what time is it?")
	c.confirmation()
	c.say("/stop")
	if e := c.errorEvent(); e.Code != switchboard.ErrCodeCancelled {
		t.Fatalf("stop reported %+v", e)
	}
	c.idle()
	rows := h.spendingBy("")
	if len(rows) != 1 || rows[0].Turns != 1 || rows[0].Usage.TotalTokens != 15 || rows[0].Unpriced != 1 {
		t.Fatalf("spending after a stopped turn = %+v, want its one call charged, unpriced", rows)
	}
	c.say("/usage")
	msg := c.until(switchboard.EventMessage, func(p any) bool {
		return p.(*switchboard.MessageData).Role == switchboard.RoleSystem
	}).(*switchboard.MessageData)
	if !strings.Contains(msg.Content, "= 15 total") || !strings.Contains(msg.Content, "Cost: unknown") {
		t.Errorf("/usage said %q", msg.Content)
	}
}

// /usage shows the session's cost to everyone, and the person's own
// spend against their budget to them alone.
func TestUsageShowsCostAndTheBudget(t *testing.T) {
	h := newHarness(t, spending(&sessions.Spending{Prices: gptTest, Budgets: []sessions.Budget{
		{Scope: switchboard.ScopePerson, Period: switchboard.PeriodDay, Tokens: 1000},
	}}))
	c := h.newSession(alice)
	c.answered("hi")
	c.say("/usage")
	msg := c.until(switchboard.EventMessage, func(p any) bool {
		return p.(*switchboard.MessageData).Role == switchboard.RoleSystem
	}).(*switchboard.MessageData)
	if !strings.Contains(msg.Content, "Cost: $0.0000") || strings.Contains(msg.Content, "unknown") {
		t.Errorf("/usage said %q", msg.Content)
	}
	own := c.noticeOf(sessions.NoticeInfo)
	if own.Code != sessions.NoticeInfo || own.For != alice.Key() || !strings.Contains(own.Message, "daily budget of 1000 tokens: 15 of 1000 tokens used") {
		t.Errorf("alice was told %+v", own)
	}
}

// noticeOf is the first notice (a seq-0 error event) of code c was sent,
// among the events it read already or, if none, those that come next: a
// notice is sent at once, without waiting for the stored events before
// it.
func (c *client) noticeOf(code string) *switchboard.ErrorData {
	c.t.Helper()
	for _, ev := range c.got {
		if ev.Type != switchboard.EventError || ev.Seq != 0 {
			continue
		}
		p, err := ev.Payload()
		if err != nil {
			c.t.Fatal(err)
		}
		if d := p.(*switchboard.ErrorData); d.Code == code {
			return d
		}
	}
	return c.until(switchboard.EventError, func(p any) bool {
		return p.(*switchboard.ErrorData).Code == code
	}).(*switchboard.ErrorData)
}

// answered says text and waits for the answer and the turn's end.
func (c *client) answered(text string) {
	c.t.Helper()
	c.say(text)
	c.reply()
	c.idle()
}

// budgetNotice waits for the budget notice to c's person.
func (c *client) budgetNotice() *switchboard.ErrorData {
	c.t.Helper()
	return c.until(switchboard.EventError, func(p any) bool {
		return p.(*switchboard.ErrorData).Code == switchboard.ErrCodeBudget
	}).(*switchboard.ErrorData)
}

// A person's budget refuses their next turn before the model is called:
// they are told which budget and when it resets, nothing of the message
// is stored, the session's owner is told, the refusal survives a restart,
// and raising the budget at run time lets the next turn through.
func TestAPersonsBudgetRefusesBeforeTheModelIsCalled(t *testing.T) {
	mets := &recordingMetrics{}
	h := newHarness(t, spending(&sessions.Spending{Prices: gptTest, Budgets: []sessions.Budget{
		{Scope: switchboard.ScopePerson, Period: switchboard.PeriodDay, Tokens: 15},                     // everyone
		{Scope: switchboard.ScopePerson, Key: alice.Key(), Period: switchboard.PeriodDay, Tokens: 1000}, // but alice
	}}), func(c *sessions.Config) { c.Metrics = mets })
	owner := h.newSession(alice)
	owner.answered("hi")
	member := h.attach(sessions.AttachOptions{SessionID: owner.id, Author: bob})
	member.answered("first")
	calls := len(h.llm.Requests())
	stored := len(member.window())

	member.say("second")
	e := member.budgetNotice()
	if e.For != bob.Key() || !strings.Contains(e.Message, "You have reached your daily budget of 15 tokens") ||
		!strings.Contains(e.Message, "It resets at 00:00 UTC (in 11h") {
		t.Errorf("bob was told %+v", e)
	}
	notice := owner.until(switchboard.EventError, func(p any) bool {
		d := p.(*switchboard.ErrorData)
		return d.For == alice.Key() && strings.Contains(d.Message, "Bob")
	}).(*switchboard.ErrorData)
	if !strings.Contains(notice.Message, "A turn for Bob was refused: Bob has reached their daily budget of 15 tokens") {
		t.Errorf("the owner was told %q", notice.Message)
	}
	if n := len(h.llm.Requests()); n != calls {
		t.Fatalf("the model was called %d times after the refusal", n-calls)
	}
	if n := len(member.window()); n != stored {
		t.Fatalf("the refused message was stored: %d messages, were %d", n, stored)
	}
	// Alice's own budget is higher: the session stays usable for her.
	owner.answered("still here?")

	h.restart()
	member = h.attach(sessions.AttachOptions{SessionID: owner.id, Author: bob})
	calls = len(h.llm.Requests())
	member.say("third")
	if e := member.budgetNotice(); !strings.Contains(e.Message, "daily budget of 15 tokens") {
		t.Errorf("after a restart bob was told %+v", e)
	}
	if n := len(h.llm.Requests()); n != calls {
		t.Fatalf("after a restart the model was called %d times for a refused turn", n-calls)
	}

	h.m.SetSpending(&sessions.Spending{Prices: gptTest, Budgets: []sessions.Budget{
		{Scope: switchboard.ScopePerson, Period: switchboard.PeriodDay, Tokens: 1000},
	}})
	member.answered("fourth")
	mets.mu.Lock()
	defer mets.mu.Unlock()
	if strings.Join(mets.refused, " ") != "person person" {
		t.Errorf("refusals counted: %v, want the person's two", mets.refused)
	}
}

// A guide's budget is checked before every model call of a turn, what
// the turn spent so far counting: the turn stops before its second call,
// is charged its first, and ends for everyone with the reason.
func TestAGuidesBudgetStopsATurnBeforeItsNextCall(t *testing.T) {
	h := newHarness(t, spending(&sessions.Spending{Budgets: []sessions.Budget{
		{Scope: switchboard.ScopeGuide, Key: "tester", Period: switchboard.PeriodMonth, Tokens: 15},
	}}))
	h.llm.Push(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_a", Name: "calculator", Args: `{"expression":"2+2"}`}}})
	c := h.newSession(alice)
	c.say("what is 2+2?")
	e := c.until(switchboard.EventError, func(p any) bool {
		d := p.(*switchboard.ErrorData)
		return d.Code == switchboard.ErrCodeBudget && d.For == ""
	}).(*switchboard.ErrorData)
	if !strings.Contains(e.Message, "Stopped before the next model call: The assistant tester has reached its monthly budget of 15 tokens. It resets on 1 ") {
		t.Errorf("everyone was told %q", e.Message)
	}
	c.idle()
	if n := len(h.llm.Requests()); n != 1 {
		t.Fatalf("the model was called %d times, want once", n)
	}
	if rows := h.spendingBy(switchboard.ByGuide); len(rows) != 1 || rows[0].Usage.TotalTokens != 15 {
		t.Fatalf("the stopped turn was charged %+v, want its one call", rows)
	}
	// The next turn is refused at its start; the other guide is not bound.
	c.say("again")
	c.budgetNotice()
	if n := len(h.llm.Requests()); n != 1 {
		t.Fatalf("the model was called for a refused turn")
	}
	other := h.attach(sessions.AttachOptions{Author: bob, Guide: "other"})
	other.say("hi")
	other.reply()
}

// The overall budget, in dollars, binds everyone and every guide.
func TestTheOverallBudgetInDollars(t *testing.T) {
	h := newHarness(t, spending(&sessions.Spending{
		Prices:  map[string]switchboard.Price{"gpt-test": {Input: 100_000}}, // 10 input tokens: $1
		Budgets: []sessions.Budget{{Scope: switchboard.ScopeOverall, Period: switchboard.PeriodMonth, USD: 1}},
	}))
	c := h.newSession(alice)
	c.answered("hi")
	other := h.attach(sessions.AttachOptions{Author: bob, Guide: "other"})
	other.say("hi")
	if e := other.budgetNotice(); !strings.Contains(e.Message, "This gateway has reached its overall monthly budget of $1.00") {
		t.Errorf("bob was told %q", e.Message)
	}
	if n := len(h.llm.Requests()); n != 1 {
		t.Fatalf("the model was called %d times, want once", n)
	}
}

// The model label of the metrics is bounded: a response's model that is
// neither priced nor the one configured is counted as the configured
// model, and with none configured, as "other".
func TestTheModelLabelIsBounded(t *testing.T) {
	mets := &recordingMetrics{}
	h := newHarness(t, spending(&sessions.Spending{Prices: map[string]switchboard.Price{"priced": {Input: 1}}}),
		func(c *sessions.Config) { c.Metrics = mets })
	c := h.newSession(alice)
	c.answered("hi")
	h.cfg.Providers["main"].Model = "configured"
	c.answered("again")
	mets.mu.Lock()
	defer mets.mu.Unlock()
	if got := strings.Join(mets.spent, " "); got != "tester/other tester/configured" {
		t.Errorf("labels = %q, want other, then the configured model", got)
	}
	if rows := h.spendingBy(switchboard.ByModel); len(rows) != 1 || rows[0].Key != "gpt-test" || rows[0].Unpriced != 2 {
		t.Errorf("the store keeps the model the provider named: %+v", rows)
	}
}
