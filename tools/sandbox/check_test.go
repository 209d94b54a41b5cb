//go:build linux

package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeBwrap is a bwrap that answers --help like the real one (so it
// passes for a bwrap with every option) and otherwise runs script.
func fakeBwrap(t *testing.T, script string) string {
	t.Helper()
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap is not installed: apt-get install bubblewrap (CI installs it)")
	}
	dir := t.TempDir()
	reachable(t, dir)
	p := filepath.Join(dir, "bwrap")
	body := "#!/bin/sh\nif [ \"$1\" = --help ]; then exec " + real + " --help; fi\n" + script
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckRefusesWithoutASandbox: a missing bwrap, one that cannot make
// namespaces, one too old, or a Python that is not there: Check says what
// to do, and the tools refuse with the same words rather than run the code
// some other way.
func TestCheckRefusesWithoutASandbox(t *testing.T) {
	needBwrap(t)
	emptyPath := t.TempDir()
	cases := []struct {
		name   string
		path   string // PATH, when set
		change func(*Config)
		want   []string
	}{
		{"not on PATH", emptyPath, nil, []string{"bwrap is not installed", "apt-get install bubblewrap"}},
		{"configured but missing", "", func(c *Config) { c.Bwrap = "/nonexistent/bwrap" }, []string{"tools.sandbox.bwrap", "apt-get install bubblewrap"}},
		{"no user namespaces", "", func(c *Config) {
			c.Bwrap = fakeBwrap(t, "echo 'bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n")
		}, []string{"cannot create the sandbox's namespaces", "No permissions to create new namespace", "kernel.unprivileged_userns_clone=1"}},
		{"uid map refused", "", func(c *Config) {
			c.Bwrap = fakeBwrap(t, "echo 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
		}, []string{"cannot create the sandbox's namespaces", "apparmor_restrict_unprivileged_userns"}},
		{"too old", "", func(c *Config) {
			dir := t.TempDir()
			reachable(t, dir)
			c.Bwrap = filepath.Join(dir, "bwrap")
			os.WriteFile(c.Bwrap, []byte("#!/bin/sh\necho '    --unshare-user  Create new user namespace'\n"), 0o755)
		}, []string{"has no --unshare-pid option", "bubblewrap (0.8 or later)"}},
		{"no python", "", func(c *Config) { c.Python = "/usr/bin/python-none" }, []string{"cannot run /usr/bin/python-none", "tools.sandbox.python"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.path != "" {
				t.Setenv("PATH", c.path)
			}
			base := t.TempDir()
			reachable(t, base)
			cfg := Config{Enabled: true, Dir: filepath.Join(base, "sandbox")}
			if c.change != nil {
				c.change(&cfg)
			}
			s, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Check(context.Background())
			if err == nil {
				t.Fatal("Check passed")
			}
			mustContain(t, "Check", err.Error(), c.want...)
			for _, tool := range []string{ToolPython} {
				_, err := call(t, s, sessA, tool, map[string]any{"code": "open('ran', 'w')"})
				if err == nil {
					t.Fatalf("%s ran without a sandbox", tool)
				}
				mustContain(t, tool, err.Error(), c.want...)
			}
			if _, err := os.Stat(filepath.Join(s.workspace(sessA), "ran")); err == nil {
				t.Fatal("the code ran")
			}
		})
	}
}

// TestCheckNamesAnUnreachableDir: as root the sandbox runs as nobody, who
// must be able to reach the workspaces.
func TestCheckNamesAnUnreachableDir(t *testing.T) {
	needBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("only a root gateway runs the sandbox as another uid")
	}
	base := t.TempDir() // 0700: nobody cannot enter
	s, err := New(Config{Enabled: true, Dir: filepath.Join(base, "sandbox")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Check(context.Background())
	if err == nil {
		t.Fatal("Check passed")
	}
	mustContain(t, "Check", err.Error(), "the sandbox runs as uid 65534, which cannot reach", "chmod o+x "+filepath.Dir(base)+",", "tools.sandbox.dir")
}

// TestCheckIsKept: a Check that failed is not repeated by every call, but
// is tried again later; one that passed is kept.
func TestCheckIsKept(t *testing.T) {
	needBwrap(t)
	base := t.TempDir()
	reachable(t, base)
	s, err := New(Config{Enabled: true, Dir: filepath.Join(base, "sandbox"), Bwrap: "/nonexistent/bwrap"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.ready(ctx); err == nil {
		t.Fatal("ready with a missing bwrap")
	}
	real, _ := exec.LookPath("bwrap")
	s.cfg.Bwrap = real
	if _, err := s.ready(ctx); err == nil {
		t.Fatal("the failed check was not kept")
	}
	s.checkMu.Lock()
	s.checked = time.Now().Add(-checkAgain)
	s.checkMu.Unlock()
	if _, err := s.ready(ctx); err != nil {
		t.Fatalf("ready after bwrap appeared: %v", err)
	}
	s.cfg.Bwrap = "/nonexistent/bwrap"
	if _, err := s.ready(ctx); err != nil {
		t.Fatalf("a passed check was not kept: %v", err)
	}
}

func TestConfig(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.Dir != DefaultDir || c.Python != DefaultPython || c.Timeout != 30*time.Second || c.CPUSeconds != 10 || c.MemoryBytes != 1<<30 ||
		c.MaxFiles != 256 || c.FileSizeBytes != 64<<20 || c.MaxProcs != 64 || c.OutputBytes != 64<<10 || c.QuotaBytes != 100<<20 ||
		c.TmpBytes != 64<<20 || c.Concurrency < 2 {
		t.Fatalf("defaults: %+v", c)
	}
	bad := []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Python = "python3" }, "tools.sandbox.python"},
		{func(c *Config) { c.Python = "/usr/bin/../bin/python3" }, "tools.sandbox.python"},
		{func(c *Config) { c.Timeout = -time.Second }, "tools.sandbox.timeout"},
		{func(c *Config) { c.MemoryBytes = 1 << 20 }, "tools.sandbox.memory_mb"},
		{func(c *Config) { c.MaxFiles = 3 }, "tools.sandbox.max_files"},
		{func(c *Config) { c.MaxProcs = -1 }, "tools.sandbox.max_procs"},
		{func(c *Config) { c.QuotaBytes = -1 }, "tools.sandbox.quota_mb"},
		{func(c *Config) { c.Wheelhouse = "wheels" }, "tools.sandbox.wheelhouse"},
	}
	for _, b := range bad {
		c := Config{}.WithDefaults()
		b.change(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Validate = %v, want %s", err, b.want)
		}
		if _, err := New(c, nil); err == nil {
			t.Errorf("New accepted %+v", c)
		}
	}
}

func TestRequirement(t *testing.T) {
	for _, ok := range []string{"pandas", "numpy==2.1", "scikit-learn>=1.3,<2", "requests[socks]", "zope.interface", "a_b-c"} {
		if !requirement.MatchString(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"-r x", "--index-url=x", "http://x/y.whl", "./pkg", "pkg @ file:///etc", "pkg;python_version>'3'", "", "pkg==1 --pre"} {
		if requirement.MatchString(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 64 << 20: "64 MiB", 1 << 30: "1 GiB", 134464: "131.3 KiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{30 * time.Second: "30 s", 1500 * time.Millisecond: "1.5 s", 2 * time.Minute: "2 min", 90 * time.Second: "90 s"} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%s) = %q, want %q", d, got, want)
		}
	}
	for in, want := range map[string]string{"abc": "abc", "ab\xc3": "ab", "a\xe2\x82": "a", "é": "é", "a\xf0\x9f\x98": "a"} {
		if got := string(trimPartialRune([]byte(in))); got != want {
			t.Errorf("trimPartialRune(%q) = %q, want %q", in, got, want)
		}
	}
}
