package storetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

func testSessionRoundTrip(t *testing.T, db Store) {
	ctx := context.Background()
	want := NewSession(t, db, "s1", "slack:T1:C1:1700000000.000100")

	got, err := db.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Session = %+v, want %+v", got, want)
	}
	if got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt location = %v, want UTC", got.CreatedAt.Location())
	}
	byKey, err := db.SessionByKey(ctx, want.Key)
	if err != nil || !reflect.DeepEqual(byKey, want) {
		t.Errorf("SessionByKey = %+v, %v; want %+v", byKey, err, want)
	}

	if err := db.SetSessionGuide(ctx, "s1", "support"); err != nil {
		t.Fatal(err)
	}
	u := switchboard.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
	for range 2 {
		if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{Usage: u}); err != nil {
			t.Fatal(err)
		}
	}
	got, err = db.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Guide != "support" {
		t.Errorf("Guide = %q, want support", got.Guide)
	}
	if want := u.Add(u); got.Usage != want {
		t.Errorf("Usage = %+v, want %+v (added, not replaced)", got.Usage, want)
	}
}

func testSessionNotFound(t *testing.T, db Store) {
	ctx := context.Background()
	checks := map[string]error{}
	_, checks["Session"] = db.Session(ctx, "nope")
	_, checks["SessionByKey"] = db.SessionByKey(ctx, "nope")
	_, checks["SessionByKey empty"] = db.SessionByKey(ctx, "")
	checks["ClearSessionKey"] = db.ClearSessionKey(ctx, "nope")
	checks["SetSessionGuide"] = db.SetSessionGuide(ctx, "nope", "g")
	checks["WriteTurn usage"] = writeTurn(ctx, db, "nope", switchboard.TurnWrite{Usage: switchboard.Usage{TotalTokens: 1}})
	for name, err := range checks {
		if !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", name, err)
		}
	}
}

func testSessionKeyIsUniqueUntilCleared(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "old", "stdin")
	// Sessions without a key never collide with each other.
	NewSession(t, db, "a", "")
	NewSession(t, db, "b", "")

	err := db.CreateSession(ctx, switchboard.Session{ID: "new", Key: "stdin"})
	if !errors.Is(err, switchboard.ErrExists) {
		t.Fatalf("second session with key stdin: err = %v, want ErrExists", err)
	}
	if err := db.CreateSession(ctx, switchboard.Session{ID: "old"}); !errors.Is(err, switchboard.ErrExists) {
		t.Errorf("duplicate id: err = %v, want ErrExists", err)
	}

	// /reset: the old session lets go of the key and a new one takes it.
	if err := db.ClearSessionKey(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	NewSession(t, db, "new", "stdin")
	s, err := db.SessionByKey(ctx, "stdin")
	if err != nil || s.ID != "new" {
		t.Errorf("SessionByKey(stdin) = %q, %v; want new", s.ID, err)
	}
	old, err := db.Session(ctx, "old")
	if err != nil || old.Key != "" {
		t.Errorf("old session = %+v, %v; want it kept, without its key", old, err)
	}
}

