package main

// The crash tests on replicas: three gateway processes on one PostgreSQL
// database (internal/pgtest), each on its own HTTP port, behind clients
// that connect round-robin (each reconnection goes to the next replica)
// and resume where they were. TestReplicaCrash kills the replica running
// a conversation at random points of its work and starts it again;
// TestReplicaRollingRestart stops each in turn with SIGTERM mid-turn. Both
// end with the audit of crash_test.go, on the PostgreSQL store.
//
// A soak run:
//
//	go test ./cmd/gateway -run TestReplicaCrash -crash.replica-kills=100
//
// -crash.seed and -crash.points work as for TestCrash.

import (
	"context"
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/storage/postgres"
)

var replicaKills = flag.Int("crash.replica-kills", 5, "how many times TestReplicaCrash kills a replica with SIGKILL (a soak run: 100)")

const (
	replicas       = 3
	replicaClients = 6 // two a replica at first
	// replicaLease is storage.lease: short, so that a killed replica's
	// conversations are taken over within a few seconds.
	replicaLease = 2 * time.Second
)

// newReplicaRun prepares three replicas on a new database. r1 and r2 keep
// their storage.replica across restarts (as a StatefulSet's pod names
// would); r3 is a new replica at each start (as with storage.replica
// unset).
func newReplicaRun(t *testing.T, llm *openaitest.Server, grace string) *crashRun {
	t.Helper()
	gatewayBinary(t)
	dsn := pg.NewDatabase(t)
	h := newCrashRun(t, writeReplicaSetup(t, llm.BaseURL(), grace, dsn, replicaLease), replicas)
	h.replicaID = func(node, gen int) string {
		if node == 2 {
			return fmt.Sprintf("r3-%d", gen)
		}
		return fmt.Sprintf("r%d", node+1)
	}
	// Who runs a conversation is who holds its lease, unexpired.
	leases, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leases.Close() })
	h.owner = func(session string) int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ls, err := leases.Leases(ctx, postgres.SessionLease(session))
		if err != nil || len(ls) != 1 || !ls[0].Expires.After(time.Now()) {
			return -1
		}
		return h.nodeOf(ls[0].Holder)
	}
	return h
}

// A replica killed at any point of its work leaves its conversations to
// the others, which take them over within about a lease time; it starts
// again and serves the clients that reconnect to it. Nothing a client was
// shown is lost or renumbered, every accepted input is answered once, and
// the turns cut are resumed after an interrupted notice.
func TestReplicaCrash(t *testing.T) {
	seed := crashSeedOf()
	kills := *replicaKills
	points := killPoints(t)
	t.Logf("crash seed %d, %d kills (replay: go test ./cmd/gateway -run 'TestReplicaCrash$' -crash.seed=%d -crash.replica-kills=%d)", seed, kills, seed, kills)

	llm := openaitest.New()
	t.Cleanup(llm.Close)
	h := newReplicaRun(t, llm, "5s")
	h.begin(llm, replicaClients, seed)
	tally, total := h.killAndAudit(kills, points, seed)
	t.Logf("seed %d: %d kills %s; %d sessions on %d replicas (lease %v), %s; %s", seed, kills, tally, len(h.clients), replicas, replicaLease, total, clusterLog(h.log.String()))
}

// Each replica in turn is stopped with SIGTERM while a conversation it
// runs is streaming a reply, and started again: the turns under way finish
// within the grace, what is sent meanwhile is answered by the others, and
// no turn fails: every input is answered once, nothing is interrupted, and
// the only notices are restarting (and duplicate, for an input sent again
// after it, already_resolved for an approval sent again) — no error.
func TestReplicaRollingRestart(t *testing.T) {
	seed := crashSeedOf()
	t.Logf("seed %d (replay: -crash.seed=%d)", seed, seed)
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	h := newReplicaRun(t, llm, "10s")
	h.begin(llm, replicaClients, seed)

	streaming := 0
	for i := range h.nodes {
		// A reply streaming in a conversation it runs, when possible.
		n := h.deltas.count()
		if waitFor(5*time.Second, func() bool { return h.deltas.count() > n && h.owner(h.deltas.last()) == i }) {
			streaming++
		}
		h.terminate(i, 30*time.Second)
		h.start(i)
		if !waitFor(20*time.Second, func() bool { return h.all((*crashClient).settled) }) {
			t.Fatalf("after %s restarted, not every client resumed its session:\n%s", h.nodes[i].name, h.report((*crashClient).settled))
		}
		h.waitTurns(10 * time.Second)
	}
	h.finish()
	total := h.audit()
	t.Logf("seed %d: %d replicas restarted one at a time (%d while streaming a reply it ran); %d sessions, %s; %s", seed, len(h.nodes), streaming, len(h.clients), total, clusterLog(h.log.String()))
	if total.interrupted != 0 {
		t.Errorf("%d turns were interrupted: a replica stopped with SIGTERM finishes its turns", total.interrupted)
	}
	for code, n := range total.connErrs {
		// already_resolved: an approval a client sent again on its new
		// connection while the first, forwarded through the owner's inbox
		// by the replica that went away, was still on its way (the
		// crashClient's own comment): the first was taken, as it should.
		if code != switchboard.ErrCodeRestarting && code != switchboard.ErrCodeDuplicate && code != switchboard.ErrCodeAlreadyResolved {
			t.Errorf("the clients got %d %s errors, want none but restarting, duplicate and already_resolved", n, code)
		}
	}
	if total.alreadyResolved != 0 {
		t.Logf("%d approvals were sent again after they were taken (already_resolved)", total.alreadyResolved)
	}
}

var (
	takenOverRE = regexp.MustCompile(`msg="cluster: conversations taken over from replicas gone" sessions=(\d+)`)
	lostRE      = regexp.MustCompile(`msg="cluster: conversations taken over by other replicas" sessions=(\d+)`)
)

// clusterLog says from the replicas' log how conversations moved: taken
// over from a replica gone, promoted in place (a mirror that became the
// owner), and lost by a live replica (one that paused past its lease).
func clusterLog(log string) string {
	sum := func(re *regexp.Regexp) int {
		n := 0
		for _, m := range re.FindAllStringSubmatch(log, -1) {
			k, _ := strconv.Atoi(m[1])
			n += k
		}
		return n
	}
	return fmt.Sprintf("conversations taken over from replicas gone %d, run in place by a mirror %d, lost by a live replica %d",
		sum(takenOverRE), strings.Count(log, `msg="this replica runs the session now"`), sum(lostRE))
}
