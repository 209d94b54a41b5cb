package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// idleResult is the gateway's memory with many idle connections open.
type idleResult struct {
	conns          int
	before, after  int64 // VmRSS in KiB
	requested      int
	firstDialError string
}

func (r idleResult) perConnKiB() float64 {
	if r.conns == 0 {
		return 0
	}
	return float64(r.after-r.before) / float64(r.conns)
}

// measureIdle opens n connections to the gateway, each a session that
// said hello and got ready, and reads the gateway's RSS before and after.
func measureIdle(ctx context.Context, gw *child, n int, stopOpen bool) (idleResult, error) {
	url := "ws://" + gw.addr + "/ws"
	warm, err := dialSession(ctx, url)
	if err != nil {
		return idleResult{}, err
	}
	defer warm.Close()
	time.Sleep(idleSettle / 4)
	before, err := memKiB(gw.pid(), "VmRSS")
	if err != nil {
		return idleResult{}, err
	}
	conns, errs := dialSessions(ctx, []string{url}, n, 100)
	defer closeAll(conns)
	var firstErr error
	if len(errs) > 0 {
		firstErr = errs[0]
	}
	time.Sleep(idleSettle) // let the sessions settle
	after, err := memKiB(gw.pid(), "VmRSS")
	if err != nil {
		return idleResult{}, err
	}
	if stopOpen {
		gw.stop() // with the connections open: its heap profile shows them
	}
	r := idleResult{conns: len(conns), before: before, after: after, requested: n}
	if firstErr != nil {
		r.firstDialError = firstErr.Error()
	}
	if len(conns) == 0 {
		return r, errors.Join(errors.New("no connection succeeded"), firstErr)
	}
	return r, nil
}

// report is docs/benchmarks.md.
type report struct {
	machine       string
	date          time.Time
	commit        string
	duration      time.Duration
	framesPerTurn int
	rows          []row
	slack         []slackRow
	discord       []discordRow
	idle          idleResult
	context       []contextResult
	compaction    []compactionResult
	vectors       []vectorResult // vectors.go
	files         []filesResult  // files.go
	procs         []procsRow     // procs.go
	stream        []streamResult // stream.go
	replicas      []replicaRow   // replicas.go
	takeovers     []takeoverResult
	pgVersion     string
	tracing       []tracingRow // tracing.go
}

