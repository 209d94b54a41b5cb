// Command bench is `make bench`: it measures the gateway over WebSocket
// against a scripted model, next to two floors driven by the same client —
// a bare gorilla/websocket server sending the same frames, and a thin relay
// that streams the same model with no sessions or storage — then turns
// through the Slack listener against the fake Slack (slack.go) and through
// the Discord listener against the fake Discord (discord.go), the memory
// of idle connections and the cost of building a turn's context, and
// writes docs/benchmarks.md.
//
// Every server runs as its own process on loopback (bench llm|echo|relay
// are the floors and the model, bench llm-tools the model of the Discord
// rows; the gateway is bin/gateway; the fake Slack and the fake Discord
// run in the bench process), so CPU and memory are read per process from
// /proc. The numbers are for people to read: no test asserts one.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "llm":
			return serveChild(ctx, llmHandler())
		case "llm-tools":
			return serveChild(ctx, toolLLMHandler())
		case "echo":
			sizes, err := parseInts(args[1])
			if err != nil {
				return err
			}
			return serveChild(ctx, echoHandler(sizes))
		case "relay":
			return serveChild(ctx, relayHandler(args[1]))
		}
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	gateway := fs.String("gateway", "bin/gateway", "the gateway binary")
	out := fs.String("out", "docs/benchmarks.md", "where to write the report ('' for stdout only)")
	levels := fs.String("levels", "1,100,1000", "concurrent sessions per run")
	duration := fs.Duration("duration", 5*time.Second, "measured time per run")
	warmup := fs.Duration("warmup", time.Second, "unmeasured time before each run")
	idle := fs.Int("idle", 10000, "idle connections for the memory measurement (0 to skip)")
	contextSizes := fs.String("context", "10000,1000000", "stored messages for the context-build measurement ('' to skip)")
	compactionSizes := fs.String("compaction", "200,2048,16384", "message sizes in bytes for the compaction measurement ('' to skip)")
	compactionTurns := fs.Int("compaction-turns", 300, "turns of each compaction conversation")
	fileRuns := fs.Int("files", 20, "runs of each picture sent with a message (0 to skip)")
	streamSessions := fs.Int("stream", 10, "sessions of the streaming measurement, each sent a reply token by token (0 to skip)")
	streamTokens := fs.Int("stream-tokens", 500, "tokens of each streamed reply")
	streamPace := fs.Duration("stream-pace", 20*time.Millisecond, "time between two of its tokens")
	streamIntervals := fs.String("stream-intervals", "0,200ms", "the sessions.delta_interval values measured")
	replicasOn := fs.Bool("replicas", true, "measure the gateway as replicas on one PostgreSQL server the bench starts (internal/pgtest: PostgreSQL 15 or later installed)")
	replicaCounts := fs.String("replica-counts", "1,3", "numbers of replicas measured")
	replicaLevels := fs.String("replica-levels", "100,1000", "concurrent sessions, spread round-robin over the replicas")
	takeover := fs.Int("takeover", 30, "conversations followed across a replica's kill, a third of them on the replica killed (0 to skip)")
	takeoverLeases := fs.String("takeover-leases", "10s,2s", "the storage.lease values of the takeover measurement")
	takeoverRounds := fs.Int("takeover-rounds", 4, "kills of the takeover measurement for each lease, each on fresh replicas")
	procsSessions := fs.Int("procs", 100, "sessions of the cores measurement, the gateway and the relay at GOMAXPROCS 1, 2, 4, … up to the machine's cores (0 to skip)")
	vectors := fs.Int("vectors", 100_000, "vectors a semantic recall search scans (0 to skip)")
	vectorDims := fs.String("vector-dims", "768,1536,3072", "their lengths, each measured")
	profiles := fs.String("cpuprofile", "", "directory for a CPU profile of each gateway run, gateway-<sessions>.prof, and the heap with the idle connections open, idle.heap ('' for none)")
	soak := fs.Duration("soak", 0, "instead of the benchmarks: a soak of this long (sessions opened, used and closed), reporting memory and goroutines over time")
	soakClients := fs.Int("soak-clients", 300, "concurrent clients in the soak")
	soakTurns := fs.Int("soak-turns", 5, "turns per session in the soak")
	slackOn := fs.Bool("slack", true, "measure the Slack listener against the fake Slack (listeners/slack/slacktest)")
	slackLevels := fs.String("slack-levels", "1,100", "concurrent Slack threads per run")
	discordOn := fs.Bool("discord", true, "measure the Discord listener against the fake Discord (listeners/discord/discordtest)")
	discordLevels := fs.String("discord-levels", "1,100", "concurrent Discord threads per run")
	tracingLevels := fs.String("tracing-levels", "1,100", "concurrent sessions of the tracing measurement, each run with tracing off, on, and on with the trace log ('' to skip)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lv, err := parseInts(*levels)
	if err != nil {
		return fmt.Errorf("--levels: %w", err)
	}
	slv, err := parseInts(*slackLevels)
	if err != nil {
		return fmt.Errorf("--slack-levels: %w", err)
	}
	dlv, err := parseInts(*discordLevels)
	if err != nil {
		return fmt.Errorf("--discord-levels: %w", err)
	}
	raiseFileLimit()
	dir, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	rep := report{machine: machine(), date: time.Now().UTC(), duration: *duration, commit: gitCommit()}

	llm, err := startChild(ctx, "llm")
	if err != nil {
		return fmt.Errorf("llm server: %w", err)
	}
	defer llm.stop()
	llmURL := "http://" + llm.addr

	if *soak > 0 {
		return runSoakReport(ctx, *gateway, dir, llmURL, *out, *soakClients, *soakTurns, *soak)
	}

	// Calibrate the echo floor on what the gateway sends per turn.
	sizes, err := calibrate(ctx, *gateway, dir, llmURL)
	if err != nil {
		return fmt.Errorf("calibrating against the gateway: %w", err)
	}
	rep.framesPerTurn = len(sizes)
	log("a gateway turn is %d frames (%v bytes)", len(sizes), sizes)
	echo, err := startChild(ctx, "echo", joinInts(sizes))
	if err != nil {
		return fmt.Errorf("echo server: %w", err)
	}
	defer echo.stop()
	relay, err := startChild(ctx, "relay", llmURL)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	defer relay.stop()

	for _, n := range lv {
		var args []string
		if *profiles != "" {
			args = []string{"--cpuprofile", filepath.Join(*profiles, fmt.Sprintf("gateway-%d.prof", n))}
		}
		gw, err := startGateway(ctx, *gateway, dir, llmURL, args...)
		if err != nil {
			return err
		}
		for _, t := range []struct {
			name string
			p    *child
		}{{"gateway", gw}, {"thin relay (floor)", relay}, {"bare WebSocket (floor)", echo}} {
			row, err := measure(ctx, t.name, t.p, n, *warmup, *duration)
			if err != nil {
				gw.stop()
				return fmt.Errorf("%s at %d sessions: %w", t.name, n, err)
			}
			log("%-24s %5d sessions: %8.0f turns/s  p50 %-9v p99 %-9v CPU %.2fs/1k turns  peak RSS %d MiB  %.1f frames/turn  errors %d",
				t.name, n, row.turnsPerSec(), row.p50(), row.p99(), row.cpuPer1k, row.peakKiB>>10, row.framesPerTurn(), row.errors)
			rep.rows = append(rep.rows, row)
		}
		gw.stop()
	}

	if *procsSessions > 0 {
		rep.procs, err = measureProcs(ctx, *gateway, dir, llmURL, *procsSessions, *warmup, *duration)
		if err != nil {
			return fmt.Errorf("cores: %w", err)
		}
		for _, x := range rep.procs {
			log("%-24s GOMAXPROCS=%d: %8.0f turns/s", x.name, x.procs, x.row.turnsPerSec())
		}
	}

	if *tracingLevels != "" {
		tl, err := parseInts(*tracingLevels)
		if err != nil {
			return fmt.Errorf("--tracing-levels: %w", err)
		}
		if rep.tracing, err = measureTracing(ctx, *gateway, dir, llmURL, tl, *warmup, *duration); err != nil {
			return fmt.Errorf("tracing: %w", err)
		}
		for _, x := range rep.tracing {
			log("tracing %-28s %5d sessions: %8.0f turns/s  p50 %-9v p99 %-9v CPU %.2fs/1k turns  %.1f spans/turn",
				x.mode, x.row.sessions, x.row.turnsPerSec(), x.row.p50(), x.row.p99(), x.row.cpuPer1k, x.spansPerTurn())
		}
	}

	if *replicasOn {
		counts, err := parseInts(*replicaCounts)
		if err != nil {
			return fmt.Errorf("--replica-counts: %w", err)
		}
		levels, err := parseInts(*replicaLevels)
		if err != nil {
			return fmt.Errorf("--replica-levels: %w", err)
		}
		leases, err := parseDurations(*takeoverLeases)
		if err != nil {
			return fmt.Errorf("--takeover-leases: %w", err)
		}
		rep.replicas, rep.takeovers, rep.pgVersion, err = measureReplicas(ctx, *gateway, dir, llmURL, counts, levels, *warmup, *duration, *takeover, max(*takeoverRounds, 1), leases)
		if err != nil {
			return fmt.Errorf("replicas: %w", err)
		}
	}

	if !*slackOn {
		slv = nil
	}
	for _, n := range slv {
		row, err := measureSlack(ctx, *gateway, dir, llmURL, n, *warmup, *duration)
		if err != nil {
			return fmt.Errorf("slack at %d threads: %w", n, err)
		}
		log("slack %5d threads: %8.0f turns/s  p50 %-9v p99 %-9v first text p50 %-9v  %.2f Web API calls/turn  ack p99 %v max %v  CPU %.2fs/1k turns  %d new conns  errors %d",
			n, row.turnsPerSec(), round(percentile(row.latencies, 50)), round(percentile(row.latencies, 99)), round(percentile(row.firstText, 50)),
			row.callsPerTurn(), round(percentile(row.acks, 99)), round(percentile(row.acks, 100)), row.cpuPer1k, row.conns, row.errors())
		rep.slack = append(rep.slack, row)
	}

	if !*discordOn {
		dlv = nil
	}
	for _, n := range dlv {
		row, err := measureDiscord(ctx, *gateway, dir, n, *warmup, *duration)
		if err != nil {
			return fmt.Errorf("discord at %d threads: %w", n, err)
		}
		log("discord %5d threads: %8.0f turns/s  p50 %-9v p99 %-9v first text p50 %-9v  %.2f REST calls/plain turn  %.2f/approval turn  %d clicks  ack p99 %v max %v  CPU %.2fs/1k turns  %.2f new conns/call  errors %d",
			n, row.turnsPerSec(), round(percentile(row.latencies, 50)), round(percentile(row.latencies, 99)), round(percentile(row.firstText, 50)),
			row.callsPerTurn(), row.callsPerApproval(), len(row.acks)+row.unacked, round(percentile(row.acks, 99)), round(percentile(row.acks, 100)),
			row.cpuPer1k, row.connsPerCall(), row.errors())
		rep.discord = append(rep.discord, row)
	}

	if *idle > 0 {
		var args []string
		if *profiles != "" {
			// The heap with every idle connection open: the gateway writes
			// it when told to stop, which measureIdle does before closing them.
			args = []string{"--memprofile", filepath.Join(*profiles, "idle.heap")}
		}
		gw, err := startGateway(ctx, *gateway, dir, llmURL, args...)
		if err != nil {
			return err
		}
		rep.idle, err = measureIdle(ctx, gw, *idle, *profiles != "")
		gw.stop()
		if err != nil {
			return fmt.Errorf("idle connections: %w", err)
		}
		log("idle: %d connections, %.1f KiB each", rep.idle.conns, rep.idle.perConnKiB())
	}
	if *contextSizes != "" {
		cs, err := parseInts(*contextSizes)
		if err != nil {
			return fmt.Errorf("--context: %w", err)
		}
		rep.context, err = measureContextBuild(ctx, dir, cs, contextLoads)
		if err != nil {
			return fmt.Errorf("context build: %w", err)
		}
		for _, c := range rep.context {
			log("context build with %d stored messages: median %v, p99 %v; recall median %v, p99 %v", c.messages, c.median, c.p99, c.recallMedian, c.recallP99)
		}
	}

	if *compactionSizes != "" {
		cs, err := parseInts(*compactionSizes)
		if err != nil {
			return fmt.Errorf("--compaction: %w", err)
		}
		rep.compaction, err = measureCompaction(ctx, *gateway, dir, cs, *compactionTurns)
		if err != nil {
			return fmt.Errorf("compaction: %w", err)
		}
		for _, c := range rep.compaction {
			log("compaction with %d-byte messages: %d turns in %v, %.1f summaries per 100 turns, %.1f %% of tokens, %.0f tokens a turn, %d refused",
				c.messageBytes, c.turns, c.elapsed.Round(time.Millisecond), c.summariesPer100(), c.summaryShare(), c.tokensPerTurn(), c.refused)
		}
	}
	if *streamSessions > 0 {
		ivs, err := parseDurations(*streamIntervals)
		if err != nil {
			return fmt.Errorf("--stream-intervals: %w", err)
		}
		if rep.stream, err = measureStream(ctx, *gateway, dir, *streamSessions, *streamTokens, *streamPace, ivs); err != nil {
			return fmt.Errorf("streaming: %w", err)
		}
		for _, x := range rep.stream {
			log("streaming %d tokens %v apart, delta_interval %v: %.0f deltas stored per reply, %.0f bytes (%.0f of text)", x.tokens, x.pace, x.interval, x.deltas, x.deltaBytes, x.replyBytes)
		}
	}
	if *fileRuns > 0 {
		if rep.files, err = measureFiles(ctx, *gateway, dir, *fileRuns); err != nil {
			return fmt.Errorf("files: %w", err)
		}
		for _, f := range rep.files {
			u50, _ := quantiles(f.upload)
			m50, _ := quantiles(f.toLLM)
			log("a %d-byte picture (%s): upload median %v, input to model request median %v", f.bytes, f.name, u50, m50)
		}
	}
	if *vectors > 0 {
		dims, err := parseInts(*vectorDims)
		if err != nil {
			return fmt.Errorf("--vector-dims: %w", err)
		}
		if rep.vectors, err = measureVectors(ctx, dir, *vectors, dims); err != nil {
			return fmt.Errorf("semantic recall: %w", err)
		}
		for _, v := range rep.vectors {
			log("semantic recall over %d vectors of %d: median %v, p99 %v, %.0f MiB held; cold read of %d: median %v",
				v.vectors, v.dims, v.median, v.p99, v.heldMiB, v.coldVectors, v.coldMedian)
		}
	}

	md := rep.markdown()
	fmt.Print(md)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(md), 0o644); err != nil {
			return err
		}
		log("wrote %s", *out)
	}
	return nil
}

