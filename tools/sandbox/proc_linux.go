//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"syscall"
)

// nobody is the uid and gid bwrap runs as when the gateway is root.
const nobody = 65534

// runAs is the uid to run bwrap as: the gateway's own, except for root.
//
// Root is dropped because of the process limit: the kernel does not apply
// RLIMIT_NPROC to processes of the host's uid 0, whatever namespace they
// are in and whatever uid they have inside it (bwrap maps the inside uid
// onto the uid that started it). Run as an unprivileged uid, the limit
// holds, and the sandbox has no host privilege left to misuse should it
// ever get out of its namespaces. The uid needs search permission on the
// workspaces' directory and its parents (New makes the directory 0711;
// Check names a parent that denies it), and owns the workspaces.
func runAs() int {
	if os.Geteuid() == 0 {
		return nobody
	}
	return -1
}

// sysProcAttr starts bwrap in a process group of its own (the wall-clock
// kill takes the whole group) and, for a root gateway, as uid.
func sysProcAttr(uid int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if uid >= 0 {
		a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}
	}
	return a
}

// killGroup kills bwrap's process group. What the code started inside is
// killed with it: bwrap's children die with it (--die-with-parent, which
// also covers the gateway dying), and the kernel kills every process of a
// PID namespace when its first one dies.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

func lookPath(name string) (string, error) { return exec.LookPath(name) }

// nonblock opens a FIFO without waiting for its other end.
const nonblock = syscall.O_NONBLOCK

// The signals a run's report tells apart.
const (
	sigXCPU = syscall.SIGXCPU
	sigKill = syscall.SIGKILL
)
