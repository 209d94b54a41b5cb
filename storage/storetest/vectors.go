package storetest

import (
	"context"
	"reflect"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// What is left to embed is the database's to say, per space; vectors are
// read back a conversation at a time, of one length; a message found by
// id is its members' only; a vector goes with its message.
func testVectors(t *testing.T, db Store) {
	ctx := context.Background()
	for _, s := range []struct{ id, member string }{{"alices", "web:alice"}, {"bobs", "web:bob"}} {
		NewSession(t, db, s.id, "")
		if err := db.SetMember(ctx, s.id, switchboard.Member{Key: s.member, Role: "owner"}); err != nil {
			t.Fatal(err)
		}
	}
	say := func(session string, msgs ...switchboard.Message) {
		t.Helper()
		if err := writeTurn(ctx, db, session, switchboard.TurnWrite{Messages: msgs}); err != nil {
			t.Fatal(err)
		}
	}
	say("alices", switchboard.Message{Role: switchboard.RoleUser, Content: "my locker code is 4711"},
		switchboard.Message{Role: switchboard.RoleAssistant, Content: "Noted."},
		switchboard.Message{Role: switchboard.RoleAssistant, ToolCalls: []switchboard.ToolCall{{ID: "c1", Name: "calculator", Args: []byte(`{}`)}}},
		switchboard.Message{Role: switchboard.RoleTool, ToolCallID: "c1", Content: "42"})
	say("bobs", switchboard.Message{Role: switchboard.RoleUser, Content: "hello"})

	pending, err := db.Unembedded(ctx, "m1", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, p := range pending {
		texts = append(texts, p.SessionID+": "+p.Text)
	}
	if want := []string{"alices: my locker code is 4711", "alices: Noted.", "bobs: hello"}; !reflect.DeepEqual(texts, want) {
		t.Fatalf("unembedded: %q, want %q (no tool calls or results)", texts, want)
	}
	if n, err := db.CountUnembedded(ctx, "m1", 0); err != nil || n != 3 {
		t.Fatalf("CountUnembedded = %d, %v", n, err)
	}
	if page, _ := db.Unembedded(ctx, "m1", pending[0].ID, 1); len(page) != 1 || page[0].ID != pending[1].ID {
		t.Fatalf("the page after the first: %+v", page)
	}

	v := func(xs ...float32) []float32 { return xs }
	if err := db.SaveVectors(ctx, "m1", []switchboard.Vector{
		{MessageID: pending[0].ID, Values: v(1, 0, 0)}, {MessageID: pending[1].ID, Values: v()}, {MessageID: pending[2].ID, Values: v(0, 1, 0)},
	}); err != nil {
		t.Fatal(err)
	}
	if left, _ := db.Unembedded(ctx, "m1", 0, 10); len(left) != 0 {
		t.Fatalf("left to embed after saving: %+v", left)
	}
	if left, _ := db.Unembedded(ctx, "m2", 0, 10); len(left) != 3 {
		t.Fatalf("another model's vectors count as none: %d left", len(left))
	}

	ids, flat, err := db.SessionVectors(ctx, "m1", "alices", 3)
	if err != nil || !reflect.DeepEqual(ids, []int64{pending[0].ID}) || !reflect.DeepEqual(flat, v(1, 0, 0)) {
		t.Fatalf("SessionVectors = %v %v %v: the empty vector is left out", ids, flat, err)
	}
	if ids, _, _ := db.SessionVectors(ctx, "m1", "alices", 4); len(ids) != 0 {
		t.Fatalf("vectors of another length: %v", ids)
	}
	if ids, _, _ := db.SessionVectors(ctx, "m2", "alices", 3); len(ids) != 0 {
		t.Fatalf("vectors of another space: %v", ids)
	}

	// Re-embedding with another model replaces the vector.
	if err := db.SaveVectors(ctx, "m2", []switchboard.Vector{{MessageID: pending[0].ID, Values: v(0, 0, 1, 0)}}); err != nil {
		t.Fatal(err)
	}
	if ids, _, _ := db.SessionVectors(ctx, "m1", "alices", 3); len(ids) != 0 {
		t.Fatalf("the old model's vector stayed: %v", ids)
	}
	if ids, flat, _ := db.SessionVectors(ctx, "m2", "alices", 4); len(ids) != 1 || flat[2] != 1 {
		t.Fatalf("the new model's vector: %v %v", ids, flat)
	}
	if ids, _, _ := db.SessionVectors(ctx, "m2", "alices", 3); len(ids) != 0 {
		t.Fatalf("a vector of 4 numbers read as one of 3: %v", ids)
	}

	if got, _ := db.MemberSessions(ctx, "web:alice"); !reflect.DeepEqual(got, []string{"alices"}) {
		t.Fatalf("MemberSessions = %v", got)
	}
	all := []int64{pending[0].ID, pending[1].ID, pending[2].ID}
	hits, err := db.Hits(ctx, "web:bob", all)
	if err != nil || len(hits) != 1 || hits[0].Message.Content != "hello" || hits[0].At.IsZero() {
		t.Fatalf("Bob asked for every id and got %+v, %v", hits, err)
	}
	if hits, _ := db.Hits(ctx, "web:mallory", all); len(hits) != 0 {
		t.Fatalf("a stranger got %+v", hits)
	}

	// m2 has Alice's first message's vector (above); "Noted." and
	// Bob's "hello" wait for theirs.
	if n, err := db.CountUnembedded(ctx, "m2", 0); err != nil || n != 2 {
		t.Fatalf("CountUnembedded(m2) = %d, %v; want 2", n, err)
	}
	if err := db.DeleteSessions(ctx, []string{"alices"}); err != nil {
		t.Fatal(err)
	}
	// Alice's messages are gone with their vectors; Bob's stay.
	if left, err := db.Unembedded(ctx, "m2", 0, 10); err != nil || len(left) != 1 || left[0].ID != pending[2].ID {
		t.Fatalf("left to embed after deleting Alice's conversation: %+v, %v; want Bob's message alone", left, err)
	}
	if ids, _, err := db.SessionVectors(ctx, "m2", "alices", 4); err != nil || len(ids) != 0 {
		t.Fatalf("vectors of the deleted conversation: %v, %v", ids, err)
	}
	if ids, flat, err := db.SessionVectors(ctx, "m1", "bobs", 3); err != nil || !reflect.DeepEqual(ids, []int64{pending[2].ID}) || !reflect.DeepEqual(flat, v(0, 1, 0)) {
		t.Fatalf("Bob's vectors after deleting Alice's conversation: %v %v %v", ids, flat, err)
	}
	// A vector for a message deleted meanwhile is dropped, not an error.
	if err := db.SaveVectors(ctx, "m2", []switchboard.Vector{{MessageID: pending[0].ID, Values: v(1, 1, 1, 1)}}); err != nil {
		t.Fatal(err)
	}
	if ids, _, err := db.SessionVectors(ctx, "m2", "alices", 4); err != nil || len(ids) != 0 {
		t.Fatalf("a vector stored for a deleted message: %v, %v", ids, err)
	}
	if hits, err := db.Hits(ctx, "web:alice", all); err != nil || len(hits) != 0 {
		t.Fatalf("Alice found messages of a deleted conversation: %+v, %v", hits, err)
	}
	// Lengths a vector cannot have are refused.
	for _, dims := range []int{0, switchboard.MaxVectorDims + 1} {
		if _, _, err := db.SessionVectors(ctx, "m1", "bobs", dims); err == nil {
			t.Errorf("SessionVectors of %d numbers succeeded", dims)
		}
	}
	if err := db.SaveVectors(ctx, "m2", []switchboard.Vector{{MessageID: pending[2].ID, Values: make([]float32, switchboard.MaxVectorDims+1)}}); err == nil {
		t.Fatal("a vector longer than MaxVectorDims was stored")
	}
}
