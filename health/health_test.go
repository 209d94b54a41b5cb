package health_test

import (
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/health"
)

// Parts start Starting; a required part down or starting makes the
// gateway not ready, an optional one does not; the watcher sees each
// change once, in order, and not a report that changes nothing.
func TestRegistry(t *testing.T) {
	var seen []string
	r := health.New(func(s health.Status) { seen = append(seen, s.Name+" "+string(s.State)) })
	slack := r.Add("slack", "listener", true)
	prov := r.Add("provider main", "provider", false)
	if health.Ready(r.Snapshot()) {
		t.Fatal("ready while a required listener is starting")
	}
	slack.Up()
	prov.Down("the circuit breaker is open", "")
	if !health.Ready(r.Snapshot()) {
		t.Fatalf("not ready with only an optional part down: %+v", r.Snapshot())
	}
	slack.Down("invalid_auth", "set SLACK_APP_TOKEN")
	slack.Down("invalid_auth", "set SLACK_APP_TOKEN") // no change
	snap := r.Snapshot()
	if health.Ready(snap) || snap[0].Name != "slack" || snap[0].Reason != "invalid_auth" || snap[0].Fix != "set SLACK_APP_TOKEN" {
		t.Fatalf("snapshot %+v", snap)
	}
	want := []string{"slack starting", "provider main starting", "slack up", "provider main down", "slack down"}
	if len(seen) != len(want) {
		t.Fatalf("watched %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("watched %v, want %v", seen, want)
		}
	}
	var none *health.Reporter
	none.Up() // a part built without a registry reports nothing
	if none.State() != health.Starting {
		t.Fatal("a nil reporter's state")
	}
}

// A part standing by (a replica's Discord listener while another holds
// the Gateway connection) is up, ready, and says why it does less; up
// again, the reason goes.
func TestStandbyIsUpWithAReason(t *testing.T) {
	r := health.New(nil)
	p := r.Add("discord", "listener", true)
	p.Standby("standby: another replica holds the connection")
	if s := r.Snapshot()[0]; s.State != health.Up || s.Reason == "" || s.Fix != "" || !health.Ready(r.Snapshot()) {
		t.Fatalf("standing by: %+v", s)
	}
	p.Up()
	if s := r.Snapshot()[0]; s.State != health.Up || s.Reason != "" {
		t.Fatalf("up: %+v", s)
	}
}

// A part taken out is gone from the snapshot, its watcher is told once,
// and its old reporter reports nothing more.
func TestRemovedPartIsGone(t *testing.T) {
	var seen []string
	r := health.New(func(s health.Status) { seen = append(seen, s.Name+" "+string(s.State)) })
	prov := r.Add("provider old", "provider", false)
	prov.Up()
	r.Remove("provider old")
	r.Remove("provider old") // twice: nothing more
	prov.Down("late", "")
	if snap := r.Snapshot(); len(snap) != 0 {
		t.Fatalf("snapshot after Remove = %+v", snap)
	}
	if got := strings.Join(seen, ", "); got != "provider old starting, provider old up, provider old removed" {
		t.Fatalf("watched %s", got)
	}
	if prov.State() != health.Removed {
		t.Fatalf("a removed part's state = %s", prov.State())
	}
}
