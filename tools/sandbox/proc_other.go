//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
	"syscall"
)

// bubblewrap is Linux's: elsewhere the tools refuse.

func runAs() int { return -1 }

func sysProcAttr(int) *syscall.SysProcAttr { return nil }

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}

func lookPath(string) (string, error) {
	return "", errors.New("the sandbox needs Linux")
}

const nonblock = 0

const (
	sigXCPU = syscall.Signal(24)
	sigKill = syscall.Signal(9)
)
