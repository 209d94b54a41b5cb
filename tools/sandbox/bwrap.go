package sandbox

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

//go:embed boot.py
var bootSource string

// bootPy is boot.py without its comments: it is passed with -c, and shows
// in the sandbox's process list.
var bootPy = func() string {
	var b strings.Builder
	for _, line := range strings.Split(bootSource, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}()

// Paths inside the sandbox.
const (
	insideWorkspace  = "/workspace"
	insideWheelhouse = "/wheelhouse"
	insideProgram    = "/sandbox/main.py"
	// insideUID is who the code is inside its user namespace; outside it
	// is the uid bwrap runs as.
	insideUID = "1000"
	// shmBytes is /dev/shm's size (multiprocessing's semaphores live there).
	shmBytes = 16 << 20
)

// sandboxEnv is the whole environment inside: nothing of the gateway's.
var sandboxEnv = []string{
	"PATH", "/usr/local/bin:/usr/bin:/bin",
	"HOME", insideWorkspace,
	"LANG", "C.UTF-8",
	"USER", "sandbox",
	"TMPDIR", "/tmp",
	// Unbuffered, so what was printed before a kill still reaches the model.
	"PYTHONUNBUFFERED", "1",
	// No __pycache__ directories in the workspace.
	"PYTHONDONTWRITEBYTECODE", "1",
	// The program lives in /sandbox; the model's modules are in /workspace.
	"PYTHONPATH", insideWorkspace,
	// matplotlib, if installed: no display, and its cache out of the workspace.
	"MPLBACKEND", "Agg",
	"MPLCONFIGDIR", "/tmp/matplotlib",
}

// bwrapEnv is bwrap's own environment. It must be as bare as the
// sandbox's: bwrap's init process (PID 1 inside) keeps the environment
// bwrap was started with, and the code can read it in /proc/1/environ.
var bwrapEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + insideWorkspace, "LANG=C.UTF-8"}

// rootDirs are the host's top-level directories the sandbox sees (read
// only) when they exist: what Python and its libraries are made of. On a
// merged-/usr system all but /usr are symlinks, and stay symlinks.
var rootDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcFiles are the few files of /etc worth seeing; not /etc itself,
// which holds the host's accounts, keys and configuration.
var etcFiles = []string{"/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "/etc/fonts", "/etc/mime.types"}

// features are the bwrap options this version has, of those that are
// not in every version we accept.
type features struct {
	disableUserns bool // --disable-userns (0.8): no namespaces made inside
	cgroupTry     bool // --unshare-cgroup-try
}

// required are the bwrap options a sandbox cannot do without.
var required = []string{"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
	"--die-with-parent", "--new-session", "--args", "--file", "--size", "--tmpfs",
	"--clearenv", "--setenv", "--remount-ro", "--ro-bind-try", "--symlink", "--chdir"}

// probe asks bwrap which options it has.
func probe(ctx context.Context, bwrap string) (features, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap, "--help")
	cmd.Env = bwrapEnv
	out, err := cmd.CombinedOutput()
	if err != nil {
		return features{}, fmt.Errorf("sandbox unavailable: %s --help: %v: %s", bwrap, err, firstLine(string(out)))
	}
	help := string(out)
	has := func(opt string) bool { return strings.Contains(help, opt+" ") }
	for _, opt := range required {
		if !has(opt) {
			return features{}, fmt.Errorf("sandbox unavailable: %s has no %s option: install a newer bubblewrap (0.8 or later)", bwrap, opt)
		}
	}
	return features{disableUserns: has("--disable-userns"), cgroupTry: has("--unshare-cgroup-try")}, nil
}

// execSpec is one run.
type execSpec struct {
	workspace string // host path, mounted at /workspace
	code      string
	deps      []string
	timeout   time.Duration // 0: the configured one
	// watch is called every watchEvery during the run; an error stops the
	// run and becomes its cause.
	watch func() error
}

// watchEvery is how often a run's workspace is measured against its quota.
const watchEvery = 200 * time.Millisecond

// Why the gateway stopped a run.
var (
	errTimeout = errors.New("time limit")
	errQuota   = errors.New("workspace quota")
)

// execResult is how a run ended.
type execResult struct {
	status  int            // exit status of the code (bwrap passes it on); -1 when bwrap itself was killed
	signal  syscall.Signal // the signal that ended the code, if one did
	stopped error          // errTimeout, errQuota or what watch returned: the gateway stopped it
	stdout  *capped
	stderr  *capped
	elapsed time.Duration
	cpu     time.Duration
}

