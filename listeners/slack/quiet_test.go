package slack_test

// A quiet thread (issue 22): a question that uses a tool is answered in a
// few messages, its tool calls one short line each inside the reply, never
// a message of their own; present's card is its output; nothing written
// for the model reaches the thread; a decided approval says what was
// decided and when, in each reader's time zone.

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// texts is everything a message shows: its text and every text of its
// blocks.
func texts(m slacktest.Message) []string {
	out := []string{m.Text}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "text" {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var blocks any
	if json.Unmarshal(m.Blocks, &blocks) == nil {
		walk(blocks)
	}
	return out
}

// shows is what a message shows, as one text.
func shows(m slacktest.Message) string { return strings.Join(texts(m), "\n") }

// showsAll is what the bot's messages show, one message to a line.
func showsAll(msgs []slacktest.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(strings.ReplaceAll(shows(m), "\n", " ⏎ ") + "\n")
	}
	return b.String()
}

// checkNoToolMessages fails if a bot message is a tool line of its own:
// the old "→ tool" and "← tool" posts, or a message that is nothing but
// tool lines.
func checkNoToolMessages(t *testing.T, msgs []slacktest.Message) {
	t.Helper()
	for _, m := range msgs {
		s := strings.TrimSpace(shows(m))
		if strings.HasPrefix(s, "→") || strings.HasPrefix(s, "←") || strings.HasPrefix(s, "✗") || strings.Contains(s, "\n→") || strings.Contains(s, "\n←") {
			t.Errorf("a tool call posted as a message of its own: %q", s)
		}
	}
}

var usedLine = regexp.MustCompile(`used current_time · (&lt;0\.1|\d+\.\d) s`)

// One question whose tool call is approved: the reply's first words, the
// approval card and the answer, three messages where there were five; the
// call is one line at the end of the answer; the decided card says who
// approved it, from where and when, in Slack's date syntax.
func TestApprovedToolCallIsALineOfTheAnswer(t *testing.T) {
	for _, mode := range streamModes {
		t.Run(mode.name, func(t *testing.T) {
			r := newModeRig(t, mode.native, nil)
			r.gw.LLM.Push(
				openaitest.Reply{Text: []string{"Let me check."}, ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
				openaitest.Reply{Text: []string{"It is ", "noon."}},
			)
			ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "time?"})
			r.send(ev)
			root := ev["ts"].(string)
			var card slacktest.Message
			r.eventually("the approval card", func() (ok bool) { card, ok = r.approvalCard("C1", root); return ok })
			r.click(alice.ID, "C1", card.TS, "sb_approve")
			r.eventually("the answer", func() bool {
				m := r.botReplies("C1", root)
				last := m[len(m)-1]
				return strings.Contains(last.Text, "noon.") && !last.Streaming
			})
			msgs := r.botReplies("C1", root)
			if len(msgs) != 3 {
				t.Fatalf("%d bot messages, want 3 (the first words, the card, the answer):\n%s", len(msgs), showsAll(msgs))
			}
			checkNoToolMessages(t, msgs)
			if !strings.Contains(msgs[0].Text, "Let me check.") || msgs[1].TS != card.TS || !strings.Contains(msgs[2].Text, "It is noon.") {
				t.Fatalf("the thread:\n%s", showsAll(msgs))
			}
			if n := len(usedLine.FindAllString(showsAll(msgs), -1)); n != 1 || !usedLine.MatchString(shows(msgs[2])) {
				t.Errorf("the tool line shown %d times, not on the answer:\n%s", n, showsAll(msgs))
			}
			// The line is a context block at the end of the answer.
			var blocks []map[string]any
			_ = json.Unmarshal(msgs[2].Blocks, &blocks)
			if len(blocks) == 0 || blocks[len(blocks)-1]["type"] != "context" {
				t.Errorf("the answer's blocks: %s", msgs[2].Blocks)
			}

			decided := shows(msgs[1])
			if strings.Contains(decided, "Approve `") || strings.Contains(decided, "?*") || strings.Contains(string(msgs[1].Blocks), `"sb_approve"`) {
				t.Errorf("the decided card still asks: %s", decided)
			}
			if !regexp.MustCompile(`Approved by Alice · Slack · <!date\^\d+\^\{date_short_pretty\} \{time\}\|\d{4}-\d\d-\d\d \d\d:\d\d UTC>`).MatchString(decided) {
				t.Errorf("the decided card does not say who approved it and when: %s", decided)
			}

			results := r.gw.LLM.ToolResults()
			if len(results) != 1 || !strings.Contains(results[0], "UTC") {
				t.Fatalf("tool results the model got: %q", results)
			}
			if all := showsAll(msgs); strings.Contains(all, results[0]) {
				t.Errorf("the tool's result, written for the model, reached the thread: %q\n%s", results[0], all)
			}
		})
	}
}

