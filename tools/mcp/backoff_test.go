package mcp

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A stdio server that dies at every start is started again after 1s, 2s,
// 4s … up to the ceiling of a minute, and then every minute; its failures
// are logged as a warning once, then at most once per ceiling, each
// attempt in between at debug. The clock is synctest's: the ten minutes
// pass at once, the child processes are real.
func TestStdioKeepsDying(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		m, err := New([]ServerConfig{stdioServer(t, "dying", "exit")}, testEnviron(), slog.New(rec))
		if err != nil {
			t.Fatal(err)
		}
		if m.backoffMin != time.Second || m.backoffMax != time.Minute {
			t.Fatalf("backoff %s to %s; the test expects the production values", m.backoffMin, m.backoffMax)
		}
		began := time.Now()
		if err := m.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute)
		m.Close()

		type failure struct {
			at    time.Duration // since the start
			level slog.Level
			msg   string
			in    time.Duration // the delay before the next attempt
		}
		var got []failure
		rec.mu.Lock()
		for _, r := range rec.records {
			if !strings.HasPrefix(r.Message, "mcp: server ") || !strings.Contains(r.Message, "down") {
				continue
			}
			f := failure{at: r.Time.Sub(began), level: r.Level, msg: r.Message}
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "in" {
					f.in = a.Value.Duration()
				}
				return true
			})
			got = append(got, f)
		}
		rec.mu.Unlock()
		if len(got) < 12 {
			t.Fatalf("%d failures in ten minutes: %+v", len(got), got)
		}

		// The delays double to the ceiling and stay there, and each attempt
		// comes after its delay.
		want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60, 60, 60}
		for i, f := range got {
			w := time.Minute
			if i < len(want) {
				w = want[i] * time.Second
			}
			if f.in != w {
				t.Errorf("failure %d at %s: next attempt in %s, want %s", i+1, f.at, f.in, w)
			}
			if i > 0 && f.at-got[i-1].at != got[i-1].in {
				t.Errorf("failure %d at %s, %s after the one before; its delay was %s", i+1, f.at, f.at-got[i-1].at, got[i-1].in)
			}
		}

		// Warnings: the first failure, then one a minute at most.
		var warned []failure
		for _, f := range got {
			switch f.level {
			case slog.LevelWarn:
				warned = append(warned, f)
			case slog.LevelDebug:
				if f.msg != "mcp: server down again; starting it again" {
					t.Errorf("debug record %q", f.msg)
				}
			default:
				t.Errorf("a failure logged at %s: %+v", f.level, f)
			}
		}
		if len(warned) == 0 || warned[0].at != 0 || warned[0].msg != "mcp: server down; starting it again" {
			t.Fatalf("the first failure was not a warning: %+v", got)
		}
		for i, f := range warned[1:] {
			if f.msg != "mcp: server still down; starting it again" || f.at-warned[i].at < time.Minute {
				t.Errorf("warning %q at %s, %s after the one before", f.msg, f.at, f.at-warned[i].at)
			}
		}
		if max := 1 + int(10*time.Minute/time.Minute); len(warned) > max || len(warned) >= len(got) {
			t.Errorf("%d warnings for %d failures in ten minutes (at most %d)", len(warned), len(got), max)
		}
		if st := m.Status()[0]; st.Restarts != len(got) || !strings.Contains(st.LastError, "exit status 3") {
			t.Errorf("status %+v after %d failures", st, len(got))
		}
	})
}
