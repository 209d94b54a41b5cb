package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// The cores rows: how turns/s grow with the cores the gateway may use.
// The gateway and the thin relay each run with GOMAXPROCS = 1, 2, 4, …
// up to the machine's cores, at one number of sessions; the load
// generator and the model keep every core. From the speedup S(n) of n
// cores over one, the Karp–Flatt metric e = (1/S − 1/n) / (1 − 1/n) is
// the serial fraction the curve implies: 0 for a program that scales
// perfectly, 1 for one that uses one core whatever it is given.

// procsRow is one program at one core count.
type procsRow struct {
	name  string
	procs int
	row   row
}

// coreCounts are 1, 2, 4, … up to the machine's cores, and the machine's
// cores themselves.
func coreCounts() []int {
	n := runtime.NumCPU()
	var out []int
	for c := 1; c < n; c *= 2 {
		out = append(out, c)
	}
	return append(out, n)
}

// measureProcs runs the gateway and the relay at each core count.
func measureProcs(ctx context.Context, bin, dir, llmURL string, sessions int, warmup, d time.Duration) ([]procsRow, error) {
	var out []procsRow
	for _, procs := range coreCounts() {
		env := []string{fmt.Sprintf("GOMAXPROCS=%d", procs)}
		gw, err := startGatewayEnv(ctx, bin, dir, llmURL, env)
		if err != nil {
			return nil, err
		}
		r, err := measure(ctx, "gateway", gw, sessions, warmup, d)
		gw.stop()
		if err != nil {
			return nil, fmt.Errorf("gateway, GOMAXPROCS=%d: %w", procs, err)
		}
		out = append(out, procsRow{"gateway", procs, r})
		relay, err := startChildEnv(ctx, env, "relay", llmURL)
		if err != nil {
			return nil, err
		}
		r, err = measure(ctx, "thin relay (floor)", relay, sessions, warmup, d)
		relay.stop()
		if err != nil {
			return nil, fmt.Errorf("relay, GOMAXPROCS=%d: %w", procs, err)
		}
		out = append(out, procsRow{"thin relay (floor)", procs, r})
	}
	return out, nil
}

// startChildEnv is startChild with env added to the child's environment.
func startChildEnv(ctx context.Context, env []string, args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return startCommand(exec.CommandContext(ctx, self, args...), env)
}

// karpFlatt is the serial fraction a speedup s on n cores implies.
func karpFlatt(s float64, n int) float64 {
	if n <= 1 || s <= 0 {
		return 0
	}
	return (1/s - 1/float64(n)) / (1 - 1/float64(n))
}

func (r *report) procsSection(p func(string, ...any)) {
	if len(r.procs) == 0 {
		return
	}
	sessions := r.procs[0].row.sessions
	p("## Cores\n\n")
	p("Turns/s at %d sessions with the program limited to n cores (`GOMAXPROCS`), the load generator and the model keeping every core "+
		"(%d on this machine). Speedup is over one core; the serial fraction is the Karp–Flatt metric (1/S − 1/n) / (1 − 1/n): "+
		"what share of the work the curve says runs one core at a time (0: it scales perfectly).\n\n", sessions, runtime.NumCPU())
	p("| program | cores | turns/s | speedup | serial fraction | share of the relay |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: |\n")
	base := map[string]float64{}
	relayAt := map[int]float64{}
	for _, x := range r.procs {
		if x.procs == 1 {
			base[x.name] = x.row.turnsPerSec()
		}
		if strings.HasPrefix(x.name, "thin relay") {
			relayAt[x.procs] = x.row.turnsPerSec()
		}
	}
	for _, x := range r.procs {
		tps := x.row.turnsPerSec()
		s := tps / max(base[x.name], 1e-9)
		share := "—"
		if !strings.HasPrefix(x.name, "thin relay") && relayAt[x.procs] > 0 {
			share = fmt.Sprintf("%.0f %%", 100*tps/relayAt[x.procs])
		}
		serial := "—"
		if x.procs > 1 {
			serial = fmt.Sprintf("%.2f", karpFlatt(s, x.procs))
		}
		p("| %s | %d | %.0f | %.2f | %s | %s |\n", x.name, x.procs, tps, s, serial, share)
	}
	p("\n")
}
