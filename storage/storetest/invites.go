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
