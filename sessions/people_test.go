package sessions_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/sessions"
)

// info waits for the next info notice to c (a /who or /approvals answer).
func (c *client) info() string {
	c.t.Helper()
	return c.until(switchboard.EventError, func(p any) bool { return p.(*switchboard.ErrorData).Code == sessions.NoticeInfo }).(*switchboard.ErrorData).Message
}

// members waits for an EventMembers matching ok.
func (c *client) members(ok func([]switchboard.MemberData) bool) []switchboard.MemberData {
	c.t.Helper()
	return c.until(switchboard.EventMembers, func(p any) bool { return ok(p.(*switchboard.MembersData).Members) }).(*switchboard.MembersData).Members
}

func member(ms []switchboard.MemberData, name string) (switchboard.MemberData, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m, true
		}
	}
	return switchboard.MemberData{}, false
}

func TestWhoListsPeopleWithRoleChannelAndPresence(t *testing.T) {
	h := newHarness(t)
	ann := h.newSession(alice)
	ann.say("/help") // stores the session
	dan := switchboard.Author{Channel: "discord", ID: "D9", Name: "Dan"}
	if _, err := h.m.Submit(context.Background(), ann.id, switchboard.Input{Kind: switchboard.InputText, Text: "/who", Author: dan}); err != nil {
		t.Fatal(err) // Dan writes from a bound Discord thread: no attachment
	}
	b := h.join(ann, bob)
	if len(b.sub.Ready.Members) != 3 {
		t.Fatalf("Bob's ready lists %+v; want Alice, Bob and Dan", b.sub.Ready.Members)
	}
	// Alice is told Bob is here.
	ms := ann.members(func(ms []switchboard.MemberData) bool { m, ok := member(ms, "Bob"); return ok && m.Here })
	if m, _ := member(ms, "Alice"); !m.Here || m.Role != "owner" || m.Channel != "web" {
		t.Errorf("Alice in the roster: %+v", m)
	}
	if m, _ := member(ms, "Dan"); m.Here || m.LastSeen == nil || m.Channel != "discord" {
		t.Errorf("Dan, who wrote from Discord and has nothing open: %+v; want not here, last seen set", m)
	}
	ann.say("/who")
	who := ann.info()
	for _, want := range []string{"3 people", "Alice · Web · owner · here now", "Bob · Slack · member · here now", "Dan · Discord · member · last seen moments ago"} {
		if !strings.Contains(who, want) {
			t.Errorf("/who = %q; missing %q", who, want)
		}
	}
	for _, n := range b.notices() {
		if n.Code == sessions.NoticeInfo {
			t.Errorf("Bob got Alice's /who: %+v", n)
		}
	}
	// Bob closes his tab: Alice sees him go.
	b.sub.Close()
	ann.members(func(ms []switchboard.MemberData) bool {
		m, ok := member(ms, "Bob")
		return ok && !m.Here && m.LastSeen != nil
	})

	// Last seen survives an unload and a restart.
	h.restart()
	ann = h.attach(sessions.AttachOptions{SessionID: ann.id, Author: alice, AfterSeq: -1})
	if m, ok := member(ann.sub.Ready.Members, "Bob"); !ok || m.LastSeen == nil || m.Here {
		t.Fatalf("after a restart Bob is %+v; want known, not here, last seen kept", m)
	}
}

func TestRoleMakesSomeoneAViewerEverywhere(t *testing.T) {
	h := newHarness(t)
	askForTime(h)
	ann := h.newSession(alice)
	b := h.join(ann, bob)
	ann.say("/role bob approver")
	ann.until(switchboard.EventMessage, func(p any) bool { return p.(*switchboard.MessageData).Content == "Alice made Bob an approver." })
	b.members(func(ms []switchboard.MemberData) bool { m, _ := member(ms, "Bob"); return m.Role == "approver" })

	// Only the owner changes roles; nobody changes the owner's.
	b.say("/role alice viewer")
	if e := b.errorEvent(); e.Code != switchboard.ErrCodeForbidden {
		t.Errorf("Bob changing a role: %+v", e)
	}
	ann.say("/role alice viewer")
	if e := ann.errorEvent(); !strings.Contains(e.Message, "owner's role") {
		t.Errorf("Alice demoting herself: %+v", e)
	}
	ann.say("/role nobody viewer")
	if e := ann.errorEvent(); e.Code != switchboard.ErrCodeNotFound || !strings.Contains(e.Message, "/who") {
		t.Errorf("an unknown name: %+v", e)
	}
	ann.say("/role bob owner")
	if e := ann.errorEvent(); e.Code != switchboard.ErrCodeBadInput {
		t.Errorf("making someone owner: %+v", e)
	}

	ann.say("/role Bob viewer")
	ann.say("what time is it?")
	req := ann.confirmation()
	// Bob's message and his click are refused, with the reason.
	_, err := h.m.Submit(context.Background(), ann.id, switchboard.Input{Kind: switchboard.InputText, Text: "hi", Author: bob})
	if !errors.Is(err, sessions.ErrForbidden) || !strings.Contains(err.Error(), "viewer") {
		t.Errorf("a viewer's message: %v", err)
	}
	_, err = h.m.Submit(context.Background(), ann.id, switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true, Author: bob})
	if !errors.Is(err, sessions.ErrForbidden) {
		t.Errorf("a viewer's approval: %v", err)
	}
	// A viewer may still look around.
	b.say("/who")
	if who := b.info(); !strings.Contains(who, "Bob · Slack · viewer") {
		t.Errorf("/who by a viewer: %q", who)
	}
	// The role is stored.
	ms, _ := h.db.Members(context.Background(), ann.id)
	for _, m := range ms {
		if m.Key == bob.Key() && m.Role != string(collaboration.Viewer) {
			t.Errorf("stored role of Bob: %q", m.Role)
		}
	}
}

