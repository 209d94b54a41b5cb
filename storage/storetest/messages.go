package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// user is a person's message saying s.
func user(s string) switchboard.Message {
	return switchboard.Message{Role: switchboard.RoleUser, Content: s, Author: "me"}
}

// assistant is the assistant's message saying s and calling the
// calculator once for each id in calls.
func assistant(s string, calls ...string) switchboard.Message {
	m := switchboard.Message{Role: switchboard.RoleAssistant, Content: s}
	for _, c := range calls {
		m.ToolCalls = append(m.ToolCalls, switchboard.ToolCall{ID: c, Name: "calculator", Args: json.RawMessage(`{"expr":"1+1"}`)})
	}
	return m
}

// appendMsgs stores msgs in a session's context.
func appendMsgs(t testing.TB, db Store, session string, msgs ...switchboard.Message) {
	t.Helper()
	if err := db.AppendMessages(context.Background(), session, msgs, false); err != nil {
		t.Fatal(err)
	}
}

// result is the calculator's result of the call with the given id.
func result(call string) switchboard.Message {
	return switchboard.Message{Role: switchboard.RoleTool, Content: "2", ToolCallID: call, ToolName: "calculator"}
}

// checkWhole fails if a window starts with a tool result or holds a result
// whose assistant message it does not.
func checkWhole(t *testing.T, n int, w []switchboard.Message) {
	t.Helper()
	if len(w) > 0 && w[0].Role == switchboard.RoleTool {
		t.Errorf("Window(%d) starts with a tool result", n)
	}
	calls := map[string]bool{}
	for _, m := range w {
		for _, c := range m.ToolCalls {
			calls[c.ID] = true
		}
		if m.Role == switchboard.RoleTool && !calls[m.ToolCallID] {
			t.Errorf("Window(%d) has result %s without its call", n, m.ToolCallID)
		}
	}
}

// describe names a message in a window's spot checks: its first call,
// the call it is the result of, or its text.
func describe(m switchboard.Message) string {
	if len(m.ToolCalls) > 0 {
		return "call " + m.ToolCalls[0].ID
	}
	if m.Role == switchboard.RoleTool {
		return "result " + m.ToolCallID
	}
	return m.Content
}

func testWindowNeverStartsWithAToolResult(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	NewSession(t, db, "other", "")

	// Stored as the agent stores them: each assistant-with-tools message in
	// one call with all of its results.
	history := [][]switchboard.Message{
		{user("u1")},
		{assistant("", "c1", "c2"), result("c1"), result("c2")},
		{assistant("a1")},
		{user("u2")},
		{assistant("", "c3"), result("c3")},
		{assistant("", "c4", "c5", "c6"), result("c4"), result("c5"), result("c6")},
		{assistant("a2")},
	}
	var all []switchboard.Message
	for _, group := range history {
		appendMsgs(t, db, "s1", group...)
		appendMsgs(t, db, "other", user("noise")) // interleaved ids of another session
		all = append(all, group...)
	}

	for n := 1; n <= len(all)+2; n++ {
		got, err := db.Window(ctx, "s1", n)
		if err != nil {
			t.Fatal(err)
		}
		// Expected: the last n, minus leading tool results.
		want := all[max(0, len(all)-n):]
		for len(want) > 0 && want[0].Role == switchboard.RoleTool {
			want = want[1:]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Window(%d) = %v\nwant %v", n, got, want)
		}
		checkWhole(t, n, got)
	}

	// Spot checks of cuts that land inside groups.
	cases := []struct {
		n     int
		first string
		size  int
	}{
		{n: 2, first: "a2", size: 1},      // cut on c6's result
		{n: 4, first: "a2", size: 1},      // cut on c4's result
		{n: 5, first: "call c4", size: 5}, // the whole c4 group
		{n: 6, first: "call c4", size: 5}, // cut on c3's result
		{n: 7, first: "call c3", size: 7}, // the whole c3 group
		{n: len(all) - 1, first: "call c1", size: len(all) - 1},
	}
	for _, c := range cases {
		got, err := db.Window(ctx, "s1", c.n)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.size || describe(got[0]) != c.first {
			t.Errorf("Window(%d) starts with %q and has %d messages, want %q and %d", c.n, describe(got[0]), len(got), c.first, c.size)
		}
	}

	if got, err := db.Window(ctx, "s1", 0); err != nil || len(got) != 0 {
		t.Errorf("Window(0) = %v, %v; want empty", got, err)
	}
	if got, err := db.Window(ctx, "empty", 10); err != nil || len(got) != 0 {
		t.Errorf("Window of a session without messages = %v, %v", got, err)
	}
	if n, err := db.MessageCount(ctx, "s1"); err != nil || n != int64(len(all)) {
		t.Errorf("MessageCount = %d, %v; want %d", n, err, len(all))
	}
}

