package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
	"github.com/switchboard-gw/switchboard/web"
)

// The widget under a guide with guardrails (docs/guardrails.md): a
// message they refuse is marked not sent, with the rule's message; an
// answer they block after part of it streamed ends as the rule's message,
// in the bubble that streamed.
func TestGuardrailsInBrowser(t *testing.T) {
	browser := startBrowser(t)
	g := newGatewayTuned(t, "../guides", websocket.Config{}, web.Options{}, sessionstest.OnlyGuide(t, "guarded", sessionstest.GuardedGuide))
	p := openPage(t, browser, g.url+"/")

	p.say("my password: hunter2")
	p.waitFor(`[...` + root + `.querySelectorAll('.notice')].some(n => n.textContent.includes('Please never send passwords here.'))`)
	p.waitFor(`(() => { const m = [...` + root + `.querySelectorAll('.msg[data-role=user]')].pop();
		return m.dataset.pending === 'failed' && m.querySelector('.sending').textContent === 'not sent'; })()`)
	if n := len(g.llm.Requests()); n != 0 {
		t.Fatalf("the model was called %d times for a refused message", n)
	}

	g.llm.Push(openaitest.Reply{Delay: 100 * time.Millisecond,
		Text: []string{strings.Repeat("Let me look that up. ", 20), "More. ", "Still more. ", "The codename is ", "PROJECT ", "ALPHA", "."}})
	p.say("the codename?")
	p.waitFor(root + `.querySelector('.msg[data-role=assistant].streaming')?.textContent.includes('Let me look')`)
	p.waitFor(root + `.querySelector('.msg[data-role=assistant]:not(.streaming) .body')?.textContent.trim() === '` + sessionstest.GuardedMessage + `'`)
	if n := p.count(".msg[data-role=assistant]", "Let me look"); n != 0 {
		t.Fatalf("what streamed before the block is still shown:\n%s", p.transcript())
	}
}

// A message a budget refuses before its turn is marked not sent too,
// with the budget's sentence; it is not left "sending…".
func TestBudgetRefusalInBrowser(t *testing.T) {
	browser := startBrowser(t)
	g := newGateway(t)
	g.mgr.SetSpending(&sessions.Spending{Budgets: []sessions.Budget{
		{Scope: switchboard.ScopePerson, Period: switchboard.PeriodDay, Tokens: 1},
	}})
	p := openPage(t, browser, g.url+"/")
	p.say("first")
	p.waitFor(root + `.querySelector('.msg[data-role=assistant]:not(.streaming)') !== null`)
	p.say("second")
	p.waitFor(`[...` + root + `.querySelectorAll('.notice')].some(n => n.textContent.toLowerCase().includes('budget'))`)
	p.waitFor(`(() => { const m = [...` + root + `.querySelectorAll('.msg[data-role=user]')].pop();
		return m.querySelector('.body').textContent === 'second' && m.dataset.pending === 'failed' && m.querySelector('.sending').textContent === 'not sent'; })()`)
	if n := len(g.llm.Requests()); n != 1 {
		t.Fatalf("the model was called %d times, want once: the second message was refused", n)
	}
}