// exec runs code in a sandbox on spec.workspace and waits for it. The
// error is for a sandbox that could not be set up, or a ctx that ended;
// anything the code did is in the result.
func (s *Sandbox) exec(ctx context.Context, r *runner, spec execSpec) (*execResult, error) {
	timeout := spec.timeout
	if timeout <= 0 {
		timeout = s.cfg.Timeout
	}
	opts, command := s.args(r.feat, spec)

	// Three descriptors: bwrap reads its options from fd 3 (so its command
	// line, visible inside as PID 1's, shows no host path) and copies the
	// program from fd 4; the bootstrap writes to fd 5 once it runs, which
	// tells a sandbox that could not be set up from code that failed.
	argsR, argsW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	startedR, startedW, err := os.Pipe()
	if err != nil {
		closeAll(argsR, argsW)
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	codeR, codeW, err := os.Pipe()
	if err != nil {
		closeAll(argsR, argsW, startedR, startedW)
		return nil, fmt.Errorf("sandbox: %w", err)
	}

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	runCtx, cancelTimer := context.WithTimeoutCause(runCtx, timeout, errTimeout)
	defer cancelTimer()

	res := &execResult{stdout: &capped{max: s.cfg.OutputBytes}, stderr: &capped{max: s.cfg.OutputBytes}}
	cmd := exec.CommandContext(runCtx, r.bwrap, append([]string{"--args", "3", "--"}, command...)...)
	cmd.Env = bwrapEnv
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = res.stdout, res.stderr
	cmd.ExtraFiles = []*os.File{argsR, codeR, startedW}
	cmd.SysProcAttr = sysProcAttr(s.dropUID)
	// The sandbox's processes are in bwrap's process group or below bwrap
	// (--die-with-parent), and all of them in its PID namespace, which
	// the kernel empties when its first process dies.
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 2 * time.Second

	start := time.Now()
	err = cmd.Start()
	closeAll(argsR, codeR, startedW)
	if err != nil {
		closeAll(argsW, codeW, startedR)
		return nil, fmt.Errorf("sandbox: start %s: %w", r.bwrap, err)
	}
	// Pipes are written while bwrap reads them; a bwrap that dies early
	// makes the writes fail (EPIPE) rather than block.
	feed := func(w *os.File, data []byte) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = w.Write(data)
			_ = w.Close()
		}()
		return done
	}
	argsDone := feed(argsW, nulJoin(opts))
	codeDone := feed(codeW, []byte(spec.code))
	var started bytes.Buffer
	startedDone := make(chan struct{})
	go func() {
		defer close(startedDone)
		_, _ = io.Copy(&started, io.LimitReader(startedR, 16))
		_ = startedR.Close()
	}()

	watchDone := make(chan struct{})
	if spec.watch != nil {
		go func() {
			defer close(watchDone)
			t := time.NewTicker(watchEvery)
			defer t.Stop()
			for {
				select {
				case <-runCtx.Done():
					return
				case <-t.C:
					if err := spec.watch(); err != nil {
						stop(err)
						return
					}
				}
			}
		}()
	} else {
		close(watchDone)
	}

	waitErr := cmd.Wait()
	stop(nil) // ends the watcher
	<-watchDone
	<-argsDone
	<-codeDone
	<-startedDone
	res.elapsed = time.Since(start)
	if ps := cmd.ProcessState; ps != nil {
		res.cpu = ps.UserTime() + ps.SystemTime()
	}

	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sandbox: run stopped: %w", err)
	}
	if runCtx.Err() != nil {
		if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
			res.stopped = cause
		}
	}
	if started.Len() == 0 && res.stopped == nil {
		return nil, setupError(r.bwrap, s.cfg.Python, s.workspaceHint(spec.workspace), res.stderr.String(), waitErr)
	}
	res.status = -1
	if ps := cmd.ProcessState; ps != nil {
		res.status = ps.ExitCode()
	}
	// bwrap exits 128+n when the code was killed by signal n.
	if res.status > 128 && res.status < 128+65 {
		res.signal = syscall.Signal(res.status - 128)
	}
	return res, nil
}

