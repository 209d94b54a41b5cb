package sessions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/tools"
)

// longGuide compacts, with the shipped assistant's window, and reads
// reports with a tool whose results are tens of KiB.
const longGuide = `---
name: long
description: A long conversation with large tool results
memory: { policy: compact, window: 20 }
tools: [read_report]
approval: { default: auto }
max_iterations: 3
---
You answer questions about the reports you read.
`

// reportBytes is the size of a read_report result.
const reportBytes = 48 << 10

// withLongGuide gives the harness the long guide, as its default, and
// read_report, which returns a report of reportBytes numbered n.
func withLongGuide(t *testing.T) option {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "long.md"), []byte(longGuide), 0o644); err != nil {
		t.Fatal(err)
	}
	catalog, err := guides.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	report := tools.Tool{
		Name: "read_report", Description: "Reads the report numbered n.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		Execute: func(ctx context.Context, args json.RawMessage) (tools.Result, error) {
			var in struct{ N int }
			if err := json.Unmarshal(args, &in); err != nil {
				return tools.Result{}, err
			}
			return tools.Result{Content: long(in.N, reportBytes)}, nil
		},
	}
	registry, err := tools.NewRegistry(report)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *sessions.Config) {
		c.Guides, c.DefaultGuide, c.Tools = catalog, "long", registry
		c.Providers["main"].ContextWindow = longWindow
	}
}

// The model's context: a request may hold longWindow less the 4,096
// tokens the gateway leaves for the answer, and the scripted model refuses
// anything over that, counting tokens its own way (a token for every three
// bytes, which the gateway's estimate of four learns from its answers).
const (
	longWindow = 32_000
	longLimit  = longWindow - 4096
)

// turnNumber finds "Turn N" in the last user message of a request.
var turnNumber = regexp.MustCompile(`^Turn (\d+):`)

// The figure test: a 300-turn conversation with 16 KiB messages
// and large tool results (48 KiB, every fifth turn) against a scripted
// model that refuses requests over its context limit. Every turn is
// answered, no request is over the budget (the model refuses none), the
// stored history is whole, and compaction kept the context short.
func TestThreeHundredTurnsWithinTheBudget(t *testing.T) {
	const turns, messageBytes = 300, 16 << 10
	start := time.Now()
	h := newHarness(t, withLongGuide(t))
	h.llm.SetContextLimit(longLimit)
	h.llm.Respond(func(r openaitest.Request) openaitest.Reply {
		if isSummaryRequest(r) {
			// Notes as long as a model's: a few hundred words.
			return openaitest.Reply{Text: []string{"NOTES: " + strings.Repeat("a fact the conversation established. ", 60)}}
		}
		n := -1
		for _, m := range r.Messages {
			if m.Role == "user" {
				if sub := turnNumber.FindStringSubmatch(openaitest.Text(m.Content)); sub != nil {
					n, _ = strconv.Atoi(sub[1])
				}
			}
		}
		if last := r.Messages[len(r.Messages)-1]; last.Role == "user" && n%5 == 0 {
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: fmt.Sprint("call_", n), Name: "read_report", Args: fmt.Sprintf(`{"n":%d}`, n)}}}
		}
		return openaitest.Reply{Text: []string{fmt.Sprintf("Answer %d.", n)}}
	})
	c := h.newSession(alice)
	refusedAt := -1 // the turn of the first refusal
	for i := range turns {
		c.say(fmt.Sprintf("Turn %d: %s", i, long(i, messageBytes)))
		if got, want := c.reply().Content, fmt.Sprintf("Answer %d.", i); got != want {
			t.Fatalf("turn %d answered %q, want %q", i, got, want)
		}
		if refusedAt < 0 && len(h.llm.TooLong()) > 0 {
			refusedAt = i
		}
	}
	elapsed := time.Since(start)

	// No request over the budget: the model refused none. The one
	// allowance is for the first turns, while the estimate learns the
	// model's count from its answers; the refused request is then made
	// again shorter, and the turn still answered (above).
	if refused := h.llm.TooLong(); len(refused) > 1 || len(refused) == 1 && refusedAt > 3 {
		t.Fatalf("the model refused %d requests as over its limit of %d tokens (%v), the first at turn %d", len(refused), longLimit, refused, refusedAt)
	}
	var summaries, calls int
	var last openaitest.Request
	for _, r := range h.llm.Requests() {
		if isSummaryRequest(r) {
			summaries++
		} else {
			calls++
			last = r
		}
	}
	if !strings.Contains(systemOf(last), "NOTES: ") {
		t.Fatalf("the last turn's request lacks the notes on the conversation before it:\n%.300s", systemOf(last))
	}
	compactions := 0
	for _, ev := range c.got {
		if ev.Type == switchboard.EventCompaction {
			compactions++
		}
	}
	// Each request holds at most about 28k of the model's tokens, the
	// conversation ~1.7M: without compaction most of it would be left out
	// silently. Every compaction is a summary the model made.
	if compactions < turns/10 || compactions != summaries {
		t.Fatalf("%d compactions and %d summary requests in %d turns, want one for each and at least %d", compactions, summaries, turns, turns/10)
	}
	if want := turns + turns/5; calls != want+len(h.llm.TooLong()) {
		t.Fatalf("%d turn requests, want %d (one a turn, two in a turn that reads a report) and one for each refusal", calls, want)
	}

	// The history is whole: every message stored, none shortened.
	stored, err := h.db.Window(context.Background(), c.id, 10*turns)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2*turns + 2*(turns/5); len(stored) != want {
		t.Fatalf("%d messages stored, want %d", len(stored), want)
	}
	var users, results int
	for _, m := range stored {
		switch m.Role {
		case switchboard.RoleUser:
			if len(m.Content) < messageBytes || !strings.HasPrefix(m.Content, fmt.Sprintf("Turn %d: ", users)) || strings.Contains(m.Content, "left out here") {
				t.Fatalf("stored message %d is %d bytes, %.20q…: not the message sent", users, len(m.Content), m.Content)
			}
			users++
		case switchboard.RoleTool:
			if len(m.Content) < reportBytes || strings.Contains(m.Content, "left out here") {
				t.Fatalf("stored tool result %d is %d bytes: shortened", results, len(m.Content))
			}
			results++
		}
	}
	if users != turns || results != turns/5 {
		t.Fatalf("stored %d user messages and %d tool results, want %d and %d", users, results, turns, turns/5)
	}
	t.Logf("%d turns in %v: %d model calls for the turns, %d summaries (%.0f per 100 turns), %d refused",
		turns, elapsed.Round(time.Millisecond), calls, summaries, 100*float64(summaries)/turns, len(h.llm.TooLong()))
}
