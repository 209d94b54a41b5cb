package storage

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// openFile opens a store in a fresh directory (one level down, so Open has
// to create it) and closes it when the test ends.
func openFile(t testing.TB, opts ...Option) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "switchboard.db")
	db, err := Open(context.Background(), path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

func TestOpenAppliesPragmasOnEveryPool(t *testing.T) {
	db, _ := openFile(t)
	ctx := context.Background()
	want := map[string]string{
		"journal_mode": "wal",
		"busy_timeout": "5000",
		"synchronous":  "1", // NORMAL
		"foreign_keys": "1",
		// The writer checkpoints; readers get it too, harmlessly.
		"wal_autocheckpoint": "4000",
	}
	for pool, conn := range map[string]*sql.DB{"write": db.write, "read": db.read} {
		for name, w := range want {
			var got string
			if err := conn.QueryRowContext(ctx, "PRAGMA "+name).Scan(&got); err != nil {
				t.Fatalf("%s pool: pragma %s: %v", pool, name, err)
			}
			if got != w {
				t.Errorf("%s pool: pragma %s = %q, want %q", pool, name, got, w)
			}
		}
	}
	// The writer is the only one: the read pool must refuse writes.
	if _, err := db.read.ExecContext(ctx, `DELETE FROM sessions`); err == nil {
		t.Error("read pool accepted a write")
	}
	if got := db.write.Stats().MaxOpenConnections; got != 1 {
		t.Errorf("writer pool allows %d connections, want 1", got)
	}
}

func TestMigrationsAreAppliedOnce(t *testing.T) {
	ctx := context.Background()
	db, path := openFile(t)
	files, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded migrations: %v %v", files, err)
	}
	applied := func(db *DB) map[int]int64 {
		t.Helper()
		rows, err := db.read.QueryContext(ctx, `SELECT version, applied_at FROM schema_migrations`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[int]int64{}
		for rows.Next() {
			var v int
			var at int64
			if err := rows.Scan(&v, &at); err != nil {
				t.Fatal(err)
			}
			m[v] = at
		}
		return m
	}
	first := applied(db)
	if len(first) != len(files) {
		t.Fatalf("applied %v, want %d migrations", first, len(files))
	}
	storetest.NewSession(t, db, "s1", "k1")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for range 2 {
		db, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		again := applied(db)
		if len(again) != len(first) {
			t.Errorf("after reopen applied %v, want %v", again, first)
		}
		for v, at := range first {
			if again[v] != at {
				t.Errorf("migration %d re-applied (applied_at %d → %d)", v, at, again[v])
			}
		}
		if _, err := db.Session(ctx, "s1"); err != nil {
			t.Errorf("data lost on reopen: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMemoryDSN(t *testing.T) {
	ctx := context.Background()
	a, err := Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	storetest.NewSession(t, a, "s1", "stdin")
	if err := a.AppendEvents(ctx, nil, ev("s1", 1, switchboard.EventState, `{"state":"idle"}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Written by the background writer, read back through the read path.
	if seq, err := a.LastSeq(ctx, "s1"); err != nil || seq != 1 {
		t.Errorf("LastSeq = %d, %v; want 1", seq, err)
	}
	if _, err := a.SessionByKey(ctx, "stdin"); err != nil {
		t.Errorf("SessionByKey: %v", err)
	}
	// Each ":memory:" store is its own database.
	if _, err := b.Session(ctx, "s1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second memory store sees the first one's session: %v", err)
	}
}

func TestRestartKeepsEverything(t *testing.T) {
	ctx := context.Background()
	db, path := openFile(t)
	storetest.NewSession(t, db, "s1", "stdin")
	if err := db.SetMember(ctx, "s1", switchboard.Member{Key: "stdin:me", Role: "owner"}); err != nil {
		t.Fatal(err)
	}
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{Usage: switchboard.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}}); err != nil {
		t.Fatal(err)
	}
	var evs []switchboard.Event
	for i := int64(1); i <= 50; i++ {
		evs = append(evs, ev("s1", i, switchboard.EventDelta, `{"content":"x"}`))
	}
	// No Flush: Close must commit what is queued.
	if err := db.AppendEvents(ctx, nil, evs...); err != nil {
		t.Fatal(err)
	}
	msgs := []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi", Author: "me"}, {Role: switchboard.RoleAssistant, Content: "hello"}}
	if err := db.AppendMessages(ctx, "s1", msgs, false); err != nil {
		t.Fatal(err)
	}
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{Turn: []byte(`{"turn":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SeenInput(ctx, "s1", "c1"); err != nil {
		t.Fatal(err)
	}
	bound := time.UnixMilli(1_700_000_000_000).UTC()
	if err := db.Bind(ctx, switchboard.Binding{Channel: "slack", Address: "T1/C1/1.1", SessionID: "s1", CreatedAt: bound, ByInvite: true}); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRendered(ctx, "slack", "T1/C1/1.1", "s1", 2); err != nil {
		t.Fatal(err)
	}
	if err := db.SetBindingState(ctx, "slack", "T1/C1/1.1", "s1", `{"stream":"1.2"}`); err != nil {
		t.Fatal(err)
	}
	inboxID, _, err := db.AcceptInput(ctx, "s1", "web:u1:c2", switchboard.Input{Kind: switchboard.InputText, ClientID: "c2", Text: "queued"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := db.SessionByKey(ctx, "stdin")
	if err != nil || s.ID != "s1" || s.Usage.TotalTokens != 7 {
		t.Errorf("session after restart = %+v, %v", s, err)
	}
	if role, err := db.Member(ctx, "s1", "stdin:me"); err != nil || role != "owner" {
		t.Errorf("member after restart = %q, %v", role, err)
	}
	if seq, err := db.LastSeq(ctx, "s1"); err != nil || seq != 50 {
		t.Errorf("LastSeq after restart = %d, %v; want 50", seq, err)
	}
	if w, err := db.Window(ctx, "s1", 10); err != nil || len(w) != 2 || w[1].Content != "hello" {
		t.Errorf("window after restart = %+v, %v", w, err)
	}
	if p, err := db.LoadPending(ctx, "s1"); err != nil || string(p) != `{"turn":1}` {
		t.Errorf("pending after restart = %q, %v", p, err)
	}
	if seen, err := db.SeenInput(ctx, "s1", "c1"); err != nil || !seen {
		t.Errorf("input id forgotten across restart: %v, %v", seen, err)
	}
	want := switchboard.Binding{Channel: "slack", Address: "T1/C1/1.1", SessionID: "s1", RenderedSeq: 2, CreatedAt: bound, State: `{"stream":"1.2"}`, ByInvite: true}
	if b, err := db.Binding(ctx, "slack", "T1/C1/1.1"); err != nil || b != want {
		t.Errorf("binding after restart = %+v, %v; want %+v", b, err, want)
	}
	if q, err := db.Inbox(ctx, "s1"); err != nil || len(q) != 1 || q[0].ID != inboxID || q[0].Input.Text != "queued" {
		t.Errorf("inbox after restart = %+v, %v; want the accepted input %d", q, err, inboxID)
	}
	if _, dup, err := db.AcceptInput(ctx, "s1", "web:u1:c2", switchboard.Input{Kind: switchboard.InputText, Text: "again"}); err != nil || !dup {
		t.Errorf("accepted input's key forgotten across restart: %v, %v", dup, err)
	}
}

func TestClosedStoreRefusesWork(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := db.AppendEvents(ctx, nil, ev("s1", 1, switchboard.EventState, `{}`)); !errors.Is(err, switchboard.ErrClosed) {
		t.Errorf("AppendEvents after Close = %v, want ErrClosed", err)
	}
	if err := db.Flush(ctx); !errors.Is(err, switchboard.ErrClosed) {
		t.Errorf("Flush after Close = %v, want ErrClosed", err)
	}
}

// writeTurn is WriteTurn for tests that only care whether it failed.
func writeTurn(ctx context.Context, db *DB, sessionID string, w switchboard.TurnWrite) error {
	_, err := db.WriteTurn(ctx, sessionID, w)
	return err
}
