package sandbox

// Uploads: the files people send, saved in their conversation's
// workspace under uploads/, where the python tool and sandbox_fs_* see
// them at once. A file is written under a temporary name and renamed
// into place once whole, so a crash, a full disk or a download cut short
// leaves no half file under a real name; it counts against the
// workspace's quota like anything the code writes.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/switchboard-gw/switchboard"
)

// UploadsDir is the workspace folder people's files go to.
const UploadsDir = "uploads"

// Uploads keeps people's files in the sandbox's workspaces (the
// sessions.Uploads of the gateway). It works whether or not the python
// tool can run: the files are still read by the model.
type Uploads struct{ s *Sandbox }

// Uploads returns the sandbox's store of people's files.
func (s *Sandbox) Uploads() Uploads { return Uploads{s} }

// Save writes r as uploads/<name> in the session's workspace, or
// uploads/<stem>-2<ext> and so on when the name is taken; name must be a
// plain file name (sessions makes it one). It fails with
// switchboard.ErrFileTooLarge past limit bytes and
// switchboard.ErrWorkspaceFull past the workspace's quota, leaving
// nothing behind.
//
// r is read (a download, as slow as the network) into a staging file
// outside every workspace, without the workspace's lock: a python run or
// another upload of the conversation does not wait for it. Only the copy
// into the workspace, from the local disk, holds the lock.
func (u Uploads) Save(ctx context.Context, sessionID, name string, r io.Reader, limit int64) (string, int64, error) {
	s := u.s
	if err := validSession(sessionID); err != nil {
		return "", 0, err
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return "", 0, fmt.Errorf("sandbox: upload: %q is not a file name", name)
	}
	room, err := u.room(sessionID)
	if err != nil {
		return "", 0, err
	}
	if room <= 0 {
		return "", 0, fmt.Errorf("sandbox: upload %s: %w", name, switchboard.ErrWorkspaceFull)
	}
	staged, err := os.CreateTemp(s.staging(), "upload-*")
	if err != nil {
		return "", 0, fmt.Errorf("sandbox: upload %s: %w", name, err)
	}
	defer os.Remove(staged.Name())
	defer staged.Close()
	bound := min(limit, room)
	n, err := copyCtx(ctx, staged, io.LimitReader(r, bound+1))
	switch {
	case err != nil:
		return "", 0, fmt.Errorf("sandbox: upload %s: %w", name, err)
	case n > limit:
		return "", 0, fmt.Errorf("sandbox: upload %s: %w", name, switchboard.ErrFileTooLarge)
	case n > bound:
		return "", 0, fmt.Errorf("sandbox: upload %s: %w", name, switchboard.ErrWorkspaceFull)
	}
	if _, err := staged.Seek(0, io.SeekStart); err != nil {
		return "", 0, fmt.Errorf("sandbox: upload %s: %w", name, err)
	}
	p, err := u.place(ctx, sessionID, name, staged, n)
	return p, n, err
}

// room is how many bytes the session's workspace may still take.
func (u Uploads) room(sessionID string) (int64, error) {
	s := u.s
	defer s.lock(sessionID)()
	ws, err := s.ensureWorkspace(sessionID)
	if err != nil {
		return 0, err
	}
	snap, err := s.snapshot(ws)
	if err != nil {
		return 0, err
	}
	if snap.full || snap.entries+2 > maxEntries {
		return 0, nil
	}
	return s.cfg.QuotaBytes - snap.bytes, nil
}

// place copies n staged bytes into the session's uploads/, under the
// workspace's lock, and returns the path it got.
func (u Uploads) place(ctx context.Context, sessionID, name string, staged io.Reader, n int64) (string, error) {
	s := u.s
	defer s.lock(sessionID)()
	ws, err := s.ensureWorkspace(sessionID)
	if err != nil {
		return "", err
	}
	// The code may have written meanwhile: the quota is checked again.
	snap, err := s.snapshot(ws)
	if err != nil {
		return "", err
	}
	if snap.full || snap.entries+2 > maxEntries || snap.bytes+n > s.cfg.QuotaBytes {
		return "", fmt.Errorf("sandbox: upload %s: %w", name, switchboard.ErrWorkspaceFull)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return "", fmt.Errorf("sandbox: workspace: %w", err)
	}
	defer root.Close()
	if err := s.mkdirs(root, UploadsDir); err != nil {
		return "", rootError(UploadsDir, err)
	}
	tmp := path.Join(UploadsDir, ".partial-"+randomHex())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", rootError(tmp, err)
	}
	defer root.Remove(tmp) // linked under its name once whole
	_, err = copyCtx(context.WithoutCancel(ctx), f, staged)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("sandbox: upload %s: %w", name, err)
	}
	if s.dropUID >= 0 {
		if err := root.Lchown(tmp, s.dropUID, s.dropUID); err != nil {
			return "", fmt.Errorf("sandbox: upload %s: %w", name, err)
		}
	}
	ext := path.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 1; i <= 1000; i++ {
		p := path.Join(UploadsDir, name)
		if i > 1 {
			p = path.Join(UploadsDir, fmt.Sprintf("%s-%d%s", stem, i, ext))
		}
		// Link, not rename: it fails on a name that is taken, where a
		// rename would replace the file.
		if err := root.Link(tmp, p); errors.Is(err, fs.ErrExist) {
			continue
		} else if err != nil {
			return "", rootError(p, err)
		}
		return p, nil
	}
	return "", fmt.Errorf("sandbox: upload %s: a thousand files of that name already", name)
}

// Read returns at most limit bytes of a file of the session's uploads.
func (u Uploads) Read(ctx context.Context, sessionID, p string, limit int64) ([]byte, error) {
	s := u.s
	if err := validSession(sessionID); err != nil {
		return nil, err
	}
	if !isUpload(p) {
		return nil, fmt.Errorf("sandbox: %q is not an upload", p)
	}
	defer s.lock(sessionID)()
	root, err := os.OpenRoot(s.workspace(sessionID))
	if err != nil {
		return nil, fmt.Errorf("sandbox: workspace: %w", err)
	}
	defer root.Close()
	data, _, err := readRegular(root, p, 0, limit)
	return data, err
}

// Remove deletes a file of the session's uploads; one already gone is
// no error.
func (u Uploads) Remove(ctx context.Context, sessionID, p string) error {
	s := u.s
	if err := validSession(sessionID); err != nil {
		return err
	}
	if !isUpload(p) {
		return fmt.Errorf("sandbox: %q is not an upload", p)
	}
	defer s.lock(sessionID)()
	root, err := os.OpenRoot(s.workspace(sessionID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sandbox: workspace: %w", err)
	}
	defer root.Close()
	if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rootError(p, err)
	}
	return nil
}

// stagingDir holds uploads on their way in, beside the workspaces (not a
// session id, so never one of them).
const stagingDir = ".incoming"

// staging is the directory uploads are read into; New empties it, as
// what a crash left there belongs to no upload.
func (s *Sandbox) staging() string { return filepath.Join(s.cfg.Dir, stagingDir) }

// isUpload: p names a file directly in uploads/.
func isUpload(p string) bool {
	dir, name := path.Split(p)
	return dir == UploadsDir+"/" && name != "" && name != "." && name != ".." && path.Clean(p) == p
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// copyCtx is io.Copy that stops when ctx ends (a download that stalls is
// cut by its caller's deadline).
func copyCtx(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k, err := src.Read(buf)
		if k > 0 {
			w, werr := dst.Write(buf[:k])
			n += int64(w)
			if werr != nil {
				return n, werr
			}
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
