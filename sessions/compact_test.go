package sessions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
)

// isSummaryRequest tells the compaction's model calls from the turns'.
func isSummaryRequest(r openaitest.Request) bool {
	return len(r.Messages) > 0 && r.Messages[0].Role == "system" &&
		strings.Contains(openaitest.Text(r.Messages[0].Content), "You keep the memory of a conversation")
}

// systemOf is a request's system prompt.
func systemOf(r openaitest.Request) string {
	if len(r.Messages) > 0 && r.Messages[0].Role == "system" {
		return openaitest.Text(r.Messages[0].Content)
	}
	return ""
}

// A compacting guide summarises what would leave its window: the model is
// then given the notes and the messages after them, the next summary
// starts from the last one, a restart keeps both, and the history keeps
// every message.
func TestCompactionKeepsWhatLeavesTheWindow(t *testing.T) {
	h := newHarness(t)
	summaries := 0
	h.llm.Respond(func(r openaitest.Request) openaitest.Reply {
		if isSummaryRequest(r) {
			summaries++
			return openaitest.Reply{Text: []string{fmt.Sprintf("NOTES %d: %d bytes noted.", summaries, len(openaitest.Text(r.Messages[1].Content)))}}
		}
		return openaitest.Reply{Text: []string{"Noted."}}
	})
	c := h.attach(sessions.AttachOptions{Author: alice, Guide: "compacting"})
	for i := range 10 {
		c.say(fmt.Sprintf("fact %d: the locker code is %d", i, 1000+i))
		if got := c.reply().Content; got != "Noted." {
			t.Fatalf("turn %d answered %q", i, got)
		}
	}
	var summaryReqs, turnReqs []openaitest.Request
	for _, r := range h.llm.Requests() {
		if isSummaryRequest(r) {
			summaryReqs = append(summaryReqs, r)
		} else {
			turnReqs = append(turnReqs, r)
		}
	}
	if len(summaryReqs) < 2 {
		t.Fatalf("%d summaries in 10 turns with a window of 6, want at least 2", len(summaryReqs))
	}
	first := openaitest.Text(summaryReqs[0].Messages[1].Content)
	if !strings.Contains(first, ": fact 0: the locker code is 1000\nAssistant: Noted.") {
		t.Fatalf("the first summary was not made from the first messages:\n%s", first)
	}
	if second := openaitest.Text(summaryReqs[1].Messages[1].Content); !strings.HasPrefix(second, "Earlier notes:\nNOTES 1:") {
		t.Fatalf("the second summary did not start from the first:\n%.200s", second)
	}
	last := turnReqs[len(turnReqs)-1]
	if !strings.Contains(systemOf(last), fmt.Sprintf("NOTES %d:", len(summaryReqs))) {
		t.Fatalf("the last request's system prompt lacks the latest notes:\n%s", systemOf(last))
	}
	if n := len(last.Messages) - 1; n > 6 {
		t.Fatalf("the last request carries %d messages, more than the window of 6", n)
	}
	compactions := 0
	for _, ev := range c.got {
		if ev.Type == switchboard.EventCompaction {
			compactions++
		}
	}
	if compactions != len(summaryReqs) {
		t.Fatalf("%d compaction events for %d summaries", compactions, len(summaryReqs))
	}
	if n := len(c.window()); n != 20 {
		t.Fatalf("%d messages stored, want all 20", n)
	}

	// After a restart the model is given the same notes and tail: no
	// summary is made again.
	before := len(h.llm.Requests())
	h.restart()
	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: -1})
	c2.say("what was the first locker code?")
	c2.reply()
	reqs := h.llm.Requests()[before:]
	if len(reqs) != 1 || isSummaryRequest(reqs[0]) {
		t.Fatalf("after the restart: %d requests (a summary first: %v), want the turn's alone", len(reqs), len(reqs) > 0 && isSummaryRequest(reqs[0]))
	}
	if want := fmt.Sprintf("NOTES %d:", len(summaryReqs)); !strings.Contains(systemOf(reqs[0]), want) || len(reqs[0].Messages)-1 > 6 {
		t.Fatalf("after the restart: system %q (want %q), %d messages", systemOf(reqs[0]), want, len(reqs[0].Messages)-1)
	}
}

