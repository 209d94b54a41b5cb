package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-gw/switchboard"
)

func inspect(t *testing.T, dsn string) *Inspector {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := Inspect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return in
}

// An empty database: no tables yet, which the user may create; nothing
// else to read, and the inspector created nothing.
func TestInspectAnEmptyDatabase(t *testing.T) {
	ctx := context.Background()
	dsn := pg.NewDatabase(t)
	in := inspect(t, dsn)
	if in.ServerNum < 150000 || in.Server == "" || in.User != "postgres" {
		t.Errorf("server %q (%d), user %q", in.Server, in.ServerNum, in.User)
	}
	s, err := in.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s != (Schema{Applied: 0, Known: SchemaVersion(), In: "public", MayCreate: true}) || s.Known < 2 {
		t.Errorf("schema %+v", s)
	}
	if rs, err := in.Replicas(ctx, time.Minute); err != nil || len(rs) != 0 {
		t.Errorf("replicas %v, %v", rs, err)
	}
	if held, err := in.Held(ctx, SessionLease("")); err != nil || len(held) != 0 {
		t.Errorf("held %v, %v", held, err)
	}
	if r, err := in.RecallIndex(ctx); err != nil || r.Exists {
		t.Errorf("recall index %+v, %v", r, err)
	}
	if p, n, err := in.Unembedded(ctx, "space"); err != nil || p != 0 || n != 0 {
		t.Errorf("unembedded %d of %d, %v", p, n, err)
	}
	// Every transaction is read only: not even a table can be made.
	_, err = in.pool.Exec(ctx, `CREATE TABLE doctor_was_here (x int)`)
	if code, _ := pgCode(err); code != "25006" {
		t.Errorf("a write through the inspector: %v, want read_only_sql_transaction", err)
	}
}

// A database two replicas use: the schema is this binary's, both are
// live, each holding the conversations it claimed, and the recall index
// and the messages left to embed are read.
func TestInspectTheReplicas(t *testing.T) {
	ctx := context.Background()
	dsn := pg.NewDatabase(t)
	a := openOn(t, dsn, WithReplica("a"))
	b := openOn(t, dsn, WithReplica("b"))
	for i, db := range []*DB{a, a, b} {
		if _, err := db.AcquireLease(ctx, SessionLease(fmt.Sprint(i)), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.AcquireLease(ctx, "role:discord", time.Minute); err != nil {
		t.Fatal(err)
	}
	// An expired lease is nobody's.
	if _, err := b.AcquireLease(ctx, SessionLease("gone"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.ReleaseLease(ctx, SessionLease("gone")); err != nil {
		t.Fatal(err)
	}
	plain := openOn(t, dsn) // the conversation's writes unfenced
	newSession(t, plain, "s", "")
	if err := plain.AppendMessages(ctx, "s", []switchboard.Message{user("one"), user("two")}, false); err != nil {
		t.Fatal(err)
	}

	in := inspect(t, dsn)
	s, err := in.Schema(ctx)
	if err != nil || s.Applied != SchemaVersion() {
		t.Fatalf("schema %+v, %v", s, err)
	}
	rs, err := in.Replicas(ctx, time.Minute)
	if err != nil || len(rs) != 2 || rs[0].ID != "a" || rs[1].ID != "b" {
		t.Fatalf("replicas %+v, %v", rs, err)
	}
	held, err := in.Held(ctx, SessionLease(""))
	if err != nil || len(held) != 2 || held["a"] != 2 || held["b"] != 1 {
		t.Errorf("held %v, %v", held, err)
	}
	r, err := in.RecallIndex(ctx)
	if err != nil || !r.Exists || !r.Valid || r.Bytes == 0 {
		t.Errorf("recall index %+v, %v", r, err)
	}
	if p, n, err := in.Unembedded(ctx, "space"); err != nil || p != 2 || n != 2 {
		t.Errorf("unembedded %d of %d, %v", p, n, err)
	}
	// Reading changed nothing: the leases are as they were.
	if n := count(t, a, `SELECT count(*) FROM leases WHERE expires_at > 0`); n != 4 {
		t.Errorf("%d leases unexpired after the inspection, want 4", n)
	}
}

// Each way of not reaching a database is explained with what to change.
func TestInspectExplainsWhatIsWrong(t *testing.T) {
	ctx := context.Background()
	// A listener that takes connections and answers nothing; one that
	// answers the TLS request with no, as a server without ssl does; a
	// port where nothing listens.
	silent := listen(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	noTLS := listen(t, func(c net.Conn) {
		var req [8]byte
		if _, err := io.ReadFull(c, req[:]); err == nil {
			_, _ = c.Write([]byte("N"))
		}
		_, _ = io.Copy(io.Discard, c)
	})
	closed := listen(t, nil)

	for _, tc := range []struct {
		name, dsn   string
		timeout     time.Duration
		reason, fix string
	}{
		{"no database", pg.DSN("nowhere"), 10 * time.Second, `the database "nowhere" does not exist`, `CREATE DATABASE nowhere OWNER postgres`},
		{"refused", fmt.Sprintf("postgres://gw@%s/db?sslmode=disable", closed), 10 * time.Second, "no server answers at " + closed, "start PostgreSQL"},
		{"silent", fmt.Sprintf("postgres://gw@%s/db?sslmode=disable", silent), 300 * time.Millisecond, "no answer from " + silent, "firewall"},
		{"no TLS", fmt.Sprintf("postgres://gw@%s/db?sslmode=require", noTLS), 10 * time.Second, "does not offer TLS", "sslmode=disable in storage.dsn"},
		{"bad dsn", "postgres://gw@host:notaport/db", time.Second, "storage.dsn does not parse", "postgres://user:password@host:5432/database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, tc.timeout)
			defer cancel()
			in, err := Inspect(ctx, tc.dsn)
			if err == nil {
				in.Close()
				t.Fatal("inspected")
			}
			p, ok := errors.AsType[*Problem](err)
			if !ok {
				t.Fatalf("%v is not a Problem", err)
			}
			if !strings.Contains(p.Reason, tc.reason) || !strings.Contains(p.Fix, tc.fix) {
				t.Errorf("reason %q, fix %q; want %q and %q", p.Reason, p.Fix, tc.reason, tc.fix)
			}
		})
	}

	// The server's refusals, as it words them.
	cfg, err := pgx.ParseConfig("postgres://gw@db.example:5432/switchboard")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err error
		fix string
	}{
		{&pgconn.PgError{Code: "28000", Message: `no pg_hba.conf entry for host "10.0.0.7", user "gw", database "switchboard", no encryption`}, "pg_hba.conf"},
		{&pgconn.PgError{Code: "28000", Message: `role "gw" does not exist`}, `CREATE ROLE gw LOGIN`},
		{&pgconn.PgError{Code: "28P01", Message: `password authentication failed for user "gw"`}, "password in storage.dsn"},
		{&pgconn.PgError{Code: "53300", Message: `sorry, too many clients already`}, "max_connections"},
	} {
		p := explainConnect(cfg, fmt.Errorf("failed to connect: %w", tc.err))
		if !strings.Contains(p.Reason, tc.err.(*pgconn.PgError).Message) || !strings.Contains(p.Fix, tc.fix) {
			t.Errorf("%v: reason %q, fix %q; want the fix to say %q", tc.err, p.Reason, p.Fix, tc.fix)
		}
	}
}

// listen serves each connection to 127.0.0.1:<free port> with serve, or,
// with serve nil, returns a port nothing listens on any more.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if serve == nil {
		ln.Close()
		return addr
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return addr
}