// runSoakReport runs the soak against a fresh gateway and writes its
// report to out; it fails if memory or goroutines kept growing.
func runSoakReport(ctx context.Context, bin, dir, llmURL, out string, clients, turns int, d time.Duration) error {
	gw, err := startGateway(ctx, bin, dir, llmURL)
	if err != nil {
		return err
	}
	defer gw.stop()
	log("soak: %d clients for %v", clients, d)
	samples, failures, err := runSoak(ctx, gw, "http://"+gw.metricsAddr+"/metrics", clients, turns, d, d/30)
	if err != nil {
		return err
	}
	md, flat := soakReport(samples, clients, turns, d, failures)
	md = fmt.Sprintf("# Soak\n\nWritten by `make soak` (`bench --soak`). Measured on %s at commit `%s`, on %s.\n\n%s",
		time.Now().UTC().Format("2006-01-02"), gitCommit(), machine(), strings.TrimPrefix(md, "## Soak\n\n"))
	fmt.Print(md)
	if out != "" {
		if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
			return err
		}
		log("wrote %s", out)
	}
	if !flat {
		return fmt.Errorf("soak: memory or goroutines kept growing")
	}
	return nil
}

// How long the idle measurement lets connections settle before reading
// the gateway's memory, and how many times the context build is timed per
// size. Fixed for the report; the smoke test shortens them.
var (
	idleSettle   = 2 * time.Second
	contextLoads = 200
)