func (r report) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Benchmarks\n\n")
	p("Written by `make bench` (`bench/`). Measured on %s", r.date.Format("2006-01-02"))
	if r.commit != "" {
		p(" at commit `%s`", r.commit)
	}
	p(", on %s. The load generator, the model and the server under test share this machine.\n\n", r.machine)
	p("## Turns over WebSocket\n\n")
	p("A scripted OpenAI-compatible model runs as its own process on loopback and streams a reply of %d tokens at once. "+
		"Each of N WebSocket connections is a session sending turns back to back; a turn is timed from sending the input "+
		"to receiving the assistant's final `message`. Each run is measured for %v after a warm-up. "+
		"Every gateway event is stored in SQLite before it is sent, and each message is on disk (fsync) before the gateway acts on it: "+
		"what that crash safety costs is in [performance.md](performance.md#what-crash-safety-costs).\n\n",
		tokensPerReply, r.duration)
	p("The floors, driven by the same client in the same run: **thin relay** forwards each input to the same model "+
		"and streams every token back as a frame, with no sessions, storage or events; **bare WebSocket** is a gorilla/websocket "+
		"server answering each input with the frames of one gateway turn measured on its own (%d frames), with no model at all.\n\n",
		r.framesPerTurn)
	p("A gateway turn is the user's message, state changes, the deltas, the final message and usage. The tokens arrive " +
		"faster than a session stores and sends them, so a session merges the text that has piled up into fewer deltas " +
		"(`sessions/readahead.go`; a model streaming slowly has its text held for `sessions.delta_interval`, 200 ms, after each delta: see Streaming below): the frames column " +
		"says how many each target sent per turn.\n\n")
	p("| target | sessions | turns/s | p50 | p99 | CPU s / 1k turns | peak RSS | frames / turn | errors |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, row := range r.rows {
		p("| %s | %d | %.0f | %v | %v | %.2f | %d MiB | %.1f | %d |\n", row.target, row.sessions, row.turnsPerSec(), row.p50(), row.p99(),
			row.cpuPer1k, row.peakKiB>>10, row.framesPerTurn(), row.errors)
	}
	p("\n")
	var ratios []string
	for i, row := range r.rows {
		if row.target != "gateway" {
			continue
		}
		for _, other := range r.rows[i:] {
			if other.sessions == row.sessions && strings.HasPrefix(other.target, "thin relay") && other.turnsPerSec() > 0 {
				ratios = append(ratios, fmt.Sprintf("%.0f %% at %d", 100*row.turnsPerSec()/other.turnsPerSec(), row.sessions))
			}
		}
	}
	if len(ratios) > 0 {
		p("Gateway turns/s as a share of the thin relay's (sessions): %s. "+
			"Where the gateway's time goes: [performance.md](performance.md).\n\n", strings.Join(ratios, ", "))
	}
	r.procsSection(p)
	r.tracingSection(p)
	r.replicasSection(p)
	r.streamSection(p)
	if len(r.slack) > 0 {
		r.slackSection(p)
	}
	if len(r.discord) > 0 {
		r.discordSection(p)
	}
	if r.idle.conns > 0 {
		p("## Idle connections\n\n")
		p("%d WebSocket connections, each its own session that said hello and got `ready`, then idle: the gateway's RSS "+
			"went from %d MiB to %d MiB, **%.1f KiB per connection** (connection, its goroutines and buffers, and a loaded session).",
			r.idle.conns, r.idle.before>>10, r.idle.after>>10, r.idle.perConnKiB())
		if r.idle.conns < r.idle.requested {
			p(" %d of %d connections were refused: %s.", r.idle.requested-r.idle.conns, r.idle.requested, r.idle.firstDialError)
		}
		p("\n\n")
	}
	if len(r.context) > 0 {
		p("## Context build\n\n")
		p("Loading the sliding window (%d messages) of a session from SQLite, as a session does when it loads; "+
			"afterwards the window is kept in memory and each turn builds its request from it. Median and p99 of %d loads.\n\n", windowSize, contextLoads)
		p("*Recall* is what `memory.recall: true` adds to a turn: the full-text search (SQLite FTS5, BM25) of the new message's words " +
			"among the reader's conversations, here a question of common words and one rare one over a conversation of that many messages.\n\n")
		p("| stored messages | median | p99 | recall median | recall p99 |\n| ---: | ---: | ---: | ---: | ---: |\n")
		for _, c := range r.context {
			p("| %d | %v | %v | %v | %v |\n", c.messages, c.median.Round(time.Microsecond), c.p99.Round(time.Microsecond),
				c.recallMedian.Round(time.Microsecond), c.recallP99.Round(time.Microsecond))
		}
		p("\n")
	}
	if len(r.compaction) > 0 {
		p("## Compaction\n\n")
		p("What `memory.policy: compact` costs in model calls. A guide that compacts with the shipped assistant's window (20 messages) "+
			"holds one conversation of %d turns over WebSocket, each message of the size given, against a scripted model whose context is "+
			"%d tokens (the provider's `context_window`): it refuses a request over the %d tokens that leaves for the prompt, counts a token "+
			"for every three bytes (the gateway's estimate, four, learns the difference from its answers) and writes notes of ~300 words "+
			"when asked for a summary. Compaction summarises the older messages before the window holds more than 20 or a request would "+
			"pass 80 %% of the budget: each summary is one extra model call. Its share of tokens is the summaries' prompt and completion "+
			"tokens among all the conversation's.\n\n", r.compaction[0].turns, compactionWindow, compactionLimit)
		p("| message size | turns | summaries / 100 turns | summaries' share of tokens | tokens / turn | refused as too long |\n")
		p("| ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, c := range r.compaction {
			p("| %s | %d | %.1f | %.1f %% | %.0f | %d |\n", byteLabel(c.messageBytes), c.turns, c.summariesPer100(), c.summaryShare(), c.tokensPerTurn(), c.refused)
		}
		p("\n")
	}
	if len(r.vectors) > 0 {
		r.vectorsSection(p)
	}
	if len(r.files) > 0 {
		r.filesSection(p)
	}
	return b.String()
}

// byteLabel is a message size as people read it: 200 B, 2 KiB, 16 KiB.
func byteLabel(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}
