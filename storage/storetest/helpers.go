package storetest

// What the suite's tests share, and a store's own tests too (the exported
// ones): making sessions and events, and telling what a publisher heard.

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// NewSession stores a session with the given id and key (none when key is
// ""), created at a fixed time, and returns it as stored.
func NewSession(t testing.TB, db Store, id, key string) switchboard.Session {
	t.Helper()
	s := switchboard.Session{
		ID: id, Key: key, Guide: "assistant", Owner: "stdin:me",
		CreatedAt: time.Date(2026, 11, 22, 10, 30, 0, 123_000_000, time.UTC),
	}
	if err := db.CreateSession(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// writeTurn is WriteTurn for tests that only care whether it failed.
func writeTurn(ctx context.Context, db Store, sessionID string, w switchboard.TurnWrite) error {
	_, err := db.WriteTurn(ctx, sessionID, w)
	return err
}
