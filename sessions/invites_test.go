package sessions_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/sessions"
)

var inviteCodeRE = regexp.MustCompile(`Invite code ([a-z2-7]{26})`)

// /share gives its asker alone a code with the role, uses and expiry
// asked; Join spends a use and makes the bearer a member with that role;
// a used-up, withdrawn or unknown code is refused and changes nothing;
// only the owner invites approvers.
func TestShareAndJoin(t *testing.T) {
	h := newHarness(t, func(c *sessions.Config) { c.PublicURL = "https://chat.example.com" })
	owner := h.newSession(alice)
	owner.say("/usage") // stored, with alice as its owner
	carol := switchboard.Author{Channel: "discord", ID: "D1", Name: "Carol"}
	watcher := h.attach(sessions.AttachOptions{SessionID: owner.id, Author: carol})

	owner.send(switchboard.Input{Kind: switchboard.InputText, Text: "/share approver uses 2 expires 1h"})
	notice := owner.errorEvent()
	m := inviteCodeRE.FindStringSubmatch(notice.Message)
	if notice.Code != sessions.NoticeInfo || notice.For != alice.Key() || m == nil ||
		!strings.Contains(notice.Message, "https://chat.example.com/s/"+m[1]) || !strings.Contains(notice.Message, "approver, 2 use(s)") ||
		notice.Link != "https://chat.example.com/s/"+m[1] {
		t.Fatalf("share notice: %+v", notice)
	}
	code := m[1]
	// The member watching never saw the code.
	watcher.sub.Close()
	for ev := range watcher.sub.Events() {
		if strings.Contains(string(ev.Data), code) {
			t.Fatalf("the code reached someone else: %s", ev.Data)
		}
	}

	ctx := context.Background()
	id, role, err := h.m.Join(ctx, strings.ToUpper(code), bob)
	if err != nil || id != owner.id || role != collaboration.Approver {
		t.Fatalf("join: %s, %s, %v", id, role, err)
	}
	members, _ := h.db.Members(ctx, owner.id)
	if !slices.ContainsFunc(members, func(m switchboard.Member) bool { return m.Key == bob.Key() && m.Role == "approver" }) {
		t.Fatalf("members: %v", members)
	}
	dan := switchboard.Author{Channel: "stdin", ID: "dan"}
	if _, _, err := h.m.Join(ctx, code, dan); err != nil {
		t.Fatalf("second use: %v", err)
	}
	erin := switchboard.Author{Channel: "web", ID: "erin"}
	if _, _, err := h.m.Join(ctx, code, erin); !errors.Is(err, switchboard.ErrInviteUsedUp) {
		t.Fatalf("third use: %v", err)
	}
	if _, _, err := h.m.Join(ctx, "aaaaaaaaaaaaaaaaaaaaaaaaaa", erin); !errors.Is(err, switchboard.ErrInviteUnknown) {
		t.Fatalf("unknown code: %v", err)
	}

	// A member may not share; the owner withdraws what is open.
	member := h.attach(sessions.AttachOptions{SessionID: owner.id, Author: carol})
	member.send(switchboard.Input{Kind: switchboard.InputText, Text: "/share viewer"})
	if e := member.errorEvent(); e.Code != switchboard.ErrCodeForbidden {
		t.Fatalf("a member's /share: %+v", e)
	}
	owner.send(switchboard.Input{Kind: switchboard.InputText, Text: "/share viewer"})
	code2 := inviteCodeRE.FindStringSubmatch(owner.errorEvent().Message)[1]
	owner.send(switchboard.Input{Kind: switchboard.InputText, Text: "/unshare"})
	if e := owner.errorEvent(); !strings.Contains(e.Message, "1 open invite code(s) withdrawn") {
		t.Fatalf("unshare: %+v", e)
	}
	if _, _, err := h.m.Join(ctx, code2, erin); !errors.Is(err, switchboard.ErrInviteRevoked) {
		t.Fatalf("a withdrawn code: %v", err)
	}
	owner.send(switchboard.Input{Kind: switchboard.InputText, Text: "/share expires 10y"})
	if e := owner.errorEvent(); e.Code != switchboard.ErrCodeBadInput || !strings.Contains(e.Message, "Usage: /share") {
		t.Fatalf("a bad /share: %+v", e)
	}
}

// A gateway too full to load the session leaves the code unspent. The
// sessions unload on synctest's clock.
func TestJoinWhenFullSpendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, func(c *sessions.Config) { c.MaxLive = 1; c.IdleTimeout = 10 * time.Minute })
		owner := h.newSession(alice)
		owner.send(switchboard.Input{Kind: switchboard.InputText, Text: "/share member uses 1"})
		code := inviteCodeRE.FindStringSubmatch(owner.errorEvent().Message)[1]
		owner.sub.Close()
		h.idleOut(t)
		other := h.newSession(switchboard.Author{Channel: "web", ID: "zoe", Name: "Zoe"}) // the one place in memory
		ctx := context.Background()
		if _, _, err := h.m.Join(ctx, code, bob); !errors.Is(err, sessions.ErrFull) {
			t.Fatalf("join while full: %v", err)
		}
		other.sub.Close()
		h.idleOut(t)
		if id, _, err := h.m.Join(ctx, code, bob); err != nil || id != owner.id {
			t.Fatalf("the code after a refusal: %s, %v; want its one use still there", id, err)
		}
	})
}
