package slack_test

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/routing"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// A thread opened in a channel a routing rule names gets that rule's
// guide; a thread in another channel gets the default (docs/routing.md):
// the place's ids reach the sessions from the listener's address.
func TestRoutingByTheSlackChannel(t *testing.T) {
	r := newTunedRig(t, sessionstest.Routed(t, routing.RuleSpec{Guide: "support", Channel: "slack", Place: "C2"}), nil)
	for _, c := range []struct {
		channel string
		support bool
	}{{"C2", true}, {"C1", false}} {
		r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hello from " + c.channel + "."}})
		ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: c.channel, User: alice.ID, Text: "hi"})
		r.send(ev)
		r.answered(c.channel, ev["ts"].(string), "Hello from "+c.channel+".")
		system, _ := r.gw.LLM.LastSystem()
		if got := strings.Contains(system, "Acme Widgets"); got != c.support {
			t.Errorf("a thread in %s: answered by support %v, want %v", c.channel, got, c.support)
		}
	}
}
