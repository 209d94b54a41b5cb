package switchboard

import (
	"errors"
	"testing"
	"time"
)

func TestInviteRedeemable(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	live := Invite{UsesLeft: 1, ExpiresAt: now.Add(time.Minute)}
	for _, c := range []struct {
		name string
		inv  Invite
		want error
	}{
		{"usable", live, nil},
		{"revoked", Invite{UsesLeft: 1, ExpiresAt: now.Add(time.Minute), Revoked: true}, ErrInviteRevoked},
		{"expired at the instant", Invite{UsesLeft: 1, ExpiresAt: now}, ErrInviteExpired},
		{"used up", Invite{UsesLeft: 0, ExpiresAt: now.Add(time.Minute)}, ErrInviteUsedUp},
	} {
		if got := c.inv.Redeemable(now); !errors.Is(got, c.want) || (c.want == nil) != (got == nil) {
			t.Errorf("%s: Redeemable = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFoundsKeepsTheOrder(t *testing.T) {
	if Founds(nil) != nil {
		t.Error("no hits must be no founds")
	}
	got := Founds([]Hit{{ID: 2, Found: Found{SessionID: "b"}}, {ID: 1, Found: Found{SessionID: "a"}}})
	if len(got) != 2 || got[0].SessionID != "b" || got[1].SessionID != "a" {
		t.Errorf("Founds = %+v", got)
	}
}

func TestEventNumbered(t *testing.T) {
	for _, ev := range []Event{{Seq: 1}, {Session: "s"}, {Session: "s", Seq: -1}} {
		if ev.Numbered() == nil {
			t.Errorf("%+v passed as numbered", ev)
		}
	}
	if err := (Event{Session: "s", Seq: 1}).Numbered(); err != nil {
		t.Errorf("a numbered event refused: %v", err)
	}
}
