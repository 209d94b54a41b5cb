package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gws "github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard-gw/switchboard/internal/pgtest"
)

// The replicas rows: the gateway as 1 and 3 replicas sharing one
// PostgreSQL server that the bench starts (internal/pgtest's, with the
// durability a production server has: fsync, synchronous_commit and
// full_page_writes on), the clients spread round-robin over them; and the
// time from a replica's SIGKILL to its conversations answering again.

// replicaRow is k replicas at one level.
type replicaRow struct {
	loadResult
	replicas int
	gwCPU    float64 // the replicas' CPU seconds per 1,000 turns
	pgCPU    float64 // PostgreSQL's
}

// takeoverResult is one measurement of conversations outliving their
// replica.
type takeoverResult struct {
	replicas int
	lease    time.Duration
	rounds   int
	victim   []time.Duration // kill to answer, the killed replica's conversations, sorted
	others   []time.Duration // the same, the others' (sent at the same moment), sorted
	errors   int
}

// replicasBench is what the replicas section needs.
type replicasBench struct {
	bin, dir, llmURL string
	srv              *pgtest.Server
	pgPID            int
}

// measureReplicas runs turns at each level on each number of replicas,
// then the takeover measurement with each lease.
func measureReplicas(ctx context.Context, bin, dir, llmURL string, counts, levels []int, warmup, d time.Duration, takeover, rounds int, leases []time.Duration) (rows []replicaRow, takeovers []takeoverResult, version string, err error) {
	srv, err := pgtest.Start("fsync=on", "synchronous_commit=on", "full_page_writes=on")
	if err != nil {
		return nil, nil, "", fmt.Errorf("starting PostgreSQL (or run with --replicas=false): %w", err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			log("stopping PostgreSQL: %v", err)
		}
	}()
	pid, err := srv.PID()
	if err != nil {
		return nil, nil, "", err
	}
	b := &replicasBench{bin: bin, dir: dir, llmURL: llmURL, srv: srv, pgPID: pid}
	if version, err = b.version(ctx); err != nil {
		return nil, nil, "", err
	}
	for _, k := range counts {
		for _, n := range levels {
			r, err := b.turns(ctx, k, n, warmup, d)
			if err != nil {
				return nil, nil, "", fmt.Errorf("%d replicas, %d sessions: %w", k, n, err)
			}
			log("%d replicas %5d sessions: %8.0f turns/s  p50 %-9v p99 %-9v CPU gateways %.2fs, PostgreSQL %.2fs /1k turns  errors %d",
				k, n, r.turnsPerSec(), round(percentile(r.latencies, 50)), round(percentile(r.latencies, 99)), r.gwCPU, r.pgCPU, r.errors)
			rows = append(rows, r)
		}
	}
	if takeover > 0 {
		for _, lease := range leases {
			t := takeoverResult{replicas: 3, lease: lease, rounds: rounds}
			for range rounds {
				if err := b.takeover(ctx, &t, takeover); err != nil {
					return nil, nil, "", fmt.Errorf("takeover with a %v lease: %w", lease, err)
				}
			}
			slices.Sort(t.victim)
			slices.Sort(t.others)
			log("takeover, lease %v: the killed replica's %d conversations answered again after %v to %v (median %v); the others' in %v; errors %d",
				lease, len(t.victim), round(percentile(t.victim, 0)), round(percentile(t.victim, 100)), round(percentile(t.victim, 50)),
				round(percentile(t.others, 50)), t.errors)
			takeovers = append(takeovers, t)
		}
	}
	return rows, takeovers, version, nil
}

func (b *replicasBench) version(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, b.srv.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var v string
	err = conn.QueryRow(ctx, `SHOW server_version`).Scan(&v)
	return v, err
}

// start starts k replicas on a new database, holding a conversation for
// lease unrenewed (0: storage.lease's default).
func (b *replicasBench) start(ctx context.Context, k int, what string, lease time.Duration) ([]*child, error) {
	dsn, _, err := b.srv.CreateDatabase(what)
	if err != nil {
		return nil, err
	}
	var gws []*child
	for i := range k {
		storage := func(run string) string {
			s := fmt.Sprintf(`{ dsn: %q, replica: "r%d", data_dir: %q`, dsn, i+1, filepath.Join(run, "data"))
			if lease > 0 {
				s += fmt.Sprintf(`, lease: %s`, lease)
			}
			return s + " }"
		}
		gw, err := startGatewayWith(ctx, b.bin, b.dir, b.llmURL, nil, storage)
		if err != nil {
			stopAll(gws)
			return nil, err
		}
		gws = append(gws, gw)
	}
	return gws, nil
}

