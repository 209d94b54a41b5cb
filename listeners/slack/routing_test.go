package slack_test

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/routing"
	"github.com/switchboard-gw/switchboard/sessions"
)

// A thread opened in a channel a routing rule names gets that rule's
// guide; a thread in another channel gets the default (docs/routing.md):
// the place's ids reach the sessions from the listener's address.
func TestRoutingByTheSlackChannel(t *testing.T) {
	r := newTunedRig(t, func(cfg *sessions.Config) {
		table, err := routing.New([]routing.RuleSpec{{Guide: "support", Channel: "slack", Place: "C2"}}, nil, cfg.DefaultGuide)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Router = table
	}, nil)
	system := func() string {
		reqs := r.gw.LLM.Requests()
		if len(reqs) == 0 {
			t.Fatal("the model was never called")
		}
		for _, m := range reqs[len(reqs)-1].Messages {
			if m.Role == "system" {
				return openaitest.Text(m.Content)
			}
		}
		return ""
	}
	for _, c := range []struct {
		channel string
		support bool
	}{{"C2", true}, {"C1", false}} {
		r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hello from " + c.channel + "."}})
		ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: c.channel, User: alice.ID, Text: "hi"})
		r.send(ev)
		r.answered(c.channel, ev["ts"].(string), "Hello from "+c.channel+".")
		if got := strings.Contains(system(), "Acme Widgets"); got != c.support {
			t.Errorf("a thread in %s: answered by support %v, want %v", c.channel, got, c.support)
		}
	}
}
