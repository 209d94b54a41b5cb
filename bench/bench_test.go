package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The bench starts its servers by running its own binary as "bench llm",
// "bench echo …" or "bench relay …"; under go test that binary is the test
// binary, so it must serve too.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "llm", "llm-tools", "echo", "relay":
			if err := run(context.Background(), os.Args[1:]); err != nil {
				log("%v", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// TestReportRuns is make bench in miniature: a real gateway, the floors,
// replicas on PostgreSQL and one killed, Slack threads against the fake
// Slack, Discord threads against the fake Discord, idle connections, the
// context build and compaction on a tiny load, and a report with every
// section and no errors.
// It asserts what was measured, never how fast: that is for people. The
// gateway is built without -race (the packages' own tests race it) and
// through go run's executable cache, so after the first run it costs a
// copy, not a link.
func TestReportRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	dir := t.TempDir()
	gateway := buildGateway(t, dir)
	settle, loads, every := idleSettle, contextLoads, discordApprovalEvery
	// Every other Discord turn an approval, so the short run clicks.
	idleSettle, contextLoads, discordApprovalEvery = 100*time.Millisecond, 20, 2
	t.Cleanup(func() { idleSettle, contextLoads, discordApprovalEvery = settle, loads, every })
	out := filepath.Join(dir, "benchmarks.md")
	err := run(t.Context(), []string{
		"--gateway", gateway, "--levels", "1,2", "--warmup", "50ms", "--duration", "200ms",
		"--idle", "5", "--context", "50,500", "--vectors", "2000", "--vector-dims", "64,128", "--slack-levels", "1,2", "--discord-levels", "1,2",
		"--compaction", "200,16384", "--compaction-turns", "30", "--files", "2", "--procs", "2", "--stream", "2", "--stream-tokens", "30", "--stream-pace", "10ms",
		"--replica-counts", "1,3", "--replica-levels", "3", "--takeover", "3", "--takeover-leases", "1s", "--takeover-rounds", "1", "--tracing-levels", "2", "--out", out,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)

	// | target | sessions | turns/s | p50 | p99 | CPU | RSS | frames / turn | errors |
	rows := regexp.MustCompile(`(?m)^\| (gateway|thin relay \(floor\)|bare WebSocket \(floor\)) \| (\d+) \| (\d+) \|.*\| ([\d.]+) \| (\d+) \|$`).
		FindAllStringSubmatch(report, -1)
	if len(rows) != 6 {
		t.Fatalf("%d result rows, want 3 targets × 2 levels:\n%s", len(rows), report)
	}
	for _, r := range rows {
		turns, _ := strconv.Atoi(r[3])
		frames, _ := strconv.ParseFloat(r[4], 64)
		if turns == 0 || frames < 3 || r[5] != "0" {
			t.Errorf("%s at %s sessions: %s turns/s, %s frames a turn, %s errors", r[1], r[2], r[3], r[4], r[5])
		}
	}

	// | threads | turns/s | p50 | p99 | first text p50 | first text p99 | calls / turn | new conns / call | ack p99 | ack max | CPU | errors |
	// The tracing rows: off exports nothing, traced runs export a turn's
	// two spans (an invoke_agent and a chat) or more (the warm-up's).
	_, tracing, _ := strings.Cut(report, "## Tracing\n")
	tracing, _, _ = strings.Cut(tracing, "\n## ")
	traceRows := regexp.MustCompile(`(?m)^\| (off|traced, exported|traced, exported, trace log) \| 2 \| (\d+) \|(?: [^|]+ \|){4} ([\d.]+) \| [^|]+ \|$`).
		FindAllStringSubmatch(tracing, -1)
	if len(traceRows) != 3 {
		t.Fatalf("%d tracing rows, want off, traced, traced with the log:\n%s", len(traceRows), tracing)
	}
	for _, r := range traceRows {
		spans, _ := strconv.ParseFloat(r[3], 64)
		if turns, _ := strconv.Atoi(r[2]); turns == 0 || (r[1] == "off") != (spans == 0) || r[1] != "off" && spans < 2 {
			t.Errorf("tracing %s: %s turns/s, %s spans a turn", r[1], r[2], r[3])
		}
	}

	_, slack, _ := strings.Cut(report, "## Slack\n")
	slack, _, _ = strings.Cut(slack, "\n## ")
	slackRows := regexp.MustCompile(`(?m)^\| (\d+) \| (\d+) \|(?: [^|]+ \|){4} ([\d.]+) \|(?: [^|]+ \|){4} (\d+) \|$`).
		FindAllStringSubmatch(slack, -1)
	if len(slackRows) != 2 {
		t.Fatalf("%d Slack rows, want 2 levels:\n%s", len(slackRows), report)
	}
	for _, r := range slackRows {
		turns, _ := strconv.Atoi(r[2])
		calls, _ := strconv.ParseFloat(r[3], 64)
		if turns == 0 || calls == 0 || r[4] != "0" {
			t.Errorf("Slack at %s threads: %s turns/s, %s Web API calls a turn, %s errors", r[1], r[2], r[3], r[4])
		}
	}
	// | threads | turns/s | p50 | p99 | first text p50 | first text p99 | calls / plain turn | calls / approval turn | new conns / call | clicks | ack p99 | ack max | CPU | errors |
	_, discord, _ := strings.Cut(report, "## Discord\n")
	discord, _, _ = strings.Cut(discord, "\n## ")
	discordRows := regexp.MustCompile(`(?m)^\| (\d+) \| (\d+) \|(?: [^|]+ \|){4} ([\d.]+) \|(?: [^|]+ \|){2} (\d+) \|(?: [^|]+ \|){3} (\d+) \|$`).
		FindAllStringSubmatch(discord, -1)
	if len(discordRows) != 2 {
		t.Fatalf("%d Discord rows, want 2 levels:\n%s", len(discordRows), report)
	}
	clicks := 0
	for _, r := range discordRows {
		turns, _ := strconv.Atoi(r[2])
		calls, _ := strconv.ParseFloat(r[3], 64)
		n, _ := strconv.Atoi(r[4])
		clicks += n
		if turns == 0 || calls == 0 || r[5] != "0" {
			t.Errorf("Discord at %s threads: %s turns/s, %s REST calls a plain turn, %s errors", r[1], r[2], r[3], r[5])
		}
	}
	// How many approvals a short run reaches depends on the machine's
	// speed: logged, not asserted.
	t.Logf("Approve clicked %d times in the Discord runs", clicks)
	// | replicas | sessions | turns/s | p50 | p99 | CPU, gateways | CPU, PostgreSQL | errors |
	_, replicas, _ := strings.Cut(report, "## Replicas\n")
	replicas, _, _ = strings.Cut(replicas, "\n## ")
	replicaRows := regexp.MustCompile(`(?m)^\| (\d) \| 3 \| (\d+) \|(?: [^|]+ \|){4} (\d+) \|$`).FindAllStringSubmatch(replicas, -1)
	if len(replicaRows) != 2 {
		t.Fatalf("%d replica rows, want 1 and 3 replicas:\n%s", len(replicaRows), report)
	}
	for _, r := range replicaRows {
		if turns, _ := strconv.Atoi(r[2]); turns == 0 || r[3] != "0" {
			t.Errorf("%s replicas: %s turns/s, %s errors", r[1], r[2], r[3])
		}
	}
	// | lease | the killed replica's conversations | min | median | max | expected | the others' median | errors |
	if !regexp.MustCompile(`(?m)^\| 1s \| 1 \|(?: [^|]+ \|){5} 0 \|$`).MatchString(replicas) {
		t.Errorf("no takeover row with a 1s lease, the killed replica's one conversation answered and no error:\n%s", replicas)
	}
	// | message size | turns | summaries / 100 turns | summaries' share of tokens | tokens / turn | refused as too long |
	_, compaction, _ := strings.Cut(report, "## Compaction\n")
	compactionRows := regexp.MustCompile(`(?m)^\| (200 B|16 KiB) \| 30 \| ([\d.]+) \| ([\d.]+) % \| (\d+) \| (\d+) \|$`).
		FindAllStringSubmatch(compaction, -1)
	if len(compactionRows) != 2 {
		t.Fatalf("%d compaction rows, want 2 message sizes:\n%s", len(compactionRows), report)
	}
	for _, r := range compactionRows {
		per100, _ := strconv.ParseFloat(r[2], 64)
		share, _ := strconv.ParseFloat(r[3], 64)
		// A summary is due after ten turns of 200 B (the window of 20),
		// every few of 16 KiB (the budget); the request that fits the
		// budget is never refused, but the first while the estimate learns.
		if per100 == 0 || share == 0 || share >= 100 || r[5] != "0" && r[5] != "1" {
			t.Errorf("compaction with %s messages: %s summaries per 100 turns, %s %% of tokens, %s refused", r[1], r[2], r[3], r[5])
		}
	}
	for _, want := range []string{
		"Gateway turns/s as a share of the thin relay's (sessions):",
		"Web API calls per turn by method, at 1 thread: `chat.",
		"REST calls per plain turn by route, at 1 thread: `",
		"5 WebSocket connections, each its own session",
		"Median and p99 of 20 loads.",
		"| 50 | ", "| 500 | ",
		"## Semantic recall", "| 2000 | 64 | ", "| 2000 | 128 | ",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
}

// buildGateway puts a gateway binary in dir. "go run -exec cp" has the go
// command link it (or take it from its cache of go run executables, Go
// 1.24+) and hand it to cp, which copies it out: a plain go build would
// link the 100 MB binary again on every run.
func buildGateway(t *testing.T, dir string) string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	cp, err := exec.LookPath("cp")
	if err != nil {
		t.Skip("no cp to copy the gateway binary with")
	}
	bin := filepath.Join(dir, "gateway")
	cmd := exec.CommandContext(t.Context(), goTool, "run", "-exec", cp, "../cmd/gateway", bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the gateway: %v\n%s", err, out)
	}
	return bin
}
