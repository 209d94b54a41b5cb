package storage

import (
	"bytes"
	"context"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// What is left to embed is the database's to say, per space; vectors are
// read back a conversation at a time, of one length; a message found by
// id is its members' only; a vector goes with its message.
func TestVectors(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	for _, s := range []struct{ id, member string }{{"alices", "web:alice"}, {"bobs", "web:bob"}} {
		storetest.NewSession(t, db, s.id, "")
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

	count := func() int {
		var n int
		if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM message_vectors`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 3 {
		t.Fatalf("%d vectors stored", n)
	}
	if pending, total, err := CountUnembeddedIn(ctx, db.read, "m2"); err != nil || pending != 2 || total != 3 {
		t.Fatalf("CountUnembeddedIn = %d of %d, %v", pending, total, err)
	}
	if err := db.DeleteSessions(ctx, []string{"alices"}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d vectors after deleting Alice's conversation, want Bob's one", n)
	}
	// A vector for a message deleted meanwhile is dropped, not an error.
	if err := db.SaveVectors(ctx, "m2", []switchboard.Vector{{MessageID: pending[0].ID, Values: v(1, 1, 1, 1)}}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("a vector was stored for a deleted message: %d", n)
	}
	if err := db.SaveVectors(ctx, "m2", []switchboard.Vector{{MessageID: pending[2].ID, Values: make([]float32, switchboard.MaxVectorDims+1)}}); err == nil {
		t.Fatal("a vector longer than MaxVectorDims was stored")
	}
}

// A stored vector that cannot be read (a damaged or edited file) is left
// out of its conversation's, not an error for the search.
func TestSessionVectorsSkipsDamagedVectors(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	storetest.NewSession(t, db, "s", "")
	if err := writeTurn(ctx, db, "s", switchboard.TurnWrite{Messages: []switchboard.Message{
		{Role: switchboard.RoleUser, Content: "one"}, {Role: switchboard.RoleUser, Content: "two"}}}); err != nil {
		t.Fatal(err)
	}
	pending, _ := db.Unembedded(ctx, "m", 0, 10)
	nan := EncodeVector([]float32{1, float32(math.NaN())})
	if err := db.SaveVectors(ctx, "m", []switchboard.Vector{{MessageID: pending[0].ID, Values: []float32{1, 0}}, {MessageID: pending[1].ID, Values: []float32{0, 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.write.ExecContext(ctx, `UPDATE message_vectors SET vector = ? WHERE message_id = ?`, nan, pending[1].ID); err != nil {
		t.Fatal(err)
	}
	ids, flat, err := db.SessionVectors(ctx, "m", "s", 2)
	if err != nil || !reflect.DeepEqual(ids, []int64{pending[0].ID}) || len(flat) != 2 {
		t.Fatalf("SessionVectors = %v %v %v", ids, flat, err)
	}
}

func TestDecodeVector(t *testing.T) {
	v := []float32{0, 1, -0.5, math.MaxFloat32, math.SmallestNonzeroFloat32}
	got, err := DecodeVector([]float32{9}, EncodeVector(v))
	if err != nil || !reflect.DeepEqual(got, append([]float32{9}, v...)) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if b := EncodeVector([]float32{1}); !bytes.Equal(b, []byte{0, 0, 0x80, 0x3f}) {
		t.Fatalf("1 is % x, want little-endian float32", b)
	}
	for name, b := range map[string][]byte{
		"not whole float32s": {1, 2, 3},
		"NaN":                EncodeVector([]float32{float32(math.NaN())}),
		"infinite":           EncodeVector([]float32{0, float32(math.Inf(-1))}),
		"too long":           make([]byte, 4*(switchboard.MaxVectorDims+1)),
	} {
		got, err := DecodeVector([]float32{9}, b)
		if !errors.Is(err, ErrBadVector) || len(got) != 1 {
			t.Errorf("%s: %v, %v", name, got, err)
		}
	}
}

// DecodeVector reads what the database holds, which a damaged or edited
// file makes anything: it never panics, refuses what is not finite
// float32s, and reads back exactly what EncodeVector wrote.
func FuzzDecodeVector(f *testing.F) {
	f.Add(EncodeVector([]float32{1, 0, -1}))
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4, 5})
	f.Add(EncodeVector([]float32{float32(math.NaN())}))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeVector(nil, b)
		if err != nil {
			if len(v) != 0 {
				t.Fatalf("an error with %d numbers", len(v))
			}
			return
		}
		if len(v) != len(b)/4 {
			t.Fatalf("%d numbers from %d bytes", len(v), len(b))
		}
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("a number that is not finite: %v", x)
			}
		}
		if !bytes.Equal(EncodeVector(v), b) {
			t.Fatal("does not read back what it decodes")
		}
	})
}
