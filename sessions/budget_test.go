package sessions_test

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// long is a message of about n bytes, numbered so no two are alike.
func long(i, n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString("Message ")
		b.WriteString(strings.Repeat(string(rune('a'+i%26)), 8))
		b.WriteString(" carries a long paragraph of text that the model is meant to read. ")
	}
	return b.String()
}

// A conversation whose window holds far more than the model's context:
// with the window known (the provider's context_window), every turn is
// answered and the model, counting its tokens its own way, refuses at
// most the first request the estimate had not yet learnt from.
func TestALongConversationFitsTheContext(t *testing.T) {
	h := newHarness(t, func(c *sessions.Config) { c.Providers["main"].ContextWindow = 16_000 })
	h.llm.SetContextLimit(12_000) // the window less the reply's room
	c := h.newSession(alice)
	for i := range 40 {
		h.llm.Push(openaitest.Reply{Text: []string{"Answer " + string(rune('A'+i%26)) + "."}})
		c.say(long(i, 16<<10))
		if got := c.reply().Content; !strings.HasPrefix(got, "Answer ") {
			t.Fatalf("turn %d answered %q", i, got)
		}
	}
	if refused := h.llm.TooLong(); len(refused) > 1 {
		t.Fatalf("the model refused %d requests as too long (tokens %v); at most the first may be", len(refused), refused)
	}
	// The history keeps every message whole.
	for _, m := range c.window() {
		if m.Role == switchboard.RoleUser && (len(m.Content) < 16<<10 || strings.Contains(m.Content, "left out here")) {
			t.Fatalf("a stored message was shortened: %d bytes", len(m.Content))
		}
	}
}

// With no context window known, the model's refusal as too long is
// answered with one shorter request, and the session keeps the tighter
// budget: every turn is answered, and the model refuses once.
func TestARefusalAsTooLongShortensTheRequest(t *testing.T) {
	h := newHarness(t)
	h.llm.SetContextLimit(10_000)
	c := h.newSession(alice)
	for i := range 12 {
		h.llm.Push(openaitest.Reply{Text: []string{"Answer."}})
		c.say(long(i, 12<<10))
		if got := c.reply().Content; got != "Answer." {
			t.Fatalf("turn %d answered %q", i, got)
		}
	}
	if refused := h.llm.TooLong(); len(refused) != 1 {
		t.Fatalf("the model refused %d requests as too long (%v), want exactly 1", len(refused), refused)
	}
}

// A server that reports no usage (some OpenAI-compatible ones) teaches
// the estimate nothing: its refusal as too long tightens the budget once,
// and every turn is answered.
func TestAServerThatReportsNoUsageStillFits(t *testing.T) {
	h := newHarness(t, func(c *sessions.Config) { c.Providers["main"].ContextWindow = 16_000 })
	h.llm.SetContextLimit(12_000)
	h.llm.SetNoUsage(true)
	c := h.newSession(alice)
	for i := range 30 {
		h.llm.Push(openaitest.Reply{Text: []string{"Answer."}})
		c.say(long(i, 16<<10))
		if got := c.reply().Content; got != "Answer." {
			t.Fatalf("turn %d answered %q", i, got)
		}
	}
	if refused := h.llm.TooLong(); len(refused) > 1 {
		t.Fatalf("the model refused %d requests as too long (%v); at most the first may be", len(refused), refused)
	}
}

// A pasted document longer than the whole context is cut in the request,
// with a note the model reads, and answered; the stored message is whole.
func TestADocumentLongerThanTheContextIsCut(t *testing.T) {
	h := newHarness(t, func(c *sessions.Config) { c.Providers["main"].ContextWindow = 16_000 })
	h.llm.SetContextLimit(12_000)
	c := h.newSession(alice)
	doc := long(1, 200<<10)
	h.llm.Push(openaitest.Reply{Text: []string{"Read it."}})
	c.say(doc)
	if got := c.reply().Content; got != "Read it." {
		t.Fatalf("answered %q", got)
	}
	last := openaitest.Text(lastRequest(t, h.llm).Messages[len(lastRequest(t, h.llm).Messages)-1].Content)
	if !strings.Contains(last, "does not fit in the model's context") || len(last) >= len(doc) {
		t.Fatalf("the request's message (%d bytes) is not the document cut with a note", len(last))
	}
	var stored string
	for _, m := range c.window() {
		if m.Role == switchboard.RoleUser {
			stored = m.Content
		}
	}
	if stored != doc {
		t.Fatalf("the stored message is %d bytes, want the whole %d", len(stored), len(doc))
	}
}
