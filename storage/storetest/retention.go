package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// Retention: a session whose last turn ended before the cutoff expires,
// unless it has an open turn or an input waiting; deleting it deletes all
// it holds, so a new session with its id starts afresh.
func testExpiredSessionsAreDeletedWithEverythingTheyHold(t *testing.T, db Store) {
	ctx := context.Background()
	// All four were created on 2026-11-22 (NewSession).
	for _, id := range []string{"old", "busy", "waiting", "recent"} {
		NewSession(t, db, id, "")
	}
	if err := db.SetMember(ctx, "old", switchboard.Member{Key: "web:ann", Role: "owner"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.WriteTurn(ctx, "old", switchboard.TurnWrite{
		Messages: []switchboard.Message{user("hi")},
		Events:   []switchboard.Event{Event("old", 1, switchboard.EventMessage, `{}`)},
	}); err != nil {
		t.Fatal(err)
	}
	// busy has an open turn, waiting an accepted input: neither is taken.
	if err := writeTurn(ctx, db, "busy", switchboard.TurnWrite{Turn: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := acceptInput(ctx, db, "waiting", switchboard.Input{Kind: switchboard.InputText, Text: "later"}); err != nil {
		t.Fatal(err)
	}
	// recent ended a turn now.
	if err := writeTurn(ctx, db, "recent", switchboard.TurnWrite{EndTurn: true}); err != nil {
		t.Fatal(err)
	}

	// older was created the day before the others.
	if err := db.CreateSession(ctx, switchboard.Session{ID: "older", Owner: "web:ann", CreatedAt: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}

	cutoff := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	if ids, err := db.Expired(ctx, cutoff, 1); err != nil || !slices.Equal(ids, []string{"older"}) {
		t.Fatalf("Expired(1) = %v, %v; want [older], the oldest", ids, err)
	}
	ids, err := db.Expired(ctx, cutoff, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"older", "old"}) {
		t.Fatalf("Expired = %v, want [older old], oldest first", ids)
	}
	if err := db.DeleteSessions(ctx, ids); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Session(ctx, "old"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("Session(old) after delete = %v", err)
	}
	if evs, err := db.EventsAfter(ctx, "old", 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("events of the deleted session: %+v, %v", evs, err)
	}
	if n, err := db.MessageCount(ctx, "old"); err != nil || n != 0 {
		t.Fatalf("messages of the deleted session: %d, %v", n, err)
	}
	if ms, err := db.Members(ctx, "old"); err != nil || len(ms) != 0 {
		t.Fatalf("members of the deleted session: %+v, %v", ms, err)
	}
	for _, id := range []string{"busy", "waiting", "recent"} {
		if _, err := db.Session(ctx, id); err != nil {
			t.Fatalf("Session(%s), not expired, after the delete: %v", id, err)
		}
	}
	// A new session with the old id would number its events from 1 again.
	NewSession(t, db, "old", "")
	if err := db.AppendEvents(ctx, nil, Event("old", 1, switchboard.EventMessage, `{}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	if last, err := db.LastSeq(ctx, "old"); err != nil || last != 1 {
		t.Fatalf("LastSeq(old) = %d, %v", last, err)
	}
}