func log(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// child is a server process.
type child struct {
	cmd  *exec.Cmd
	addr string
	// metricsAddr serves the gateway's /metrics.
	metricsAddr string
	once        sync.Once
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) stop() {
	c.once.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	})
}

// startChild runs this binary as one of the servers and reads its address.
func startChild(ctx context.Context, args ...string) (*child, error) {
	return startChildEnv(ctx, nil, args...)
}

// startCommand starts one of the servers with env added to its
// environment and reads its address.
func startCommand(cmd *exec.Cmd, env []string) (*child, error) {
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("reading its address: %w", err)
	}
	return &child{cmd: cmd, addr: strings.TrimSpace(line)}, nil
}

// benchGuide answers with text only: the turn measured is the streaming
// path, not tools.
const benchGuide = `---
name: bench
description: The benchmark's guide
temperature: 0
memory: { policy: sliding-window, window: 20 }
---
You are a benchmark.
`

// startGateway starts the gateway binary with a fresh store and waits
// until it answers /healthz.
func startGateway(ctx context.Context, bin, dir, llmURL string, args ...string) (*child, error) {
	return startGatewayEnv(ctx, bin, dir, llmURL, nil, args...)
}

// startGatewayEnv is startGateway with env added to the gateway's
// environment.
func startGatewayEnv(ctx context.Context, bin, dir, llmURL string, env []string, args ...string) (*child, error) {
	return startGatewayWith(ctx, bin, dir, llmURL, env, nil, args...)
}

