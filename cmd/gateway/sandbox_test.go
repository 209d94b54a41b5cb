package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// stdlibChart is Python that draws a one-pixel PNG with the standard
// library only and prints a total: what "plot the monthly totals" comes
// down to without matplotlib.
const stdlibChart = `import zlib, struct
def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(b'\x00\xff\x00\x00')) + chunk(b'IEND', b'')
open('chart.png', 'wb').write(png)
print('total', 40 + 2)
`

// The sandboxed python tool through the built gateway, as an operator
// turns it on (tools.sandbox.enabled and a guide that lists it): the model
// runs code, its output comes back, the chart it saved reaches the web as
// an image, /files lists it, a file a person sends is read by the next
// run, and the doctor says the sandbox works.
func TestSandboxedPythonThroughTheGateway(t *testing.T) {
	if _, err := os.Stat("/usr/bin/bwrap"); err != nil {
		t.Skip("bubblewrap is not installed (apt-get install bubblewrap; .ci/run does)")
	}
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	args, _ := json.Marshal(map[string]string{"code": stdlibChart})
	readCSV, _ := json.Marshal(map[string]string{"code": "import csv\nrows = list(csv.DictReader(open('/workspace/uploads/rain.csv')))\nprint('rain', sum(int(r['rain']) for r in rows))\n"})
	llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "py1", Name: "python", Args: string(args)}}},
		openaitest.Reply{Text: []string{"The total is 42; the chart is above."}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "py2", Name: "python", Args: string(readCSV)}}},
		openaitest.Reply{Text: []string{"43 in all."}},
	)
	dir := t.TempDir()
	// The sandbox runs as an unprivileged user when the gateway is root:
	// it must be able to pass through to its workspaces.
	// Up to the temporary directory, which is not the test's to change
	// (it is 1777: every user may pass).
	for d := dir; d != "/" && d != filepath.Clean(os.TempDir()); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	guides := filepath.Join(dir, "guides")
	if err := os.MkdirAll(guides, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(guides, "analyst.md"), []byte("---\nname: analyst\n"+
		"tools: [python, sandbox_fs_list, sandbox_fs_read, sandbox_fs_write]\napproval: { default: auto }\n---\nYou analyse data.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := &gateway{t: t, dir: dir, config: filepath.Join(dir, "config.yaml")}
	if err := os.WriteFile(g.config, []byte(fmt.Sprintf(`http:
  addr: 127.0.0.1:0
metrics:
  addr: ""
storage:
  dsn: %s
providers:
%s
guides:
  dir: %s
  default: analyst
tools:
  sandbox: { enabled: true }
`, filepath.Join(dir, "data", "switchboard.db"), openAIProvider(llm), guides)), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := g.serve([]string{"TEST_OPENAI_KEY=sk-test"})
	c := dialPeer(t, srv.addr, map[string]any{"type": "hello", "user": map[string]string{"id": "ann", "name": "Ann"}})
	c.send(map[string]any{"type": "input", "id": "1", "text": "plot the monthly totals"})
	saw := func(what string, pred func(wsFrame) bool) wsFrame {
		t.Helper()
		f, err := c.until(30*time.Second, pred)
		if err != nil {
			t.Fatalf("never saw %s: %v\n%s\n%s", what, err, c.history(), srv.logs)
		}
		return f
	}
	res := saw("the tool's result", func(f wsFrame) bool { return f.Type == "tool_response" })
	var tr switchboard.ToolResponseData
	_ = json.Unmarshal(res.Data, &tr)
	if tr.IsError || !strings.Contains(tr.ContentPreview, "total 42") {
		t.Fatalf("python's result: %+v", tr)
	}
	var ui switchboard.UI
	for seq := int64(1); seq <= c.lastSeq; seq++ {
		if ev := c.seen[seq]; ev.Type == "ui" {
			_ = json.Unmarshal(ev.Data, &ui)
		}
	}
	if ui.Image == nil || ui.Image.MIMEType != "image/png" || !strings.HasPrefix(ui.Image.Data, "iVBORw0KGgo") {
		t.Fatalf("the chart did not reach the web as a PNG: %+v", ui)
	}
	saw("the answer", func(f wsFrame) bool {
		return f.Type == "message" && strings.Contains(string(f.Data), "The total is 42")
	})
	c.send(map[string]any{"type": "input", "id": "2", "text": "/files"})
	saw("/files", func(f wsFrame) bool { return f.Type == "error" && strings.Contains(string(f.Data), "chart.png") })

	// A file Ann sends is in the workspace at once: python reads it.
	csv := "city,rain\nLyon,12\nBrest,31\n"
	c.send(map[string]any{"type": "file", "id": "f1", "name": "rain.csv", "size": len(csv)})
	c.send(map[string]any{"type": "file_chunk", "id": "f1", "data": base64.StdEncoding.EncodeToString([]byte(csv))})
	saw("file_saved", func(f wsFrame) bool { return f.Type == "file_saved" })
	c.send(map[string]any{"type": "input", "id": "3", "text": "how much rain in all?", "files": []string{"f1"}})
	res = saw("python's reading", func(f wsFrame) bool {
		return f.Type == "tool_response" && strings.Contains(string(f.Data), "py2")
	})
	_ = json.Unmarshal(res.Data, &tr)
	if tr.IsError || !strings.Contains(tr.ContentPreview, "rain 43") {
		t.Fatalf("python reading the upload: %+v", tr)
	}
	saw("the answer", func(f wsFrame) bool { return f.Type == "message" && strings.Contains(string(f.Data), "43 in all.") })
	srv.stop()

	// The workspace is beside the database, one folder per session.
	if _, err := os.Stat(filepath.Join(dir, "data", "sandbox", c.session, "chart.png")); err != nil {
		t.Errorf("the chart is not in the session's workspace: %v", err)
	}
	ds := &doctorSetup{dir: dir, config: g.config}
	// Only its bubblewrap row matters here: the other checks have tests
	// of their own.
	out, _ := ds.doctor(t, []string{"PATH=" + os.Getenv("PATH"), "TEST_OPENAI_KEY=sk-test"})
	wantRow(t, out, "bubblewrap", "OK", "the python tool's sandbox works")
}
