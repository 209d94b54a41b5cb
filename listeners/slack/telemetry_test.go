package slack_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/telemetry"
	"github.com/switchboard-gw/switchboard/telemetry/otlptest"
)

// The real slack-go client's Web API calls, through the transport the
// gateway gives the listener, are client spans exported over OTLP; the
// mention the answer is for is a span of its own, which the turn links to.
func TestTheWebAPICallsAndTheInputAreTraced(t *testing.T) {
	tr := otlptest.StartTraced(t, telemetry.Config{Sampler: 1})
	r := newTunedRig(t, func(c *sessions.Config) { c.Tracer = tr.Telemetry }, func(c *slack.Config) { c.Telemetry = tr.Telemetry })
	r.fake.SetStartStreamError("feature_not_enabled") // edited, so chat.postMessage
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Noon."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "what time is it?"})
	r.send(ev)
	r.eventually("the answer in the thread", func() bool {
		m := r.botReplies("C1", ev["ts"].(string))
		return len(m) > 0 && strings.TrimSpace(m[len(m)-1].Text) == "Noon."
	})
	r.stop()
	spans := tr.Flush(t)
	posts := otlptest.Named(spans, "POST chat.postMessage")
	if len(posts) == 0 || len(posts) != r.fake.Calls("chat.postMessage") {
		t.Fatalf("%d chat.postMessage spans for %d calls; spans: %s", len(posts), r.fake.Calls("chat.postMessage"), otlptest.Names(spans))
	}
	host := func() string { u, _ := url.Parse(r.fake.APIURL()); return u.Hostname() }()
	for _, p := range posts {
		if p.Attrs["http.response.status_code"] != int64(200) || p.Attrs["server.address"] != host ||
			p.Attrs["switchboard.channel"] != "slack" || p.Attrs["http.request.method"] != "POST" {
			t.Errorf("chat.postMessage span attributes = %v", p.Attrs)
		}
	}
	in := otlptest.Named(spans, "slack receive input")
	if len(in) != 1 {
		t.Fatalf("%d input spans, want 1 (the mention); spans: %s", len(in), otlptest.Names(spans))
	}
	if id, _ := in[0].Attrs["gen_ai.conversation.id"].(string); !strings.HasPrefix(id, "s_") {
		t.Errorf("the input's span names conversation %q", id)
	}
	turn := otlptest.Named(spans, "invoke_agent assistant")
	if len(turn) != 1 {
		t.Fatalf("turn spans: %s", otlptest.Names(spans))
	}
	if l := turn[0].Links; len(l) != 1 || l[0].SpanID != in[0].SpanID || l[0].TraceID != in[0].TraceID || l[0].Attrs["switchboard.link.reason"] != "input" {
		t.Errorf("the turn links to %+v, want the input's span %s", l, in[0].SpanID)
	}
}
