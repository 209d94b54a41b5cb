package main

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func runVersionCmd(t *testing.T) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"version"}, strings.NewReader(""), &out, &errOut, nil); err != nil {
		t.Fatalf("gateway version: %v\n%s", err, errOut.String())
	}
	return out.String()
}

// A version stamped with -ldflags "-X main.version=…" is what is printed,
// with the Go version and the platform.
func TestVersionStamped(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = "v9.9.9-test"
	out := runVersionCmd(t)
	for _, want := range []string{"Switchboard gateway v9.9.9-test\n", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
}

// Without a stamp, the build info says: a module version (go install
// …@v0.1.0) or "devel", never the go command's "(devel)" placeholder.
func TestVersionWithoutStampFallsBackToBuildInfo(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = ""
	out := runVersionCmd(t)
	first, _, _ := strings.Cut(out, "\n")
	v := strings.TrimPrefix(first, "Switchboard gateway ")
	if v == first || v == "" || strings.Contains(v, "(devel)") {
		t.Errorf("version line %q: want a version or devel", first)
	}
	if !strings.Contains(out, runtime.Version()) {
		t.Errorf("no Go version:\n%s", out)
	}
	if err := run(context.Background(), []string{"version", "extra"}, nil, &bytes.Buffer{}, &bytes.Buffer{}, nil); err == nil {
		t.Error("gateway version extra: no error")
	}
}

// make build's binary: the version stamped with -X main.version is what
// it prints (a misspelt -X is silently ignored by the linker).
func TestVersionStampedBuild(t *testing.T) {
	bin := stampedGateway(t)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	if !strings.Contains(string(out), "Switchboard gateway "+stampVersion+"\n") {
		t.Errorf("the stamped version is not printed:\n%s", out)
	}
}

// The binary the Dockerfile builds (make static): CGO_ENABLED=0, -trimpath,
// the version stamped. It is static (no interpreter, no shared libraries:
// it runs on distroless/static or scratch) and prints the stamped version.
// Without cgo every package is compiled again (minutes on a cold cache),
// so it runs only with GATEWAY_TEST_STATIC=1.
func TestVersionStaticBuild(t *testing.T) {
	if os.Getenv("GATEWAY_TEST_STATIC") != "1" {
		t.Skip("set GATEWAY_TEST_STATIC=1 to build the container's static binary (make static builds the same)")
	}
	bin := buildGateway(t, &staticBuild, "gateway-static", []string{"CGO_ENABLED=0"}, "-trimpath", "-ldflags", "-s -w -X main.version="+stampVersion)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	if !strings.Contains(string(out), "Switchboard gateway "+stampVersion+"\n") {
		t.Errorf("the stamped version is not printed:\n%s", out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Skipf("not an ELF binary (%v): nothing more to check on %s", err, runtime.GOOS)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v: not static", libs)
	}
}

const stampVersion = "v0.0.0-stamp-test"

type onceBuild struct {
	once sync.Once
	path string
	err  error
}

var stampedBuild, staticBuild onceBuild

// stampedGateway is ./cmd/gateway built as make build builds it, with the
// version stamped; only the link differs from the crash tests' build, so
// it costs little once that is cached.
func stampedGateway(t *testing.T) string {
	t.Helper()
	return buildGateway(t, &stampedBuild, "gateway-stamped", nil, "-ldflags", "-X main.version="+stampVersion)
}

// buildGateway builds ./cmd/gateway once per test run, next to the crash
// tests' build (and removed with it).
func buildGateway(t *testing.T, b *onceBuild, name string, env []string, flags ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the gateway binary")
	}
	b.once.Do(func() {
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			b.err = err
			return
		}
		removeStaleBuilds()
		dir := filepath.Join(os.TempDir(), buildDirPrefix+strconv.Itoa(os.Getpid()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.err = err
			return
		}
		bin := filepath.Join(dir, name)
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			goTool = "go"
		}
		args := append(append([]string{"build"}, flags...), "-o", bin, "./cmd/gateway")
		cmd := exec.Command(goTool, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("%s go %s: %v\n%s", strings.Join(env, " "), strings.Join(args, " "), err, out)
			return
		}
		b.path = bin
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// -h lists the subcommands, not only the flags; a word that is no command
// is refused naming the ones there are (it was silently ignored before).
func TestHelpListsCommands(t *testing.T) {
	var errOut bytes.Buffer
	err := run(context.Background(), []string{"-h"}, strings.NewReader(""), &bytes.Buffer{}, &errOut, nil)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("gateway -h: %v, want flag.ErrHelp (main exits 0 on it)", err)
	}
	for _, want := range []string{"gateway doctor", "gateway healthcheck", "gateway version", "-config", "-set"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, errOut.String())
		}
	}
	err = run(context.Background(), []string{"--config", "nowhere.yaml", "doctr"}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown command "doctr"`) || !strings.Contains(err.Error(), "doctor") {
		t.Errorf("gateway doctr: %v", err)
	}
}
