// Package sandbox runs the model's Python code, one bubblewrap (bwrap)
// sandbox per run, with a workspace per session that persists between
// turns and restarts: the tools python, sandbox_fs_list, sandbox_fs_read and
// sandbox_fs_write.
//
// Each run gets new user, PID, IPC, UTS, network and (where the kernel has
// them) cgroup namespaces; a read-only view of /usr and a few files of /etc;
// a size-capped tmpfs at /tmp; and the session's workspace
// (<dir>/<session>/) at /workspace, the only writable place that outlives
// the run. Limits on CPU, memory, open files, file size and processes are
// set inside the sandbox by a small bootstrap (boot.py) before the code
// starts; a wall-clock timeout kills the whole sandbox; a watcher kills a
// run whose workspace outgrows its quota. docs/sandbox.md explains each
// layer and why it is there.
//
// There is no fallback: when bwrap is missing or cannot create the
// namespaces, the tools refuse and say what to install or enable.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config is tools.sandbox in the gateway's configuration. Zero values take
// the defaults below (Enabled aside).
type Config struct {
	Enabled bool
	// Dir holds one workspace per session, Dir/<session>/ (data/sandbox).
	Dir string
	// Python is the interpreter's path inside the sandbox, which sees the
	// host's /usr (/usr/bin/python3).
	Python string
	// Bwrap is the bubblewrap binary (looked up on PATH when empty).
	Bwrap string
	// Timeout is the wall-clock limit of one run (30s).
	Timeout time.Duration
	// CPUSeconds is the CPU time one run may use (10).
	CPUSeconds int
	// MemoryBytes is the address space of each process (1 GiB).
	MemoryBytes int64
	// MaxFiles is the number of files a process may have open (256).
	MaxFiles int
	// FileSizeBytes is the largest file a run may write (64 MiB).
	FileSizeBytes int64
	// MaxProcs is the number of processes and threads a run may have (64).
	MaxProcs int
	// OutputBytes is how much of stdout, and of stderr, the model gets
	// (64 KiB each).
	OutputBytes int
	// QuotaBytes is the most a session's workspace may hold (100 MiB).
	QuotaBytes int64
	// TmpBytes is the size of the run's /tmp, kept in memory (64 MiB).
	TmpBytes int64
	// Concurrency is how many runs may go at once across all sessions
	// (the number of CPUs, at least 2); others wait their turn.
	Concurrency int
	// Wheelhouse, when set, is a directory of wheels (.whl) the python
	// tool's dependencies are installed from, offline; without it
	// dependencies are refused.
	Wheelhouse string
}

// Defaults.
const (
	DefaultDir         = "data/sandbox"
	DefaultPython      = "/usr/bin/python3"
	DefaultTimeout     = 30 * time.Second
	DefaultCPUSeconds  = 10
	DefaultMemoryBytes = 1 << 30
	DefaultMaxFiles    = 256
	DefaultFileSize    = 64 << 20
	DefaultMaxProcs    = 64
	DefaultOutputBytes = 64 << 10
	DefaultQuotaBytes  = 100 << 20
	DefaultTmpBytes    = 64 << 20
)

// Fixed limits, not worth a configuration key.
const (
	// maxEntries bounds the files and directories of a workspace: the
	// quota in bytes says nothing of a million empty files.
	maxEntries = 10000
	// maxImages and maxImageBytes bound the pictures one result carries.
	maxImages     = 4
	maxImageBytes = 5 << 20
	// maxReadBytes is what sandbox_fs_read returns of a text file at once.
	maxReadBytes = 256 << 10
	// maxCodeBytes bounds the python tool's code.
	maxCodeBytes = 256 << 10
)

