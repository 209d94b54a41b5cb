package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite"

	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// The streaming rows: what a reply streamed token by token costs the
// store. A scripted model in this process sends each reply as tokens
// tokens, pace apart, to sessions sessions at once; the gateway runs with
// sessions.delta_interval 0 (every token its own delta) and with its
// default. Counted in the gateway's database afterwards: the delta events
// stored per reply and their bytes, beside the reply's own length.

// streamResult is one delta_interval's run.
type streamResult struct {
	interval       time.Duration
	tokens, replys int
	pace           time.Duration
	deltas         float64 // stored delta events per reply
	deltaBytes     float64 // their data, per reply
	replyBytes     float64 // the reply's text
	elapsed        time.Duration
}

// measureStream runs the streaming rows, for each interval.
func measureStream(ctx context.Context, bin, dir string, sessions, tokens int, pace time.Duration, intervals []time.Duration) ([]streamResult, error) {
	var out []streamResult
	for _, iv := range intervals {
		r, err := streamRun(ctx, bin, dir, sessions, tokens, pace, iv)
		if err != nil {
			return nil, fmt.Errorf("delta_interval %v: %w", iv, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func streamRun(ctx context.Context, bin, dir string, sessions, tokens int, pace, interval time.Duration) (streamResult, error) {
	res := streamResult{interval: interval, tokens: tokens, replys: sessions, pace: pace}
	words := make([]string, tokens)
	for i := range words {
		words[i] = fmt.Sprintf("word%d ", i)
	}
	llm := openaitest.New()
	defer llm.Close()
	llm.Respond(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Text: words, Delay: pace} })
	gw, err := startGateway(ctx, bin, dir, strings.TrimSuffix(llm.BaseURL(), "/v1"), "--set", "sessions.delta_interval="+interval.String())
	if err != nil {
		return res, err
	}
	defer gw.stop()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Go(func() {
			c, err := dialSession(ctx, "ws://"+gw.addr+"/ws")
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			if err := sayTurn(c, i, "tell me a long story"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	res.elapsed = time.Since(start)
	gw.stop()
	_, port, _ := strings.Cut(gw.addr, ":")
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "gw-"+port, "bench.db")+"?mode=ro")
	if err != nil {
		return res, err
	}
	defer db.Close()
	var n, bytes int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM events WHERE type = 'delta'`).Scan(&n, &bytes); err != nil {
		return res, fmt.Errorf("counting the stored deltas: %w", err)
	}
	res.deltas = float64(n) / float64(sessions)
	res.deltaBytes = float64(bytes) / float64(sessions)
	res.replyBytes = float64(len(strings.Join(words, "")))
	return res, nil
}

// parseDurations reads "0,200ms".
func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if n, err := strconv.Atoi(f); err == nil && n == 0 {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("want durations such as 0,200ms, not %q", f)
		}
		out = append(out, d)
	}
	return out, nil
}

func (r *report) streamSection(p func(string, ...any)) {
	if len(r.stream) == 0 {
		return
	}
	f := r.stream[0]
	p("## Streaming\n\n")
	p("What a reply streamed token by token costs the store: a scripted model sends each reply as %d tokens, %v apart, to %d sessions at once; "+
		"the gateway runs with `sessions.delta_interval` 0 (each token its own delta) and with other intervals (after a delta, text is held that long "+
		"and goes as one delta with what follows). Counted in the gateway's database afterwards: the delta events stored per reply and their bytes "+
		"(the event's JSON), beside the reply's text. The final `message` stores the whole text once more.\n\n", f.tokens, f.pace, f.replys)
	p("| delta_interval | deltas stored per reply | their bytes per reply | reply text | bytes stored per byte of text | run |\n")
	p("| ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range r.stream {
		p("| %v | %.0f | %.0f | %.0f | %.1f | %v |\n", s.interval, s.deltas, s.deltaBytes, s.replyBytes, s.deltaBytes/max(s.replyBytes, 1), s.elapsed.Round(10*time.Millisecond))
	}
	p("\n")
}
