package sessions_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// harnessMemories keeps the memory tools' memories in the harness's store
// of the moment (a restart opens another).
type harnessMemories struct{ h **harness }

func (m harnessMemories) AddMemory(ctx context.Context, mem switchboard.Memory) error {
	return (*m.h).db.AddMemory(ctx, mem)
}

func (m harnessMemories) ForgetMemory(ctx context.Context, owner, id string) error {
	return (*m.h).db.ForgetMemory(ctx, owner, id)
}

func (m harnessMemories) Search(ctx context.Context, reader, query string, limit int) ([]switchboard.Found, error) {
	return (*m.h).db.Search(ctx, reader, query, limit)
}

var memoryID = regexp.MustCompile(`mem_[0-9a-f]{12}`)

// "Remember that I prefer metric units": in another conversation of
// Alice's the model knows it; Bob's never does; /memory lists it to
// Alice, with where and when; Bob cannot forget it; Alice's /forget
// deletes it for good, from every path.
func TestRememberAndForget(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "remember", Args: `{"text":"Alice prefers metric units"}`}}},
		openaitest.Reply{Text: []string{"I will remember that."}},
	)
	a := h.attach(sessions.AttachOptions{Author: alice, Guide: "remembering"})
	a.say("remember that I prefer metric units")
	if got := a.reply().Content; got != "I will remember that." {
		t.Fatalf("answered %q", got)
	}
	result := openaitest.Text(lastRequest(t, h.llm).Messages[len(lastRequest(t, h.llm).Messages)-1].Content)
	id := memoryID.FindString(result)
	if id == "" {
		t.Fatalf("the remember tool's result names no memory id: %q", result)
	}

	// Another conversation of Alice's: the model is told.
	a2 := h.attach(sessions.AttachOptions{Author: alice, Guide: "remembering"})
	h.llm.Push(openaitest.Reply{Text: []string{"330 metres."}})
	a2.say("how tall is the tower?")
	a2.reply()
	if sys := systemOf(lastRequest(t, h.llm)); !strings.Contains(sys, "- Alice prefers metric units") {
		t.Fatalf("Alice's other conversation was not given her memory:\n%s", sys)
	}
	// Bob's conversation: never.
	b := h.attach(sessions.AttachOptions{Author: bob, Guide: "remembering"})
	h.llm.Push(openaitest.Reply{Text: []string{"Hello Bob."}})
	b.say("what units does Alice like?")
	b.reply()
	if sys := systemOf(lastRequest(t, h.llm)); strings.Contains(sys, "metric") {
		t.Fatalf("Bob's conversation was given Alice's memory:\n%s", sys)
	}

	// /memory lists it to Alice alone; Bob's /forget of her id is refused.
	a2.say("/memory")
	listed := a2.until(switchboard.EventError, nil).(*switchboard.ErrorData)
	if listed.Code != sessions.NoticeInfo || listed.For != alice.Key() || !strings.Contains(listed.Message, id+": Alice prefers metric units (said ") {
		t.Fatalf("/memory answered %+v", listed)
	}
	b.say("/forget " + id)
	if e := b.until(switchboard.EventError, nil).(*switchboard.ErrorData); e.Code != switchboard.ErrCodeNotFound {
		t.Fatalf("Bob's /forget of Alice's memory: %+v", e)
	}
	if mems, _ := h.db.Memories(context.Background(), alice.Key(), 10); len(mems) != 1 {
		t.Fatalf("Alice's memories after Bob's /forget: %+v", mems)
	}

	// Alice's /forget: gone from the store and from the next request.
	a2.say("/forget " + id)
	if e := a2.until(switchboard.EventError, nil).(*switchboard.ErrorData); e.Code != sessions.NoticeInfo || !strings.Contains(e.Message, "Forgotten for good") {
		t.Fatalf("Alice's /forget: %+v", e)
	}
	if mems, _ := h.db.Memories(context.Background(), alice.Key(), 10); len(mems) != 0 {
		t.Fatalf("memories left after /forget: %+v", mems)
	}
	h.llm.Push(openaitest.Reply{Text: []string{"Sure."}})
	a2.say("and the bridge?")
	a2.reply()
	if sys := systemOf(lastRequest(t, h.llm)); strings.Contains(sys, "metric") {
		t.Fatalf("a forgotten memory was still given to the model:\n%s", sys)
	}
}

