package storage

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

func TestExpiredSessionsAreDeletedWithEverythingTheyHold(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	// All four were created on 2026-11-22 (newSession).
	for _, id := range []string{"old", "busy", "waiting", "recent"} {
		storetest.NewSession(t, db, id, "")
	}
	if err := db.SetMember(ctx, "old", switchboard.Member{Key: "web:ann", Role: "owner"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.WriteTurn(ctx, "old", switchboard.TurnWrite{
		Messages: []switchboard.Message{user("hi")},
		Events:   []switchboard.Event{ev("old", 1, switchboard.EventMessage, `{}`)},
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

	cutoff := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	ids, err := db.Expired(ctx, cutoff, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"old"}) {
		t.Fatalf("Expired = %v, want [old]", ids)
	}
	if err := db.DeleteSessions(ctx, ids); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Session(ctx, "old"); !errorsIsNotFound(err) {
		t.Fatalf("Session(old) after delete = %v", err)
	}
	for _, q := range []string{
		`SELECT COUNT(*) FROM events WHERE session_id = 'old'`,
		`SELECT COUNT(*) FROM messages WHERE session_id = 'old'`,
		`SELECT COUNT(*) FROM members WHERE session_id = 'old'`,
	} {
		var n int
		if err := db.read.QueryRowContext(ctx, q).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s = %d, %v; want 0", q, n, err)
		}
	}
	// A new session with the old id would number its events from 1 again.
	storetest.NewSession(t, db, "old", "")
	if err := db.AppendEvents(ctx, nil, ev("old", 1, switchboard.EventMessage, `{}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	if last, err := db.LastSeq(ctx, "old"); err != nil || last != 1 {
		t.Fatalf("LastSeq(old) = %d, %v", last, err)
	}
}

func errorsIsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
