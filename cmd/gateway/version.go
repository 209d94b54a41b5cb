package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is stamped at build time:
//
//	go build -ldflags "-X main.version=v0.1.0" ./cmd/gateway
//
// (make build and the Dockerfile do). Empty: the build info says.
var version = ""

// buildVersion is what `gateway version` prints.
type buildVersion struct {
	Version  string // v0.1.0, a pseudo-version, or "devel"
	Revision string // the VCS commit, when the build recorded it
	Time     string // the commit's time
	Modified bool   // built from a work tree with uncommitted changes
	Go       string // runtime.Version()
	Platform string // GOOS/GOARCH
}

// currentVersion reads the stamped version, or else the module version the
// go command recorded (go install …@v0.1.0, or a local go build from a VCS
// checkout), and the commit the binary was built from.
func currentVersion() buildVersion {
	v := buildVersion{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	return v
}

// runVersion is `gateway version` (and `gateway --version`).
func runVersion(args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("gateway version", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "usage: gateway version (or gateway --version)")
		fmt.Fprintln(errOut, "Prints the version, the commit it was built from, the Go version and the platform.")
		fmt.Fprintln(errOut, "--config and --set are accepted and ignored, so they may stay on a command line that names version.")
	}
	// Accepted like every command's, and not used: the version is the
	// binary's, whatever the configuration.
	fs.String("config", "", "ignored")
	fs.Var(new(stringList), "set", "ignored")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("version: unexpected argument %q", fs.Arg(0))
	}
	v := currentVersion()
	fmt.Fprintf(out, "Switchboard gateway %s\n", v.Version)
	if v.Revision != "" {
		commit := v.Revision
		var notes []string
		if v.Modified {
			notes = append(notes, "modified")
		}
		if v.Time != "" {
			notes = append(notes, v.Time)
		}
		if len(notes) > 0 {
			commit += " (" + strings.Join(notes, ", ") + ")"
		}
		fmt.Fprintf(out, "commit: %s\n", commit)
	}
	fmt.Fprintf(out, "go:     %s %s\n", v.Go, v.Platform)
	return nil
}