// WithDefaults fills in the zero fields.
func (c Config) WithDefaults() Config {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	if c.Python == "" {
		c.Python = DefaultPython
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	defInt(&c.CPUSeconds, DefaultCPUSeconds)
	def(&c.MemoryBytes, DefaultMemoryBytes)
	defInt(&c.MaxFiles, DefaultMaxFiles)
	def(&c.FileSizeBytes, DefaultFileSize)
	defInt(&c.MaxProcs, DefaultMaxProcs)
	defInt(&c.OutputBytes, DefaultOutputBytes)
	def(&c.QuotaBytes, DefaultQuotaBytes)
	def(&c.TmpBytes, DefaultTmpBytes)
	defInt(&c.Concurrency, max(2, runtime.NumCPU()))
	return c
}

// Validate reports the first setting that cannot work, named by its
// configuration key.
func (c Config) Validate() error {
	switch {
	case !filepath.IsAbs(c.Python) || filepath.Clean(c.Python) != c.Python:
		return fmt.Errorf("tools.sandbox.python: %q must be a clean absolute path (inside the sandbox)", c.Python)
	case c.Timeout < 0:
		return errors.New("tools.sandbox.timeout: must be positive")
	case c.CPUSeconds < 0:
		return errors.New("tools.sandbox.cpu: must be positive")
	case c.MemoryBytes < 0 || c.MemoryBytes > 0 && c.MemoryBytes < 64<<20:
		return errors.New("tools.sandbox.memory_mb: must be at least 64 (Python itself needs some)")
	case c.MaxFiles < 0 || c.MaxFiles > 0 && c.MaxFiles < 16:
		return errors.New("tools.sandbox.max_files: must be at least 16")
	case c.FileSizeBytes < 0:
		return errors.New("tools.sandbox.file_size_mb: must be positive")
	case c.MaxProcs < 0:
		return errors.New("tools.sandbox.max_procs: must be positive")
	case c.OutputBytes < 0:
		return errors.New("tools.sandbox.output_kb: must be positive")
	case c.QuotaBytes < 0:
		return errors.New("tools.sandbox.quota_mb: must be positive")
	case c.TmpBytes < 0:
		return errors.New("tools.sandbox.tmp_mb: must be positive")
	case c.Concurrency < 0:
		return errors.New("tools.sandbox.concurrency: must be positive")
	case c.Wheelhouse != "" && !filepath.IsAbs(c.Wheelhouse):
		return fmt.Errorf("tools.sandbox.wheelhouse: %q must be an absolute path", c.Wheelhouse)
	}
	return nil
}

// FileInfo is one file of a session's workspace.
type FileInfo struct {
	Path    string // slash-separated, relative to /workspace
	Size    int64
	ModTime time.Time
}

// Sandbox runs code for sessions, each in its own workspace.
type Sandbox struct {
	cfg Config
	log *slog.Logger
	// dropUID is the uid (and gid) bwrap runs as when the gateway is root:
	// see runAs in proc_linux.go. -1 when the gateway is not root.
	dropUID int

	slots chan struct{} // Concurrency

	mu    sync.Mutex
	locks map[string]*sessionLock

	checkMu  sync.Mutex
	checked  time.Time // when the last Check ran
	checkErr error     // its outcome
	runner   *runner   // what the last Check found; nil when it failed
}

// runner is the bwrap a passed Check found, and what it can do.
type runner struct {
	bwrap string
	feat  features
}

type sessionLock struct {
	mu   sync.Mutex
	refs int
}

// checkAgain is how soon a failed Check is tried again when a tool needs
// the sandbox, so installing bwrap needs no restart.
const checkAgain = 30 * time.Second

// New checks cfg (defaults applied) and creates the workspaces' directory.
// It does not run bwrap: Check does, and the tools call it before their
// first run, so a gateway without bwrap starts and its tools say why they
// cannot work.
func New(cfg Config, logger *slog.Logger) (*Sandbox, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("tools.sandbox.dir: %w", err)
	}
	cfg.Dir = dir
	s := &Sandbox{cfg: cfg, log: logger, dropUID: runAs(), slots: make(chan struct{}, cfg.Concurrency), locks: map[string]*sessionLock{}}
	// When bwrap runs as another uid (the gateway is root), that uid must
	// be able to reach the workspaces to mount them: search permission
	// (x) and nothing more. Check says so when an ancestor denies it.
	mode := os.FileMode(0o700)
	if s.dropUID >= 0 {
		mode = 0o711
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return nil, fmt.Errorf("tools.sandbox.dir: %w", err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		return nil, fmt.Errorf("tools.sandbox.dir: %w", err)
	}
	// Uploads a crash cut short are nobody's now.
	if err := os.RemoveAll(s.staging()); err != nil {
		return nil, fmt.Errorf("tools.sandbox.dir: %w", err)
	}
	if err := os.Mkdir(s.staging(), 0o700); err != nil {
		return nil, fmt.Errorf("tools.sandbox.dir: %w", err)
	}
	return s, nil
}

// Config is the configuration in use, defaults applied.
func (s *Sandbox) Config() Config { return s.cfg }

// sessionIDPattern is what session ids look like ("s_" and hex); anything else is
// refused before it comes near a path.
var sessionIDPattern = regexp.MustCompile(`^s_[0-9a-f]{4,64}$`)

func validSession(id string) error {
	if !sessionIDPattern.MatchString(id) {
		return fmt.Errorf("sandbox: %q is not a session id", id)
	}
	return nil
}

// workspace is the host path of a session's workspace.
func (s *Sandbox) workspace(id string) string { return filepath.Join(s.cfg.Dir, id) }

// lock serialises everything done to one session's workspace: runs, file
// operations, listing and removal. No sandboxed process outlives its run
// (the PID namespace dies with it), so under the lock nothing else
// changes the workspace.
func (s *Sandbox) lock(id string) func() {
	s.mu.Lock()
	l := s.locks[id]
	if l == nil {
		l = &sessionLock{}
		s.locks[id] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.locks, id)
		}
		s.mu.Unlock()
	}
}

