//go:build unix

package storage

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockFile takes an exclusive lock on dsn's lock file (dsn + ".lock") for
// as long as the process keeps the returned file open, so that a second
// gateway on the same database refuses to start instead of numbering the
// same sessions' events as the first. The kernel drops the lock when the
// process dies, kill -9 included, so a crash never leaves it stale.
func lockFile(dsn string) (*os.File, error) {
	path := dsn + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("storage: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("storage: %s is in use by another gateway%s: stop it first, or give this one its own storage.dsn", dsn, holder)
		}
		return nil, fmt.Errorf("storage: lock %s: %w", path, err)
	}
	// Who holds it, for the message above; best effort.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