// startGatewayWith is startGatewayEnv with storage, when not nil, giving
// the config's storage section for the run's directory (by default an
// SQLite file in it).
func startGatewayWith(ctx context.Context, bin, dir, llmURL string, env []string, storage func(run string) string, args ...string) (*child, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	run := filepath.Join(dir, "gw-"+strconv.Itoa(port))
	if err := os.MkdirAll(filepath.Join(run, "guides"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(run, "guides", "bench.md"), []byte(benchGuide), 0o644); err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	mport, err := freePort()
	if err != nil {
		return nil, err
	}
	maddr := "127.0.0.1:" + strconv.Itoa(mport)
	st := fmt.Sprintf(`{ dsn: %q }`, filepath.Join(run, "bench.db"))
	if storage != nil {
		st = storage(run)
	}
	cfg := fmt.Sprintf(`http: { addr: %q }
metrics: { addr: %q }
storage: %s
providers:
  - { name: main, kind: openai, base_url: %q, api_key: bench, model: bench-model }
guides: { dir: %q, default: bench }
listeners:
  # One client address opens every connection here: no per-address bounds.
  websocket: { enabled: true, max_conns_per_ip: -1, new_sessions_per_ip: -1 }
  stdin: { enabled: false }
log: { level: warn }
`, addr, maddr, st, llmURL+"/v1", filepath.Join(run, "guides"))
	cfgPath := filepath.Join(run, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--config", cfgPath}, args...)...)
	cmd.Stderr = os.Stderr
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	c := &child{cmd: cmd, addr: addr, metricsAddr: maddr}
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return c, nil
			}
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("the gateway did not answer /healthz on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func calibrate(ctx context.Context, bin, dir, llmURL string) ([]int, error) {
	gw, err := startGateway(ctx, bin, dir, llmURL)
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	c, err := dialSession(ctx, "ws://"+gw.addr+"/ws")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// The last of 50 turns, when the connection, the model client and
	// SQLite's cache are warm: the first turns are slower and their
	// replies come in more deltas.
	var sizes []int
	for i := range 50 {
		sizes = sizes[:0]
		if _, err := turn(c, i, &sizes); err != nil {
			return nil, err
		}
	}
	return sizes, nil
}

// row is one target at one level.
type row struct {
	loadResult
	target   string
	cpuPer1k float64 // CPU seconds per 1,000 turns
	peakKiB  int64
}

func (r row) p50() time.Duration { return percentile(r.latencies, 50).Round(10 * time.Microsecond) }
func (r row) p99() time.Duration { return percentile(r.latencies, 99).Round(10 * time.Microsecond) }

func measure(ctx context.Context, name string, p *child, n int, warmup, d time.Duration) (row, error) {
	var cpu0, cpu1 time.Duration
	var peak int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if kb, err := memKiB(p.pid(), "VmRSS"); err == nil {
				peak = max(peak, kb)
			}
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	}()
	res, err := runLoad(ctx, []string{"ws://" + p.addr + "/ws"}, n, warmup, d,
		func() { cpu0, _ = cpuTime(p.pid()) },
		func() { cpu1, _ = cpuTime(p.pid()) })
	close(stopSampling)
	<-sampled
	if err != nil {
		return row{}, err
	}
	r := row{loadResult: res, target: name, peakKiB: peak}
	if res.turns > 0 {
		r.cpuPer1k = (cpu1 - cpu0).Seconds() / float64(res.turns) * 1000
	}
	return r, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// raiseFileLimit lifts the soft open-files limit to the hard one; the
// servers started after inherit it. 10,000 idle connections need it.
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, errors.New("want a comma-separated list of positive numbers, not " + strconv.Quote(s))
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
