package sessions_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine a test started is still
// running once every test is done: every session goroutine, timer and
// subscriber a Manager starts ends with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
