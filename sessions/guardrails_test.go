package sessions_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// guardedGuide masks e-mail addresses in what people write and refuses
// passwords; it masks card numbers in its answers and refuses a codename.
const guardedGuide = `---
name: guarded
description: Keeps secrets
tools: [calculator]
approval: { default: auto }
guardrails:
  input:
    mask: [email]
    block:
      - { name: password, pattern: '(?i)password\s*[:=]', message: Please never send passwords here. }
  output:
    mask: [credit_card]
    block:
      - { name: codename, pattern: 'PROJECT [A-Z]{5}', message: That answer cannot be shown. }
---
You keep secrets.
`

// card is a card number with a valid Luhn digit.
const card = "4111 1111 1111 1111"

// withGuide adds a guide to the harness's catalog.
func withGuide(t *testing.T, file, body string) option {
	return func(cfg *sessions.Config) {
		dir := cfg.Guides.Dir()
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		catalog, err := guides.LoadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Guides = catalog
	}
}

// guarded is a session with the guarded guide, its model in process.
func guarded(t *testing.T) (*harness, *client) {
	h := newBubbleHarness(t, withGuide(t, "guarded.md", guardedGuide))
	return h, h.attach(sessions.AttachOptions{Author: alice, Guide: "guarded"})
}

// decisions are the guardrail events among evs.
func decisions(t *testing.T, evs []switchboard.Event) []switchboard.GuardrailData {
	t.Helper()
	var out []switchboard.GuardrailData
	for _, ev := range evs {
		if ev.Type != switchboard.EventGuardrail {
			continue
		}
		p, err := ev.Payload()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *p.(*switchboard.GuardrailData))
	}
	return out
}

func TestGuardrailMasksInputBeforeTheModelSeesIt(t *testing.T) {
	h, c := guarded(t)
	c.say("Please write to alice@example.com about it.")
	c.reply()
	last := lastMessage(t, h.model)
	if strings.Contains(last.Content, "alice@example.com") || !strings.Contains(last.Content, "[email]") {
		t.Fatalf("the model was sent %q, want the address masked", last.Content)
	}
	for _, m := range c.window() {
		if strings.Contains(m.Content, "alice@example.com") {
			t.Errorf("the stored %s message has the address: %q", m.Role, m.Content)
		}
	}
	stored := c.stored()
	for _, ev := range stored {
		if strings.Contains(string(ev.Data), "alice@example.com") {
			t.Errorf("stored %s event %d has the address: %s", ev.Type, ev.Seq, ev.Data)
		}
	}
	want := []switchboard.GuardrailData{{Side: "input", Rule: "email", Action: "mask", Count: 1, For: alice.Key()}}
	if got := decisions(t, stored); len(got) != 1 || got[0] != want[0] {
		t.Errorf("guardrail events %+v, want %+v", got, want)
	}
}

func TestGuardrailBlockedInputNeverReachesTheModel(t *testing.T) {
	h, c := guarded(t)
	c.say("my password: hunter2")
	e := c.errorEvent()
	if e.Code != switchboard.ErrCodeGuardrail || e.Message != "Please never send passwords here." || e.For != alice.Key() {
		t.Fatalf("the writer was told %+v", e)
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Fatalf("the model was called %d times for a blocked message", n)
	}
	if w := c.window(); len(w) != 0 {
		t.Fatalf("a blocked message left %d messages in the context: %+v", len(w), w)
	}
	for _, ev := range c.stored() {
		if strings.Contains(string(ev.Data), "hunter2") {
			t.Errorf("stored %s event %d has the blocked text: %s", ev.Type, ev.Seq, ev.Data)
		}
	}
	if got := decisions(t, c.stored()); len(got) != 1 || got[0].Action != "block" || got[0].Rule != "password" {
		t.Errorf("guardrail events %+v, want the password block", got)
	}

	// The session goes on.
	h.model.Push(openaitest.Reply{Text: []string{"Hello!"}})
	c.say("hello")
	if r := c.reply(); r.Content != "Hello!" {
		t.Fatalf("after a blocked message, the next got %q", r.Content)
	}
	if last := lastMessage(t, h.model); last.Content != "hello" {
		t.Fatalf("the model's last message is %q", last.Content)
	}
}

// shown is every text the client was shown of assistant replies: each
// delta and each assistant message.
func shown(t *testing.T, evs []switchboard.Event) (deltas []string, messages []string) {
	t.Helper()
	for _, ev := range evs {
		p, err := ev.Payload()
		if err != nil {
			t.Fatal(err)
		}
		switch d := p.(type) {
		case *switchboard.DeltaData:
			deltas = append(deltas, d.Content)
		case *switchboard.MessageData:
			if d.Role == switchboard.RoleAssistant {
				messages = append(messages, d.Content)
			}
		}
	}
	return deltas, messages
}

// In a bubble, the scripted model's Delay makes each piece of text a
// delta of its own: what the guard releases is seen piece by piece.

