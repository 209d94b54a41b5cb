package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage"
	"github.com/switchboard-gw/switchboard/storage/postgres"
)

// chargingStore is what fillCharges needs of a store: either of them.
type chargingStore interface {
	CreateSession(ctx context.Context, s switchboard.Session) error
	WriteTurn(ctx context.Context, sessionID string, w switchboard.TurnWrite) (bool, error)
}

// fillCharges stores, through the store's own API, turns of two people
// with two guides and models: three in the last week, one a month ago.
func fillCharges(t *testing.T, db chargingStore, now time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, id := range []string{"s1", "s2"} {
		if err := db.CreateSession(ctx, switchboard.Session{ID: id, Guide: "assistant", Owner: "web:ann", CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		session string
		charge  switchboard.Charge
	}{
		{"s1", switchboard.Charge{Guide: "assistant", Model: "gpt-4o-mini", Person: "web:ann", Channel: "web",
			Usage: switchboard.Usage{PromptTokens: 1000, CompletionTokens: 200, TotalTokens: 1200, CachedTokens: 800}, CostUSD: 0.25, Priced: true, At: now.Add(-2 * 24 * time.Hour)}},
		{"s1", switchboard.Charge{Guide: "assistant", Model: "gpt-4o-mini", Person: "web:ann", Channel: "web",
			Usage: switchboard.Usage{PromptTokens: 500, CompletionTokens: 100, TotalTokens: 600}, CostUSD: 0.5, Priced: true, At: now.Add(-time.Hour)}},
		{"s2", switchboard.Charge{Guide: "support", Model: "llama3", Person: "slack:U1", Channel: "slack",
			Usage: switchboard.Usage{PromptTokens: 300, CompletionTokens: 30, TotalTokens: 330}, At: now.Add(-3 * 24 * time.Hour)}},
		{"s2", switchboard.Charge{Guide: "support", Model: "gpt-4o-mini", Person: "slack:U1", Channel: "slack",
			Usage: switchboard.Usage{PromptTokens: 9000, CompletionTokens: 900, TotalTokens: 9900}, CostUSD: 9, Priced: true, At: now.Add(-30 * 24 * time.Hour)}},
	} {
		if _, err := db.WriteTurn(ctx, c.session, switchboard.TurnWrite{EndTurn: true, Usage: c.charge.Usage, Charge: &c.charge}); err != nil {
			t.Fatal(err)
		}
	}
}

// tableRow finds the table row whose first column is key, as its columns.
func tableRow(t *testing.T, out, key string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == key {
			return f
		}
	}
	t.Fatalf("no row %q in:\n%s", key, out)
	return nil
}

func wantColumns(t *testing.T, out, key, want string) {
	t.Helper()
	if got := strings.Join(tableRow(t, out, key), " "); got != want {
		t.Errorf("row %s = %q, want %q\n%s", key, got, want, out)
	}
}

// checkUsageReports runs gateway usage on the store s is set up with.
func checkUsageReports(t *testing.T, s *doctorSetup, sets ...string) {
	t.Helper()
	usage := func(args ...string) string {
		t.Helper()
		args = append([]string{"usage", "--config", s.config}, append(sets, args...)...)
		out, errOut, err := runCLI(args, s.env)
		if err != nil {
			t.Fatalf("gateway %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	out := usage("--since", "7d", "--by", "person")
	if !regexp.MustCompile(`^Usage since \d{4}-\d\d-\d\d \d\d:\d\d UTC, by person\n`).MatchString(out) {
		t.Errorf("heading:\n%s", out)
	}
	wantColumns(t, out, "PERSON", "PERSON turns input cached output total cost")
	wantColumns(t, out, "web:ann", "web:ann 2 1500 800 300 1800 $0.7500")
	wantColumns(t, out, "slack:U1", "slack:U1 1 300 0 30 330 unknown")
	wantColumns(t, out, "total", "total 3 1800 800 330 2130 $0.7500 + unknown")
	if !strings.Contains(out, "1 of 3 turns used a model with no price") {
		t.Errorf("the unpriced turn is not explained:\n%s", out)
	}
	out = usage("--since", "60d", "--by", "model")
	wantColumns(t, out, "gpt-4o-mini", "gpt-4o-mini 3 10500 800 1200 11700 $9.7500")
	wantColumns(t, out, "llama3", "llama3 1 300 0 30 330 unknown")
	out = usage("--since", "24h", "--by", "guide")
	wantColumns(t, out, "assistant", "assistant 1 500 0 100 600 $0.5000")
	if strings.Contains(out, "support") {
		t.Errorf("a turn older than --since is in the report:\n%s", out)
	}
	out = usage("--by", "channel")
	wantColumns(t, out, "slack", "slack 1 300 0 30 330 unknown")
	out = usage("--since", "2h", "--by", "person", "--set", "log.level=debug")
	wantColumns(t, out, "web:ann", "web:ann 1 500 0 100 600 $0.5000")
	for _, bad := range [][]string{{"--by", "session"}, {"--since", "yesterday"}, {"--since", "-3d"}} {
		args := append([]string{"usage", "--config", s.config}, append(sets, bad...)...)
		if _, _, err := runCLI(args, s.env); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("gateway usage %s: %v, want an error naming %s", strings.Join(bad, " "), err, bad[0])
		}
	}
}

// gateway usage reads what the store holds, grouped as asked, and writes
// nothing: a SQLite file no gateway has open gets no -wal or -shm beside
// it, and one a gateway has open is read through its WAL.
func TestUsageCommandOnSQLite(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	ctx := context.Background()
	if err := os.MkdirAll(s.dir+"/data", 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(ctx, s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	fillCharges(t, db, time.Now().UTC())
	// Open: read beside the gateway, through the WAL.
	checkUsageReports(t, s)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	checkUsageReports(t, s)
	for _, side := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(s.dsn + side); err == nil {
			t.Errorf("gateway usage left %s beside the database", side)
		}
	}
	if after, err := os.Stat(s.dsn); err != nil || !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Errorf("gateway usage changed the database file")
	}

	_, _, err = runCLI([]string{"usage", "--config", s.config, "--set", "storage.dsn=" + s.dir + "/nowhere.db"}, s.env)
	if err == nil || !strings.Contains(err.Error(), "there is no database at") {
		t.Errorf("no database: %v", err)
	}
}

func TestUsageCommandOnPostgres(t *testing.T) {
	if pg == nil {
		t.Skip("no PostgreSQL")
	}
	dsn := pg.NewDatabase(t)
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	db, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fillCharges(t, db, time.Now().UTC())
	checkUsageReports(t, s, "--set", "storage.dsn="+dsn)
}
