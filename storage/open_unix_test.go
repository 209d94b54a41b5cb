//go:build unix

package storage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A database the gateway may not write is reported with its path and the
// system's reason, not SQLite's bare "unable to open database file (14)".
func TestOpenExplainsPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		// Root ignores file permissions: run this test again as nobody.
		rerunAsNobody(t, "TestOpenExplainsPermissionDenied")
		return
	}
	dir := filepath.Join(os.Getenv("STORAGE_TEST_DIR"), "ro")
	if os.Getenv("STORAGE_TEST_DIR") == "" {
		dir = filepath.Join(t.TempDir(), "ro")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dsn := filepath.Join(dir, "switchboard.db")
	// The lock file exists from an earlier run; the directory was made
	// read-only since.
	if err := os.WriteFile(dsn+".lock", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	_, err := Open(context.Background(), dsn)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Open on a read-only directory: %v", err)
	}
}

// rerunAsNobody runs one test of this binary as uid 65534, from a copy and a
// directory nobody can reach.
func rerunAsNobody(t *testing.T, test string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "storage-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "storage.test")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), "STORAGE_TEST_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}