func testAppendMessagesIsAtomic(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{Turn: []byte(`{"turn":1}`)}); err != nil {
		t.Fatal(err)
	}

	bad := assistant("", "c1")
	bad.ToolCalls[0].Args = json.RawMessage(`{not json`)
	// The first message is fine and gets inserted before the second fails.
	err := db.AppendMessages(ctx, "s1", []switchboard.Message{user("hi"), bad, result("c1")}, true)
	if err == nil {
		t.Fatal("AppendMessages with an unencodable message succeeded")
	}
	if !strings.Contains(err.Error(), "append messages: ") {
		t.Errorf("error %q is not wrapped with its context", err)
	}
	if n, err := db.MessageCount(ctx, "s1"); err != nil || n != 0 {
		t.Errorf("MessageCount after a failed append = %d, %v; want 0", n, err)
	}
	if _, err := db.LoadPending(ctx, "s1"); err != nil {
		t.Errorf("pending turn deleted by a failed append: %v", err)
	}
	// Foreign keys: messages need a session.
	if err := db.AppendMessages(ctx, "ghost", []switchboard.Message{user("hi")}, false); err == nil {
		t.Error("AppendMessages to an unknown session succeeded")
	}
}

func testPendingTurn(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")

	if _, err := db.LoadPending(ctx, "s1"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("LoadPending with none = %v, want ErrNotFound", err)
	}
	for _, data := range []string{`{"v":1}`, `{"v":2}`} {
		if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{Turn: []byte(data)}); err != nil {
			t.Fatal(err)
		}
		got, err := db.LoadPending(ctx, "s1")
		if err != nil || string(got) != data {
			t.Errorf("LoadPending = %q, %v; want %q", got, err, data)
		}
	}
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{EndTurn: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LoadPending(ctx, "s1"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("LoadPending after delete = %v, want ErrNotFound", err)
	}
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{EndTurn: true}); err != nil {
		t.Errorf("deleting nothing: %v", err)
	}

	// Storing a turn's messages without clearPending keeps the turn…
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{Turn: []byte(`{"v":3}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendMessages(ctx, "s1", []switchboard.Message{user("hi")}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LoadPending(ctx, "s1"); err != nil {
		t.Errorf("pending turn gone without clearPending: %v", err)
	}
	// …with it, the turn is completed in the same transaction.
	if err := db.AppendMessages(ctx, "s1", []switchboard.Message{assistant("", "c1"), result("c1")}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LoadPending(ctx, "s1"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("pending turn after clearPending = %v, want ErrNotFound", err)
	}
	if n, err := db.MessageCount(ctx, "s1"); err != nil || n != 3 {
		t.Errorf("MessageCount = %d, %v; want 3", n, err)
	}
}

func testSeenInput(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	NewSession(t, db, "s2", "")

	steps := []struct {
		session, id string
		want        bool
	}{
		{"s1", "c1", false},
		{"s1", "c1", true},
		{"s1", "c2", false},
		{"s2", "c1", false}, // ids are per session
		{"s1", "", false},
		{"s1", "", false}, // empty ids are never recorded
		{"s2", "c1", true},
	}
	for i, s := range steps {
		got, err := db.SeenInput(ctx, s.session, s.id)
		if err != nil {
			t.Fatal(err)
		}
		if got != s.want {
			t.Errorf("step %d: SeenInput(%s, %q) = %v, want %v", i, s.session, s.id, got, s.want)
		}
	}
}

// The answer of a turn and the tokens it cost are one write (what
// AppendReply was): the message is stored and the usage added together.
func testWriteTurnStoresTheAnswerAndAddsUsage(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	u := switchboard.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
	answer := switchboard.Message{Role: switchboard.RoleAssistant, Content: "Hello"}
	if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{Messages: []switchboard.Message{answer}, Usage: u}); err != nil {
		t.Fatal(err)
	}
	// A turn that ended without text (stopped, tools only) still spent tokens.
	if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{Usage: u}); err != nil {
		t.Fatal(err)
	}
	w, err := db.Window(ctx, "s1", 10)
	if err != nil || len(w) != 1 || w[0].Content != "Hello" {
		t.Fatalf("window = %+v, %v; want the one answer", w, err)
	}
	s, err := db.Session(ctx, "s1")
	if err != nil || s.Usage != u.Add(u) {
		t.Fatalf("usage = %+v, %v; want %+v", s.Usage, err, u.Add(u))
	}
	if _, err := db.WriteTurn(ctx, "nope", switchboard.TurnWrite{Usage: u}); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("usage for a missing session: %v, want ErrNotFound", err)
	}
}

// A user's message and its client id are one write (what AppendInput was):
// stored and marked seen together, or neither.
func testWriteTurnStoresInputAndMarksTogether(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	hi := switchboard.Message{Role: switchboard.RoleUser, Content: "hi"}
	for i, step := range []struct {
		id      string
		wantDup bool
	}{{"c1", false}, {"c1", true}, {"", false}, {"", false}, {"c2", false}} {
		dup, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{ClientID: step.id, Messages: []switchboard.Message{hi}})
		if err != nil || dup != step.wantDup {
			t.Fatalf("step %d: WriteTurn(client id %q) = %v, %v; want %v", i, step.id, dup, err, step.wantDup)
		}
	}
	if n, err := db.MessageCount(ctx, "s1"); err != nil || n != 4 {
		t.Fatalf("stored %d messages (%v), want 4: a repeated id stores nothing", n, err)
	}
	if seen, err := db.SeenInput(ctx, "s1", "c2"); err != nil || !seen {
		t.Fatalf("SeenInput(c2) = %v, %v; WriteTurn must record the id", seen, err)
	}
	// An input whose message cannot be stored is not marked seen.
	NewSession(t, db, "s2", "")
	bad := assistant("", "c1")
	bad.ToolCalls[0].Args = json.RawMessage(`{not json`)
	if _, err := db.WriteTurn(ctx, "s2", switchboard.TurnWrite{ClientID: "c3", Messages: []switchboard.Message{hi, bad}}); err == nil {
		t.Fatal("WriteTurn with an unencodable message succeeded")
	}
	if seen, err := db.SeenInput(ctx, "s2", "c3"); err != nil || seen {
		t.Fatalf("a failed WriteTurn left its id marked seen: %v, %v", seen, err)
	}
	if _, err := db.WriteTurn(ctx, "nope", switchboard.TurnWrite{ClientID: "c3", Messages: []switchboard.Message{hi}}); err == nil {
		t.Fatal("WriteTurn into a missing session succeeded")
	}
	if n, err := db.MessageCount(ctx, "nope"); err != nil || n != 0 {
		t.Fatalf("a failed WriteTurn stored %d messages (%v)", n, err)
	}
}

// A summary covers every message but the last Keep; the context is the
// summary and those; a later summary moves on; the messages themselves
// stay; deleting the session deletes its summary.
func testSummaryAndContext(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	say := func(from, to int) {
		t.Helper()
		var msgs []switchboard.Message
		for i := from; i <= to; i++ {
			msgs = append(msgs, switchboard.Message{Role: switchboard.RoleUser, Content: fmt.Sprint("m", i)})
		}
		if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{Messages: msgs}); err != nil {
			t.Fatal(err)
		}
	}
	contents := func(ms []switchboard.Message) string {
		s := ""
		for _, m := range ms {
			s += m.Content + " "
		}
		return s
	}
	say(1, 4)
	if summary, msgs, err := db.Context(ctx, "s1", 100); err != nil || summary != "" || contents(msgs) != "m1 m2 m3 m4 " {
		t.Fatalf("before a summary: %q %q %v", summary, contents(msgs), err)
	}
	// A summary written with two more messages keeps three after it.
	err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "m5"}, {Role: switchboard.RoleAssistant, Content: "m6"}},
		Summary:  &switchboard.Summary{Text: "first summary", Keep: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	if summary, msgs, err := db.Context(ctx, "s1", 100); err != nil || summary != "first summary" || contents(msgs) != "m4 m5 m6 " {
		t.Fatalf("after the first summary: %q %q %v", summary, contents(msgs), err)
	}
	say(7, 8)
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{Summary: &switchboard.Summary{Text: "second", Keep: 1}}); err != nil {
		t.Fatal(err)
	}
	if summary, msgs, err := db.Context(ctx, "s1", 100); err != nil || summary != "second" || contents(msgs) != "m8 " {
		t.Fatalf("after the second summary: %q %q %v", summary, contents(msgs), err)
	}
	if n, _ := db.MessageCount(ctx, "s1"); n != 8 {
		t.Fatalf("%d messages stored, want all 8", n)
	}
	// Keep beyond what there is: the summary covers nothing yet.
	NewSession(t, db, "s2", "")
	say2 := switchboard.TurnWrite{Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "only"}}, Summary: &switchboard.Summary{Text: "x", Keep: 5}}
	if err := writeTurn(ctx, db, "s2", say2); err != nil {
		t.Fatal(err)
	}
	if _, msgs, _ := db.Context(ctx, "s2", 100); contents(msgs) != "only " {
		t.Fatalf("keep 5 of 1: %q", contents(msgs))
	}
	if err := db.DeleteSessions(ctx, []string{"s1"}); err != nil {
		t.Fatal(err)
	}
	if summary, _, err := db.Context(ctx, "s1", 100); err != nil || summary != "" {
		t.Fatalf("summary of the deleted session: %q, %v", summary, err)
	}
	if f, err := db.Footprint(ctx); err != nil || f.Summaries != 1 {
		t.Fatalf("after deleting the session: %+v, %v; want s2's summary alone", f, err)
	}
}
