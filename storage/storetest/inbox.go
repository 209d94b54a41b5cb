package storetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// acceptInput accepts in with its client id as the de-duplication key.
func acceptInput(ctx context.Context, db Store, sessionID string, in switchboard.Input) (int64, bool, error) {
	return db.AcceptInput(ctx, sessionID, in.ClientID, in)
}

// inboxOf describes a session's inbox as "id:client:text …".
func inboxOf(t testing.TB, db Store, session string) string {
	t.Helper()
	q, err := db.Inbox(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	s := ""
	for i, in := range q {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d:%s:%s", in.ID, in.Input.ClientID, in.Input.Text)
	}
	return s
}

// unfinishedOf lists the store's unfinished sessions, sorted.
func unfinishedOf(t testing.TB, db Store) string {
	t.Helper()
	ids, err := db.Unfinished(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(sortedCopy(ids))
}

// An accepted input waits in its session's inbox until the write that
// takes it up; its client id is recorded as it is accepted.
func testAcceptInputInboxAndUnfinished(t *testing.T, db Store) {
	ctx := context.Background()
	for _, id := range []string{"s1", "s2", "s3"} {
		NewSession(t, db, id, "")
	}
	if got := unfinishedOf(t, db); got != "[]" {
		t.Fatalf("Unfinished of a new store = %s", got)
	}

	accept := func(session string, in switchboard.Input) (int64, bool) {
		t.Helper()
		id, dup, err := acceptInput(ctx, db, session, in)
		if err != nil {
			t.Fatalf("AcceptInput(%s, %q) = %v", session, in.ClientID, err)
		}
		return id, dup
	}
	id1, dup := accept("s1", textInput("c1", "one"))
	if dup || id1 <= 0 {
		t.Fatalf("first AcceptInput = %d, %v", id1, dup)
	}
	// The same client id again: a duplicate, nothing stored.
	if id, dup := accept("s1", textInput("c1", "one again")); !dup || id != 0 {
		t.Errorf("AcceptInput of a seen id = %d, %v; want 0, a duplicate", id, dup)
	}
	id2, _ := accept("s1", textInput("c2", "two"))
	// No client id: stored, nothing recorded, never a duplicate.
	id3, _ := accept("s1", textInput("", "three"))
	id4, dup := accept("s1", textInput("", "four"))
	// The same client id in another session is another input.
	id5, dup5 := accept("s2", textInput("c1", "other"))
	if dup || dup5 || !(id1 < id2 && id2 < id3 && id3 < id4) || id5 <= id4 {
		t.Fatalf("ids %d %d %d %d %d (dup %v %v), want increasing, no duplicates", id1, id2, id3, id4, id5, dup, dup5)
	}
	// A full input round-trips, with the files that came with it.
	confirm := switchboard.Input{Kind: switchboard.InputConfirm, ClientID: "c9", ConfirmationID: "conf_1", Approved: true,
		Author: switchboard.Author{Channel: "slack", ID: "U1", Name: "Ann"},
		Files:  []switchboard.File{{Name: "rain.csv", Path: "uploads/rain.csv", Type: "text/csv", Size: 27}}}
	id6, _ := accept("s3", confirm)
	if q, err := db.Inbox(ctx, "s3"); err != nil || len(q) != 1 || q[0].ID != id6 || !reflect.DeepEqual(q[0].Input, confirm) {
		t.Errorf("Inbox(s3) = %+v, %v; want %+v", q, err, confirm)
	}
	// An unknown session accepts nothing and records no id.
	if _, _, err := acceptInput(ctx, db, "ghost", textInput("c1", "boo")); err == nil {
		t.Error("AcceptInput for an unknown session succeeded")
	}
	if got := inboxOf(t, db, "ghost"); got != "" {
		t.Errorf("Inbox(ghost) = %s", got)
	}
	if got := seenIDs(t, db, "ghost", "c1"); len(got) != 0 {
		t.Errorf("seen ids of ghost = %v", got)
	}

	wantS1 := fmt.Sprintf("%d:c1:one %d:c2:two %d::three %d::four", id1, id2, id3, id4)
	if got := inboxOf(t, db, "s1"); got != wantS1 {
		t.Errorf("Inbox(s1) = %s, want %s", got, wantS1)
	}
	if got := inboxOf(t, db, "s2"); got != fmt.Sprintf("%d:c1:other", id5) {
		t.Errorf("Inbox(s2) = %s", got)
	}
	if got := fmt.Sprint(seenIDs(t, db, "s1", "c1", "c2", "c9")); got != "[c1 c2]" {
		t.Errorf("seen ids of s1 = %s, want [c1 c2]", got)
	}
	if got := unfinishedOf(t, db); got != "[s1 s2 s3]" {
		t.Errorf("Unfinished = %s, want [s1 s2 s3]", got)
	}

	// Taking an input up removes it, in the write that stores its message.
	if dup, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{
		InboxID: id1, Messages: []switchboard.Message{user("one")}, Turn: []byte(`{}`),
	}); err != nil || dup {
		t.Fatalf("WriteTurn(InboxID) = %v, %v", dup, err)
	}
	wantS1 = fmt.Sprintf("%d:c2:two %d::three %d::four", id2, id3, id4)
	if got := inboxOf(t, db, "s1"); got != wantS1 {
		t.Errorf("Inbox(s1) after taking up %d = %s, want %s", id1, got, wantS1)
	}
	// Another session's inbox id is not this session's to take.
	if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{InboxID: id5}); err != nil {
		t.Fatal(err)
	}
	if got := inboxOf(t, db, "s2"); got != fmt.Sprintf("%d:c1:other", id5) {
		t.Errorf("s1 took up s2's input: Inbox(s2) = %s", got)
	}
	// A write that fails leaves its input in the inbox.
	bad := assistant("", "c1")
	bad.ToolCalls[0].Args = []byte(`{not json`)
	if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{InboxID: id2, Messages: []switchboard.Message{bad}}); err == nil {
		t.Fatal("WriteTurn with an unencodable message succeeded")
	}
	if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{InboxID: id2, Events: []switchboard.Event{Event("s1", 7, switchboard.EventMessage, `{}`)}}); err == nil {
		t.Fatal("WriteTurn with a gap succeeded")
	}
	if got := inboxOf(t, db, "s1"); got != wantS1 {
		t.Errorf("Inbox(s1) after failed writes = %s, want %s", got, wantS1)
	}
	for _, id := range []int64{id2, id3, id4} {
		if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{InboxID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.WriteTurn(ctx, "s2", switchboard.TurnWrite{InboxID: id5}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.WriteTurn(ctx, "s3", switchboard.TurnWrite{InboxID: id6}); err != nil {
		t.Fatal(err)
	}
	// s1's turn is still open; the others are done.
	if got := unfinishedOf(t, db); got != "[s1]" {
		t.Errorf("Unfinished = %s, want [s1]: its turn is open", got)
	}
	if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{EndTurn: true}); err != nil {
		t.Fatal(err)
	}
	if got := unfinishedOf(t, db); got != "[]" {
		t.Errorf("Unfinished = %s, want none", got)
	}
	// The ids stay seen after their input is taken up.
	if id, dup := accept("s1", textInput("c1", "one, once more")); !dup || id != 0 {
		t.Errorf("AcceptInput(c1) after it was taken up = %d, %v; want a duplicate", id, dup)
	}
}
