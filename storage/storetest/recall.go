package storetest

import (
	"context"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// Search finds a conversation's messages by their words (any of them),
// people's and the assistant's, for its members only; a person's query
// syntax is text; case and accents do not matter; a deleted conversation
// is found no more.
func testSearch(t *testing.T, db Store) {
	ctx := context.Background()
	for _, s := range []struct{ id, member string }{{"alices", "web:alice"}, {"bobs", "slack:U2"}, {"shared", "web:alice"}, {"shared", "slack:U2"}} {
		if _, err := db.Session(ctx, s.id); err != nil {
			NewSession(t, db, s.id, "")
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
	// The shared one first: the best match, found first, is stored later.
	say("shared", "The team locker is on floor 3.")
	say("alices", "The locker code is 4711, remember it.")
	say("bobs", "My locker code is 1234.")
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
	if got := texts("web:mallory", "locker"); len(got) != 0 {
		t.Fatalf("a stranger found %q", got)
	}
	// Quotes, stars and operators are text: their words are searched
	// for, Alice's two messages with "locker" found.
	for q, want := range map[string]int{`locker" OR "`: 2, `NEAR(locker code)`: 2, `locker*`: 2, `"unterminated`: 0, `-locker`: 2, `locker:code`: 2} {
		if got := texts("web:alice", q); len(got) != want {
			t.Errorf("query %q found %q, want %d messages", q, got, want)
		}
	}
	// SearchHits is Search with the messages' ids, by which Hits finds
	// them again.
	hits, err := db.SearchHits(ctx, "web:alice", "locker", 10)
	if err != nil || len(hits) != 2 {
		t.Fatalf("SearchHits = %+v, %v; want Alice's two locker messages", hits, err)
	}
	again, err := db.Hits(ctx, "web:alice", []int64{hits[0].ID, hits[1].ID})
	if err != nil || len(again) != 2 {
		t.Fatalf("Hits of the ids SearchHits gave = %+v, %v", again, err)
	}
	byID := map[int64]string{}
	for _, h := range again {
		byID[h.ID] = h.Message.Content
	}
	for _, h := range hits {
		if h.ID == 0 || byID[h.ID] != h.Message.Content {
			t.Errorf("SearchHits gave %d for %q; Hits has %q for it", h.ID, h.Message.Content, byID[h.ID])
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
	if f, err := db.Footprint(ctx); err != nil || f.IndexedMessages != 4 {
		t.Fatalf("footprint %+v, %v; want 4 indexed messages: Alice's two, Bob's and the shared one", f, err)
	}
	if err := db.DeleteSessions(ctx, []string{"alices"}); err != nil {
		t.Fatal(err)
	}
	if got := texts("web:alice", "4711"); len(got) != 0 {
		t.Fatalf("a deleted conversation was found: %q", got)
	}
	if f, err := db.Footprint(ctx); err != nil || f.IndexedMessages != 2 {
		t.Fatalf("after the delete: %+v, %v; want the 2 messages of the others left in the index", f, err)
	}
}
