package discord_test

// A quiet thread (issue 22): a question that uses a tool is answered in a
// few messages, its tool calls one short subtext line each inside the
// reply, never a message of their own; present's card is its output;
// nothing written for the model reaches the thread; a decided approval
// says what was decided and when, in each reader's time zone.

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// shows is what a message shows: its content and its embeds' texts.
func shows(m discordtest.Message) string {
	parts := []string{m.Content}
	var embeds []struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		Fields      []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"fields"`
	}
	_ = json.Unmarshal(m.Embeds, &embeds)
	for _, e := range embeds {
		parts = append(parts, e.Title, e.Description)
		for _, f := range e.Fields {
			parts = append(parts, f.Name, f.Value)
		}
	}
	return strings.Join(parts, "\n")
}

// showsAll is what the bot's messages show, one message to a line.
func showsAll(msgs []discordtest.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(strings.ReplaceAll(shows(m), "\n", " ⏎ ") + "\n")
	}
	return b.String()
}

// checkNoToolMessages fails if a bot message is a tool line of its own:
// the old "-# → tool" and "-# ← tool" posts, or a message of nothing but
// tool lines.
func checkNoToolMessages(t *testing.T, msgs []discordtest.Message) {
	t.Helper()
	for _, m := range msgs {
		s := strings.TrimSpace(shows(m))
		if strings.Contains(s, "→") || strings.Contains(s, "←") || strings.HasPrefix(s, "-# used ") || strings.HasPrefix(s, "-# ✗") {
			t.Errorf("a tool call posted as a message of its own: %q", s)
		}
	}
}

var usedLine = regexp.MustCompile(`\n-# used current\\_time · (\\<0\.1|\d+\.\d) s$`)

// One question whose tool call is approved: the reply's first words, the
// approval and the answer, three messages where there were five; the call
// is one subtext line at the end of the answer; the decided card says who
// approved it and when, in Discord's timestamp syntax.
func TestApprovedToolCallIsALineOfTheAnswer(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{Text: []string{"Let me check."}, ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
		openaitest.Reply{Text: []string{"It is ", "noon."}},
	)
	_, thread := r.mention(alice, "time?")
	var card discordtest.Message
	r.eventually("the approval", func() (ok bool) { card, ok = r.approvalMessage(thread); return ok })
	r.click(thread, card.ID, alice, customID(t, card, "sb:approve:"))
	r.eventually("the answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "It is noon.") })
	msgs := r.botMessages(thread)
	if len(msgs) != 3 {
		t.Fatalf("%d bot messages, want 3 (the first words, the approval, the answer):\n%s", len(msgs), showsAll(msgs))
	}
	checkNoToolMessages(t, msgs)
	if msgs[0].Content != "Let me check." || msgs[1].ID != card.ID {
		t.Fatalf("the thread:\n%s", showsAll(msgs))
	}
	if n := strings.Count(showsAll(msgs), "used current"); n != 1 || !usedLine.MatchString(msgs[2].Content) {
		t.Errorf("the tool line shown %d times, not on the answer:\n%s", n, showsAll(msgs))
	}

	r.eventually("the approval decided", func() bool {
		m, _ := r.fake.Message(thread, card.ID)
		return !strings.Contains(string(m.Components), "sb:approve:")
	})
	m, _ := r.fake.Message(thread, card.ID)
	decided := shows(m)
	if strings.Contains(decided, "Approve `") || strings.Contains(decided, "Expires") || !strings.Contains(decided, "Tool call `current_time`") {
		t.Errorf("the decided card still asks: %s", decided)
	}
	if !regexp.MustCompile(`✅ Approved by Ali(ce)? · Discord · <t:\d+:f>`).MatchString(decided) {
		t.Errorf("the decided card does not say who approved it and when: %s", decided)
	}

	results := r.gw.LLM.ToolResults()
	if len(results) != 1 || !strings.Contains(results[0], "UTC") {
		t.Fatalf("tool results the model got: %q", results)
	}
	if all := showsAll(msgs); strings.Contains(all, results[0]) {
		t.Errorf("the tool's result, written for the model, reached the thread: %q\n%s", results[0], all)
	}
}

// A tool that needs no approval: the answer alone, its line at its end. A
// turn that says nothing after its tool shows the line in one small
// message at its end.
func TestAutomaticToolCallIsALineOfTheAnswer(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "calculator", Args: `{"expression":"2*(3+4)"}`}}},
		openaitest.Reply{Text: []string{"That is 14."}},
	)
	_, thread := r.mention(alice, "2*(3+4)?")
	r.eventually("the answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "That is 14.") })
	msgs := r.botMessages(thread)
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0].Content, "That is 14.\n-# used calculator · ") {
		t.Fatalf("%d bot messages, want 1 (the answer, ending in its tool line):\n%s", len(msgs), showsAll(msgs))
	}
	checkNoToolMessages(t, msgs)

	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_2", Name: "calculator", Args: `{"expression":"1+1"}`}}},
		openaitest.Reply{}, // no words after it
	)
	r.post(discordtest.UserMessage{ChannelID: thread, AuthorID: alice, Content: "and 1+1, quietly"})
	r.eventually("the line at the turn's end", func() bool { return len(r.botMessages(thread)) == 2 })
	if s := r.botMessages(thread)[1].Content; !strings.HasPrefix(s, "-# used calculator · ") || strings.Contains(s, "2") {
		t.Fatalf("the turn's last message: %q", s)
	}
}