// A summary that cannot be made leaves the turn to go on: it is answered,
// nothing is compacted, and the next turn tries again.
func TestAFailedSummaryDoesNotFailTheTurn(t *testing.T) {
	h := newHarness(t)
	h.llm.Respond(func(r openaitest.Request) openaitest.Reply {
		if isSummaryRequest(r) {
			return openaitest.Reply{Status: 500}
		}
		return openaitest.Reply{Text: []string{"Noted."}}
	})
	c := h.attach(sessions.AttachOptions{Author: alice, Guide: "compacting"})
	for i := range 6 {
		c.say(fmt.Sprintf("fact %d", i))
		if got := c.reply().Content; got != "Noted." {
			t.Fatalf("turn %d answered %q", i, got)
		}
	}
	for _, ev := range c.got {
		if ev.Type == switchboard.EventCompaction || ev.Type == switchboard.EventError {
			t.Fatalf("a failed summary showed as %s: %s", ev.Type, ev.Data)
		}
	}
	tries := 0
	for _, r := range h.llm.Requests() {
		if isSummaryRequest(r) {
			tries++
		}
	}
	if tries < 2 {
		t.Fatalf("the summary was tried %d times over the turns past the window, want a try each turn", tries)
	}
}

// A gateway that stops while a summary is being written loses nothing:
// the turn is run again after the restart, compacted once, and answered.
func TestARestartMidCompaction(t *testing.T) {
	h := newHarness(t)
	var hung atomic.Bool
	h.llm.Respond(func(r openaitest.Request) openaitest.Reply {
		if isSummaryRequest(r) {
			if !hung.Swap(true) {
				return openaitest.Reply{Hang: true}
			}
			return openaitest.Reply{Text: []string{"NOTES: the facts so far."}}
		}
		return openaitest.Reply{Text: []string{"Noted."}}
	})
	c := h.attach(sessions.AttachOptions{Author: alice, Guide: "compacting"})
	for i := range 3 {
		c.say(fmt.Sprintf("fact %d", i))
		c.reply()
	}
	// The fourth message overflows the window of 6: its turn starts with
	// a summary, which hangs.
	c.submit(switchboard.Input{ClientID: "c4", Text: "fact 3"})
	for deadline := time.Now().Add(10 * time.Second); !hung.Load(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the summary was never asked for")
		}
	}
	h.restart()
	count := func() (compactions, answers int) {
		for _, ev := range c.stored() {
			switch ev.Type {
			case switchboard.EventCompaction:
				compactions++
			case switchboard.EventMessage:
				if p, _ := ev.Payload(); p.(*switchboard.MessageData).Role == switchboard.RoleAssistant {
					answers++
				}
			}
		}
		return
	}
	compactions, answers := count()
	for deadline := time.Now().Add(10 * time.Second); answers < 4; compactions, answers = count() {
		if time.Now().After(deadline) {
			t.Fatalf("the cut turn was not answered after the restart: %d answers", answers)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if compactions != 1 || answers != 4 {
		t.Fatalf("stored %d compactions and %d answers, want 1 and 4", compactions, answers)
	}
}

// After summaries failed for a while the window holds more than the model
// takes at once: once they work again, the summary request itself fits
// the budget (the oldest part is summarised first, the rest next), so the
// model never refuses it and the window shrinks back.
func TestASummaryRequestFitsTheBudget(t *testing.T) {
	h := newHarness(t, func(c *sessions.Config) { c.Providers["main"].ContextWindow = 12_000 })
	h.llm.SetContextLimit(8_000)
	var failing atomic.Bool
	failing.Store(true)
	h.llm.Respond(func(r openaitest.Request) openaitest.Reply {
		if isSummaryRequest(r) {
			if failing.Load() {
				return openaitest.Reply{Status: 500}
			}
			return openaitest.Reply{Text: []string{"NOTES: the facts so far."}}
		}
		return openaitest.Reply{Text: []string{"Noted."}}
	})
	c := h.attach(sessions.AttachOptions{Author: alice, Guide: "compacting"})
	for i := range 14 {
		c.say(long(i, 3<<10))
		if got := c.reply().Content; got != "Noted." {
			t.Fatalf("turn %d answered %q", i, got)
		}
	}
	failing.Store(false)
	for i := 14; i < 20; i++ {
		c.say(long(i, 3<<10))
		if got := c.reply().Content; got != "Noted." {
			t.Fatalf("turn %d answered %q", i, got)
		}
	}
	// The model may refuse the first request too long, while the estimate
	// learns its count (TestALongConversationFitsTheContext); never a
	// summary.
	refused := 0
	for _, r := range h.llm.Requests() {
		body, _ := json.Marshal(r)
		if n := openaitest.PromptTokens(body); n > 8_000 && isSummaryRequest(r) {
			t.Errorf("a summary request of %d tokens was refused as too long", n)
		} else if n > 8_000 {
			refused++
		}
	}
	if refused > 1 {
		t.Errorf("%d requests were refused as too long; at most the first may be", refused)
	}
	compactions := 0
	for _, ev := range c.stored() {
		if ev.Type == switchboard.EventCompaction {
			compactions++
		}
	}
	if compactions == 0 {
		t.Fatal("no compaction once summaries worked again")
	}
	if _, msgs, err := h.db.Context(context.Background(), c.id, 1000); err != nil || len(msgs) > 12 {
		t.Fatalf("the model's context still holds %d messages (%v)", len(msgs), err)
	}
}
