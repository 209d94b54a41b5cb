package main

// The run of a crash test: the gateway processes (one on SQLite, several
// replicas on one PostgreSQL database), the clients talking to them, the
// kills at chosen points, the end and the audit. TestCrash and the replica
// tests (crashreplica_test.go) share it.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// crashNode is one gateway of a run: its current process and address.
type crashNode struct {
	name string // in the log: "gateway", "r1"…
	proc *gatewayProc
	addr string // "" while it is down
	gen  int    // how many times it was started
	id   string // storage.replica of its current start ("" on SQLite)
}

// crashRun is the gateways under test and what the clients have seen of
// them.
type crashRun struct {
	t     *testing.T
	bin   string
	setup crashSetup
	log   *procLog
	// replicaID, when set, is storage.replica for a node's gen'th start:
	// the gateways are replicas on one PostgreSQL database.
	replicaID func(node, gen int) string
	// owner is the node running a session now, or -1 if none is known
	// (nil: the only node runs every session).
	owner func(session string) int

	mu    sync.Mutex
	nodes []*crashNode

	paused atomic.Bool // clients start no new input (the idle kill point)
	hold   atomic.Bool // clients answer no approval request (the approval kill point)
	final  atomic.Bool // the kills are over: clients finish their inputs

	// Live events seen by all clients (not replays), for the kill points,
	// and summaries the model was asked for (the compaction kill point).
	inputsSent, deltas, toolCalls, confirmRequests, summaries sighting

	clients     []*crashClient
	stopClients func() // stops them and waits for them
}

// sighting counts the live events of one kind and keeps the session of
// the last: the one whose gateway a kill at that point is aimed at.
type sighting struct {
	mu      sync.Mutex
	n       int64
	session string
}

func (s *sighting) add(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	s.session = session
}

func (s *sighting) count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *sighting) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session
}

// newCrashRun prepares a run of n gateways on setup (none started yet).
func newCrashRun(t *testing.T, setup crashSetup, n int) *crashRun {
	h := &crashRun{t: t, bin: gatewayBinary(t), setup: setup, log: &procLog{}}
	h.log.dumpOnFailure(t)
	for i := range n {
		name := "gateway"
		if n > 1 {
			name = "r" + strconv.Itoa(i+1)
		}
		h.nodes = append(h.nodes, &crashNode{name: name})
	}
	return h
}

// start starts node i (again).
func (h *crashRun) start(i int) {
	h.t.Helper()
	h.mu.Lock()
	n := h.nodes[i]
	gen := n.gen + 1
	h.mu.Unlock()
	var args []string
	id := ""
	if h.replicaID != nil {
		id = h.replicaID(i, gen)
		args = append(args, "--set", "storage.replica="+id)
	}
	fmt.Fprintf(h.log, "=== %s is %s (start #%d of it) ===\n", time.Now().Format("15:04:05.000"), n.name, gen)
	p, err := startGatewayProc(h.t, h.bin, h.setup.config, h.log, args...)
	if err != nil {
		h.t.Fatalf("start #%d of %s: %v", gen, n.name, err)
	}
	h.mu.Lock()
	n.proc, n.addr, n.gen, n.id = p, p.addr, gen, id
	h.mu.Unlock()
}

// startAll starts every node.
func (h *crashRun) startAll() {
	for i := range h.nodes {
		h.start(i)
	}
}

// next is where a client's next connection goes: the next node after the
// last it tried, round-robin, skipping those that are down.
func (h *crashRun) next(cursor *int) (addr string, node, gen int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for range h.nodes {
		i := *cursor % len(h.nodes)
		*cursor++
		if n := h.nodes[i]; n.addr != "" {
			return n.addr, i, n.gen
		}
	}
	return "", 0, 0
}

// alive reports whether node's gen'th start is still running.
func (h *crashRun) alive(node, gen int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.nodes[node]
	return n.gen == gen && n.addr != ""
}

// nodeOf is the node whose current start has replica id, -1 if none.
func (h *crashRun) nodeOf(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.IndexFunc(h.nodes, func(n *crashNode) bool { return n.id == id && n.addr != "" })
}

