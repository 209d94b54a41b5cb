package guides

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultQuiet is how long a folder must stay still after a change before
// the guides are read again: editors save in bursts (a temporary file
// written, renamed over the guide, a backup removed), and a Kubernetes
// ConfigMap update is several renames; one reload follows each burst.
const DefaultQuiet = 300 * time.Millisecond

// Watch calls changed once after each burst of changes in dir, when it
// has been quiet for quiet (DefaultQuiet when 0), until ctx ends. Every
// change counts, not only *.md files: a ConfigMap swaps a "..data"
// symbolic link and leaves the guides' own links untouched. The folder's
// parent is watched for the folder itself being replaced (renamed over,
// or a link to it swapped); the watch then follows the new folder. A
// burst that never stops is read at the latest 10 quiets after it began.
//
// Watch returns once watching has started; errors after that (the
// system's event queue overflowing, a folder gone) go to fail, and a
// reload follows, as after a change.
func Watch(ctx context.Context, dir string, quiet time.Duration, changed func(), fail func(error)) error {
	if quiet <= 0 {
		quiet = DefaultQuiet
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("guides: watch %s: %w", dir, err)
	}
	dir = filepath.Clean(dir)
	if err := w.Add(dir); err != nil {
		w.Close()
		return fmt.Errorf("guides: watch %s: %w", dir, err)
	}
	// The parent may not be watchable (a read-only mount's root): the
	// folder's own events still come.
	_ = w.Add(filepath.Dir(dir))
	kicks := make(chan struct{}, 1)
	kick := func() {
		select {
		case kicks <- struct{}{}:
		default: // one is waiting already: the burst is one
		}
	}
	go debounce(ctx, kicks, quiet, 10*quiet, changed)
	go func() {
		defer w.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Dir(ev.Name) != dir && ev.Name != dir {
					continue // the parent's other entries
				}
				if ev.Name == dir && ev.Has(fsnotify.Create) {
					// The folder was replaced: watch the new one (the old
					// watch ended with the old folder).
					_ = w.Remove(dir)
					if err := w.Add(dir); err != nil {
						fail(fmt.Errorf("guides: watch %s again after it was replaced: %w", dir, err))
					}
				}
				kick()
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				fail(fmt.Errorf("guides: watching %s: %w", dir, err))
				kick() // events may have been lost: read the folder again
			}
		}
	}()
	return nil
}

// debounce calls fire once a kick has been followed by quiet without
// another, or at the latest longest after the first kick of a burst. It
// runs until ctx ends. fire runs on debounce's goroutine: kicks during it
// wait in the channel and make the next burst.
func debounce(ctx context.Context, kicks <-chan struct{}, quiet, longest time.Duration, fire func()) {
	timer := time.NewTimer(quiet)
	timer.Stop()
	defer timer.Stop()
	var first time.Time // of the burst under way; zero: none
	for {
		select {
		case <-ctx.Done():
			return
		case <-kicks:
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			timer.Reset(min(quiet, first.Add(longest).Sub(now)))
		case <-timer.C:
			first = time.Time{}
			fire()
		}
	}
}
