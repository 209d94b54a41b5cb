//go:build linux

package sandbox

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/tools"
)

// chartCode draws a bar chart as a PNG with the standard library only
// (zlib and struct: matplotlib is not installed here) and prints the
// numbers behind it.
const chartCode = `
import struct, zlib
values = [3, 7, 5, 9]
W, H = 200, 120
rows = []
for y in range(H):
    row = bytearray()
    for x in range(W):
        bar = x * len(values) // W
        top = H - values[bar] * H // 10
        inside = y >= top and x % (W // len(values)) >= 8
        row += bytes((30, 120, 200) if inside else (255, 255, 255))
    rows.append(b"\x00" + bytes(row))

def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

png = (b"\x89PNG\r\n\x1a\n"
       + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(b"".join(rows)))
       + chunk(b"IEND", b""))
with open("chart.png", "wb") as f:
    f.write(png)
print("mean", sum(values) / len(values), "max", max(values))
`

func TestPythonChartArrivesAsImage(t *testing.T) {
	s := newSandbox(t, nil)
	res := python(t, s, sessA, chartCode)
	mustContain(t, "result", res.Content, "exit status 0", "mean 6.0 max 9", "files written: chart.png (", "shown to the user: chart.png")
	if len(res.Images) != 1 {
		t.Fatalf("%d images, want 1: %s", len(res.Images), res.Content)
	}
	img := res.Images[0]
	if img.MIMEType != "image/png" || img.Alt != "chart.png" || img.URL != "" {
		t.Fatalf("image = %+v", img)
	}
	data, err := base64.StdEncoding.DecodeString(img.Data)
	if err != nil {
		t.Fatal(err)
	}
	pic, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the chart is not a PNG: %v", err)
	}
	if b := pic.Bounds(); b.Dx() != 200 || b.Dy() != 120 {
		t.Fatalf("chart is %v", b)
	}
	// The last bar (9 of 10) reaches near the top; above the first (3)
	// is white.
	blue, white := color.RGBAModel.Convert(pic.At(190, 20)).(color.RGBA), color.RGBAModel.Convert(pic.At(30, 20)).(color.RGBA)
	if blue != (color.RGBA{30, 120, 200, 255}) || white != (color.RGBA{255, 255, 255, 255}) {
		t.Fatalf("pixels: bar %v, background %v", blue, white)
	}

	// Unchanged, the chart is not sent again; redrawn, it is.
	if res := python(t, s, sessA, "print('no drawing')"); len(res.Images) != 0 {
		t.Fatalf("an unchanged picture came back: %s", res.Content)
	}
	if res := python(t, s, sessA, strings.Replace(chartCode, "[3, 7, 5, 9]", "[1, 2, 3, 4]", 1)); len(res.Images) != 1 {
		t.Fatalf("a redrawn chart did not come back: %s", res.Content)
	}
}

func TestPythonSVGAndImageLimits(t *testing.T) {
	s := newSandbox(t, nil)
	res := python(t, s, sessA, `
bars = [4, 8, 6]
svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="120" height="100">']
for i, v in enumerate(bars):
    svg.append(f'<rect x="{10 + i * 35}" y="{100 - v * 10}" width="30" height="{v * 10}" fill="teal"/>')
svg.append("</svg>")
open("bars.svg", "w").write("\n".join(svg))
open("bad.png", "w").write("not a picture")
for i in range(5):
    open(f"copy{i}.svg", "w").write("\n".join(svg))
print("total", sum(bars))
`)
	mustContain(t, "result", res.Content, "total 18", "shown to the user: bars.svg, copy0.svg, copy1.svg, copy2.svg",
		"copy3.svg (too many pictures in one run)", "copy4.svg (too many pictures in one run)", "not shown: bad.png (not a PNG file), copy3.svg")
	if len(res.Images) != maxImages || res.Images[0].MIMEType != "image/svg+xml" || res.Images[0].Alt != "bars.svg" {
		t.Fatalf("images: %d, first %+v", len(res.Images), res.Images[0].Alt)
	}
	svg, _ := base64.StdEncoding.DecodeString(res.Images[0].Data)
	mustContain(t, "svg", string(svg), `<rect x="10" y="60" width="30" height="40" fill="teal"/>`)
}

