package web_test

import (
	"github.com/chromedp/chromedp"

	"testing"

	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// The plan in the widget, in real Chromium: a checklist in the
// transcript, updated in place as the plan changes, with the turn's tool
// run as a task under it; neither the plan's call nor its result is
// shown; a reload replays it into one checklist again.
func TestPlanInBrowser(t *testing.T) {
	browser := startBrowser(t)
	g := newGateway(t)
	gate := make(chan struct{})
	turn := openaitest.PlanTurn("Refunded nothing, sorry.")
	// The first plan stays up until the test has seen it: the next reply
	// waits after its first words.
	turn[1].Text, turn[1].Gate = []string{"Refunding… ", "now."}, gate
	g.llm.Push(turn...)
	p := openPage(t, browser, g.url+"/")
	p.say("refund my order")
	steps := root + `.querySelectorAll('.plan .steps li')`
	p.waitFor(`(() => { const s = [...` + steps + `];
		return s.length === 3 && s[0].dataset.status === 'in_progress' && s[1].dataset.status === 'pending'
			&& s[0].querySelector('.text').textContent === '1. Find the order'; })()`)
	p.waitFor(root + `.querySelector('.plan .title').textContent === 'Plan · 0/3 done'`)
	// The calculator ran as a task of the plan, not as a tool box.
	p.waitFor(root + `.querySelector('.plan .tasks li[data-call=call_calc_1]')?.dataset.status === 'done'`)
	p.readable("a plan")
	close(gate)
	p.waitFor(`(() => { const s = [...` + steps + `];
		return s.length === 3 && s[0].dataset.status === 'done' && s[1].dataset.status === 'failed' && s[2].dataset.status === 'in_progress'; })()`)
	p.waitFor(root + `.querySelector('.plan .title').textContent === 'Plan · 1/3 done'`)
	p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Refunded nothing'))`)
	check := func(when string) {
		t.Helper()
		if n := eval[int](p, root+`.querySelectorAll('.plan').length`); n != 1 {
			t.Fatalf("%s: %d checklists, want the one updated in place:\n%s", when, n, p.transcript())
		}
		if n := eval[int](p, root+`.querySelectorAll('.tool').length`); n != 0 {
			t.Fatalf("%s: %d tool boxes beside the plan (its call, its result or the calculator's):\n%s", when, n, p.transcript())
		}
		if got := eval[string](p, root+`.querySelector('.plan li[data-status=failed] .sr-only').textContent`); got != " (failed)" {
			t.Fatalf("%s: a failed step reads %q to a screen reader", when, got)
		}
	}
	check("live")
	// A reload replays the stored plans into one checklist.
	p.do(chromedp.Reload())
	p.waitFor(root + `.querySelector('.plan .title')?.textContent === 'Plan · 1/3 done'`)
	p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Refunded nothing'))`)
	check("replayed")
}