func stopAll(gws []*child) {
	var wg sync.WaitGroup
	for _, gw := range gws {
		wg.Go(gw.stop)
	}
	wg.Wait()
}

// turns measures n sessions spread over k replicas.
func (b *replicasBench) turns(ctx context.Context, k, n int, warmup, d time.Duration) (replicaRow, error) {
	gws, err := b.start(ctx, k, fmt.Sprintf("turns_%d_%d", k, n), 0)
	if err != nil {
		return replicaRow{}, err
	}
	defer stopAll(gws)
	var urls []string
	for _, gw := range gws {
		urls = append(urls, "ws://"+gw.addr+"/ws")
	}
	var gw0, gw1, pg0, pg1 time.Duration
	res, err := runLoad(ctx, urls, n, warmup, d,
		func() { gw0, pg0 = cpuOf(gws), treeCPU(b.pgPID) },
		func() { gw1, pg1 = cpuOf(gws), treeCPU(b.pgPID) })
	if err != nil {
		return replicaRow{}, err
	}
	r := replicaRow{loadResult: res, replicas: k}
	if res.turns > 0 {
		r.gwCPU = (gw1 - gw0).Seconds() / float64(res.turns) * 1000
		r.pgCPU = (pg1 - pg0).Seconds() / float64(res.turns) * 1000
	}
	return r, nil
}

// cpuOf is the CPU time the processes have used.
func cpuOf(cs []*child) time.Duration {
	var t time.Duration
	for _, c := range cs {
		d, _ := cpuTime(c.pid())
		t += d
	}
	return t
}

// treeCPU is the CPU time of a process and its children alive (the
// PostgreSQL server: the postmaster and a backend per connection).
func treeCPU(pid int) time.Duration {
	t, _ := cpuTime(pid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || parentOf(child) != pid {
			continue
		}
		d, _ := cpuTime(child)
		t += d
	}
	return t
}

// parentOf is a process's parent's pid (0 if unknown).
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// follower is a client of a conversation on a replica other than the one
// running it (a mirror), which sends a message at the kill.
type follower struct {
	conn   *gws.Conn
	victim bool // the conversation ran on the killed replica
}

// takeover measures the time from one of t.replicas replicas' SIGKILL to
// its conversations answering again, adding to t. Each of n conversations
// is opened (and answers a turn) on replica i mod k, which runs it, and
// followed by a client on another replica. Once the leases have been
// renewed, at a moment chosen at random within a renewal period, the first
// replica is killed and at once each client sends a message, timed to the
// assistant's answer.
func (b *replicasBench) takeover(ctx context.Context, t *takeoverResult, n int) error {
	k, lease := t.replicas, t.lease
	gws, err := b.start(ctx, k, fmt.Sprintf("takeover_%v", lease), lease)
	if err != nil {
		return err
	}
	defer stopAll(gws)
	url := func(i int) string { return "ws://" + gws[i].addr + "/ws" }
	fs := make([]follower, n)
	for i := range n {
		owner := i % k
		user := fmt.Sprintf(`{"id":"takeover-%d"}`, i) // the same person on both connections
		c, ready, err := dialHello(ctx, url(owner), []byte(`{"type":"hello","user":`+user+`}`))
		if err != nil {
			return err
		}
		var rd struct {
			Data struct {
				Session string `json:"session"`
			} `json:"data"`
		}
		if err := json.Unmarshal(ready, &rd); err != nil || rd.Data.Session == "" {
			c.Close()
			return fmt.Errorf("ready without a session: %s", ready)
		}
		_, err = turn(c, 0, nil)
		c.Close()
		if err != nil {
			return err
		}
		// Followed on another replica than the one killed (the first).
		mirror := (owner + 1) % k
		if mirror == 0 {
			mirror = (owner + 2) % k
		}
		// Without resume_after: live from now, nothing replayed.
		hello := fmt.Sprintf(`{"type":"hello","session":%q,"user":%s}`, rd.Data.Session, user)
		f, _, err := dialHello(ctx, url(mirror), []byte(hello))
		if err != nil {
			return err
		}
		defer f.Close()
		fs[i] = follower{conn: f, victim: owner == 0}
	}

	// A renewal (every third of the lease) has passed, and the kill falls
	// anywhere in the next period.
	wait := lease/3 + time.Duration(rand.Int64N(int64(lease/3)))
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		return ctx.Err()
	}
	victim := gws[0]
	t0 := time.Now()
	_ = victim.cmd.Process.Signal(syscall.SIGKILL)
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for i, f := range fs {
		wg.Go(func() {
			_, err := turn(f.conn, 1000+i, nil)
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case f.victim:
				t.victim = append(t.victim, took)
			default:
				t.others = append(t.others, took)
			}
		})
	}
	wg.Wait()
	victim.once.Do(func() { _ = victim.cmd.Wait() })
	t.errors += len(errs)
	if len(errs) == len(fs) {
		return errors.Join(errs...)
	}
	return nil
}