func TestPythonErrorsAndOutput(t *testing.T) {
	s := newSandbox(t, nil)
	out := python(t, s, sessA, "print('before')\nraise ValueError('boom')\n").Content
	mustContain(t, "traceback", out, "exit status 1", "stdout:\nbefore\n",
		"File \"/sandbox/main.py\", line 2, in <module>\n    raise ValueError('boom')", "ValueError: boom")
	out = python(t, s, sessA, "import sys\nsys.stdout.write('x' * 200000)\nsys.stderr.write('e' * 100)\nsys.exit(3)").Content
	mustContain(t, "capped", out, "exit status 3", "[… truncated: 131.3 KiB more not shown]", "stderr:\n"+strings.Repeat("e", 100))
	if !strings.Contains(out, "stdout:\n"+strings.Repeat("x", DefaultOutputBytes)+"\n[… truncated") {
		t.Fatalf("stdout is not its first %d bytes and the mark", DefaultOutputBytes)
	}
	// Modules the model wrote into the workspace import as usual.
	if _, err := call(t, s, sessA, ToolWrite, map[string]any{"path": "helpers.py", "content": "def double(x):\n    return 2 * x\n"}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "import", python(t, s, sessA, "import helpers\nprint(helpers.double(21))").Content, "stdout:\n42\n")
}

func TestPythonFilesPersist(t *testing.T) {
	s := newSandbox(t, nil)
	python(t, s, sessA, "import os\nos.makedirs('out')\nopen('out/result.txt', 'w').write('41 + 1')\nopen('notes.md', 'w').write('# notes')")
	// The next turn, and a restarted gateway, find them.
	mustContain(t, "next run", python(t, s, sessA, "print(open('out/result.txt').read())").Content, "41 + 1")
	again, err := New(s.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "after restart", python(t, again, sessA, "print(open('out/result.txt').read())").Content, "41 + 1")
	files, err := again.Files(sessA)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Path != "notes.md" || files[0].Size != 7 || files[1].Path != "out/result.txt" || files[1].ModTime.IsZero() {
		t.Fatalf("Files = %+v", files)
	}
	if err := again.Remove(sessA); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(again.workspace(sessA)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the workspace is still there: %v", err)
	}
	if files, err := again.Files(sessA); err != nil || len(files) != 0 {
		t.Fatalf("Files after Remove = %v, %v", files, err)
	}
	mustContain(t, "after Remove", python(t, again, sessA, "import os\nprint(os.listdir('.'))").Content, "stdout:\n[]\n")
	if err := again.Remove(sessB); err != nil {
		t.Fatalf("Remove of a session without files: %v", err)
	}
	for _, bad := range []string{"../x", "s_", "s_../../etc", "S_ABCD", ".check"} {
		if err := again.Remove(bad); err == nil {
			t.Errorf("Remove(%q) was accepted", bad)
		}
		if _, err := again.Files(bad); err == nil {
			t.Errorf("Files(%q) was accepted", bad)
		}
	}
}

// TestSessionsAreIsolated: sessions running at once each see only their
// own workspace.
func TestSessionsAreIsolated(t *testing.T) {
	s := newSandbox(t, nil)
	var wg sync.WaitGroup
	outs := map[string]string{}
	var mu sync.Mutex
	for _, sess := range []string{sessA, sessB} {
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := call(t, s, sess, ToolPython, map[string]any{"code": fmt.Sprintf(
					"import os, time\nopen('%s-%d.txt', 'w').write('x')\ntime.sleep(0.1)\nprint(sorted(os.listdir('/workspace')))", sess, i)})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				outs[fmt.Sprintf("%s-%d", sess, i)] = res.Content
			}()
		}
	}
	wg.Wait()
	for k, out := range outs {
		own, other := sessA, sessB
		if strings.HasPrefix(k, sessB) {
			own, other = sessB, sessA
		}
		mustContain(t, k, out, own+"-")
		mustNotContain(t, k, out, other)
	}
	files, _ := s.Files(sessB)
	if len(files) != 3 {
		t.Fatalf("session B has %v", files)
	}
}

func TestPythonNeedsASession(t *testing.T) {
	s := newSandbox(t, nil)
	for _, tool := range []string{ToolPython, ToolList, ToolRead, ToolWrite} {
		args := map[string]any{"code": "print(1)", "path": "x"}
		if tool == ToolPython {
			delete(args, "path")
		} else {
			delete(args, "code")
		}
		if _, err := call(t, s, "", tool, args); err == nil || !strings.Contains(err.Error(), "has no session") {
			t.Errorf("%s without a session: %v", tool, err)
		}
		if _, err := call(t, s, "s_../../etc", tool, args); err == nil || !strings.Contains(err.Error(), "not a session id") {
			t.Errorf("%s with a bad session id: %v", tool, err)
		}
	}
	ents, _ := os.ReadDir(s.cfg.Dir)
	ents = slices.DeleteFunc(ents, func(e os.DirEntry) bool { return e.Name() == stagingDir })
	if len(ents) != 0 {
		t.Fatalf("workspaces made for calls without a session: %v", ents)
	}
}

