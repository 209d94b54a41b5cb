package storage

import (
	"context"
	"fmt"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// A summary covers every message but the last Keep; the context is the
// summary and those; a later summary moves on; the messages themselves
// stay; deleting the session deletes its summary.
func TestSummaryAndContext(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	storetest.NewSession(t, db, "s1", "")
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
	storetest.NewSession(t, db, "s2", "")
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
	var left int
	if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM summaries WHERE session_id = 's1'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("summary rows left after deleting the session: %d (%v)", left, err)
	}
}