// A tool that needs no approval: the answer alone, its line at its end.
// A turn that says nothing after its tool shows the line in one small
// message at its end.
func TestAutomaticToolCallIsALineOfTheAnswer(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "calculator", Args: `{"expression":"2*(3+4)"}`}}},
		openaitest.Reply{Text: []string{"That is 14."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "2*(3+4)?"})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("the answer", func() bool {
		m := r.botReplies("C1", root)
		return len(m) > 0 && strings.Contains(m[len(m)-1].Text, "That is 14.") && !m[len(m)-1].Streaming
	})
	msgs := r.botReplies("C1", root)
	if len(msgs) != 1 || !strings.Contains(shows(msgs[0]), "used calculator · ") {
		t.Fatalf("%d bot messages, want 1 (the answer, ending in its tool line):\n%s", len(msgs), showsAll(msgs))
	}
	checkNoToolMessages(t, msgs)

	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_2", Name: "calculator", Args: `{"expression":"1+1"}`}}},
		openaitest.Reply{}, // no words after it
	)
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "and 1+1, quietly"}))
	r.eventually("the line at the turn's end", func() bool { return len(r.botReplies("C1", root)) == 2 })
	last := r.botReplies("C1", root)[1]
	if s := shows(last); !strings.Contains(s, "used calculator · ") || strings.Contains(s, "2") {
		t.Fatalf("the turn's last message: %q", s)
	}
}

// A card from present: the reply's first words, the card and the answer;
// no line for present, and none of its result ("shown to the user … do not
// assume their choice"), which is for the model.
func TestPresentShowsTheCardAndNoToolLines(t *testing.T) {
	for _, mode := range streamModes {
		t.Run(mode.name, func(t *testing.T) {
			r := newModeRig(t, mode.native, nil)
			r.gw.LLM.Push(
				openaitest.Reply{Text: []string{"Here are your options."}, ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "present",
					Args: `{"title":"Pick one","buttons":[{"label":"Tea","value":"tea"},{"label":"Coffee","value":"coffee"}]}`}}},
				openaitest.Reply{Text: []string{"Pick one above."}},
			)
			ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "options?"})
			r.send(ev)
			root := ev["ts"].(string)
			r.eventually("the answer", func() bool {
				m := r.botReplies("C1", root)
				return len(m) > 0 && strings.Contains(m[len(m)-1].Text, "Pick one above.") && !m[len(m)-1].Streaming
			})
			msgs := r.botReplies("C1", root)
			if len(msgs) != 3 {
				t.Fatalf("%d bot messages, want 3 (the first words, the card, the answer):\n%s", len(msgs), showsAll(msgs))
			}
			if _, ok := r.cardMessage("C1", root, "sb_btn_0"); !ok || !strings.Contains(shows(msgs[1]), "Coffee") {
				t.Fatalf("the card is not the second message:\n%s", showsAll(msgs))
			}
			checkNoToolMessages(t, msgs)
			all := showsAll(msgs)
			for _, never := range []string{"present", "Shown to the user", "do not assume", "next message"} {
				if strings.Contains(all, never) {
					t.Errorf("the thread shows %q:\n%s", never, all)
				}
			}
			// What the model was told is model-facing text, and the thread
			// shows none of it.
			results := r.gw.LLM.ToolResults()
			if len(results) != 1 || !strings.Contains(results[0], "do not assume their choice") {
				t.Fatalf("present's result: %q", results)
			}
		})
	}
}

// A restart while the answer after a tool call streams: the line shows
// once, on the answer it belongs to, however much is replayed.
func TestRestartShowsAToolLineOnce(t *testing.T) {
	r := newRig(t, nil)
	gate := make(chan struct{})
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "calculator", Args: `{"expression":"6*7"}`}}},
		openaitest.Reply{Text: []string{"First part. ", "never sent"}, Gate: gate},
		openaitest.Reply{Text: []string{"Whole answer."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "6*7?"})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("the answer streaming", func() bool {
		m := r.botReplies("C1", root)
		return len(m) > 0 && m[len(m)-1].Streaming && strings.Contains(m[len(m)-1].Text, "First part.")
	})
	r.restart()
	close(gate)
	r.eventually("the turn answered again", func() bool {
		m := r.botReplies("C1", root)
		return strings.Contains(allText(m), "Whole answer.") && !m[len(m)-1].Streaming
	})
	msgs := r.botReplies("C1", root)
	checkNoToolMessages(t, msgs)
	if n := strings.Count(showsAll(msgs), "used calculator"); n != 1 {
		t.Fatalf("the tool line shown %d times:\n%s", n, showsAll(msgs))
	}
	for _, m := range msgs {
		if m.Streaming {
			t.Errorf("left streaming: %q", m.Text)
		}
	}
	t.Logf("thread after the restart:\n%s", showsAll(msgs))
}