// kill kills node i with SIGKILL.
func (h *crashRun) kill(i int) {
	h.mu.Lock()
	n := h.nodes[i]
	p := n.proc
	n.addr = ""
	h.mu.Unlock()
	fmt.Fprintf(h.log, "=== %s SIGKILL %s ===\n", time.Now().Format("15:04:05.000"), n.name)
	p.kill()
	if p.err == nil || !strings.Contains(p.err.Error(), "killed") {
		h.t.Errorf("%s was SIGKILLed but exited with %v", n.name, p.err)
	}
}

// terminate sends node i SIGTERM and waits for it to exit with status 0.
func (h *crashRun) terminate(i int, timeout time.Duration) {
	h.t.Helper()
	h.mu.Lock()
	n := h.nodes[i]
	p := n.proc
	h.mu.Unlock()
	fmt.Fprintf(h.log, "=== %s SIGTERM %s ===\n", time.Now().Format("15:04:05.000"), n.name)
	exitErr, ok := p.terminate(timeout)
	h.mu.Lock()
	n.addr = ""
	h.mu.Unlock()
	if !ok {
		h.t.Fatalf("%s did not exit within %s of SIGTERM", n.name, timeout)
	}
	if exitErr != nil {
		h.t.Errorf("after SIGTERM %s exited with %v, want status 0", n.name, exitErr)
	}
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *crashRun) all(f func(*crashClient) bool) bool {
	for _, c := range h.clients {
		if !f(c) {
			return false
		}
	}
	return true
}

func (h *crashRun) report(f func(*crashClient) bool) string {
	var b strings.Builder
	for _, c := range h.clients {
		if !f(c) {
			b.WriteString(c.report())
		}
	}
	return b.String()
}

// begin starts a run: the scripted model answers, every gateway starts,
// and n clients open their sessions (seed: their random choices).
func (h *crashRun) begin(llm *openaitest.Server, n int, seed int64) {
	llm.Respond(crashModel(chunkDelay, h.summarized))
	h.startAll()
	h.startClients(n, seed)
}

// killAndAudit kills a gateway kills times at points chosen at random
// (seed: the choices), ends the run and audits it.
func (h *crashRun) killAndAudit(kills int, points []string, seed int64) (killsTally, crashTotals) {
	tally := h.chaos(kills, points, rand.New(rand.NewPCG(uint64(seed), 0x5eed)))
	h.finish()
	return tally, h.audit()
}

// startClients starts n clients; they stop when the test ends.
func (h *crashRun) startClients(n int, seed int64) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	h.t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for i := 1; i <= n; i++ {
		c := newCrashClient(h, i, seed)
		h.clients = append(h.clients, c)
		wg.Go(func() { c.loop(ctx) })
	}
	h.stopClients = func() {
		cancel()
		wg.Wait()
	}
	if !waitFor(15*time.Second, func() bool { return h.all((*crashClient).settled) }) {
		h.t.Fatalf("the clients did not all open their sessions:\n%s", h.report((*crashClient).settled))
	}
}

// victim is the node a kill at a point seen in session is aimed at: the
// one running the session, else one at random.
func (h *crashRun) victim(session string, rng *rand.Rand) int {
	if h.owner != nil && session != "" {
		if i := h.owner(session); i >= 0 {
			return i
		}
	}
	return rng.IntN(len(h.nodes))
}

// killAt waits (a bounded time) for the point, then kills the gateway
// running the conversation where it was seen. It reports whether the point
// was reached and which node was killed.
func (h *crashRun) killAt(point string, rng *rand.Rand) (reached bool, killed int) {
	const patience = 3 * time.Second
	jitter := time.Duration(0)
	var seen *sighting
	switch point {
	case pointIdle:
		h.paused.Store(true)
		reached = waitFor(patience, func() bool { return h.all((*crashClient).idle) })
	case pointAfterInput:
		seen = &h.inputsSent
		jitter = time.Duration(rng.IntN(5000)) * time.Microsecond
	case pointMidStream:
		seen = &h.deltas
		jitter = time.Duration(rng.IntN(20000)) * time.Microsecond
	case pointMidTool:
		seen = &h.toolCalls
		jitter = time.Duration(rng.IntN(20000)) * time.Microsecond
	case pointCompaction:
		seen = &h.summaries
		jitter = time.Duration(rng.IntN(int(5*chunkDelay/time.Microsecond))) * time.Microsecond
	case pointApproval:
		h.hold.Store(true)
		seen = &h.confirmRequests
	}
	session := ""
	if seen != nil {
		n := seen.count()
		reached = waitFor(patience, func() bool { return seen.count() > n })
		session = seen.last()
	}
	killed = h.victim(session, rng)
	time.Sleep(jitter)
	h.kill(killed)
	h.paused.Store(false)
	h.hold.Store(false)
	return reached, killed
}

