package slack_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// A conversation passed to another guide shows it in the thread as a
// context line of its own, between the two guides' replies, whether the
// replies stream natively or are edited in place.
func TestHandoffIsAContextLine(t *testing.T) {
	for _, mode := range streamModes {
		t.Run(mode.name, func(t *testing.T) {
			r := newTunedRig(t, sessionstest.WithHandoffGuides(t), nil)
			if !mode.native {
				r.fake.SetStartStreamError("feature_not_enabled")
			}
			pass := sessionstest.Handoff("billing", "an invoice <question> & more")
			pass.Text = []string{"Let me pass you on."}
			r.gw.LLM.Push(pass, openaitest.Reply{Text: []string{"Billing here: it is paid."}})
			ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "was my invoice paid?"})
			r.send(ev)
			root := ev["ts"].(string)

			r.eventually("billing's answer in the thread", func() bool {
				m := r.botReplies("C1", root)
				return len(m) > 0 && strings.Contains(m[len(m)-1].Text, "Billing here") && !m[len(m)-1].Streaming
			})
			var texts []string
			var line slacktest.Message
			for _, m := range r.botReplies("C1", root) {
				texts = append(texts, strings.TrimSpace(m.Text))
				if strings.HasPrefix(m.Text, "Passed to") {
					line = m
				}
			}
			want := "Passed to billing: an invoice &lt;question&gt; &amp; more"
			if len(texts) != 3 || !strings.HasPrefix(texts[0], "Let me pass you on.") || texts[1] != want || !strings.HasPrefix(texts[2], "Billing here") ||
				strings.Contains(strings.Join(texts, "\n"), "handoff") {
				t.Fatalf("the thread reads %q, want support's reply, %q, billing's answer (and no line for the handoff tool)", texts, want)
			}
			var blocks []struct {
				Type     string `json:"type"`
				Elements []struct {
					Type, Text string
				} `json:"elements"`
			}
			if err := json.Unmarshal(line.Blocks, &blocks); err != nil {
				t.Fatal(err)
			}
			if len(blocks) != 1 || blocks[0].Type != "context" || len(blocks[0].Elements) != 1 || blocks[0].Elements[0].Text != want {
				t.Fatalf("the handoff's blocks are %s, want one context line", line.Blocks)
			}
		})
	}
}