// A card from present: the reply's first words, the card and the answer;
// no line for present, and none of its result ("shown to the user … do not
// assume their choice"), which is for the model.
func TestPresentShowsTheCardAndNoToolLines(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{Text: []string{"Here are your options."}, ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "present",
			Args: `{"title":"Pick one","buttons":[{"label":"Tea","value":"tea"},{"label":"Coffee","value":"coffee"}]}`}}},
		openaitest.Reply{Text: []string{"Pick one above."}},
	)
	_, thread := r.mention(alice, "options?")
	r.eventually("the answer", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Pick one above.") })
	msgs := r.botMessages(thread)
	if len(msgs) != 3 {
		t.Fatalf("%d bot messages, want 3 (the first words, the card, the answer):\n%s", len(msgs), showsAll(msgs))
	}
	if !strings.Contains(string(msgs[1].Components), "sb:btn:") || !strings.Contains(shows(msgs[1]), "Pick one") {
		t.Fatalf("the card is not the second message:\n%s", showsAll(msgs))
	}
	checkNoToolMessages(t, msgs)
	all := showsAll(msgs)
	for _, never := range []string{"present", "Shown to the user", "do not assume", "next message", "-# "} {
		if strings.Contains(all, never) {
			t.Errorf("the thread shows %q:\n%s", never, all)
		}
	}
	results := r.gw.LLM.ToolResults()
	if len(results) != 1 || !strings.Contains(results[0], "do not assume their choice") {
		t.Fatalf("present's result: %q", results)
	}
}

// A restart while the answer after a tool call streams: the line shows
// once, however much is replayed.
func TestRestartShowsAToolLineOnce(t *testing.T) {
	r := newRig(t, nil)
	gate := make(chan struct{})
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "calculator", Args: `{"expression":"6*7"}`}}},
		openaitest.Reply{Text: []string{"First part. ", "never sent"}, Gate: gate},
		openaitest.Reply{Text: []string{"Whole answer."}},
	)
	_, thread := r.mention(alice, "6*7?")
	r.eventually("the answer started", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "First part.") })
	r.restart()
	close(gate)
	r.eventually("the turn answered again", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Whole answer.") })
	msgs := r.botMessages(thread)
	checkNoToolMessages(t, msgs)
	if n := strings.Count(allContent(msgs), "used calculator"); n != 1 {
		t.Fatalf("the tool line shown %d times:\n%s", n, showsAll(msgs))
	}
	t.Logf("thread after the restart:\n%s", showsAll(msgs))
}

// A restart mid-reply: the reply's message is edited on after the restart,
// never posted a second time, however the stop and the session's end
// interleave.
func TestRestartMidReplyPostsItOnce(t *testing.T) {
	r := newRig(t, nil)
	gate := make(chan struct{})
	r.gw.LLM.Push(
		openaitest.Reply{Text: []string{"First part. ", "never sent"}, Gate: gate},
		openaitest.Reply{Text: []string{"Whole answer."}},
	)
	_, thread := r.mention(alice, "tell me")
	r.eventually("the answer started", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "First part.") })
	r.restart()
	close(gate)
	r.eventually("the turn answered again", func() bool { return strings.Contains(allContent(r.botMessages(thread)), "Whole answer.") })
	msgs := r.botMessages(thread)
	if n := strings.Count(allContent(msgs), "First part."); n != 1 {
		t.Fatalf("the cut reply shown %d times:\n%s", n, showsAll(msgs))
	}
}
