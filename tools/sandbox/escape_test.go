//go:build linux

package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The escape suite: code that tries to get out, or to take the host down,
// is refused or killed with a message that says why, and the gateway (this
// test process) carries on.

func TestEscapeHostFiles(t *testing.T) {
	s := newSandbox(t, nil)
	// A stand-in for the gateway's database, next to the workspaces as
	// data/switchboard.db is next to data/sandbox.
	db := filepath.Join(filepath.Dir(s.cfg.Dir), "switchboard.db")
	if err := os.WriteFile(db, []byte("SQLite format 3 gateway-secret-rows"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := fmt.Sprintf(`
import os
for p in ["/etc/shadow", "/etc/passwd", %q, "../switchboard.db", "/root/.bashrc", "/proc/1/root/etc/shadow"]:
    try:
        with open(p, "rb") as f:
            print("READ", p, f.read(64))
    except OSError as e:
        print("refused", p, type(e).__name__)
print("etc:", sorted(os.listdir("/etc")))
print("root:", sorted(os.listdir("/")))
`, db)
	out := python(t, s, sessA, code).Content
	mustContain(t, "result", out, "exit status 0",
		"refused /etc/shadow FileNotFoundError", "refused /etc/passwd FileNotFoundError",
		"refused "+db+" FileNotFoundError", "refused ../switchboard.db FileNotFoundError")
	mustNotContain(t, "result", out, "READ", "gateway-secret-rows", "shadow'")
	// What the root holds: the mount points, nothing of the host's own.
	mustNotContain(t, "result", out, "'root'", "'home'", "'var'", "'data'", "'work'")
}

func TestEscapeEnvironment(t *testing.T) {
	s := newSandbox(t, nil)
	const secret = "sk-test-7f3a9c-never-inside"
	t.Setenv("SWITCHBOARD_TEST_API_KEY", secret)
	t.Setenv("OPENAI_API_KEY", secret)
	out := python(t, s, sessA, `
import os
print("env:", sorted(os.environ))
seen = 0
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    for f in ("environ", "cmdline"):
        try:
            data = open(f"/proc/{pid}/{f}", "rb").read()
        except OSError as e:
            print("unreadable", pid, f, e)
            continue
        seen += 1
        print(pid, f, data.replace(b"\0", b" ")[:300])
print("read", seen, "files")
`).Content
	mustContain(t, "result", out, "exit status 0", "env: ['HOME', 'LANG',", "1 environ", "1 cmdline")
	mustNotContain(t, "result", out, secret, "API_KEY", "unreadable", s.cfg.Dir)
	// PID 1 is bwrap's init: its environment is bwrap's, which the gateway
	// gave only PATH, HOME and LANG.
	mustContain(t, "result", out, "1 environ b'PATH=/usr/local/bin:/usr/bin:/bin HOME=/workspace LANG=C.UTF-8 '")
}

func TestEscapeNetwork(t *testing.T) {
	s := newSandbox(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	out := python(t, s, sessA, fmt.Sprintf(`
import socket
for host, port in [("127.0.0.1", %d), ("1.1.1.1", 53), ("example.com", 80)]:
    try:
        socket.create_connection((host, port), timeout=2).close()
        print("CONNECTED", host)
    except OSError as e:
        print("refused", host, e)
`, port)).Content
	mustContain(t, "result", out, "exit status 0", "refused 127.0.0.1 [Errno 111] Connection refused",
		"refused 1.1.1.1 [Errno 101] Network is unreachable", "refused example.com", "note: the sandbox has no network")
	mustNotContain(t, "result", out, "CONNECTED")
	select {
	case <-accepted:
		t.Fatal("the host's listener accepted a connection from the sandbox")
	default:
	}
}

func TestEscapeWriteOutsideWorkspace(t *testing.T) {
	s := newSandbox(t, nil)
	marker := fmt.Sprintf("sbx-escape-%d", time.Now().UnixNano())
	out := python(t, s, sessA, fmt.Sprintf(`
import os
for d in ["/", "/usr", "/usr/lib", "/etc", "/dev", "/proc", "/sandbox", "/tmp", "/workspace"]:
    p = os.path.join(d, %q)
    try:
        with open(p, "w") as f:
            f.write("x")
        print("WROTE", d)
    except OSError as e:
        print("refused", d, e.strerror)
`, marker)).Content
	mustContain(t, "result", out, "exit status 0", "refused / Read-only file system", "refused /usr Read-only file system",
		"refused /usr/lib Read-only file system", "refused /dev Read-only file system", "refused /sandbox Read-only file system",
		"WROTE /tmp", "WROTE /workspace")
	mustNotContain(t, "result", out, "WROTE /\n", "WROTE /usr", "WROTE /etc", "WROTE /dev", "WROTE /proc", "WROTE /sandbox")
	for _, d := range []string{"/", "/usr", "/usr/lib", "/etc", "/tmp"} {
		if _, err := os.Stat(filepath.Join(d, marker)); err == nil {
			os.Remove(filepath.Join(d, marker))
			t.Errorf("the sandbox wrote %s on the host", filepath.Join(d, marker))
		}
	}
	if _, err := os.Stat(filepath.Join(s.workspace(sessA), marker)); err != nil {
		t.Errorf("the file written in /workspace is not in the workspace: %v", err)
	}
}

// TestEscapeForkBomb: the process limit holds (also when the tests run as
// root, which the kernel exempts from it: the sandbox then runs as nobody),
// and a fork bomb ends at the time limit with nothing left behind.
func TestEscapeForkBomb(t *testing.T) {
	s := newSandbox(t, func(c *Config) { c.Timeout = 2 * time.Second; c.MaxProcs = 32 })
	out := python(t, s, sessA, `
import os, time
children = 0
try:
    for i in range(200):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError as e:
    print("fork refused after", children, "children:", e)
`).Content
	mustContain(t, "limit", out, "fork refused after", "Resource temporarily unavailable", "note: the code may have at most 32 processes and threads")
	var n int
	if _, err := fmt.Sscanf(out[strings.Index(out, "fork refused after"):], "fork refused after %d", &n); err != nil || n >= 32 {
		t.Fatalf("%d children before the limit (%v), want fewer than 32:\n%s", n, err, out)
	}

	// The message comes only from the wall-clock kill: a bomb that held
	// the run past it would fail python() at the helper's deadline.
	out = python(t, s, sessA, `
import os
print("bombing", flush=True)
while True:
    try:
        os.fork()
    except OSError:
        pass
`).Content
	mustContain(t, "bomb", out, "killed: the code ran longer than 2.0 s, its time limit", "bombing")
	if left := sandboxProcesses(t); len(left) > 0 {
		t.Fatalf("sandbox processes left after the run: %v", left)
	}
	mustContain(t, "the next run", python(t, s, sessA, "print('still here')").Content, "exit status 0", "still here")
}

// sandboxProcesses lists the host's processes whose command line has one
// of markers (the sandbox's program, by default).
func sandboxProcesses(t *testing.T, markers ...string) []string {
	t.Helper()
	var left []string
	// The kernel tears a PID namespace down after its first process dies;
	// give it a moment.
	for try := 0; try < 50; try++ {
		left = left[:0]
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			for _, m := range append(markers, insideProgram) {
				if err == nil && strings.Contains(string(cmd), m) {
					left = append(left, e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
					break
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return left
}

func TestEscapeCPU(t *testing.T) {
	s := newSandbox(t, func(c *Config) { c.CPUSeconds = 1 })
	out := python(t, s, sessA, "print('spinning')\nwhile True:\n    pass\n").Content
	mustContain(t, "result", out, "killed: the code used its 1 s of CPU time", "spinning")
}

func TestEscapeWallClock(t *testing.T) {
	s := newSandbox(t, func(c *Config) { c.Timeout = 1500 * time.Millisecond })
	out := python(t, s, sessA, "import time\nprint('sleeping')\ntime.sleep(600)\n").Content
	mustContain(t, "result", out, "killed: the code ran longer than 1.5 s, its time limit", "stdout:\nsleeping")
}

func TestEscapeMemory(t *testing.T) {
	s := newSandbox(t, nil)
	out := python(t, s, sessA, "b = bytearray(1 << 30)\nprint('ALLOCATED', len(b))\n").Content
	mustContain(t, "result", out, "exit status 1", "MemoryError", "note: each process may use at most 1 GiB of memory")
	mustNotContain(t, "result", out, "ALLOCATED")
}

func TestEscapeBigFile(t *testing.T) {
	s := newSandbox(t, nil)
	out := python(t, s, sessA, `
chunk = b"x" * (1 << 20)
written = 0
try:
    with open("big.bin", "wb") as f:
        for i in range(200):
            f.write(chunk)
            written += len(chunk)
except OSError as e:
    print("stopped at", written >> 20, "MiB:", e)
`).Content
	mustContain(t, "result", out, "stopped at 64 MiB: [Errno 27] File too large", "note: files are limited to 64 MiB each")
	fi, err := os.Stat(filepath.Join(s.workspace(sessA), "big.bin"))
	if err != nil || fi.Size() > DefaultFileSize {
		t.Fatalf("big.bin: %v, %d bytes", err, fi.Size())
	}
}

// TestEscapeQuota: a workspace filled past its quota by many files below
// the file size limit stops the run, and no code runs until files are
// removed.
func TestEscapeQuota(t *testing.T) {
	s := newSandbox(t, func(c *Config) { c.QuotaBytes = 8 << 20; c.FileSizeBytes = 2 << 20 })
	out := python(t, s, sessA, `
import time
chunk = b"x" * (2 << 20)
for i in range(100):
    with open(f"part{i}.bin", "wb") as f:
        f.write(chunk)
    time.sleep(0.05)
print("DONE")
`).Content
	mustContain(t, "result", out, "killed: the workspace went over its quota (8 MiB", "over its 8 MiB quota: remove files")
	mustNotContain(t, "result", out, "DONE")
	_, err := call(t, s, sessA, ToolPython, map[string]any{"code": "print(1)"})
	if err == nil || !strings.Contains(err.Error(), "nothing runs until files are removed") {
		t.Fatalf("a run over quota: %v", err)
	}
	if _, err := call(t, s, sessA, ToolWrite, map[string]any{"path": "more.txt", "content": strings.Repeat("y", 1<<20)}); err == nil ||
		!strings.Contains(err.Error(), "quota") {
		t.Fatalf("a write over quota: %v", err)
	}
	files, err := s.Files(sessA)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, err := call(t, s, sessA, ToolWrite, map[string]any{"path": f.Path, "delete": true}); err != nil {
			t.Fatal(err)
		}
	}
	mustContain(t, "after removing", python(t, s, sessA, "print('runs again')").Content, "runs again")
}

// TestEscapeSymlinkOut: links the code makes to outside the workspace are
// not followed by the gateway's file tools.
func TestEscapeSymlinkOut(t *testing.T) {
	s := newSandbox(t, nil)
	out := python(t, s, sessA, `
import os
os.symlink("/", "root")
os.symlink("/etc/shadow", "shadow")
os.symlink("../../../../../../../etc/passwd", "up")
os.makedirs("sub")
os.symlink("../inside.txt", "sub/ok")
open("inside.txt", "w").write("fine")
os.mkfifo("pipe")
print("linked")
`).Content
	mustContain(t, "run", out, "linked")
	for _, p := range []string{"root/etc/passwd", "root/etc/shadow", "shadow", "up", "root"} {
		res, err := call(t, s, sessA, ToolRead, map[string]any{"path": p})
		if err == nil || !strings.Contains(err.Error(), "leads outside /workspace") {
			t.Errorf("sandbox_fs_read %s = %q, %v; want it refused as leading outside", p, res.Content, err)
		}
	}
	if _, err := call(t, s, sessA, ToolWrite, map[string]any{"path": "root/tmp/escaped", "content": "x"}); err == nil ||
		!strings.Contains(err.Error(), "leads outside /workspace") {
		t.Errorf("sandbox_fs_write through the link: %v", err)
	}
	if _, err := os.Stat("/tmp/escaped"); err == nil {
		os.Remove("/tmp/escaped")
		t.Error("sandbox_fs_write wrote /tmp/escaped on the host")
	}
	// A link inside the workspace is fine; a FIFO is refused without
	// waiting for a writer.
	res, err := call(t, s, sessA, ToolRead, map[string]any{"path": "sub/ok"})
	if err != nil || res.Content != "fine" {
		t.Errorf("sandbox_fs_read sub/ok = %q, %v", res.Content, err)
	}
	if _, err := call(t, s, sessA, ToolRead, map[string]any{"path": "pipe"}); err == nil || !strings.Contains(err.Error(), "a FIFO") {
		t.Errorf("sandbox_fs_read of a FIFO: %v", err)
	}
	list, err := call(t, s, sessA, ToolList, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "listing", list.Content, "root -> /", "shadow -> /etc/shadow", "inside.txt  4 B", "pipe  (a FIFO)")
	// Removing the workspace removes the links, not what they point to.
	if err := s.Remove(sessA); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatalf("/etc/passwd after Remove: %v", err)
	}
}

// TestRunLeavesNothingRunning: a run that starts background processes and
// returns leaves none of them behind (the PID namespace dies with it).
func TestRunLeavesNothingRunning(t *testing.T) {
	s := newSandbox(t, nil)
	out := python(t, s, sessA, `
import os, subprocess
subprocess.Popen(["/usr/bin/python3", "-c", "import time; time.sleep(600)"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    import time
    time.sleep(600)
print("left children behind")
`).Content
	mustContain(t, "result", out, "exit status 0", "left children behind")
	if left := sandboxProcesses(t, "time.sleep(600)"); len(left) > 0 {
		t.Fatalf("processes left: %v", left)
	}
}

// TestEscapeHiddenFiles: files behind directories the code made
// unreadable still count against the quota, and the workspace stays the
// gateway's to list and remove.
func TestEscapeHiddenFiles(t *testing.T) {
	s := newSandbox(t, func(c *Config) { c.QuotaBytes = 8 << 20; c.FileSizeBytes = 2 << 20 })
	out := python(t, s, sessA, `
import os, time
os.makedirs("hidden/deeper")
chunk = b"x" * (2 << 20)
for i in range(100):
    os.chmod("hidden/deeper", 0o700)
    with open(f"hidden/deeper/part{i}.bin", "wb") as f:
        f.write(chunk)
    os.chmod("hidden/deeper", 0o300)  # write and search, no listing
    os.chmod("hidden", 0o100)
    time.sleep(0.05)
    os.chmod("hidden", 0o700)
print("DONE")
`).Content
	mustContain(t, "result", out, "killed: the workspace went over its quota")
	mustNotContain(t, "result", out, "DONE")

	python(t, s, sessB, "import os\nos.makedirs('locked')\nopen('locked/secret.txt', 'w').write('x')\nos.chmod('locked', 0)\nos.chmod('.', 0)")
	files, err := s.Files(sessB)
	if err != nil || len(files) != 1 || files[0].Path != "locked/secret.txt" {
		t.Fatalf("Files = %v, %v", files, err)
	}
	mustContain(t, "next run", python(t, s, sessB, "import os\nprint(sorted(os.listdir('.')))").Content, "['locked']")
	if err := s.Remove(sessB); err != nil {
		t.Fatal(err)
	}
}
