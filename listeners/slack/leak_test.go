package slack_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine a test started is still
// running once every test is done.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
