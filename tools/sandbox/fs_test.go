//go:build linux

package sandbox

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFSWriteReadList(t *testing.T) {
	s := newSandbox(t, nil)
	write := func(args map[string]any) string {
		t.Helper()
		res, err := call(t, s, sessA, ToolWrite, args)
		if err != nil {
			t.Fatalf("sandbox_fs_write %v: %v", args, err)
		}
		return res.Content
	}
	read := func(args map[string]any) string {
		t.Helper()
		res, err := call(t, s, sessA, ToolRead, args)
		if err != nil {
			t.Fatalf("sandbox_fs_read %v: %v", args, err)
		}
		return res.Content
	}
	mustContain(t, "write", write(map[string]any{"path": "data/in.csv", "content": "x,y\n1,2\n"}), "wrote data/in.csv (8 B now)")
	mustContain(t, "append", write(map[string]any{"path": "/workspace/data/in.csv", "content": "3,4\n", "append": true}), "appended to data/in.csv (12 B now)")
	if got := read(map[string]any{"path": "data/in.csv"}); got != "x,y\n1,2\n3,4\n" {
		t.Fatalf("read = %q", got)
	}
	// The code sees what the tools wrote, and may change it (the files
	// belong to the uid the sandbox runs as).
	out := python(t, s, sessA, "rows = open('data/in.csv').read().split()\nprint(len(rows), 'rows')\nopen('data/in.csv', 'a').write('5,6\\n')").Content
	mustContain(t, "python", out, "exit status 0", "3 rows", "files written: data/in.csv (16 B)")

	png := base64.StdEncoding.EncodeToString(pngHeader)
	write(map[string]any{"path": "pics/dot.png", "content": png, "encoding": "base64"})
	write(map[string]any{"path": "blob.bin", "content": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff}), "encoding": "base64"})
	res, err := call(t, s, sessA, ToolRead, map[string]any{"path": "pics/dot.png"})
	if err != nil || len(res.Images) != 1 || res.Images[0].MIMEType != "image/png" || res.Images[0].Data != png {
		t.Fatalf("reading a picture: %v %+v", err, res)
	}
	mustContain(t, "binary", read(map[string]any{"path": "blob.bin"}), "a binary file of 4 B, not shown")

	list, err := call(t, s, sessA, ToolList, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "list", list.Content, "data/\n", "data/in.csv  16 B\n", "pics/dot.png  ", "blob.bin  4 B\n", "workspace: ")
	list, err = call(t, s, sessA, ToolList, map[string]any{"path": "data"})
	if err != nil {
		t.Fatal(err)
	}
	mustNotContain(t, "list of data", list.Content, "blob.bin")

	mustContain(t, "delete", write(map[string]any{"path": "pics", "delete": true}), "removed pics")
	if _, err := call(t, s, sessA, ToolRead, map[string]any{"path": "pics/dot.png"}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("read after delete: %v", err)
	}
}

// pngHeader is a 1x1 PNG.
var pngHeader, _ = base64.StdEncoding.DecodeString(
	"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")

func TestFSReadInPieces(t *testing.T) {
	s := newSandbox(t, nil)
	// 300 KiB of text, with a multi-byte character across the cut.
	text := strings.Repeat("a", maxReadBytes-1) + "é" + strings.Repeat("b", 50<<10)
	python(t, s, sessA, fmt.Sprintf("open('long.txt', 'w').write('a' * %d + 'é' + 'b' * %d)", maxReadBytes-1, 50<<10))
	first, err := call(t, s, sessA, ToolRead, map[string]any{"path": "long.txt"})
	if err != nil {
		t.Fatal(err)
	}
	size := len(text)
	want := fmt.Sprintf("[bytes 0-%d of %d; call again with offset %d for more]", maxReadBytes-1, size, maxReadBytes-1)
	mustContain(t, "first", first.Content[len(first.Content)-200:], want)
	rest, err := call(t, s, sessA, ToolRead, map[string]any{"path": "long.txt", "offset": maxReadBytes - 1})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rest.Content, "é"+strings.Repeat("b", 50<<10)) || !strings.HasSuffix(rest.Content, fmt.Sprintf("[bytes %d-%d of %d]\n", maxReadBytes-1, size, size)) {
		t.Fatalf("second piece: %q … %q", rest.Content[:20], rest.Content[len(rest.Content)-60:])
	}
}

func TestFSPathsStayInside(t *testing.T) {
	s := newSandbox(t, nil)
	for _, p := range []string{"../x", "a/../../x", "/etc/passwd", "/workspace/../etc/passwd", "..", "/"} {
		for _, tool := range []string{ToolRead, ToolWrite, ToolList} {
			args := map[string]any{"path": p}
			if tool == ToolWrite {
				args["content"] = "x"
			}
			res, err := call(t, s, sessA, tool, args)
			if err == nil || !strings.HasPrefix(err.Error(), tool+": refused") {
				t.Errorf("%s %q = %q, %v; want it refused", tool, p, res.Content, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.cfg.Dir), "x")); err == nil {
		t.Fatal("a write landed outside the workspace")
	}
	for _, c := range []struct{ in, want string }{
		{"data.csv", "data.csv"}, {"./a/b/", "a/b"}, {"/workspace", "."}, {"/workspace/x/y", "x/y"}, {"", "."}, {" a.txt ", "a.txt"},
	} {
		if got, err := cleanPath(c.in); err != nil || got != c.want {
			t.Errorf("cleanPath(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := cleanPath("/workspacex/y"); err == nil {
		t.Error("cleanPath accepted /workspacex/y")
	}
	if _, err := cleanPath("a\x00b"); err == nil {
		t.Error("cleanPath accepted a NUL")
	}
}

func TestFSWriteLimits(t *testing.T) {
	s := newSandbox(t, func(c *Config) { c.FileSizeBytes = 1 << 20; c.QuotaBytes = 3 << 20 })
	big := strings.Repeat("z", 1<<20+1)
	if _, err := call(t, s, sessA, ToolWrite, map[string]any{"path": "big.txt", "content": big}); err == nil ||
		!strings.Contains(err.Error(), "files are limited to 1 MiB each") {
		t.Fatalf("a file over the limit: %v", err)
	}
	part := strings.Repeat("z", 900<<10)
	for i := range 3 {
		if _, err := call(t, s, sessA, ToolWrite, map[string]any{"path": fmt.Sprintf("p%d.txt", i), "content": part}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := call(t, s, sessA, ToolWrite, map[string]any{"path": "p3.txt", "content": part}); err == nil ||
		!strings.Contains(err.Error(), "over its 3 MiB quota") {
		t.Fatalf("a write over quota: %v", err)
	}
	// Replacing a file with a smaller one is fine even near the quota.
	if _, err := call(t, s, sessA, ToolWrite, map[string]any{"path": "p0.txt", "content": "small"}); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, s, sessA, ToolWrite, map[string]any{"path": "x", "content": "!!", "encoding": "base64"}); err == nil ||
		!strings.Contains(err.Error(), "not valid base64") {
		t.Fatalf("bad base64: %v", err)
	}
	if _, err := call(t, s, sessA, ToolWrite, map[string]any{"path": "x"}); err == nil || !strings.Contains(err.Error(), "content is required") {
		t.Fatalf("no content: %v", err)
	}
	if _, err := call(t, s, sessA, ToolWrite, map[string]any{"path": "missing.txt", "delete": true}); err == nil ||
		!strings.Contains(err.Error(), "no such file") {
		t.Fatalf("deleting a missing file: %v", err)
	}
}
