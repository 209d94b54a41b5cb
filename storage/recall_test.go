package storage

import (
	"context"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// Search finds a conversation's messages by their words for its members
// only; a person's query syntax is text; a deleted conversation is found
// no more.
func TestSearch(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	for _, s := range []struct{ id, member string }{{"alices", "web:alice"}, {"bobs", "slack:U2"}, {"shared", "web:alice"}, {"shared", "slack:U2"}} {
		if _, err := db.Session(ctx, s.id); err != nil {
			storetest.NewSession(t, db, s.id, "")
		}
		if err := db.SetMember(ctx, s.id, switchboard.Member{Key: s.member, Role: "member"}); err != nil {
			t.Fatal(err)
		}
	}
	say := func(session, text string) {
		t.Helper()
		if err := writeTurn(ctx, db, session, switchboard.TurnWrite{Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: text}}}); err != nil {
			t.Fatal(err)
		}
	}
	say("alices", "The locker code is 4711, remember it.")
	say("bobs", "My locker code is 1234.")
	say("shared", "The team locker is on floor 3.")
	if err := writeTurn(ctx, db, "alices", switchboard.TurnWrite{Messages: []switchboard.Message{
		{Role: switchboard.RoleTool, ToolName: "calculator", Content: "locker 9999"}}}); err != nil {
		t.Fatal(err)
	}

	texts := func(reader, q string) []string {
		t.Helper()
		hits, err := db.Search(ctx, reader, q, 10)
		if err != nil {
			t.Fatalf("Search(%q, %q): %v", reader, q, err)
		}
		var out []string
		for _, h := range hits {
			out = append(out, h.SessionID+": "+h.Message.Content)
			if h.At.IsZero() {
				t.Errorf("a hit without its time: %+v", h)
			}
		}
		return out
	}
	if got := texts("web:alice", "what was my locker code?"); len(got) != 2 || got[0] != "alices: The locker code is 4711, remember it." {
		t.Fatalf("Alice's search: %q", got)
	}
	if got := texts("slack:U2", "4711"); len(got) != 0 {
		t.Fatalf("Bob found Alice's code: %q", got)
	}
	if got := texts("slack:U2", "floor"); len(got) != 1 {
		t.Fatalf("Bob's search of the shared conversation: %q", got)
	}
	for _, q := range []string{`locker" OR "`, `NEAR(locker code)`, `locker*`, `"unterminated`, `-locker`, `locker:code`} {
		if _, err := db.Search(ctx, "web:alice", q, 10); err != nil {
			t.Errorf("query %q: %v", q, err)
		}
	}
	say("alices", "We met at the Café Zürich.")
	for _, q := range []string{"cafe zurich", "CAFÉ", "Zürich"} {
		if got := texts("web:alice", q); len(got) != 1 || got[0] != "alices: We met at the Café Zürich." {
			t.Errorf("%q found %q", q, got)
		}
	}
	if got := texts("web:alice", "  ?!  "); len(got) != 0 {
		t.Fatalf("an empty query found %q", got)
	}
	if got := texts("web:alice", "9999"); len(got) != 0 {
		t.Fatalf("a tool result was indexed: %q", got)
	}
	if err := db.DeleteSessions(ctx, []string{"alices"}); err != nil {
		t.Fatal(err)
	}
	if got := texts("web:alice", "4711"); len(got) != 0 {
		t.Fatalf("a deleted conversation was found: %q", got)
	}
	var left int
	if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH '"4711"'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("index rows left after the delete: %d (%v)", left, err)
	}
}
