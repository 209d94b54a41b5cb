package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// A place shows one session, a session many places; how far a place was
// rendered only grows, and a place behind its session's events is what a
// listener catches up on start.
func testBindings(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "slack:T1:C1:1.1")
	NewSession(t, db, "s2", "")
	now := time.UnixMilli(1_700_000_000_000).UTC()

	if _, err := db.Binding(ctx, "slack", "T1/C1/1.1"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("unbound place: %v, want ErrNotFound", err)
	}
	for _, b := range []switchboard.Binding{
		{Channel: "slack", Address: "T1/C1/1.1", SessionID: "s1", CreatedAt: now},
		{Channel: "discord", Address: "G1/TH1", SessionID: "s1", CreatedAt: now.Add(time.Second)},
		{Channel: "slack", Address: "T1/D1", SessionID: "s2", CreatedAt: now.Add(2 * time.Second)},
	} {
		if err := db.Bind(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AppendEvents(ctx, nil, Event("s1", 1, switchboard.EventDelta, `{}`), Event("s1", 2, switchboard.EventDelta, `{}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	behind, err := db.BindingsBehind(ctx, "slack")
	if err != nil {
		t.Fatal(err)
	}
	if len(behind) != 1 || behind[0].Address != "T1/C1/1.1" || behind[0].RenderedSeq != 0 {
		t.Fatalf("behind = %+v, want the slack thread of s1 only (s2 has no events, discord is another channel)", behind)
	}
	if err := db.SetRendered(ctx, "slack", "T1/C1/1.1", "s1", 2); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRendered(ctx, "slack", "T1/C1/1.1", "s1", 1); err != nil { // late and older
		t.Fatal(err)
	}
	if err := db.SetRendered(ctx, "slack", "T1/C1/1.1", "s2", 9); err != nil { // no longer its session
		t.Fatal(err)
	}
	if behind, _ := db.BindingsBehind(ctx, "slack"); len(behind) != 0 {
		t.Fatalf("behind after rendering = %+v", behind)
	}
	if err := db.SetBindingState(ctx, "slack", "T1/C1/1.1", "s1", `{"stream":"1.2"}`); err != nil {
		t.Fatal(err)
	}
	// Binding the same place to the same session again keeps its progress.
	if err := db.Bind(ctx, switchboard.Binding{Channel: "slack", Address: "T1/C1/1.1", SessionID: "s1", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	b, err := db.Binding(ctx, "slack", "T1/C1/1.1")
	if err != nil || b.SessionID != "s1" || b.RenderedSeq != 2 || !b.CreatedAt.Equal(now) || b.State != `{"stream":"1.2"}` {
		t.Fatalf("bound again: %+v, %v; want s1 rendered through 2, with its state", b, err)
	}
	all, err := db.SessionBindings(ctx, "s1")
	if err != nil || len(all) != 2 || all[0].Channel != "slack" || all[1].Channel != "discord" {
		t.Fatalf("SessionBindings(s1) = %+v, %v", all, err)
	}

	// Bound to another session (joining a shared one), it starts from the
	// seq given.
	if err := db.Bind(ctx, switchboard.Binding{Channel: "slack", Address: "T1/C1/1.1", SessionID: "s2", RenderedSeq: 0, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if b, _ := db.Binding(ctx, "slack", "T1/C1/1.1"); b.SessionID != "s2" || b.RenderedSeq != 0 || b.State != "" {
		t.Fatalf("rebound: %+v, want no progress and no state of the old session", b)
	}
	if err := db.Unbind(ctx, "discord", "G1/TH1"); err != nil {
		t.Fatal(err)
	}
	if all, _ := db.SessionBindings(ctx, "s1"); len(all) != 0 {
		t.Fatalf("after unbind: %+v", all)
	}

	// Deleting a session deletes where it was shown.
	if err := db.DeleteSessions(ctx, []string{"s2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Binding(ctx, "slack", "T1/D1"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("binding of a deleted session: %v", err)
	}
}

// How a place was bound is kept: a place joined by invite stays so when it
// is bound again to the same session, and a new session bound there
// brings its own.
func testBindingByInvite(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	NewSession(t, db, "s2", "")
	now := time.UnixMilli(1_700_000_000_000).UTC()
	bind := func(session string, byInvite bool) switchboard.Binding {
		t.Helper()
		if err := db.Bind(ctx, switchboard.Binding{Channel: "slack", Address: "T1:C1:1.1", SessionID: session, CreatedAt: now, ByInvite: byInvite}); err != nil {
			t.Fatal(err)
		}
		b, err := db.Binding(ctx, "slack", "T1:C1:1.1")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if b := bind("s1", true); !b.ByInvite {
		t.Fatalf("joined place read back as %+v", b)
	}
	if b := bind("s1", false); !b.ByInvite {
		t.Fatalf("bound again to the same session: %+v, want still by invite", b)
	}
	if bs, _ := db.SessionBindings(ctx, "s1"); len(bs) != 1 || !bs[0].ByInvite {
		t.Fatalf("SessionBindings = %+v", bs)
	}
	if b := bind("s2", false); b.ByInvite || b.SessionID != "s2" {
		t.Fatalf("after /reset to a new session: %+v, want its own binding", b)
	}
}