func testMembers(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	NewSession(t, db, "s2", "")

	if _, err := db.Member(ctx, "s1", "web:u1"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("Member of nobody: err = %v, want ErrNotFound", err)
	}
	set := func(s, a, r string) {
		t.Helper()
		if err := db.SetMember(ctx, s, switchboard.Member{Key: a, Role: r, Name: "name of " + a}); err != nil {
			t.Fatal(err)
		}
	}
	set("s1", "stdin:me", "owner")
	set("s1", "web:u1", "viewer")
	set("s1", "web:u1", "member") // upsert
	set("s2", "web:u2", "member")

	if role, err := db.Member(ctx, "s1", "web:u1"); err != nil || role != "member" {
		t.Errorf("Member = %q, %v; want member", role, err)
	}
	got, err := db.Members(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := []switchboard.Member{{Key: "stdin:me", Name: "name of stdin:me", Role: "owner"}, {Key: "web:u1", Name: "name of web:u1", Role: "member"}}
	if !slices.Equal(got, want) {
		t.Errorf("Members = %v, want %v", got, want)
	}
	// Last seen only moves forward, and survives a change of role.
	t1 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	if err := db.SeenMembers(ctx, "s1", map[string]time.Time{"web:u1": t1, "web:nobody": t1}); err != nil {
		t.Fatal(err)
	}
	if err := db.SeenMembers(ctx, "s1", map[string]time.Time{"web:u1": t1.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	set("s1", "web:u1", "approver")
	got, _ = db.Members(ctx, "s1")
	if len(got) != 2 || !got[1].LastSeen.Equal(t1) || got[1].Role != "approver" {
		t.Errorf("after SeenMembers and a new role: %+v; want web:u1 approver last seen %v", got, t1)
	}
	// A role the owner set is pinned, and stays so until set again.
	if err := db.SetMember(ctx, "s1", switchboard.Member{Key: "web:u1", Role: "viewer", Pinned: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ = db.Members(ctx, "s1"); !got[1].Pinned || got[1].Role != "viewer" {
		t.Errorf("after a pinned role: %+v", got[1])
	}
	if err := db.RemoveMember(ctx, "s1", "web:u1"); err != nil {
		t.Fatal(err)
	}
	if got, _ = db.Members(ctx, "s1"); len(got) != 1 || got[0].Key != "stdin:me" {
		t.Errorf("after RemoveMember: %+v; want stdin:me alone", got)
	}
	if got, err := db.Members(ctx, "s3"); err != nil || len(got) != 0 {
		t.Errorf("Members of unknown session = %v, %v; want empty", got, err)
	}
	// Foreign keys are on: a member needs a session.
	if err := db.SetMember(ctx, "ghost", switchboard.Member{Key: "web:u1", Role: "owner"}); err == nil {
		t.Error("SetMember on an unknown session succeeded")
	}
}

// A tool allowed for the session is stored with the turn write that
// allows it, survives a reload, and an empty list clears it.
func testAllowedToolsStoredWithTheTurn(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{Allowed: []string{"current_time", "mcp.search"}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.AllowedTools, []string{"current_time", "mcp.search"}) {
		t.Fatalf("AllowedTools = %q", got.AllowedTools)
	}
	// A write without Allowed leaves it alone.
	if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{Usage: switchboard.Usage{TotalTokens: 1}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Session(ctx, "s1"); len(got.AllowedTools) != 2 {
		t.Fatalf("after an unrelated write: %q", got.AllowedTools)
	}
	if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{Allowed: []string{}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Session(ctx, "s1"); got.AllowedTools != nil {
		t.Fatalf("after clearing: %q", got.AllowedTools)
	}
}

// A person's sessions are listed most recently active first, with their
// role in each, at most as many as asked; others' sessions and stateless
// requests' sessions are not.
func testSessionsOf(t *testing.T, db Store) {
	ctx := context.Background()
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	for i, s := range []switchboard.Session{
		{ID: "s_old", Guide: "support", Owner: "openai:ci"},
		{ID: "s_new", Guide: "assistant", Owner: "web:ann"},
		{ID: "s_eph", Key: switchboard.EphemeralKey + "s_eph", Guide: "assistant", Owner: "openai:ci"},
		{ID: "s_other", Guide: "assistant", Owner: "web:bob"},
	} {
		s.CreatedAt = at.Add(time.Duration(i) * time.Minute)
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []struct{ session, key, role string }{
		{"s_old", "openai:ci", "owner"}, {"s_new", "openai:ci", "member"}, {"s_new", "web:ann", "owner"},
		{"s_eph", "openai:ci", "owner"}, {"s_other", "web:bob", "owner"},
	} {
		if err := db.SetMember(ctx, m.session, switchboard.Member{Key: m.key, Role: m.role}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.SessionsOf(ctx, "openai:ci", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []switchboard.MemberSession{
		{ID: "s_new", Guide: "assistant", Role: "member", CreatedAt: at.Add(time.Minute), ActiveAt: at.Add(time.Minute)},
		{ID: "s_old", Guide: "support", Role: "owner", CreatedAt: at, ActiveAt: at},
	}
	if !slices.Equal(got, want) {
		t.Errorf("SessionsOf = %+v\nwant %+v", got, want)
	}
	if got, err := db.SessionsOf(ctx, "openai:ci", 1); err != nil || len(got) != 1 || got[0].ID != "s_new" {
		t.Errorf("SessionsOf, at most 1: %+v, %v", got, err)
	}
	if got, err := db.SessionsOf(ctx, "web:nobody", 10); err != nil || len(got) != 0 {
		t.Errorf("SessionsOf a stranger: %+v, %v", got, err)
	}
}

// A handoff's guide is stored with the step that made it: all of the
// write or none of it (a duplicate write changes no guide).
func testGuideStoredWithTheTurn(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	step := []switchboard.Message{{Role: switchboard.RoleAssistant, ToolCalls: []switchboard.ToolCall{{ID: "c1", Name: "handoff", Args: []byte(`{}`)}}},
		{Role: switchboard.RoleTool, ToolCallID: "c1", ToolName: "handoff", Content: "Passed."}}
	if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{ClientID: "step-1", Messages: step, Guide: "billing"}); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Session(ctx, "s1"); err != nil || got.Guide != "billing" {
		t.Fatalf("guide after the step: %q, %v; want billing", got.Guide, err)
	}
	dup, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{ClientID: "step-1", Guide: "support"})
	if err != nil || !dup {
		t.Fatalf("the same write again: dup %v, %v", dup, err)
	}
	if got, _ := db.Session(ctx, "s1"); got.Guide != "billing" {
		t.Fatalf("a write not made changed the guide to %q", got.Guide)
	}
	// A write without Guide leaves it alone.
	if _, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{Usage: switchboard.Usage{TotalTokens: 1}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Session(ctx, "s1"); got.Guide != "billing" {
		t.Fatalf("after an unrelated write: %q", got.Guide)
	}
}