func TestApprovalsListsWhoDecidedFromWhere(t *testing.T) {
	h := newHarness(t)
	askForTime(h)
	ann := h.newSession(alice)
	b := h.join(ann, bob)
	ann.say("/role Bob approver")
	ann.say("what time is it?")
	req := ann.confirmation()
	b.send(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	res := ann.until(switchboard.EventConfirmationResolved, nil).(*switchboard.ConfirmationResolvedData)
	if res.By != "Bob" || res.Channel != "slack" {
		t.Errorf("resolved %+v; want by Bob from slack", res)
	}
	ann.idle()
	ann.say("/approvals")
	got := ann.info()
	if !strings.Contains(got, "current_time approved by Bob · Slack") || !strings.Contains(got, " UTC ") {
		t.Errorf("/approvals = %q", got)
	}
}

func TestLeave(t *testing.T) {
	h := newHarness(t)
	ann := h.newSession(alice)
	b := h.join(ann, bob)
	ctx := context.Background()
	if _, err := h.m.Bind(ctx, "slack", "T1:C1:1.2", ann.id); err != nil {
		t.Fatal(err)
	}
	// From a bound place: the place stops showing the session.
	b.send(switchboard.Input{Kind: switchboard.InputText, Text: "/leave", Place: "slack:T1:C1:1.2"})
	ann.until(switchboard.EventMessage, func(p any) bool {
		return strings.Contains(p.(*switchboard.MessageData).Content, "out of a Slack place")
	})
	if _, err := h.m.Binding(ctx, "slack", "T1:C1:1.2"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("binding after /leave: %v", err)
	}
	// Elsewhere: the person leaves; the owner cannot.
	ann.say("/leave")
	if e := ann.errorEvent(); !strings.Contains(e.Message, "own this conversation") {
		t.Errorf("the owner leaving: %+v", e)
	}
	b.say("/leave")
	ann.members(func(ms []switchboard.MemberData) bool { _, ok := member(ms, "Bob"); return !ok })
	ms, _ := h.db.Members(ctx, ann.id)
	if len(ms) != 1 {
		t.Errorf("members after Bob left: %+v", ms)
	}
}

func TestASessionIsShownInAtMostMaxBindingsPlaces(t *testing.T) {
	h := newHarness(t, func(c *sessions.Config) { c.MaxBindings = 2 })
	ann := h.newSession(alice)
	ann.say("/help")
	ctx := context.Background()
	for _, addr := range []string{"a", "b", "a"} { // binding a again is no new place
		if _, err := h.m.Bind(ctx, "slack", addr, ann.id); err != nil {
			t.Fatalf("bind %s: %v", addr, err)
		}
	}
	if _, err := h.m.Bind(ctx, "discord", "c", ann.id); !errors.Is(err, sessions.ErrTooManyPlaces) {
		t.Fatalf("a third place: %v; want ErrTooManyPlaces", err)
	}
}

func TestFilesListsTheSandboxWorkspace(t *testing.T) {
	when := time.Date(2026, 11, 25, 9, 30, 0, 0, time.UTC)
	listed := ""
	h := newHarness(t, func(c *sessions.Config) {
		c.Files = func(id string) ([]sessions.File, error) {
			listed = id
			return []sessions.File{{Path: "data.csv", Size: 2048, Modified: when}, {Path: "out/chart.png", Size: 3 << 20, Modified: when}}, nil
		}
	})
	ann := h.newSession(alice)
	ann.say("/files")
	got := ann.info()
	for _, want := range []string{"2 files", "data.csv  2.0 KiB  2026-11-25 09:30 UTC", "out/chart.png  3.0 MiB"} {
		if !strings.Contains(got, want) {
			t.Errorf("/files = %q; missing %q", got, want)
		}
	}
	if listed != ann.id {
		t.Errorf("listed the files of %q, want %q", listed, ann.id)
	}
	off := newHarness(t)
	c := off.newSession(alice)
	c.say("/files")
	if got := c.info(); !strings.Contains(got, "tools.sandbox and uploads are off") {
		t.Errorf("/files without a sandbox: %q", got)
	}
}