func TestGuardrailMasksStreamedOutputBeforeAnyoneSeesIt(t *testing.T) {
	synctest.Test(t, testGuardrailMasksStreamedOutput)
}

func testGuardrailMasksStreamedOutput(t *testing.T) {
	h, c := guarded(t)
	// The number comes in pieces: no piece holds it whole.
	h.model.Push(openaitest.Reply{Delay: 100 * time.Millisecond,
		Text: []string{"Your card ", "4111 11", "11 1111 ", "1111", " is on file. ", strings.Repeat("All is well. ", 40), "Bye."}})
	c.say("which card do I have?")
	r := c.reply()
	c.idle()
	deltas, messages := shown(t, c.got)
	if len(deltas) == 0 {
		t.Fatal("nothing was streamed")
	}
	for _, s := range append(deltas, messages...) {
		if strings.Contains(strings.ReplaceAll(s, " ", ""), strings.ReplaceAll(card, " ", "")) || strings.Contains(s, "4111 11") {
			t.Fatalf("the card number was shown: %q", s)
		}
	}
	if len(deltas) < 2 {
		t.Fatalf("%d deltas: the answer did not stream", len(deltas))
	}
	want := "Your card [credit_card] is on file. " + strings.Repeat("All is well. ", 40) + "Bye."
	if r.Content != want {
		t.Fatalf("the answer is %q, want %q", r.Content, want)
	}
	if got := strings.Join(deltas, ""); got != want {
		t.Fatalf("the deltas add up to %q, want the answer", got)
	}
	for _, m := range c.window() {
		if strings.Contains(m.Content, card) {
			t.Errorf("the stored %s message has the card number", m.Role)
		}
	}
	if got := decisions(t, c.stored()); len(got) != 1 || got[0] != (switchboard.GuardrailData{Side: "output", Rule: "credit_card", Action: "mask", Count: 1}) {
		t.Errorf("guardrail events %+v", got)
	}
}

func TestGuardrailMasksTheTextBeforeToolCalls(t *testing.T) {
	h, c := guarded(t)
	h.model.Push(
		openaitest.Reply{Text: []string{"Card " + card + " noted; adding up."}, ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "calculator", Args: `{"expression":"2+2"}`}}},
		openaitest.Reply{Text: []string{"4."}},
	)
	c.say("add it up")
	first := c.reply()
	if first.Content != "Card [credit_card] noted; adding up." {
		t.Fatalf("the text before the tool call is %q", first.Content)
	}
	if last := c.reply(); last.Content != "4." {
		t.Fatalf("the answer is %q", last.Content)
	}
	c.idle()
	deltas, _ := shown(t, c.got)
	for _, d := range deltas {
		if strings.Contains(d, "4111") {
			t.Fatalf("a delta showed the card number: %q", d)
		}
	}
	for _, m := range c.window() {
		if strings.Contains(m.Content, card) {
			t.Errorf("the stored %s message has the card number", m.Role)
		}
	}
}

func TestGuardrailBlockedOutputIsReplaced(t *testing.T) {
	synctest.Test(t, testGuardrailBlockedOutputIsReplaced)
}

func testGuardrailBlockedOutputIsReplaced(t *testing.T) {
	h, c := guarded(t)
	h.model.Push(openaitest.Reply{
		Delay:     100 * time.Millisecond,
		Text:      []string{strings.Repeat("Let me see. ", 30), "The codename is ", "PROJECT ", "ALPHA", ", as you asked."},
		ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "calculator", Args: `{"expression":"2+2"}`}},
	})
	c.say("what is the codename?")
	r := c.reply()
	c.idle()
	if r.Content != "That answer cannot be shown." {
		t.Fatalf("the answer is %q, want the block's message", r.Content)
	}
	deltas, messages := shown(t, c.got)
	for _, s := range append(deltas, messages...) {
		if strings.Contains(s, "PROJECT") || strings.Contains(s, "ALPHA") {
			t.Fatalf("the blocked phrase was shown, in part: %q", s)
		}
	}
	if len(deltas) == 0 {
		t.Fatal("nothing streamed before the block: the test does not show a replaced stream")
	}
	if n := len(h.model.Requests()); n != 1 {
		t.Fatalf("the model was called %d times: a blocked answer's tool calls ran", n)
	}
	for _, ev := range c.got {
		if ev.Type == switchboard.EventToolCall {
			t.Fatalf("a blocked answer's tool call was announced: %s", ev.Data)
		}
	}
	w := c.window()
	if len(w) != 2 || w[1].Role != switchboard.RoleAssistant || w[1].Content != "That answer cannot be shown." || len(w[1].ToolCalls) != 0 {
		t.Fatalf("stored %+v, want the question and the block's message", w)
	}
	if got := decisions(t, c.stored()); len(got) != 1 || got[0] != (switchboard.GuardrailData{Side: "output", Rule: "codename", Action: "block", Count: 1}) {
		t.Errorf("guardrail events %+v", got)
	}
}
