package slack_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// An answer a guardrail blocked after part of it streamed natively ends
// as the block's message: the streamed message is stopped and edited, so
// the text that streamed does not stay in the thread.
func TestABlockedAnswerReplacesWhatStreamed(t *testing.T) {
	r := newTunedRig(t, sessionstest.OnlyGuide(t, "guarded", sessionstest.GuardedGuide), nil)
	prefix := strings.Repeat("Let me look that up for you. ", 20)
	r.gw.LLM.Push(openaitest.Reply{Delay: 50 * time.Millisecond,
		Text: []string{prefix, "More words to push it out. ", "And more. ", "The codename is ", "PROJECT ", "ALPHA", "."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "the codename?"})
	r.send(ev)
	root := ev["ts"].(string)
	msgs := r.answered("C1", root, sessionstest.GuardedMessage)
	streamed := false
	for _, q := range append(r.fake.Requests("chat.startStream"), r.fake.Requests("chat.appendStream")...) {
		if strings.Contains(q.Params.Get("markdown_text"), "Let me look") {
			streamed = true
		}
	}
	if !streamed {
		t.Fatalf("nothing streamed before the block: the test shows no replaced stream")
	}
	for _, m := range msgs {
		if strings.Contains(m.Text, "Let me look") || strings.Contains(m.Text, "PROJECT") {
			t.Fatalf("the thread still shows what streamed:%s", shown(msgs))
		}
	}
	if len(msgs) != 1 {
		t.Fatalf("the thread holds:%s\nwant the one reply, edited", shown(msgs))
	}
}
