package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The bench starts its servers by running its own binary as "bench llm",
// "bench echo …" or "bench relay …"; under go test that binary is the test
// binary, so it must serve too.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "llm", "echo", "relay":
			if err := run(context.Background(), os.Args[1:]); err != nil {
				log("%v", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// TestReportRuns is make bench in miniature: a real gateway (built with
// -race, which also checks it under load), the floors, idle connections
// and the context build, and a report with every section and no errors.
// It asserts what was measured, never how fast: that is for people.
func TestReportRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	dir := t.TempDir()
	gateway := filepath.Join(dir, "gateway")
	build := exec.CommandContext(t.Context(), "go", "build", "-race", "-o", gateway, "../cmd/gateway")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the gateway: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "benchmarks.md")
	err := run(t.Context(), []string{
		"--gateway", gateway, "--levels", "1,3", "--warmup", "100ms", "--duration", "300ms",
		"--idle", "20", "--context", "100,2000", "--out", out,
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
	for _, want := range []string{
		"Gateway turns/s as a share of the thin relay's (sessions):",
		"20 WebSocket connections, each its own session",
		"| 100 | ", "| 2000 | ",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
}