// The tools refuse what makes no sense, in a sentence the model reads.
func TestRememberRefusesBadInput(t *testing.T) {
	h := newHarness(t)
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{
			{ID: "c1", Name: "remember", Args: `{"text":"   "}`},
			{ID: "c2", Name: "remember", Args: `{"text":"` + strings.Repeat("x", 1001) + `"}`},
			{ID: "c3", Name: "forget", Args: `{"id":"mem_000000000000"}`},
		}},
		openaitest.Reply{Text: []string{"Done."}},
	)
	c := h.attach(sessions.AttachOptions{Author: alice, Guide: "remembering"})
	c.say("remember nothing")
	c.reply()
	req := lastRequest(t, h.llm)
	var results []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			results = append(results, openaitest.Text(m.Content))
		}
	}
	if len(results) != 3 || !strings.Contains(results[0], "text is empty") || !strings.Contains(results[1], "at most 1000") || !strings.Contains(results[2], "has no memory") {
		t.Fatalf("tool results: %q", results)
	}
	if mems, _ := h.db.Memories(context.Background(), alice.Key(), 10); len(mems) != 0 {
		t.Fatalf("kept %+v", mems)
	}
}

// Recall: a guide with memory.recall is given, for a new message, the
// best matches from the conversations of the person it answers, with
// their dates; memory_search finds them on request. Bob never finds
// Alice's.
func TestRecallFindsOnlyTheReadersConversations(t *testing.T) {
	h := newHarness(t)
	h.llm.Respond(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Text: []string{"Noted."}} })
	a := h.attach(sessions.AttachOptions{Author: alice})
	a.say("my locker code is 4711")
	a.reply()
	b := h.attach(sessions.AttachOptions{Author: bob})
	b.say("my locker code is 1234")
	b.reply()

	a2 := h.attach(sessions.AttachOptions{Author: alice, Guide: "recalling"})
	a2.say("what was my locker code?")
	a2.reply()
	sys := systemOf(lastRequest(t, h.llm))
	if !strings.Contains(sys, "Recalled from earlier conversations of Alice") || !strings.Contains(sys, "my locker code is 4711") || strings.Contains(sys, "1234") {
		t.Fatalf("Alice's recall:\n%s", sys)
	}
	if !regexp.MustCompile(`- \d{4}-\d\d-\d\d \d\d:\d\d UTC, conversation s_`).MatchString(sys) {
		t.Fatalf("a recalled message without its date and conversation:\n%s", sys)
	}

	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "s1", Name: "memory_search", Args: `{"query":"locker code","limit":5}`}}},
		openaitest.Reply{Text: []string{"Found it."}},
	)
	b2 := h.attach(sessions.AttachOptions{Author: bob, Guide: "recalling"})
	b2.say("search for my code")
	b2.reply()
	req := lastRequest(t, h.llm)
	result := openaitest.Text(req.Messages[len(req.Messages)-1].Content)
	if !strings.Contains(result, "1234") || strings.Contains(result, "4711") {
		t.Fatalf("Bob's memory_search: %q", result)
	}
	if sys := systemOf(req); strings.Contains(sys, "4711") {
		t.Fatalf("Bob's recall holds Alice's code:\n%s", sys)
	}
}

// A fact given 200 messages ago, long out of the model's window, is found
// by memory_search, after a restart too.
func TestAFactFromLongAgoIsFound(t *testing.T) {
	h := newHarness(t)
	h.llm.Respond(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Text: []string{"Noted."}} })
	a := h.attach(sessions.AttachOptions{Author: alice, Guide: "recalling"})
	a.say("the locker code is 4711")
	a.reply()
	for i := range 100 {
		a.say(fmt.Sprintf("small talk number %d about the weather", i))
		a.reply()
	}
	h.restart()
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "s1", Name: "memory_search", Args: `{"query":"locker code"}`}}},
		openaitest.Reply{Text: []string{"It is 4711."}},
	)
	a2 := h.attach(sessions.AttachOptions{SessionID: a.id, Author: alice, AfterSeq: -1})
	a2.say("what was the code for the locker?")
	if got := a2.reply().Content; got != "It is 4711." {
		t.Fatalf("answered %q", got)
	}
	reqs := h.llm.Requests()
	first := reqs[len(reqs)-2] // the request that called memory_search
	for _, m := range first.Messages[1:] {
		if strings.Contains(openaitest.Text(m.Content), "4711") {
			t.Fatal("the fact was still in the model's window: the test proves nothing")
		}
	}
	last := reqs[len(reqs)-1]
	if result := openaitest.Text(last.Messages[len(last.Messages)-1].Content); !strings.Contains(result, "the locker code is 4711") {
		t.Fatalf("memory_search found %q", result)
	}
}
