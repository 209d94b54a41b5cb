package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage"
)

// contextResult is the time to build a turn's context for a session with
// a given number of stored messages.
type contextResult struct {
	messages int
	median   time.Duration
	p99      time.Duration
	// recall is what memory.recall adds to a turn: the FTS5 search of a
	// message's words among the reader's conversations (storage.Search).
	recallMedian, recallP99 time.Duration
}

// recallQuery is a new message as memory.recall searches with it: words
// in every message (left out by the search: they tell nothing), words in
// none, and one rare one, which must be found.
const recallQuery = "what did we say about message 42 of the long conversation?"

// windowSize is the bench guide's memory window.
const windowSize = 20

// measureContextBuild stores sessions of each size in a fresh SQLite file
// and times loading the sliding window, which is what a session reads to
// build the model's context (once, when it loads; afterwards the window
// lives in memory). The query walks the (session_id, id) index backwards,
// so the time should not grow with history.
func measureContextBuild(ctx context.Context, dir string, sizes []int, runs int) ([]contextResult, error) {
	db, err := storage.Open(ctx, filepath.Join(dir, "context.db"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var out []contextResult
	for _, n := range sizes {
		id := fmt.Sprintf("s_context_%d", n)
		if err := db.CreateSession(ctx, switchboard.Session{ID: id, Guide: "bench"}); err != nil {
			return nil, err
		}
		// Another session's messages interleaved would be realistic but
		// slower to set up; the index is per session either way.
		const batch = 5000
		msgs := make([]switchboard.Message, 0, batch)
		for i := range n {
			role := switchboard.RoleUser
			if i%2 == 1 {
				role = switchboard.RoleAssistant
			}
			msgs = append(msgs, switchboard.Message{Role: role, Content: fmt.Sprintf("message %d of a long conversation, about as long as a chat line", i)})
			if len(msgs) == batch || i == n-1 {
				if err := db.AppendMessages(ctx, id, msgs, false); err != nil {
					return nil, fmt.Errorf("storing %d messages: %w", n, err)
				}
				msgs = msgs[:0]
			}
		}
		times := make([]time.Duration, 0, runs)
		for range runs {
			start := time.Now()
			w, err := db.Window(ctx, id, windowSize)
			if err != nil {
				return nil, err
			}
			times = append(times, time.Since(start))
			if len(w) != windowSize {
				return nil, fmt.Errorf("window of %d messages, want %d", len(w), windowSize)
			}
		}
		slices.Sort(times)
		res := contextResult{messages: n, median: percentile(times, 50), p99: percentile(times, 99)}
		if err := db.SetMember(ctx, id, switchboard.Member{Key: "bench:reader", Role: "owner"}); err != nil {
			return nil, err
		}
		times = times[:0]
		for range runs {
			start := time.Now()
			found, err := db.Search(ctx, "bench:reader", recallQuery, 3)
			if err != nil {
				return nil, err
			}
			times = append(times, time.Since(start))
			if len(found) == 0 || !strings.HasPrefix(found[0].Message.Content, "message 42 ") {
				return nil, fmt.Errorf("recall did not find message 42 first: %d found", len(found))
			}
		}
		slices.Sort(times)
		res.recallMedian, res.recallP99 = percentile(times, 50), percentile(times, 99)
		out = append(out, res)
	}
	return out, nil
}
