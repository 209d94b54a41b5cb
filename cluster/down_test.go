package cluster

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// While the database stays down, the renewals and the roles' tries that
// fail say so at ERROR once a minute between them, not at every try.
func TestAnOutageIsAnErrorOnceAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(Config{Lease: 10 * time.Second})
		var errors int
		for range 48 { // two minutes of tries every 2.5 s
			if c.downLevel() == slog.LevelError {
				errors++
			}
			time.Sleep(2500 * time.Millisecond)
		}
		if errors != 2 {
			t.Fatalf("%d ERROR lines in two minutes of outage, want 2", errors)
		}
	})
}
