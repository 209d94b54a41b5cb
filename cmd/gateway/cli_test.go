package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI is `gateway args…` in this process.
func runCLI(args []string, environ []string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, strings.NewReader(""), &out, &errOut, environ)
	return out.String(), errOut.String(), err
}

// --config and --set go on either side of the command: `gateway --config
// x.yaml doctor` was refused as the unknown command "doctor".
func TestGlobalFlagsOnEitherSideOfTheCommand(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	for _, args := range [][]string{
		{"--config", s.config, "doctor"},
		{"doctor", "--config", s.config},
		{"--config=" + s.config, "--set", "log.level=debug", "doctor", "--timeout", "5s"},
		{"--set", "log.level=debug", "doctor", "--config", s.config},
	} {
		out, errOut, err := runCLI(args, s.env)
		if err != nil {
			t.Errorf("gateway %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
			continue
		}
		want := []string{s.config}
		if strings.Contains(strings.Join(args, " "), "--set") {
			want = append(want, "with 1 --set")
		}
		wantRow(t, out, "config", "OK", want...)
	}
	// Given on both sides, the one after the command wins; --set adds up.
	out, _, _ := runCLI([]string{"--config", "nowhere.yaml", "--set", "log.level=debug", "doctor", "--config", s.config, "--set", "log.format=json"}, s.env)
	wantRow(t, out, "config", "OK", s.config, "with 2 --set")

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	addr := "http.addr=127.0.0.1:" + port
	for _, args := range [][]string{
		{"--config", s.config, "--set", addr, "healthcheck"},
		{"--config", s.config, "healthcheck", "--set", addr, "--timeout", "5s"},
		{"healthcheck", "--config", s.config, "--set", addr},
	} {
		if out, errOut, err := runCLI(args, nil); err != nil || out != "ok\n" {
			t.Errorf("gateway %s: %q, %v\n%s", strings.Join(args, " "), out, err, errOut)
		}
	}

	for _, args := range [][]string{
		{"version"},
		{"--version"},
		{"--config", "nowhere.yaml", "version"},
		{"version", "--config", "nowhere.yaml", "--set", "log.level=debug"},
		{"--set", "log.level=debug", "--version"},
	} {
		if out, errOut, err := runCLI(args, nil); err != nil || !strings.HasPrefix(out, "Switchboard gateway ") {
			t.Errorf("gateway %s: %q, %v\n%s", strings.Join(args, " "), out, err, errOut)
		}
	}
}

// gateway help, and gateway help COMMAND, print to standard output and
// succeed; -h and --help still print to standard error with flag.ErrHelp
// (main exits 0 on it).
func TestHelpCommand(t *testing.T) {
	out, _, err := runCLI([]string{"help"}, nil)
	if err != nil {
		t.Fatalf("gateway help: %v", err)
	}
	for _, want := range []string{"gateway doctor", "gateway healthcheck", "gateway version", "gateway help", "-config", "-set", "-version"} {
		if !strings.Contains(out, want) {
			t.Errorf("gateway help lacks %q:\n%s", want, out)
		}
	}
	for cmd, wants := range map[string][]string{
		"doctor":      {"usage: gateway doctor", "-timeout", "-config"},
		"healthcheck": {"usage: gateway healthcheck", "-url", "-config"},
		"version":     {"usage: gateway version"},
		"help":        {"gateway doctor", "gateway help"},
	} {
		out, errOut, err := runCLI([]string{"help", cmd}, nil)
		if err != nil {
			t.Errorf("gateway help %s: %v", cmd, err)
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("gateway help %s lacks %q:\nstdout:\n%s\nstderr:\n%s", cmd, want, out, errOut)
			}
		}
	}
	if _, _, err := runCLI([]string{"help", "doctr"}, nil); err == nil || !strings.Contains(err.Error(), `unknown command "doctr"`) {
		t.Errorf("gateway help doctr: %v", err)
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"doctor", "-h"}, {"--config", "x.yaml", "doctor", "--help"}, {"healthcheck", "-h"}, {"version", "-h"}} {
		out, errOut, err := runCLI(args, nil)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(strings.ToLower(errOut), "usage") || out != "" {
			t.Errorf("gateway %s: %v, want flag.ErrHelp and the usage on stderr\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
		}
	}
}

// A word that is no command, or a flag no one defines, is refused saying
// what is wrong; nothing runs.
func TestUnknownCommandsAndFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"doctr"}, []string{`unknown command "doctr"`, "doctor, healthcheck, status, usage, help"}},
		{[]string{"--config", "x.yaml", "doctr"}, []string{`unknown command "doctr"`}},
		{[]string{"config.yaml"}, []string{`unknown command "config.yaml"`, "--config config.yaml"}},
		{[]string{"--bogus"}, []string{"-bogus"}},
		{[]string{"doctor", "--bogus"}, []string{"-bogus"}},
		{[]string{"--timeout", "5s", "doctor"}, []string{"-timeout", "after the command", "gateway doctor --timeout"}},
		{[]string{"doctor", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"version", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"--cpuprofile", "cpu.out", "doctor"}, []string{"--cpuprofile", "doctor"}},
		{[]string{"--version", "doctor"}, []string{"--version", "doctor"}},
		{[]string{"help", "doctor", "healthcheck"}, []string{"one command"}},
	} {
		out, _, err := runCLI(c.args, nil)
		if err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("gateway %s: %v, want an error\n%s", strings.Join(c.args, " "), err, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("gateway %s: %q lacks %q", strings.Join(c.args, " "), err, w)
			}
		}
	}
	if _, err := os.Stat("cpu.out"); err == nil {
		os.Remove("cpu.out")
		t.Error("--cpuprofile before a command it does not apply to started a profile")
	}
}

// The paths a config file writes are its folder's: a gateway started
// elsewhere with --config finds its guides and keeps its database beside
// the file, and leaves the working directory alone.
func TestConfigPathsAreTheConfigFilesFolder(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "my-guides"), os.DirFS("../../guides")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(`http: { addr: 127.0.0.1:0 }
metrics: { addr: "" }
storage: { dsn: data/gw.db }
providers: [{ name: main, kind: demo }]
guides: { dir: my-guides, default: assistant }
listeners: { stdin: { enabled: true } }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	cmd := exec.Command(self, "--config", cfg)
	cmd.Dir = elsewhere
	cmd.Env = append(hermeticEnv(), "GATEWAY_TEST_RUN_MAIN=1", "USER=tester")
	cmd.Stdin = strings.NewReader("what is 2*(3+4)?\n")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("gateway --config %s, from another directory: %v\nstdout:\n%s\nstderr:\n%s", cfg, err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "2*(3+4) = 14") {
		t.Errorf("no answer:\n%s\n%s", out.String(), errOut.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "gw.db")); err != nil {
		t.Errorf("the database is not beside the config file: %v", err)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) > 0 {
		t.Errorf("the gateway wrote into its working directory: %v", entries)
	}

	// The doctor reads the same paths.
	s := &doctorSetup{dir: dir, config: cfg, env: []string{"PATH=" + fakeBwrap(t, "#!/bin/sh\nexit 0\n"), "USER=tester"}}
	doc, err := s.doctor(t, nil)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, doc)
	}
	wantRow(t, doc, "guides", "OK", filepath.Join(dir, "my-guides"))
	wantRow(t, doc, "database", "OK", filepath.Join(dir, "data", "gw.db"))
}
