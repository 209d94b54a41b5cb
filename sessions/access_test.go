package sessions_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/sessions"
)

var carolAuthor = switchboard.Author{Channel: "slack", ID: "U3", Name: "Carol"}

// JoinPlace points a place at a shared session only where a join may:
// a thread that shows another conversation is refused (ErrPlaceTaken) and
// a direct place (a DM, the terminal) is its one person's to point
// elsewhere; a place the channel cannot prove is refused with the
// channel's own error. No refusal spends the code or binds the place.
func TestJoinPlaceDecidesWhereAJoinMayGo(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	shared := h.newSession(alice)
	shared.say("/usage")
	shared.send(switchboard.Input{Kind: switchboard.InputText, Text: "/share member uses 3"})
	code := inviteCodeRE.FindStringSubmatch(shared.errorEvent().Message)[1]
	uses := func() int {
		t.Helper()
		sum := sha256.Sum256([]byte(code))
		inv, err := h.db.Invite(ctx, hex.EncodeToString(sum[:]))
		if err != nil {
			t.Fatal(err)
		}
		return inv.UsesLeft
	}

	other := h.newSession(bob)
	other.say("/usage")
	thread := sessions.Place{Channel: "slack", Address: "T1:C1:1.1"}
	if _, err := h.m.Bind(ctx, thread.Channel, thread.Address, other.id); err != nil {
		t.Fatal(err)
	}
	proved := false
	_, _, err := h.m.JoinPlace(ctx, code, carolAuthor, thread, 0, func(context.Context) error { proved = true; return nil })
	var refusal *sessions.Refusal
	if !errors.Is(err, sessions.ErrPlaceTaken) || !errors.As(err, &refusal) || !strings.Contains(refusal.Reason, "another conversation") {
		t.Fatalf("a join in a thread that shows another conversation: %v", err)
	}
	if proved {
		t.Fatal("the place was proven (posted in) before the refusal")
	}
	if b, _ := h.m.Binding(ctx, thread.Channel, thread.Address); b.SessionID != other.id {
		t.Fatalf("the thread shows %s now", b.SessionID)
	}

	cannot := errors.New("not_in_channel")
	fresh := sessions.Place{Channel: "slack", Address: "T1:C2:2.2"}
	if _, _, err := h.m.JoinPlace(ctx, code, carolAuthor, fresh, 0, func(context.Context) error { return cannot }); !errors.Is(err, cannot) {
		t.Fatalf("a place that cannot be proven: %v", err)
	}
	if _, err := h.m.Binding(ctx, fresh.Channel, fresh.Address); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("an unproven place was bound: %v", err)
	}
	if n := uses(); n != 3 {
		t.Fatalf("%d uses left after two refusals, want 3", n)
	}

	dm := sessions.Place{Channel: "slack", Address: "T1:D1", Direct: true}
	if _, err := h.m.Bind(ctx, dm.Channel, dm.Address, other.id); err != nil {
		t.Fatal(err)
	}
	if id, role, err := h.m.JoinPlace(ctx, code, carolAuthor, dm, 0, nil); err != nil || id != shared.id || role != collaboration.Member {
		t.Fatalf("a join in one's own DM: %s %s %v", id, role, err)
	}
	if b, _ := h.m.Binding(ctx, dm.Channel, dm.Address); b.SessionID != shared.id || !b.ByInvite {
		t.Fatalf("the DM after the join: %+v", b)
	}
}

// In a place joined by invite only the conversation's people act: a
// stranger's message, click and stop are refused with the reason, even
// when their channel vouches for them as an approver, and they do not
// become members; the same stranger may act in a thread the conversation
// started, where a newcomer joins.
func TestOnlyTheSharedPeopleActInAJoinedPlace(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	owner := h.newSession(alice)
	owner.say("/usage")
	owner.send(switchboard.Input{Kind: switchboard.InputText, Text: "/share viewer uses 1"})
	code := inviteCodeRE.FindStringSubmatch(owner.errorEvent().Message)[1]
	joined := sessions.Place{Channel: "slack", Address: "T1:C1:9.9"}
	if _, _, err := h.m.JoinPlace(ctx, code, carolAuthor, joined, 0, nil); err != nil {
		t.Fatal(err)
	}
	stranger := switchboard.Author{Channel: "slack", ID: "U0DAVE", Name: "Dave"}
	place := "slack:" + joined.Address
	for _, in := range []switchboard.Input{
		{Kind: switchboard.InputText, Text: "hello"},
		{Kind: switchboard.InputText, Text: "/who"},
		{Kind: switchboard.InputAction, ActionID: "ui_x:0"},
		{Kind: switchboard.InputConfirm, ConfirmationID: "c1", Approved: true, Grant: "approver"},
		{Kind: switchboard.InputCancel, Grant: "approver"},
	} {
		in.Author, in.Place = stranger, place
		_, err := h.m.Submit(ctx, owner.id, in)
		if !errors.Is(err, sessions.ErrForbidden) || !strings.Contains(sessions.Reason(err, ""), "shared with particular people") {
			t.Fatalf("%s from a stranger: %v", in.Kind, err)
		}
	}
	members, _ := h.db.Members(ctx, owner.id)
	for _, m := range members {
		if m.Key == stranger.Key() {
			t.Fatalf("the stranger became a member: %+v", members)
		}
	}

	// Where the conversation started, a newcomer joins.
	started := h.newSession(bob)
	started.say("/usage")
	if _, err := h.m.Bind(ctx, "slack", "T1:C1:8.8", started.id); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Submit(ctx, started.id, switchboard.Input{Kind: switchboard.InputText, Text: "/usage", Author: stranger, Place: "slack:T1:C1:8.8"}); err != nil {
		t.Fatalf("a newcomer in a thread the conversation started: %v", err)
	}
}

// A role a channel vouches for raises, never lowers, and never undoes the
// owner's /role: the owner stays owner, a vouched approver is one until
// the owner pins them lower, and a pinned role survives a reload.
func TestGrantedRolesAndTheOwnersWord(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	owner := h.newSession(alice)
	owner.say("/usage")
	send := func(who switchboard.Author, text string) error {
		_, err := h.m.Submit(ctx, owner.id, switchboard.Input{Kind: switchboard.InputText, Author: who, Text: text, Grant: "approver"})
		return err
	}
	role := func(key string) string {
		ms, _ := h.db.Members(ctx, owner.id)
		for _, m := range ms {
			if m.Key == key {
				return m.Role
			}
		}
		return ""
	}
	if err := send(alice, "/usage"); err != nil || role(alice.Key()) != "owner" {
		t.Fatalf("the owner vouched for as an approver: %v, %s", err, role(alice.Key()))
	}
	if err := send(bob, "/usage"); err != nil || role(bob.Key()) != "approver" {
		t.Fatalf("a vouched approver: %v, %s", err, role(bob.Key()))
	}
	owner.say("/role " + bob.Name + " viewer")
	owner.until(switchboard.EventMessage, func(d any) bool { return strings.Contains(d.(*switchboard.MessageData).Content, "a viewer") })
	h.restart()
	if err := send(bob, "hi"); !errors.Is(err, sessions.ErrForbidden) || role(bob.Key()) != "viewer" {
		t.Fatalf("a pinned viewer vouched for as an approver: %v, %s", err, role(bob.Key()))
	}
}
