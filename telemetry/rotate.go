package telemetry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// rotating is a file that is renamed path.1 before a write would take it
// past max bytes, path.1 becoming path.2 and so on, the oldest past keep
// deleted: logrotate's names, so the newest lines are always in path and
// `cat path.3 path.2 path.1 path` reads them in order.
//
// Written here rather than taken from lumberjack: rotation and pruning
// happen in the write that needs them (lumberjack prunes on a goroutine
// of its own, which a flush at shutdown cannot wait for), sizes are bytes,
// and names do not depend on the clock (two rotations in one millisecond
// would give lumberjack's timestamped names one name). Only the writer's
// goroutine (traceLog.run) calls it.
type rotating struct {
	path string
	max  int64
	keep int
	f    *os.File
	size int64
}

func openRotating(path string, max int64, keep int) (*rotating, error) {
	r := &rotating{path: path, max: max, keep: keep}
	return r, r.open()
}

func (r *rotating) open() error {
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	r.f, r.size = f, info.Size()
	return nil
}

// Write appends b, rotating first when b would take the file past max (a
// file is never left empty for it: a single write larger than max is
// written whole).
func (r *rotating) Write(b []byte) (int, error) {
	if r.f == nil {
		if err := r.open(); err != nil { // the last rotation could not reopen
			return 0, err
		}
	}
	if r.size > 0 && r.size+int64(len(b)) > r.max {
		if err := r.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := r.f.Write(b)
	r.size += int64(n)
	return n, err
}

func (r *rotating) rotate() error {
	if err := r.f.Close(); err != nil {
		return err
	}
	r.f = nil
	name := func(i int) string { return fmt.Sprintf("%s.%d", r.path, i) }
	if err := os.Remove(name(r.keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for i := r.keep - 1; i >= 1; i-- {
		if err := os.Rename(name(i), name(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(r.path, name(1)); err != nil {
		return err
	}
	return r.open()
}

func (r *rotating) Close() error {
	if r.f == nil {
		return nil
	}
	return r.f.Close()
}