// TestPythonStopsAtTheCallsDeadline: the registry's deadline for the call
// (sessions.tool_timeout) shortens the run, which still reports why.
func TestPythonStopsAtTheCallsDeadline(t *testing.T) {
	s := newSandbox(t, nil)
	reg, err := tools.NewRegistry(s.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(tools.WithSession(context.Background(), sessA), 2500*time.Millisecond)
	defer cancel()
	res, err := reg.Run(ctx, ToolPython, []byte(`{"code": "import time\ntime.sleep(60)"}`))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	// Stopped a second before the call's deadline, not at the configured
	// 30 s (how much before depends on the machine's speed).
	mustContain(t, "result", res.Content, "killed: the code ran longer than", "its time limit")
	mustNotContain(t, "result", res.Content, "longer than 30 s")

	// Cancelled (the user's /stop): the run ends at once, nothing is left.
	ctx, cancel = context.WithCancel(tools.WithSession(context.Background(), sessA))
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err = s.Run(ctx, sessA, "import time\ntime.sleep(60)", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	// Not cancelled, the run would last until its time limit.
	if d := time.Since(start); d >= s.cfg.Timeout {
		t.Fatalf("the cancelled run took %s, its whole time limit", d)
	}
	if left := sandboxProcesses(t); len(left) > 0 {
		t.Fatalf("processes left: %v", left)
	}
}

func TestDependencies(t *testing.T) {
	s := newSandbox(t, nil)
	_, err := call(t, s, sessA, ToolPython, map[string]any{"code": "import pandas", "dependencies": []string{"pandas"}})
	if err == nil || !strings.Contains(err.Error(), "no network") || !strings.Contains(err.Error(), "no wheelhouse") {
		t.Fatalf("dependencies without a wheelhouse: %v", err)
	}

	if err := exec.Command(DefaultPython, "-m", "pip", "--version").Run(); err != nil {
		t.Skipf("no pip for %s, so a wheelhouse cannot be tried: %v", DefaultPython, err)
	}
	wheels := t.TempDir()
	reachable(t, wheels)
	writeWheel(t, filepath.Join(wheels, "sbxdemo-1.0-py3-none-any.whl"))
	s = newSandbox(t, func(c *Config) { c.Wheelhouse = wheels })
	for _, bad := range []string{"--index-url=https://example.com", "https://example.com/x.whl", "pkg; os_name=='posix'", "-e ."} {
		if _, err := call(t, s, sessA, ToolPython, map[string]any{"code": "1", "dependencies": []string{bad}}); err == nil ||
			!strings.Contains(err.Error(), "give a package name") {
			t.Errorf("dependency %q: %v", bad, err)
		}
	}
	res, err := call(t, s, sessA, ToolPython, map[string]any{"code": "import sbxdemo\nprint('value', sbxdemo.VALUE)", "dependencies": []string{"sbxdemo==1.0"}})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "installed", res.Content, "exit status 0", "value 42")
	res, err = call(t, s, sessA, ToolPython, map[string]any{"code": "print('ran')", "dependencies": []string{"nosuchpackage"}})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "missing", res.Content, "exit status 2", "could not be installed from the wheelhouse")
	mustNotContain(t, "missing", res.Content, "ran\n")
	// Installed for the run, not into the workspace.
	if files, _ := s.Files(sessA); len(files) != 0 {
		t.Fatalf("files in the workspace: %v", files)
	}
}

// writeWheel makes a wheel of a one-module package, sbxdemo 1.0.
func writeWheel(t *testing.T, file string) {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	files := map[string]string{
		"sbxdemo/__init__.py":             "VALUE = 42\n",
		"sbxdemo-1.0.dist-info/METADATA":  "Metadata-Version: 2.1\nName: sbxdemo\nVersion: 1.0\n",
		"sbxdemo-1.0.dist-info/WHEEL":     "Wheel-Version: 1.0\nGenerator: sandbox_test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"sbxdemo-1.0.dist-info/top_level": "sbxdemo\n",
	}
	var record strings.Builder
	for name, content := range files {
		w, err := z.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(content))
		fmt.Fprintf(&record, "%s,,\n", name)
	}
	record.WriteString("sbxdemo-1.0.dist-info/RECORD,,\n")
	w, _ := z.Create("sbxdemo-1.0.dist-info/RECORD")
	w.Write([]byte(record.String()))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkPrint measures a run's overhead: print(1) from the tool call
// to its result (namespaces, mounts, two Python starts, snapshots).
func BenchmarkPrint(b *testing.B) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("bwrap is not installed")
	}
	dir := b.TempDir()
	if os.Geteuid() == 0 {
		os.Chmod(dir, 0o711)
		os.Chmod(filepath.Dir(dir), 0o711)
	}
	s, err := New(Config{Enabled: true, Dir: filepath.Join(dir, "sandbox")}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Check(ctx); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		res, err := s.Run(ctx, sessA, "print(1)", nil)
		if err != nil || !strings.Contains(res.Content, "stdout:\n1\n") {
			b.Fatalf("%v %q", err, res.Content)
		}
	}
}
