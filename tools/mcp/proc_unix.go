//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// ownGroup starts the child in a process group of its own: a server
// started through a launcher (npx, uvx, a shell script) is a tree, and
// killGroup must reach all of it. It also keeps the terminal's Ctrl-C from
// reaching the child before the gateway has stopped it in order.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills what is left of the child's process group once the
// child itself was stopped.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