// crashSeedOf is -crash.seed, or one from the clock.
func crashSeedOf() int64 {
	if *crashSeed != 0 {
		return *crashSeed
	}
	return time.Now().UnixNano()
}

func killPoints(t *testing.T) []string {
	if *crashPoints == "" {
		return allKillPoints
	}
	var out []string
	for _, p := range strings.Split(*crashPoints, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(allKillPoints, p) {
			t.Fatalf("-crash.points: unknown point %q (want %s)", p, strings.Join(allKillPoints, ", "))
		}
		out = append(out, p)
	}
	return out
}

// summarized counts a summary the model was asked for, in the session of
// the client whose question it covers last.
func (h *crashRun) summarized(qid string) {
	session := ""
	if n, err := strconv.Atoi(strings.TrimPrefix(strings.Split(qid, "-")[0], "q")); err == nil && n >= 1 && n <= len(h.clients) {
		c := h.clients[n-1]
		c.mu.Lock()
		session = c.session
		c.mu.Unlock()
	}
	h.summaries.add(session)
}

// killsTally is what the kills of a run hit.
type killsTally struct {
	chosen, missed map[string]int
	killed         map[string]int // by node name
	late           int            // restarts once the others had taken over
}

func (k killsTally) String() string {
	var pts []string
	for _, p := range allKillPoints {
		if k.chosen[p] > 0 {
			pts = append(pts, fmt.Sprintf("%s %d (%d not reached)", p, k.chosen[p], k.missed[p]))
		}
	}
	s := "[" + strings.Join(pts, ", ") + "]"
	if len(k.killed) > 1 {
		s += fmt.Sprintf(" on %v, %d restarted once the others had taken over", k.killed, k.late)
	}
	return s
}

// chaos kills a gateway kills times, each at a point chosen at random, and
// starts it again; after each restart it waits for every client to be
// connected to a live gateway and caught up.
func (h *crashRun) chaos(kills int, points []string, rng *rand.Rand) killsTally {
	k := killsTally{chosen: map[string]int{}, missed: map[string]int{}, killed: map[string]int{}}
	for n := range kills {
		point := points[rng.IntN(len(points))]
		k.chosen[point]++
		reached, node := h.killAt(point, rng)
		if !reached {
			k.missed[point]++
		}
		k.killed[h.nodes[node].name]++
		settle := func(what string) {
			if !waitFor(20*time.Second, func() bool { return h.all((*crashClient).settled) }) {
				h.t.Fatalf("after kill %d (%s of %s)%s, not every client resumed its session:\n%s",
					n+1, point, h.nodes[node].name, what, h.report((*crashClient).settled))
			}
		}
		if len(h.nodes) > 1 && rng.IntN(2) == 0 {
			// Half the time the other replicas take the killed one's
			// conversations over (once its leases run out) before it is
			// back; otherwise it takes them up itself as it starts.
			settle(" with the replica down")
			k.late++
			h.waitTurns(20 * time.Second)
		}
		h.start(node)
		settle(" and a restart")
		// Half the time the next kill may cut the turns being resumed
		// (a crash during recovery); otherwise they end first, so a turn
		// is not cut again and again until the gateway gives it up.
		if rng.IntN(2) == 0 {
			h.waitTurns(5 * time.Second)
		}
	}
	return k
}

// waitTurns waits (at most timeout) until every turn under way now has
// ended.
func (h *crashRun) waitTurns(timeout time.Duration) {
	marks := make([]int, len(h.clients))
	for i, c := range h.clients {
		marks[i] = c.inFlight()
	}
	waitFor(timeout, func() bool {
		for i, c := range h.clients {
			if marks[i] >= 0 && c.inFlight() == marks[i] {
				return false
			}
		}
		return true
	})
}

