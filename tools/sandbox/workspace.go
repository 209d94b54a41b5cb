package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// The workspace is written by code the gateway does not trust: every path
// the gateway opens in it goes through an os.Root, which refuses symbolic
// links (and "..") that lead out of it, and files are checked to be
// regular files before they are read, so a FIFO cannot hang a tool.

// stamp is what a snapshot keeps of a file.
type stamp struct {
	size  int64
	mtime time.Time
}

// snapshot is a workspace at one moment.
type snapshot struct {
	files   map[string]stamp // regular files by slash path
	bytes   int64            // their sizes added up
	entries int              // files, directories and links
	full    bool             // stopped at maxEntries+1: there are more
}

// over says how the workspace exceeds its quota, "" when it does not.
func (s *Sandbox) over(snap *snapshot) string {
	switch {
	case snap.full || snap.entries > maxEntries:
		return fmt.Sprintf("more than %d files and directories", maxEntries)
	case snap.bytes > s.cfg.QuotaBytes:
		return fmt.Sprintf("%s, over its %s quota", formatBytes(snap.bytes), formatBytes(s.cfg.QuotaBytes))
	}
	return ""
}

// snapshot walks a workspace (which must exist) without following links.
// A directory it cannot read is an error (rather than skipped, which would
// hide what is in it from the quota).
func (s *Sandbox) snapshot(ws string) (*snapshot, error) {
	root, err := os.OpenRoot(ws)
	if errors.Is(err, fs.ErrPermission) && s.dropUID < 0 {
		// The code took the workspace's own permissions away.
		if os.Chmod(ws, 0o700) == nil {
			root, err = os.OpenRoot(ws)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: workspace: %w", err)
	}
	defer root.Close()
	snap := &snapshot{files: map[string]stamp{}}
	if err := s.walk(root, "", 0, snap); err != nil {
		return nil, fmt.Errorf("sandbox: workspace: %w", err)
	}
	return snap, nil
}

// maxDepth bounds how deep a walk goes (and so the descriptors it holds):
// deeper counts as too many entries.
const maxDepth = 64

// walk adds the directory dir (root, at rel) to snap. Each directory is
// opened as a root of its own and its entries looked at with one fstatat
// each: a directory swapped for a link mid-walk (the code runs while the
// quota watcher walks) is not followed out of the workspace.
func (s *Sandbox) walk(dir *os.Root, rel string, depth int, snap *snapshot) error {
	if depth > maxDepth {
		snap.full = true
		return nil
	}
	f, err := dir.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		ents, err := f.ReadDir(256)
		for _, e := range ents {
			if snap.entries++; snap.entries > maxEntries {
				snap.full = true
				return nil
			}
			name := e.Name()
			p := path.Join(rel, name)
			fi, err := dir.Lstat(name)
			if errors.Is(err, fs.ErrNotExist) {
				continue // gone meanwhile
			}
			if err != nil {
				return err
			}
			switch {
			case fi.Mode().IsRegular():
				snap.files[p] = stamp{fi.Size(), fi.ModTime()}
				snap.bytes += fi.Size()
			case fi.IsDir():
				sub, err := s.openDir(dir, name)
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return err
				}
				err = s.walk(sub, p, depth+1, snap)
				sub.Close()
				if err != nil || snap.full {
					return err
				}
			}
		}
		if errors.Is(err, io.EOF) || len(ents) == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// openDir opens a directory of the workspace as a root. Code may have
// taken its permissions away; a gateway that is not root owns the files
// (the code ran as its uid) and gives them back. (Root needs no
// permission.)
func (s *Sandbox) openDir(parent *os.Root, name string) (*os.Root, error) {
	sub, err := parent.OpenRoot(name)
	if errors.Is(err, fs.ErrPermission) && s.dropUID < 0 {
		if parent.Chmod(name, 0o700) == nil {
			sub, err = parent.OpenRoot(name)
		}
	}
	return sub, err
}

// cleanPath turns a path the model gave into one relative to the
// workspace: "data.csv", "out/chart.png"; "/workspace/x" is taken as "x"
// since that is where the code sees the workspace. Other absolute paths
// and ".." are refused, whatever they would lead to.
func cleanPath(p string) (string, error) {
	p = strings.TrimSpace(p)
	if strings.ContainsRune(p, 0) {
		return "", errors.New("refused: the path contains a NUL byte")
	}
	if p == insideWorkspace || strings.HasPrefix(p, insideWorkspace+"/") {
		p = strings.TrimPrefix(p, insideWorkspace)
		p = strings.TrimLeft(p, "/")
	} else if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("refused: %q is outside /workspace; give a path relative to /workspace, such as data.csv", p)
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return "", fmt.Errorf("refused: %q contains \"..\"; paths stay inside /workspace", p)
	}
	if p = path.Clean(p); p == "" {
		p = "."
	}
	return p, nil
}

// rootError rewords os.Root's refusal of a link that leads out.
func rootError(p string, err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("refused: %s leads outside /workspace (a symbolic link out of it is not followed)", p)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: no such file in /workspace", p)
	}
	return err
}

// imageTypes are the pictures a run or sandbox_fs_read shows to the users,
// by extension; the content must agree (sniffImage).
var imageTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
	".webp": "image/webp", ".svg": "image/svg+xml",
}

func isImageName(p string) bool {
	_, ok := imageTypes[strings.ToLower(path.Ext(p))]
	return ok
}

// sniffImage is the MIME type of data when it is the picture its
// extension says, "" otherwise.
func sniffImage(name string, data []byte) string {
	want := imageTypes[strings.ToLower(path.Ext(name))]
	if want == "image/svg+xml" {
		head := strings.ToLower(string(data[:min(len(data), 2048)]))
		if strings.Contains(head, "<svg") {
			return want
		}
		return ""
	}
	if want != "" && http.DetectContentType(data) == want {
		return want
	}
	return ""
}

// readRegular reads at most limit bytes from offset of a regular file in
// root, and its size. Links inside the workspace are followed, links out
// of it refused.
func readRegular(root *os.Root, p string, offset, limit int64) ([]byte, int64, error) {
	fi, err := root.Stat(p)
	if err != nil {
		return nil, 0, rootError(p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file (%s)", p, kindOf(fi))
	}
	// O_NONBLOCK: should it have become a FIFO since, open does not wait.
	f, err := root.OpenFile(p, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, 0, rootError(p, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", p)
	}
	if offset > fi.Size() {
		offset = fi.Size()
	}
	buf := make([]byte, min(limit, fi.Size()-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, fmt.Errorf("read %s: %w", p, err)
	}
	return buf[:n], fi.Size(), nil
}

func kindOf(fi fs.FileInfo) string {
	switch m := fi.Mode(); {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}
