package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

// BenchmarkTurns writes turns the way a conversation does (a message and
// its event in one WriteTurn, then two events queued without waiting) from
// many sessions at once, and reports turns/s and the commits a turn cost
// (pg_stat_database: group commit shares one among the sessions). The
// pgtest server runs with fsync off: the figures leave out the disk.
//
//	go test -run '^$' -bench Turns ./storage/postgres/
func BenchmarkTurns(b *testing.B) {
	for _, sessions := range []int{1, 16, 64} {
		for _, replica := range []bool{false, true} {
			b.Run(fmt.Sprintf("sessions=%d/replica=%v", sessions, replica), func(b *testing.B) {
				benchTurns(b, sessions, replica)
			})
		}
	}
}

func benchTurns(b *testing.B, sessions int, replica bool) {
	ctx := context.Background()
	var opts []Option
	if replica {
		opts = append(opts, WithReplica("r0"))
	}
	db := open(b, opts...)
	for s := range sessions {
		id := fmt.Sprintf("s%d", s)
		newSession(b, db, id, "")
		if replica {
			l, err := db.AcquireLease(ctx, SessionLease(id), 3600e9)
			if err != nil {
				b.Fatal(err)
			}
			db.Fence(id, l.Epoch)
		}
	}
	commits := func() int64 {
		return count(b, db, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`)
	}
	before := commits()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for s := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("s%d", s)
			seq := int64(0)
			for next.Add(1) <= int64(b.N) {
				seq++
				_, err := db.WriteTurn(ctx, id, switchboard.TurnWrite{
					Messages: []switchboard.Message{user("what is the weather like today?")},
					Events:   []switchboard.Event{ev(id, seq, switchboard.EventMessage, `{"role":"user","content":"what is the weather like today?"}`)},
					Turn:     []byte(`{"step":1}`),
				})
				if err != nil {
					b.Error(err)
					return
				}
				if err := db.AppendEvents(ctx, nil, ev(id, seq+1, switchboard.EventDelta, `{"text":"Sunny"}`),
					ev(id, seq+2, switchboard.EventDelta, `{"text":", 21 °C."}`)); err != nil {
					b.Error(err)
					return
				}
				seq += 2
			}
		})
	}
	wg.Wait()
	if err := db.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	// pg_stat_database lags the commits by up to its flush interval.
	sql(b, db, `SELECT pg_stat_force_next_flush()`)
	sql(b, db, `SELECT pg_stat_clear_snapshot()`)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
	b.ReportMetric(float64(commits()-before)/float64(b.N), "commits/turn")
}
