//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/tools"
)

// These tests run the real bwrap: the sandbox is only as good as what it
// does to real code. Without bwrap they skip (CI installs it); with a bwrap
// that cannot create namespaces they fail.

// needBwrap skips the test when bubblewrap is not installed.
func needBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed, so the sandbox cannot be tested here: apt-get install bubblewrap (CI installs it)")
	}
}

// reachable makes a test directory and its parents searchable by the uid
// the sandbox runs as when the tests run as root (t.TempDir is 0700).
func reachable(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// newSandbox is a checked sandbox with its workspaces in a fresh
// directory; change adjusts the configuration first.
func newSandbox(t *testing.T, change func(*Config)) *Sandbox {
	t.Helper()
	needBwrap(t)
	base := t.TempDir()
	reachable(t, base)
	cfg := Config{Enabled: true, Dir: filepath.Join(base, "sandbox")}
	if change != nil {
		change(&cfg)
	}
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return s
}

// session ids for the tests.
const (
	sessA = "s_0a0a0a0a0a"
	sessB = "s_0b0b0b0b0b"
)

// call runs one of s's tools through a registry (so the arguments are
// checked against its schema) for a session.
func call(t *testing.T, s *Sandbox, sess, tool string, args any) (tools.Result, error) {
	t.Helper()
	reg, err := tools.NewRegistry(s.Tools()...)
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if sess != "" {
		ctx = tools.WithSession(ctx, sess)
	}
	return reg.Run(ctx, tool, raw)
}

// python runs code and fails the test when the run did not happen.
func python(t *testing.T, s *Sandbox, sess, code string) tools.Result {
	t.Helper()
	res, err := call(t, s, sess, ToolPython, map[string]any{"code": code})
	if err != nil {
		t.Fatalf("python: %v\ncode:\n%s", err, code)
	}
	return res
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, shorten(got))
		}
	}
}

func mustNotContain(t *testing.T, what, got string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(got, b) {
			t.Errorf("%s contains %q:\n%s", what, b, shorten(got))
		}
	}
}

// shorten keeps a failure message readable.
func shorten(s string) string {
	if len(s) > 4000 {
		return s[:2000] + "\n[…]\n" + s[len(s)-2000:]
	}
	return s
}
