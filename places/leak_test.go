package places_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine a test started is still
// running once every test is done (the same check guards sessions,
// storage and every listener's tests).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The leak check bites: a test binary whose test leaves a goroutine behind
// fails, naming it.
func TestLeakCheckFailsALeak(t *testing.T) {
	if os.Getenv("PLACES_TEST_LEAK") == "1" {
		block := make(chan struct{})
		go func() { <-block }() // never ends: the leak
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeakCheckFailsALeak$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PLACES_TEST_LEAK=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "found unexpected goroutines") || !strings.Contains(string(out), "TestLeakCheckFailsALeak") {
		t.Fatalf("a leaked goroutine passed the check (%v):\n%s", err, out)
	}
}
