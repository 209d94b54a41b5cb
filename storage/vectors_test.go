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

// A vector is stored as a row of its own, deleted with its message; none
// is stored for a message deleted meanwhile; and gateway doctor's count of
// a file's messages left to embed (CountUnembeddedIn) agrees with the
// store's. What the methods show of vectors is the suite's (storetest).
func TestVectorRowsGoWithTheirMessages(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	for _, id := range []string{"a", "b"} {
		storetest.NewSession(t, db, id, "")
		if err := writeTurn(ctx, db, id, switchboard.TurnWrite{Messages: []switchboard.Message{user("one of " + id), user("two of " + id)}}); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := db.Unembedded(ctx, "m", 0, 10)
	if err != nil || len(msgs) != 4 {
		t.Fatalf("Unembedded = %+v, %v", msgs, err)
	}
	vs := []switchboard.Vector{{MessageID: msgs[0].ID, Values: []float32{1, 0}}, {MessageID: msgs[1].ID}, {MessageID: msgs[2].ID, Values: []float32{0, 1}}}
	if err := db.SaveVectors(ctx, "m", vs); err != nil {
		t.Fatal(err)
	}
	rows := func() int {
		t.Helper()
		var n int
		if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM message_vectors`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(); n != 3 {
		t.Fatalf("%d vectors stored, want 3 (an empty one too)", n)
	}
	if pending, total, err := CountUnembeddedIn(ctx, db.read, "m"); err != nil || pending != 1 || total != 4 {
		t.Fatalf("CountUnembeddedIn = %d of %d, %v; want 1 of 4", pending, total, err)
	}
	if err := db.DeleteSessions(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 1 {
		t.Fatalf("%d vectors after deleting a, want b's one", n)
	}
	if err := db.SaveVectors(ctx, "m", vs[:1]); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 1 {
		t.Fatalf("a vector was stored for a deleted message: %d rows", n)
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
