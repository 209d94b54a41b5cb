package discord_test

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/routing"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// A thread opened by a mention in a server's channel is routed by the
// server's and the channel's ids (docs/routing.md): the listener hands
// them in with the first message, since the thread's own id is the place.
func TestRoutingByTheDiscordServerAndChannel(t *testing.T) {
	for _, place := range []string{discordtest.DefaultGuildID, discordtest.DefaultChannelID} {
		r := newTunedRig(t, sessionstest.Routed(t, routing.RuleSpec{Guide: "support", Channel: "discord", Place: place}))
		r.gw.LLM.Push(openaitest.Reply{Text: []string{"Routed."}})
		_, thread := r.mention(alice, "hello")
		r.eventually("the answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Routed.") })
		if system, _ := r.gw.LLM.LastSystem(); !strings.Contains(system, "Acme Widgets") {
			t.Errorf("a rule on place %s: the thread's conversation was answered with %q, want support's prompt", place, system)
		}
	}
}