// args are bwrap's options and the command for one run.
func (s *Sandbox) args(feat features, spec execSpec) (opts, command []string) {
	a := []string{
		"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
	}
	if feat.cgroupTry {
		a = append(a, "--unshare-cgroup-try")
	}
	if feat.disableUserns {
		a = append(a, "--disable-userns")
	}
	a = append(a,
		"--die-with-parent", "--new-session",
		"--uid", insideUID, "--gid", insideUID, "--hostname", "sandbox",
		"--clearenv",
	)
	for i := 0; i < len(sandboxEnv); i += 2 {
		a = append(a, "--setenv", sandboxEnv[i], sandboxEnv[i+1])
	}
	for _, d := range rootDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, f := range etcFiles {
		a = append(a, "--ro-bind-try", f, f)
	}
	a = append(a,
		"--proc", "/proc",
		"--dev", "/dev",
		"--size", strconv.FormatInt(s.cfg.TmpBytes, 10), "--tmpfs", "/tmp",
		"--size", strconv.Itoa(shmBytes), "--tmpfs", "/dev/shm",
		// /dev is a tmpfs of bwrap's: nothing to write there but devices.
		"--remount-ro", "/dev",
		"--bind", spec.workspace, insideWorkspace,
	)
	if len(spec.deps) > 0 && s.cfg.Wheelhouse != "" {
		a = append(a, "--ro-bind", s.cfg.Wheelhouse, insideWheelhouse)
	}
	a = append(a,
		"--file", "4", insideProgram,
		"--chdir", insideWorkspace,
		// Last: the root (bwrap's tmpfs, holding the mount points) read-only.
		"--remount-ro", "/",
	)
	command = append([]string{
		s.cfg.Python, "-I", "-S", "-c", bootPy,
		strconv.Itoa(s.cfg.CPUSeconds),
		strconv.FormatInt(s.cfg.MemoryBytes, 10),
		strconv.Itoa(s.cfg.MaxFiles),
		strconv.FormatInt(s.cfg.FileSizeBytes, 10),
		strconv.Itoa(s.cfg.MaxProcs),
		s.cfg.Python, insideProgram,
	}, spec.deps...)
	return a, command
}

// workspaceHint is what to do when bwrap cannot reach the workspace: name
// the directories above it that the sandbox's uid may not search.
func (s *Sandbox) workspaceHint(ws string) string {
	if s.dropUID < 0 {
		return ""
	}
	var blocked []string
	for d := filepath.Dir(ws); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			blocked = append([]string{d}, blocked...)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	fix := "give it search permission on each directory above it (chmod o+x)"
	if len(blocked) > 0 {
		fix = "give it search permission: chmod o+x " + strings.Join(blocked, " ")
	}
	return fmt.Sprintf("the gateway runs as root, so the sandbox runs as uid %d, which cannot reach %s; %s, "+
		"or set tools.sandbox.dir to a directory it can reach", s.dropUID, ws, fix)
}

// setupError explains a sandbox that did not start, from what bwrap said
// (its own lines start "bwrap: ").
func setupError(bwrap, python, wsHint, stderr string, waitErr error) error {
	why := ""
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "bwrap: ") {
			why = line
			break
		}
	}
	if why == "" {
		why = firstLine(stderr)
	}
	if why == "" && waitErr != nil {
		why = waitErr.Error()
	}
	low := strings.ToLower(why)
	switch {
	case strings.Contains(low, "namespace") || strings.Contains(low, "uid map") || strings.Contains(low, "operation not permitted"):
		return fmt.Errorf("sandbox unavailable: %s cannot create the sandbox's namespaces (%s): allow unprivileged user namespaces "+
			"(sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap); "+
			"in a container, its seccomp profile must allow them", bwrap, why)
	case strings.Contains(why, "Can't find source path") && strings.Contains(why, "Permission denied") && wsHint != "":
		return fmt.Errorf("sandbox unavailable: %s (%s)", wsHint, why)
	case strings.Contains(why, "execvp"):
		return fmt.Errorf("sandbox unavailable: %s cannot run %s inside the sandbox, which sees the host's /usr: "+
			"install python3 or set tools.sandbox.python (%s)", bwrap, python, why)
	}
	return fmt.Errorf("sandbox unavailable: %s could not set up the sandbox: %s", bwrap, why)
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	max     int
	buf     bytes.Buffer
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		n := min(room, len(p))
		c.buf.Write(p[:n])
		c.dropped += int64(len(p) - n)
	} else {
		c.dropped += int64(len(p))
	}
	return len(p), nil
}

func (c *capped) String() string { return c.buf.String() }

// text is the output for the model, marked when it was cut.
func (c *capped) text() string {
	s := strings.ToValidUTF8(c.buf.String(), "\uFFFD")
	if c.dropped > 0 {
		s += fmt.Sprintf("\n[… truncated: %s more not shown]", formatBytes(c.dropped))
	}
	return s
}

func nulJoin(args []string) []byte {
	var b bytes.Buffer
	for _, a := range args {
		b.WriteString(a)
		b.WriteByte(0)
	}
	return b.Bytes()
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// formatBytes is a size for people: 512 B, 1.5 KiB, 100 MiB.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 3; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + [...]string{"KiB", "MiB", "GiB", "TiB"}[exp]
}