// ensureWorkspace creates the session's workspace, owned by the uid the
// sandbox runs as.
func (s *Sandbox) ensureWorkspace(id string) (string, error) {
	ws := s.workspace(id)
	if err := os.Mkdir(ws, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("sandbox: workspace: %w", err)
	}
	fi, err := os.Lstat(ws)
	if err != nil {
		return "", fmt.Errorf("sandbox: workspace: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("sandbox: workspace %s is not a directory", ws)
	}
	// The code may have changed the workspace's permissions (a gateway
	// that is not root would then be locked out of it).
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(ws, 0o700); err != nil {
			return "", fmt.Errorf("sandbox: workspace: %w", err)
		}
	}
	if s.dropUID >= 0 {
		if err := os.Lchown(ws, s.dropUID, s.dropUID); err != nil {
			return "", fmt.Errorf("sandbox: workspace: %w", err)
		}
	}
	return ws, nil
}

// Remove deletes a session's workspace and everything in it: for the
// retention of old sessions and for deleting a session's data. A session
// without one is not an error. A run under way finishes first.
func (s *Sandbox) Remove(sessionID string) error {
	if err := validSession(sessionID); err != nil {
		return err
	}
	defer s.lock(sessionID)()
	ws := s.workspace(sessionID)
	if err := os.RemoveAll(ws); err != nil {
		// The code may have left a directory without write permission,
		// which a gateway that is not root cannot empty: open up the
		// directories and try again.
		_ = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o700)
			}
			return nil
		})
		if err := os.RemoveAll(ws); err != nil {
			return fmt.Errorf("sandbox: remove workspace of %s: %w", sessionID, err)
		}
	}
	return nil
}

// Files lists the files in a session's workspace (regular files, not
// directories or links), sorted by path; none when it has no workspace.
func (s *Sandbox) Files(sessionID string) ([]FileInfo, error) {
	if err := validSession(sessionID); err != nil {
		return nil, err
	}
	defer s.lock(sessionID)()
	snap, err := s.snapshot(s.workspace(sessionID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]FileInfo, 0, len(snap.files))
	for p, st := range snap.files {
		out = append(out, FileInfo{Path: p, Size: st.size, ModTime: st.mtime})
	}
	slices.SortFunc(out, func(a, b FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// Check finds bwrap and has it run the sandbox's Python once, with every
// namespace, mount and limit of a real run, in a scratch workspace. The
// error says what to install or enable. The tools keep the outcome: a
// success until the next Check, a failure for 30 seconds.
func (s *Sandbox) Check(ctx context.Context) error {
	_, err := s.recheck(ctx)
	return err
}

func (s *Sandbox) recheck(ctx context.Context) (*runner, error) {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	r, err := s.check(ctx)
	s.checked, s.checkErr, s.runner = time.Now(), err, r
	return r, err
}

// ready is Check as the tools need it: done once when it works, again
// after checkAgain when it did not.
func (s *Sandbox) ready(ctx context.Context) (*runner, error) {
	s.checkMu.Lock()
	r, err, at := s.runner, s.checkErr, s.checked
	s.checkMu.Unlock()
	if r != nil {
		return r, nil
	}
	if !at.IsZero() && time.Since(at) < checkAgain {
		return nil, err
	}
	return s.recheck(ctx)
}

func (s *Sandbox) check(ctx context.Context) (*runner, error) {
	bwrap := s.cfg.Bwrap
	if bwrap != "" {
		if _, err := os.Stat(bwrap); err != nil {
			return nil, fmt.Errorf("sandbox unavailable: tools.sandbox.bwrap: %w: %s", err, installHint)
		}
	} else {
		p, err := lookPath("bwrap")
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("sandbox unavailable: bwrap is not installed (not on PATH): %s", installHint)
		}
		if err != nil {
			return nil, fmt.Errorf("sandbox unavailable: %w", err)
		}
		bwrap = p
	}
	feat, err := probe(ctx, bwrap)
	if err != nil {
		return nil, err
	}
	r := &runner{bwrap: bwrap, feat: feat}

	scratch := filepath.Join(s.cfg.Dir, ".check")
	if err := os.RemoveAll(scratch); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	defer os.RemoveAll(scratch)
	if s.dropUID >= 0 {
		if err := os.Lchown(scratch, s.dropUID, s.dropUID); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := s.exec(ctx, r, execSpec{workspace: scratch, code: "import sys\nprint('ok', sys.version_info[0])\n"})
	if err != nil {
		return nil, err
	}
	if out.status != 0 || strings.TrimSpace(out.stdout.String()) != "ok 3" {
		return nil, fmt.Errorf("sandbox unavailable: a test run of %s in the sandbox failed with status %d: %s",
			s.cfg.Python, out.status, firstLine(out.stderr.String()+out.stdout.String()))
	}
	s.log.Info("sandbox ready", "bwrap", bwrap, "python", s.cfg.Python, "dir", s.cfg.Dir, "run_as", s.runAsText())
	return r, nil
}

// runAsText says which uid the sandbox runs as, for the log.
func (s *Sandbox) runAsText() string {
	if s.dropUID >= 0 {
		return fmt.Sprintf("uid %d (the gateway is root)", s.dropUID)
	}
	return fmt.Sprintf("uid %d (the gateway's)", os.Getuid())
}

const installHint = "install bubblewrap (apt-get install bubblewrap; dnf install bubblewrap; apk add bubblewrap)"

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
