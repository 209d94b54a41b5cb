package discord_test

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// A conversation passed to another guide shows it in the thread as a
// subtext line of its own, between the two guides' replies; the model's
// reason cannot bring its own markup.
func TestHandoffIsASubtextLine(t *testing.T) {
	r := newTunedRig(t, sessionstest.WithHandoffGuides(t))
	pass := sessionstest.Handoff("billing", "an *invoice* question")
	pass.Text = []string{"Let me pass you on."}
	r.gw.LLM.Push(pass, openaitest.Reply{Text: []string{"Billing here: it is paid."}})
	_, thread := r.mention(alice, "was my invoice paid?")
	r.eventually("billing's answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Billing here") })
	var contents []string
	for _, m := range r.botMessages(thread) {
		contents = append(contents, m.Content)
	}
	want := `-# Passed to billing: an \*invoice\* question`
	if len(contents) != 3 || !strings.HasPrefix(contents[0], "Let me pass you on.") || contents[1] != want || !strings.HasPrefix(contents[2], "Billing here") {
		t.Fatalf("the thread reads %q, want support's reply, %q, billing's answer", contents, want)
	}
}