// finish has the clients finish their inputs, stops them, and stops every
// gateway with SIGTERM, which must exit 0.
func (h *crashRun) finish() {
	h.t.Helper()
	h.final.Store(true)
	if !waitFor(30*time.Second, func() bool { return h.all((*crashClient).finished) }) {
		h.t.Fatalf("after the last restart the clients' inputs were not all answered:\n%s\nthe end of their stored events:\n%s",
			h.report((*crashClient).finished), h.storedTails((*crashClient).finished))
	}
	h.stopClients()
	for i := range h.nodes {
		h.terminate(i, 30*time.Second)
	}
	for _, c := range h.clients {
		for _, p := range c.problems {
			h.t.Errorf("client %d: %s", c.n, p)
		}
	}
}

// crashTotals is what the audit counted over the run.
type crashTotals struct {
	sessionStats
	inputs, resent, reconnects int
	connErrs                   map[string]int
}

func (c crashTotals) String() string {
	return fmt.Sprintf("%d events, %d inputs (%d resent), %d interrupted turns (%d given up), %d already_resolved, %d compactions, %d reconnects, connection errors %v",
		c.events, c.inputs, c.resent, c.interrupted, c.gaveUp, c.alreadyResolved, c.compactions, c.reconnects, c.connErrs)
}

// audit checks the stored history of every client's session against what
// the client sent and saw, and that nothing is left unfinished.
func (h *crashRun) audit() crashTotals {
	db := openAudit(h.t, h.setup.db)
	total := crashTotals{connErrs: map[string]int{}}
	for _, c := range h.clients {
		var texts []string
		for _, in := range c.inputs {
			texts = append(texts, in.text)
			total.resent += in.sends - 1
		}
		total.inputs += len(texts)
		total.reconnects += c.reconnects
		for code, n := range c.connErrs {
			total.connErrs[code] += n
		}
		st, fails := auditSession(db, c.session, texts, c.seen)
		total.add(st)
		reportFailures(h.t, fmt.Sprintf("session %s (client %d)", c.session, c.n), fails)
	}
	reportFailures(h.t, "store", auditStore(db))
	return total
}

// storedTails lists the last stored events of the sessions of the clients
// for which f is false. An SQLite store is read once its gateway is
// killed (the store takes the file's lock): the test is failing anyway.
func (h *crashRun) storedTails(f func(*crashClient) bool) string {
	if h.replicaID == nil {
		for i := range h.nodes {
			h.nodes[i].proc.kill()
		}
	}
	db, err := openStoredHistory(h.setup.db)
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	var b strings.Builder
	for _, c := range h.clients {
		if f(c) {
			continue
		}
		c.mu.Lock()
		session := c.session
		c.mu.Unlock()
		evs, err := loadEvents(db, session)
		if err != nil {
			fmt.Fprintf(&b, "session %s: %v\n", session, err)
			continue
		}
		fmt.Fprintf(&b, "session %s (client %d), %d events:\n%s\n", session, c.n, len(evs), describeEvents(evs, len(evs)-25, len(evs)))
		turn, ok, err := openTurn(db, session)
		if err != nil {
			fmt.Fprintf(&b, "  its open turn: %v\n", err)
		}
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "  its stored open turn: %s\n", turn)
		var p struct {
			Confirmations []struct {
				ID       string `json:"id"`
				Resolved bool   `json:"resolved"`
			} `json:"confirmations"`
		}
		_ = json.Unmarshal(turn, &p)
		for _, cf := range p.Confirmations {
			asked := slices.ContainsFunc(evs, func(ev evRow) bool {
				return ev.Type == "confirmation_request" && strings.Contains(string(ev.Data), `"`+cf.ID+`"`)
			})
			if !cf.Resolved && !asked {
				fmt.Fprintf(&b, "  the open turn waits for approval %s, but no confirmation_request for it is stored: no client can answer it\n", cf.ID)
			}
		}
	}
	return b.String()
}

func reportFailures(t *testing.T, what string, fails []string) {
	t.Helper()
	const max = 25
	if len(fails) == 0 {
		return
	}
	more := ""
	if len(fails) > max {
		more = fmt.Sprintf("\n… and %d more", len(fails)-max)
		fails = fails[:max]
	}
	t.Errorf("%s:\n%s%s", what, strings.Join(fails, "\n"), more)
}
