package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-gw/switchboard/health"
)

// /readyz tells a client on this machine why a part is down and what to
// do; a probe from elsewhere gets the states alone, as /metrics is kept
// from it.
func TestReadyzKeepsReasonsOnThisMachine(t *testing.T) {
	reg := health.New(nil)
	reg.Add("slack", "listener", true).Down("Slack refused the bot token in the environment variable SLACK_BOT_TOKEN", "put the bot token there")
	for _, tc := range []struct {
		remote  string
		reasons bool
	}{{"127.0.0.1:5000", true}, {"[::1]:5000", true}, {"203.0.113.7:5000", false}} {
		req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		readyz(reg)(rec, req)
		var body readiness
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusServiceUnavailable || body.Ready || len(body.Parts) != 1 || body.Parts[0].State != health.Down {
			t.Fatalf("from %s: %d %+v", tc.remote, rec.Code, body)
		}
		if got := body.Parts[0].Reason != "" && body.Parts[0].Fix != ""; got != tc.reasons {
			t.Errorf("from %s: reasons shown %v, want %v: %+v", tc.remote, got, tc.reasons, body.Parts[0])
		}
	}
}

// A replica on PostgreSQL whose database stops taking its connections
// cannot renew its leases: /readyz says so (the database part is down,
// with why and the fix), the log has the ERROR, the metric is 0; once the
// database takes connections again, it is ready again. The database is
// really cut off: connections refused and those open ended.
func TestReadyzFollowsTheDatabase(t *testing.T) {
	dsn := pg.NewDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
	g := newGateway(t, "  - name: main\n    kind: demo", "")
	s := g.serve(nil, "storage.dsn="+dsn, "storage.lease=1s", "storage.replica=r1")

	r := s.readyz(func(r readyzBody, code int) bool { return code == 200 && r.part("database").State == health.Up })
	if p := r.part("database"); p.Kind != "storage" || !p.Required {
		t.Errorf("the database part: %+v", p)
	}
	metricsUntil(t, s, `switchboard_component_up{component="database",kind="storage"} 1`, "switchboard_replicas_live 1",
		"switchboard_leases_held 0", "switchboard_leases_lost_total 0", "switchboard_sessions_taken_over_total 0")

	admin := pg.DSN("postgres")
	pgExec(t, admin, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS false")
	t.Cleanup(func() { pgExec(t, admin, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS true") })
	pgExec(t, admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"+strings.Trim(name, `"`)+"' AND pid <> pg_backend_pid()")
	r = s.readyz(func(r readyzBody, code int) bool { return code == 503 && r.part("database").State == health.Down })
	if p := r.part("database"); !strings.Contains(p.Reason, "cannot be renewed") || !strings.Contains(p.Fix, "storage.dsn") {
		t.Errorf("down without why or the fix: %+v", p)
	}
	metricsUntil(t, s, `switchboard_component_up{component="database",kind="storage"} 0`)

	pgExec(t, admin, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS true")
	s.readyz(func(r readyzBody, code int) bool { return code == 200 && r.part("database").State == health.Up })
	metricsUntil(t, s, `switchboard_component_up{component="database",kind="storage"} 1`)
	s.stop() // the log is whole once the gateway has exited
	if logs := s.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "leases not renewed") {
		t.Errorf("no ERROR in the log:\n%s", logs)
	}
}

// metricsUntil GETs /metrics until it has every line of want.
func metricsUntil(t *testing.T, s *server, want ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, _, body := s.get("/metrics")
		missing := slices.IndexFunc(want, func(w string) bool { return !strings.Contains(body, "\n"+w+"\n") })
		if missing < 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q", want[missing])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
