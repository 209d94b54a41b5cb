//go:build unix

package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// One store per database file: a second Open of the same file, here from
// the same process, is refused with a message naming the file and the pid
// holding it, until the first store is closed.
func TestSecondOpenOfAFileIsRefused(t *testing.T) {
	ctx := context.Background()
	db, path := openFile(t)
	storetest.NewSession(t, db, "s1", "")

	pid := fmt.Sprintf("(pid %d)", os.Getpid())
	if b, err := os.ReadFile(path + ".lock"); err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(os.Getpid()) {
		t.Errorf("lock file holds %q, %v; want this process's pid", b, err)
	}
	for range 2 {
		second, err := Open(ctx, path)
		if err == nil {
			second.Close()
			t.Fatal("a second Open of the same file succeeded")
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), pid) {
			t.Errorf("second Open: %q; want it to name %s and %s", err, path, pid)
		}
	}
	// The refused Opens did not take the lock from the first store, nor
	// break it.
	storetest.NewSession(t, db, "s2", "")
	if _, err := db.Session(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	// Another file next to it is another database.
	other, err := Open(ctx, filepath.Join(filepath.Dir(path), "other.db"))
	if err != nil {
		t.Fatalf("Open of another file: %v", err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	defer again.Close()
	if _, err := again.Session(ctx, "s2"); err != nil {
		t.Errorf("session stored before the refused Opens: %v", err)
	}
	if _, err := Open(ctx, path); err == nil || !strings.Contains(err.Error(), pid) {
		t.Errorf("Open while the reopened store holds the file = %v, want it refused", err)
	}
}

// An Open that fails after taking the lock (here: the file is not a
// database) gives it back.
func TestFailedOpenReleasesTheLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "switchboard.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database ", 512)), 0o644); err != nil {
		t.Fatal(err)
	}
	if db, err := Open(ctx, path); err == nil {
		db.Close()
		t.Fatal("Open of a file that is not a database succeeded")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open after a failed Open: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
