//go:build unix

package main

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockHolder reports whether a gateway holds the database's lock file
// (storage takes an exclusive flock on <dsn>.lock while it is open), and
// the pid the holder wrote in it. The file is never created, and a shared
// lock is taken for a moment only when nobody holds it.
func lockHolder(path string) (pid int, held bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return 0, false, err
		}
		if b, rerr := os.ReadFile(path); rerr == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return pid, true, nil
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return 0, false, nil
}
