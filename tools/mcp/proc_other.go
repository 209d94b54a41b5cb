//go:build !unix

package mcp

import "os/exec"

// Elsewhere the child alone is stopped; what it started may outlive it.
func ownGroup(*exec.Cmd) {}

func killGroup(*exec.Cmd) {}