func (r *report) replicasSection(p func(string, ...any)) {
	if len(r.replicas) == 0 && len(r.takeovers) == 0 {
		return
	}
	p("## Replicas\n\n")
	if len(r.replicas) > 0 {
		p("The gateway as replicas sharing one PostgreSQL %s server (`storage.dsn: postgres://…`), which the bench starts on this machine "+
			"with the durability a production server has (fsync, `synchronous_commit` and `full_page_writes` on), on a Unix socket. "+
			"Each replica is its own process on its own port; connection i goes to replica i mod k and opens its session there, so the "+
			"replica a client talks to runs its conversation (no input crosses replicas). The model, the client and the measured time "+
			"are those of the first table. Everything shares the machine's %d cores: three replicas have no more CPU than one, so these "+
			"rows show what running on PostgreSQL and sharing it costs, not how far replicas scale on machines of their own.\n\n",
			r.pgVersion, runtime.NumCPU())
		p("| replicas | sessions | turns/s | p50 | p99 | CPU s / 1k turns, gateways | CPU s / 1k turns, PostgreSQL | errors |\n")
		p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, x := range r.replicas {
			p("| %d | %d | %.0f | %v | %v | %.2f | %.2f | %d |\n", x.replicas, x.sessions, x.turnsPerSec(),
				round(percentile(x.latencies, 50)), round(percentile(x.latencies, 99)), x.gwCPU, x.pgCPU, x.errors)
		}
		p("\n")
		var sqlite []string
		for _, x := range r.replicas {
			for _, g := range r.rows {
				if g.target == "gateway" && g.sessions == x.sessions && x.replicas == r.replicas[0].replicas {
					sqlite = append(sqlite, fmt.Sprintf("%.0f turns/s at %d sessions", g.turnsPerSec(), g.sessions))
				}
			}
		}
		if len(sqlite) > 0 {
			p("One gateway on SQLite (the first table): %s.\n\n", strings.Join(sqlite, ", "))
		}
	}
	if len(r.takeovers) > 0 {
		t := r.takeovers[0]
		p("**A replica's death.** %d replicas share %d conversations, each opened and answered once on replica i mod %d, which runs it, "+
			"and followed by a client on another replica. Once the leases have been renewed, at a moment chosen at random within a renewal "+
			"period, the first replica is killed (SIGKILL) and at once every client sends a message: timed from the kill to the assistant's "+
			"answer; %d rounds, each on fresh replicas. Nobody tells the others the replica died: they take a conversation over once its lease "+
			"has run out unrenewed (it was renewed every third of `storage.lease`, so between two thirds of the lease and the whole lease "+
			"after the kill), looking for conversations with work left every quarter of it: expected between 2/3 and 5/4 of the lease. "+
			"The others' conversations, whose messages cross replicas through the database as the killed one's do, show what is not waiting.\n\n",
			t.replicas, (len(t.victim)+len(t.others)+t.errors)/max(t.rounds, 1), t.replicas, t.rounds)
		p("| `storage.lease` | the killed replica's conversations | answered again after: min | median | max | expected | the others' conversations: median | errors |\n")
		p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, x := range r.takeovers {
			p("| %v | %d | %v | %v | %v | %v – %v | %v | %d |\n", x.lease, len(x.victim), roundMs(percentile(x.victim, 0)),
				roundMs(percentile(x.victim, 50)), roundMs(percentile(x.victim, 100)), roundMs(2*x.lease/3), roundMs(5*x.lease/4),
				round(percentile(x.others, 50)), x.errors)
		}
		p("\n")
	}
}

func roundMs(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
