package discord_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// An answer a guardrail blocked after part of it was shown is edited in
// place to the rule's message (docs/guardrails.md): the thread does not
// keep what was shown.
func TestABlockedAnswerIsEditedInPlace(t *testing.T) {
	r := newTunedRig(t, sessionstest.OnlyGuide(t, "guarded", sessionstest.GuardedGuide))
	r.gw.LLM.Push(openaitest.Reply{Delay: 100 * time.Millisecond,
		Text: []string{strings.Repeat("Let me look that up. ", 20), "More. ", "Still more. ", "The codename is ", "PROJECT ", "ALPHA", "."}})
	_, thread := r.mention(alice, "the codename?")
	r.eventually("the block's message", func() bool {
		return strings.TrimSpace(allContent(r.botMessages(thread))) == sessionstest.GuardedMessage
	})
	shown := false
	for _, m := range r.fake.Messages(thread) {
		for _, h := range m.History {
			if strings.Contains(h.Content, "Let me look") {
				shown = true
			}
		}
	}
	if !shown {
		t.Fatal("nothing was shown before the block: the test shows no edit")
	}
}
