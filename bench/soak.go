package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The soak: many clients open a session each, chat a few turns, close,
// and open another, for minutes, against a gateway with the default
// session settings. What must hold is that the gateway's memory and
// goroutines level off once sessions start being unloaded, instead of
// growing with every session it has seen.

type soakSample struct {
	at         time.Duration
	rssKiB     int64
	goroutines int
	sessions   int // live sessions (switchboard_sessions_live)
	turns      int64
}

// runSoak drives the gateway for d with n concurrent clients, sampling it
// every interval.
func runSoak(ctx context.Context, gw *child, metricsURL string, n, turnsPerSession int, d, interval time.Duration) ([]soakSample, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var turns, failures atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := dialSession(ctx, "ws://"+gw.addr+"/ws")
				if err != nil {
					if ctx.Err() == nil {
						failures.Add(1)
						time.Sleep(100 * time.Millisecond)
					}
					continue
				}
				for t := 0; t < turnsPerSession && ctx.Err() == nil; t++ {
					if _, err := turn(c, i*1_000_000+t, nil); err != nil {
						if ctx.Err() == nil {
							failures.Add(1)
						}
						break
					}
					turns.Add(1)
				}
				c.Close()
			}
		})
	}
	var samples []soakSample
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-tick.C:
		case <-ctx.Done():
			done = true
		}
		s := soakSample{at: time.Since(start).Round(time.Second), turns: turns.Load()}
		s.rssKiB, _ = memKiB(gw.pid(), "VmRSS")
		m, err := scrape(metricsURL)
		if err == nil {
			s.goroutines, s.sessions = int(m["go_goroutines"]), int(m["switchboard_sessions_live"])
		}
		samples = append(samples, s)
	}
	wg.Wait()
	return samples, failures.Load(), nil
}

// scrape reads the unlabelled gauges of a Prometheus text page.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// soakReport is the Markdown table of the samples, and whether memory and
// goroutines leveled off: the last third of the run may not average more
// than 20 % above the middle third.
func soakReport(samples []soakSample, n, turnsPerSession int, d time.Duration, failures int64) (string, bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "## Soak\n\n%d clients, each opening a session, chatting %d turns, closing it and opening the next, for %v, against a gateway with the default session settings (failed connections or turns: %d).\n\n",
		n, turnsPerSession, d, failures)
	b.WriteString("| time | turns | live sessions | goroutines | RSS |\n| ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "| %v | %d | %d | %d | %d MiB |\n", s.at, s.turns, s.sessions, s.goroutines, s.rssKiB>>10)
	}
	third := len(samples) / 3
	if third == 0 {
		return b.String(), false
	}
	avg := func(xs []soakSample, f func(soakSample) float64) float64 {
		sum := 0.0
		for _, x := range xs {
			sum += f(x)
		}
		return sum / float64(len(xs))
	}
	mid, last := samples[third:2*third], samples[2*third:]
	rss := func(s soakSample) float64 { return float64(s.rssKiB) }
	gor := func(s soakSample) float64 { return float64(s.goroutines) }
	flat := avg(last, rss) <= 1.2*avg(mid, rss) && avg(last, gor) <= 1.2*avg(mid, gor)
	verdict := "flat"
	if !flat {
		verdict = "still growing"
	}
	fmt.Fprintf(&b, "\nMiddle third vs last third: RSS %.0f → %.0f MiB, goroutines %.0f → %.0f: **%s**.\n",
		avg(mid, rss)/1024, avg(last, rss)/1024, avg(mid, gor), avg(last, gor), verdict)
	return b.String(), flat
}
