package discord_test

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/discord"
	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/telemetry"
	"github.com/switchboard-gw/switchboard/telemetry/otlptest"
)

// discordgo's REST calls, through the transport the gateway gives the
// listener, are client spans named after the route, ids made {id}.
func TestTheRESTCallsAreTraced(t *testing.T) {
	tr := otlptest.StartTraced(t, telemetry.Config{Sampler: 1})
	r := newRig(t, func(c *discord.Config, _ *discordtest.Server) { c.Telemetry = tr.Telemetry })
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Noon."}})
	_, thread := r.mention(alice, "what time is it?")
	r.eventually("the answer in the thread", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Noon.") })
	r.stop()
	spans := tr.Flush(t)
	for route, name := range map[string]string{
		discordtest.RouteStartThreadFromMessage: "POST channels/{id}/messages/{id}/threads",
		discordtest.RouteCreateMessage:          "POST channels/{id}/messages",
	} {
		got := otlptest.Named(spans, name)
		if n := r.fake.Calls(route); len(got) != n || n == 0 {
			t.Errorf("%d spans %q for %d calls; spans: %s", len(got), name, n, otlptest.Names(spans))
		}
		for _, s := range got {
			if s.Attrs["http.response.status_code"] == nil || s.Attrs["switchboard.channel"] != "discord" {
				t.Errorf("%s: %v", name, s.Attrs)
			}
		}
	}
}
