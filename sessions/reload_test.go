package sessions_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// systemPrompt is the system message of a request to the model.
func systemPrompt(req openaitest.Request) string {
	for _, m := range req.Messages {
		if m.Role == "system" {
			return openaitest.Text(m.Content)
		}
	}
	return ""
}

// chatting is a harness and a conversation with one turn answered.
func chatting(t *testing.T) (*harness, *client) {
	t.Helper()
	h := newHarness(t)
	c := h.newSession(alice)
	c.say("hello")
	c.reply()
	c.idle()
	return h, c
}

// A guide reloaded while a turn waits for approval: that turn ends with
// the guide it started with, the next one runs the new version, with its
// new memory window.
func TestAReloadedGuideIsTakenUpByTheNextTurn(t *testing.T) {
	h, c := chatting(t)

	callTime(h, 1) // current_time asks: the turn waits
	c.say("what time is it?")
	req := c.confirmation()

	edited := strings.Replace(testGuide, "You are the test assistant.", "You are the edited assistant.", 1)
	edited = strings.Replace(edited, "window: 6", "window: 2", 1)
	if err := os.WriteFile(filepath.Join(h.cfg.Guides.Dir(), "tester.md"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := h.cfg.Guides.Reload("tester", nil); err != nil || strings.Join(res.Changed, ",") != "tester" {
		t.Fatalf("reload = %+v, %v", res, err)
	}

	c.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	c.reply()
	c.idle()
	if p := systemPrompt(lastRequest(t, h.llm)); !strings.Contains(p, "You are the test assistant.") {
		t.Fatalf("the turn under way changed guide mid-way: system prompt %q", p)
	}

	c.say("and now?")
	c.reply()
	c.idle()
	last := lastRequest(t, h.llm)
	if p := systemPrompt(last); !strings.Contains(p, "You are the edited assistant.") {
		t.Fatalf("the next turn's system prompt = %q, want the edited guide's", p)
	}
	// The system prompt and the last two messages of the conversation.
	if n := len(last.Messages); n != 3 {
		t.Fatalf("the next turn sent %d messages, want the system prompt and the new window of 2", n)
	}
}

// SetProviders swaps the model the next call goes to.
func TestSetProvidersTakesTheNextModelCall(t *testing.T) {
	h, c := chatting(t)

	llm2 := openaitest.New()
	defer llm2.Close()
	llm2.Push(openaitest.Reply{Text: []string{"From the new endpoint."}})
	adapter, err := openai.New(providers.Config{Name: "main", Kind: "openai", BaseURL: llm2.BaseURL(), APIKey: "sk-2", Model: "gpt-new"})
	if err != nil {
		t.Fatal(err)
	}
	h.m.SetProviders(map[string]*providers.Resilient{"main": {Name: "main", Provider: adapter, Policy: providers.Policy{IdleTimeout: 5 * time.Second}}}, "main")
	before := len(h.llm.Requests())
	c.say("again")
	if r := c.reply(); r.Content != "From the new endpoint." {
		t.Fatalf("reply = %q", r.Content)
	}
	if n := len(h.llm.Requests()); n != before {
		t.Errorf("the old endpoint got %d more calls", n-before)
	}
	if m := lastRequest(t, llm2).Model; m != "gpt-new" {
		t.Errorf("model = %q, want the new provider's", m)
	}

}

// SetLimits bounds the next sessions: a lower max_live refuses the next
// one, a lower new_per_minute holds an author back from then on, and
// raising them lets them through again.
func TestSetLimitsBoundsTheNextSessions(t *testing.T) {
	h := newHarness(t)
	h.newSession(alice)
	h.newSession(bob)
	h.m.SetLimits(sessions.Limits{MaxLive: 2})
	carol := switchboard.Author{Channel: "web", ID: "carol"}
	if _, err := h.m.Attach(context.Background(), sessions.AttachOptions{Author: carol}); !errors.Is(err, sessions.ErrFull) {
		t.Fatalf("a third session after max_live was set to 2: %v, want ErrFull", err)
	}
	h.m.SetLimits(sessions.Limits{NewPerMinute: 1})
	h.newSession(carol)
	if _, err := h.m.Attach(context.Background(), sessions.AttachOptions{Author: carol}); !errors.Is(err, sessions.ErrTooFast) {
		t.Fatalf("Carol's second session after new_per_minute was set to 1: %v, want ErrTooFast", err)
	}
	h.m.SetLimits(sessions.Limits{NewPerMinute: 5})
	h.newSession(carol) // a fresh allowance at the new rate
}
