package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

var pg *Server

func TestMain(m *testing.M) { Main(m, &pg) }

// Each test's database is its own: what one creates, another does not see.
func TestDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	a, b := pg.NewDatabase(t), pg.NewDatabase(t)
	if a == b {
		t.Fatalf("two databases share the DSN %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, `CREATE TABLE t (x int); INSERT INTO t VALUES (41)`); err != nil {
		t.Fatal(err)
	}
	var x int
	if err := ca.QueryRow(ctx, `SELECT x + 1 FROM t`).Scan(&x); err != nil || x != 42 {
		t.Fatalf("read back %d, %v", x, err)
	}
	var version int
	if err := ca.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil || version < 150000 {
		t.Fatalf("server version %d, %v: want 15 or later", version, err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 't'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the other database sees %d tables named t (%v)", n, err)
	}
}

// A database still open when its test ends is dropped all the same.
func TestDropsDatabaseHeldOpen(t *testing.T) {
	ctx := context.Background()
	var dsn string
	var conn *pgx.Conn
	t.Run("holds", func(t *testing.T) {
		dsn = pg.NewDatabase(t)
		var err error
		if conn, err = pgx.Connect(ctx, dsn); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := pgx.Connect(ctx, dsn); err == nil {
		t.Fatal("the database is still there after its test ended")
	}
	conn.Close(ctx)
}
