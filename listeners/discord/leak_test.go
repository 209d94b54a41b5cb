package discord_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// TestMain fails the package when a goroutine a test started is still
// running once every test is done. The replicas' tests start a PostgreSQL
// server the first time one asks for a database; it stops after them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(sessionstest.WithPostgreSQL(m))
}
