package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/storage/postgres"
)

// The doctor on PostgreSQL runs against the test server (pgtest), a
// database of its own for each case.

// pgDoctor runs the doctor with storage.dsn set to dsn.
func pgDoctor(t *testing.T, s *doctorSetup, dsn string, env ...string) (string, error) {
	t.Helper()
	return s.doctor(t, env, "--set", "storage.dsn="+dsn)
}

// pgConn is a connection of the test's own to the database dsn, as its
// owner, closed when the test ends.
func pgConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// pgExec runs statements on the database dsn.
func pgExec(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	conn := pgConn(t, dsn)
	for _, s := range stmts {
		if _, err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// pgQuery is a query's one value.
func pgQuery[T any](t *testing.T, dsn, query string) T {
	t.Helper()
	var v T
	if err := pgConn(t, dsn).QueryRow(context.Background(), query).Scan(&v); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}

// pgSnapshot is what the replicas' tables hold, to show the doctor
// changed nothing.
func pgSnapshot(t *testing.T, dsn string) string {
	t.Helper()
	return pgQuery[string](t, dsn, `SELECT
		(SELECT string_agg(id || '@' || seen_at, ',' ORDER BY id) FROM replicas) || ' / ' ||
		(SELECT string_agg(name || '=' || holder || ':' || epoch || '@' || expires_at, ',' ORDER BY name) FROM leases)`)
}

// openReplica opens the store as the gateway opens it, as replica id.
func openReplica(t *testing.T, dsn, id string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), dsn, postgres.WithReplica(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A new, empty database: reached, no tables yet (the first start makes
// them), no replica; and the doctor made none either.
func TestDoctorPostgresEmptyDatabase(t *testing.T) {
	dsn := pg.NewDatabase(t)
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	out, err := pgDoctor(t, s, dsn)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	wantRow(t, out, "database", "OK", "PostgreSQL 1", "as postgres", "writes nothing")
	wantRow(t, out, "schema", "OK", "no tables yet", fmt.Sprintf("schema version %d", postgres.SchemaVersion()))
	wantRow(t, out, "replicas", "INFO", "no gateway has started")
	wantRow(t, out, "recall index", "OK", "not created yet")
	if strings.Contains(out, "WAL") || strings.Contains(out, ".lock") {
		t.Errorf("SQLite's rows on PostgreSQL:\n%s", out)
	}
	if tables := pgQuery[int64](t, dsn, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`); tables != 0 {
		t.Errorf("the doctor left %d tables: it must not migrate", tables)
	}
}

// Replicas sharing the database: each one live is listed with the
// conversations it runs; one not heard from is not, and its conversations
// are said to move. Reading them changed nothing.
func TestDoctorPostgresReplicas(t *testing.T) {
	ctx := context.Background()
	dsn := pg.NewDatabase(t)
	a, b, gone := openReplica(t, dsn, "a"), openReplica(t, dsn, "b"), openReplica(t, dsn, "gone")
	for _, r := range []struct {
		db       *postgres.DB
		sessions []string
	}{{a, []string{"s1", "s2", "s3"}}, {b, []string{"s4"}}, {gone, []string{"s5"}}} {
		if err := r.db.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range r.sessions {
			if _, err := r.db.AcquireLease(ctx, postgres.SessionLease(id), time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	// gone was last heard from long ago: it crashed, its leases not yet run out.
	pgExec(t, dsn, `UPDATE replicas SET seen_at = 0 WHERE id = 'gone'`)
	before := pgSnapshot(t, dsn)

	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	out, err := pgDoctor(t, s, dsn)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	wantRow(t, out, "schema", "OK", fmt.Sprintf("schema version %d, this binary's", postgres.SchemaVersion()))
	text := wantRow(t, out, "replicas", "INFO", "2 replicas live: a (3 conversations), b (1)", "within 30s, 3× storage.lease",
		"1 conversation is held by replicas not heard from", "within 12.5s")
	if strings.Contains(text, "gone (") {
		t.Errorf("a replica not heard from is listed as live:\n%s", text)
	}
	wantRow(t, out, "recall index", "OK", "messages_recall is valid")
	if after := pgSnapshot(t, dsn); after != before {
		t.Errorf("the doctor changed the replicas' tables:\nbefore %s\nafter  %s", before, after)
	}

	// The lease time counts: with storage.lease 1m, gone's hour-old
	// heartbeat is still too old, a's is fresh.
	out, _ = s.doctor(t, nil, "--set", "storage.dsn="+dsn, "--set", "storage.lease=1m")
	wantRow(t, out, "replicas", "INFO", "2 replicas live", "within 3m0s")
}

// The schema against this binary's: older is migrated by the next start,
// newer needs a newer binary, and a user that may not create tables
// cannot migrate.
func TestDoctorPostgresSchemaVersions(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	known := postgres.SchemaVersion()

	older := pg.NewDatabase(t)
	openReplica(t, older, "a").Close()
	pgExec(t, older, fmt.Sprintf(`DELETE FROM schema_migrations WHERE version = %d`, known))
	out, err := pgDoctor(t, s, older)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	wantRow(t, out, "schema", "INFO", fmt.Sprintf("schema version %d, older than this binary's %d", known-1, known), "starts will migrate it")

	newer := pg.NewDatabase(t)
	openReplica(t, newer, "a").Close()
	pgExec(t, newer, fmt.Sprintf(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (%d, 'from_the_future.sql', 0)`, known+1))
	out, err = pgDoctor(t, s, newer)
	if err == nil {
		t.Fatalf("doctor passed a database newer than the binary:\n%s", out)
	}
	wantRow(t, out, "schema", "PROBLEM", fmt.Sprintf("schema version %d, newer than this binary's %d", known+1, known),
		"this binary is older than the database: upgrade it")

	// A user of its own, which PostgreSQL 15 does not let create tables
	// in public (the database is the test's user's).
	bare := pg.NewDatabase(t)
	role := fmt.Sprintf("doctor_%d", time.Now().UnixNano())
	pgExec(t, bare, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() { pgExec(t, pg.DSN("postgres"), "DROP ROLE "+role) })
	u, err := url.Parse(bare)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	out, err = pgDoctor(t, s, u.String())
	if err == nil {
		t.Fatalf("doctor passed a user that cannot create the tables:\n%s", out)
	}
	wantRow(t, out, "database", "OK", "as "+role)
	wantRow(t, out, "schema", "PROBLEM", "may not create tables in schema public", "GRANT CREATE ON SCHEMA public TO "+role,
		"ALTER DATABASE "+strings.TrimPrefix(u.Path, "/")+" OWNER TO "+role)
}

// A database the doctor cannot reach is a PROBLEM that says what to do,
// and the password in storage.dsn is never printed.
func TestDoctorPostgresUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there now

	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	const password = "doctor-pg-password-4242"
	for _, tc := range []struct {
		name, dsn string
		want      []string
	}{
		{"nothing listens", fmt.Sprintf("postgres://gw:%s@%s/switchboard?sslmode=disable", password, closed),
			[]string{"postgres://" + closed + "/switchboard?sslmode=disable: ", "no server answers at " + closed,
				"the gateway does not start without it", "fix: start PostgreSQL, or correct the host and port in storage.dsn"}},
		{"no such database", pg.DSN("doctor_nowhere"),
			[]string{`the database "doctor_nowhere" does not exist`, "CREATE DATABASE doctor_nowhere OWNER postgres"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := pgDoctor(t, s, tc.dsn)
			if err == nil || !strings.Contains(err.Error(), "1 problem") {
				t.Fatalf("doctor = %v, want 1 problem:\n%s", err, out)
			}
			wantRow(t, out, "database", "PROBLEM", tc.want...)
			wantRow(t, out, "replicas", "INFO", "not checked: the database is not reached")
			if strings.Contains(out, password) {
				t.Errorf("the password was printed:\n%s", out)
			}
		})
	}
}

// The embeddings row says how many stored messages wait, read from
// PostgreSQL while the replicas run.
func TestDoctorPostgresEmbeddings(t *testing.T) {
	ctx := context.Background()
	chat, emb := openaitest.New(), openaitest.New()
	defer chat.Close()
	defer emb.Close()
	dsn := pg.NewDatabase(t)
	db, err := postgres.Open(ctx, dsn) // no replica: its writes are not fenced
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateSession(ctx, switchboard.Session{ID: "s_1", Guide: "assistant"}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendMessages(ctx, "s_1", []switchboard.Message{
		{Role: switchboard.RoleUser, Content: "hello"}, {Role: switchboard.RoleAssistant, Content: "hi"}}, false); err != nil {
		t.Fatal(err)
	}
	s := newDoctorSetup(t, embeddingsProviders(chat, emb), "embeddings:\n  provider: emb\n")
	out, err := pgDoctor(t, s, dsn, "TEST_OPENAI_KEY=sk-doctor-4242")
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	wantRow(t, out, "embeddings", "OK", "vectors of 1536 numbers", "2 of 2 stored messages wait to be embedded")
}
