package web_test

import (
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
	"github.com/switchboard-gw/switchboard/web"
)

// A conversation passed to another guide shows it as a line of the
// transcript, the model's reason as text, before the other guide's
// answer.
func TestHandoffInBrowser(t *testing.T) {
	browser := startBrowser(t)
	g := newGatewayTuned(t, "../guides", websocket.Config{}, web.Options{}, sessionstest.WithHandoffGuides(t))
	g.llm.Push(sessionstest.Handoff("billing", "an <b>invoice</b> question"), openaitest.Reply{Text: []string{"Billing here."}})
	p := openPage(t, browser, g.url+"/")
	p.say("Was my invoice paid?")
	p.waitFor(`[...` + root + `.querySelectorAll('.msg[data-role=assistant]')].some(m => m.textContent.includes('Billing here.'))`)
	line := eval[string](p, root+`.querySelector('.handoff')?.textContent ?? ''`)
	if line != "Passed to billing: an <b>invoice</b> question" {
		t.Fatalf("the handoff line reads %q\n%s", line, p.transcript())
	}
	if eval[bool](p, root+`.querySelector('.handoff b') !== null`) {
		t.Fatal("the model's reason was rendered as HTML")
	}
	before := eval[bool](p, `(() => { const h = `+root+`.querySelector('.handoff'); const m = [...`+root+`.querySelectorAll('.msg[data-role=assistant]')].find(m => m.textContent.includes('Billing here.')); return !!(h.compareDocumentPosition(m) & Node.DOCUMENT_POSITION_FOLLOWING); })()`)
	if !before {
		t.Fatalf("the handoff line is not before billing's answer:\n%s", p.transcript())
	}
	p.readable("a handoff")
}
