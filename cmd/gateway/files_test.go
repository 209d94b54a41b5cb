package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// The gateway as configured by default keeps the files people send, with
// the python tool off: a picture and a CSV sent over /ws land in the
// conversation's workspace beside the database, and the model is shown
// the picture and told of both.
func TestFilesReachTheModelThroughTheGateway(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	llm.Push(openaitest.Reply{Text: []string{"A chart of the rain."}})
	g := newGateway(t, openAIProvider(llm), "")
	s := g.serve([]string{"TEST_OPENAI_KEY=k"})
	defer s.stop()

	c, _, err := gws.DefaultDialer.Dial("ws://"+s.addr+"/ws", http.Header{"Origin": {"http://" + s.addr}})
	if err != nil {
		t.Fatalf("dial /ws: %v", err)
	}
	defer c.Close()
	send := func(v map[string]any) {
		t.Helper()
		if err := c.WriteJSON(v); err != nil {
			t.Fatal(err)
		}
	}
	send(map[string]any{"type": "hello", "user": map[string]string{"name": "Ada"}})
	ready := readUntil(t, c, func(f frame) bool { return f.Type == "ready" })
	var r struct {
		Session string `json:"session"`
	}
	if err := json.Unmarshal(ready[len(ready)-1].Data, &r); err != nil {
		t.Fatal(err)
	}
	var pic bytes.Buffer
	if err := png.Encode(&pic, image.NewRGBA(image.Rect(0, 0, 40, 30))); err != nil {
		t.Fatal(err)
	}
	csv := []byte("city,rain\nLyon,12\nBrest,31\n")
	for _, f := range []struct {
		id, name string
		data     []byte
	}{{"f1", "chart.png", pic.Bytes()}, {"f2", "rain.csv", csv}} {
		send(map[string]any{"type": "file", "id": f.id, "name": f.name, "size": len(f.data)})
		send(map[string]any{"type": "file_chunk", "id": f.id, "data": base64.StdEncoding.EncodeToString(f.data)})
		readUntil(t, c, func(fr frame) bool { return fr.Type == "file_saved" && strings.Contains(string(fr.Data), f.id) })
	}
	send(map[string]any{"type": "input", "id": "m1", "text": "What does this show?", "files": []string{"f1", "f2"}})
	readUntil(t, c, func(f frame) bool {
		return f.Type == "message" && strings.Contains(string(f.Data), `"role":"assistant"`)
	})

	saved, err := os.ReadFile(filepath.Join(g.dir, "data", "sandbox", r.Session, "uploads", "rain.csv"))
	if err != nil || !bytes.Equal(saved, csv) {
		t.Fatalf("the workspace holds %q (%v)", saved, err)
	}
	reqs := llm.Requests()
	last := reqs[len(reqs)-1].Messages
	user := last[len(last)-1]
	if pics := openaitest.Images(user.Content); len(pics) != 1 || !strings.HasPrefix(pics[0], "data:image/png;base64,") {
		t.Fatalf("the model was shown %d pictures", len(pics))
	}
	text := openaitest.Text(user.Content)
	for _, want := range []string{"What does this show?", "/workspace/uploads/chart.png", "rain.csv (text/csv, 27 B) at /workspace/uploads/rain.csv", "Brest,31"} {
		if !strings.Contains(text, want) {
			t.Errorf("the model's message lacks %q:\n%s", want, text)
		}
	}
}
