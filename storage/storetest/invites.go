package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// An invite is spent a use at a time; an unknown, used-up, expired or
// withdrawn code is refused, each with its own reason, and changes nothing.
func testInvites(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	now := time.UnixMilli(1_700_000_000_000).UTC()
	for _, inv := range []switchboard.Invite{
		{CodeHash: "twice", SessionID: "s1", Role: "member", UsesLeft: 2, ExpiresAt: now.Add(time.Hour), CreatedBy: "web:alice", CreatedAt: now},
		{CodeHash: "old", SessionID: "s1", Role: "viewer", UsesLeft: 5, ExpiresAt: now.Add(time.Minute), CreatedBy: "web:alice", CreatedAt: now},
	} {
		if err := db.CreateInvite(ctx, inv); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		inv, err := db.RedeemInvite(ctx, "twice", now)
		if err != nil || inv.SessionID != "s1" || inv.Role != "member" || inv.UsesLeft != 1-i {
			t.Fatalf("use %d: %+v, %v", i+1, inv, err)
		}
	}
	for code, want := range map[string]error{"twice": switchboard.ErrInviteUsedUp, "nope": switchboard.ErrInviteUnknown} {
		if _, err := db.RedeemInvite(ctx, code, now); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", code, err, want)
		}
	}
	if _, err := db.RedeemInvite(ctx, "old", now.Add(2*time.Minute)); !errors.Is(err, switchboard.ErrInviteExpired) {
		t.Errorf("expired: %v", err)
	}
	n, err := db.RevokeInvites(ctx, "s1", now)
	if err != nil || n != 1 {
		t.Fatalf("revoked %d, %v; want the one still open", n, err)
	}
	if _, err := db.RedeemInvite(ctx, "old", now); !errors.Is(err, switchboard.ErrInviteRevoked) {
		t.Errorf("revoked: %v", err)
	}
	if err := db.DeleteSessions(ctx, []string{"s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RedeemInvite(ctx, "old", now); !errors.Is(err, switchboard.ErrInviteUnknown) {
		t.Errorf("after the session's deletion: %v", err)
	}
}

// Invite reads a code's invite as it was made, without spending a use:
// after a use it reads one use fewer, once withdrawn it reads withdrawn,
// and a code not known is ErrNotFound.
func testInviteIsReadWithoutSpending(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	now := time.UnixMilli(1_700_000_000_000).UTC()
	want := switchboard.Invite{CodeHash: "h1", SessionID: "s1", Role: "member", UsesLeft: 3, ExpiresAt: now.Add(time.Hour), CreatedBy: "web:alice", CreatedAt: now}
	if err := db.CreateInvite(ctx, want); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		got, err := db.Invite(ctx, "h1")
		same := got.ExpiresAt.Equal(want.ExpiresAt) && got.CreatedAt.Equal(want.CreatedAt)
		got.ExpiresAt, got.CreatedAt = want.ExpiresAt, want.CreatedAt
		if err != nil || !same || got != want {
			t.Fatalf("%s: Invite = %+v, %v; want %+v", when, got, err, want)
		}
	}
	check("made")
	check("read again")
	if _, err := db.RedeemInvite(ctx, "h1", now); err != nil {
		t.Fatal(err)
	}
	want.UsesLeft = 2
	check("used once")
	if n, err := db.RevokeInvites(ctx, "s1", now); err != nil || n != 1 {
		t.Fatalf("RevokeInvites = %d, %v", n, err)
	}
	want.Revoked = true
	check("withdrawn")
	if _, err := db.Invite(ctx, "nope"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("Invite of an unknown code = %v, want ErrNotFound", err)
	}
}
