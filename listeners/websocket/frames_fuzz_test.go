package websocket

import (
	"strings"
	"testing"
)

// FuzzDecodeFrame: any bytes a client sends decode without a panic, and a
// frame that decodes has a known type and ids within the limits; a file
// has a name and a size, a chunk some bytes, an input text or files.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","session":"s_1","resume_after":3,"user":{"id":"u","name":"Ann"}}`,
		`{"type":"input","id":"c1","text":"hi"}`,
		`{"type":"input","id":"c2","text":"","files":["f1","f2"]}`,
		`{"type":"input","id":"c3","text":"/help","files":["f1"]}`,
		`{"type":"input","id":"c4","text":"x","files":["f1","f1"]}`,
		`{"type":"confirm","confirmation_id":"k1","approved":true,"scope":"session"}`,
		`{"type":"action","action_id":"ui_1:button:0","value":"x"}`,
		`{"type":"file","id":"f1","name":"rain.csv","size":27}`,
		`{"type":"file","id":"f1","name":"../../etc/pass\u0000wd","size":-1}`,
		`{"type":"file","id":"f1","name":"a","size":1e30}`,
		`{"type":"file_chunk","id":"f1","data":"Y2l0eSxyYWluCg=="}`,
		`{"type":"file_chunk","id":"f1","data":"Y2l0eSxyYWluCg"}`,
		`{"type":"file_chunk","id":"f1","data":""}`,
		`{"type":"cancel"}`, `{"type":"nope"}`, `not json`, `{"type":"input","id":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := decodeFrame(data)
		if err != nil {
			return
		}
		switch fr.Type {
		case frameHello, frameInput, frameConfirm, frameAction, frameCancel, frameFile, frameFileChunk:
		default:
			t.Fatalf("decoded a frame of unknown type %q from %q", fr.Type, data)
		}
		for _, id := range []string{fr.Session, fr.ID, fr.ConfirmationID, fr.ActionID} {
			if len(id) > maxIDLen {
				t.Fatalf("an id of %d bytes passed: %q", len(id), data)
			}
		}
		if fr.User != nil && (len(fr.User.ID) > maxIDLen || len(fr.User.Name) > maxNameLen) {
			t.Fatalf("a user of %d/%d bytes passed: %q", len(fr.User.ID), len(fr.User.Name), data)
		}
		switch fr.Type {
		case frameInput:
			if strings.TrimSpace(fr.Text) == "" && len(fr.Files) == 0 {
				t.Fatalf("an input with neither text nor files passed: %q", data)
			}
			if len(fr.Files) > maxInputFiles {
				t.Fatalf("an input with %d files passed", len(fr.Files))
			}
			seen := map[string]bool{}
			for _, id := range fr.Files {
				if id == "" || len(id) > maxIDLen || seen[id] {
					t.Fatalf("an input's file id %q passed: %q", id, data)
				}
				seen[id] = true
			}
			if len(fr.Files) > 0 && strings.HasPrefix(strings.TrimSpace(fr.Text), "/") {
				t.Fatalf("a command with files passed: %q", data)
			}
		case frameFile:
			if fr.ID == "" || strings.TrimSpace(fr.Name) == "" || len(fr.Name) > maxFileNameLen || fr.Size == nil || *fr.Size <= 0 {
				t.Fatalf("a file frame passed without its id, name or size: %q", data)
			}
		case frameFileChunk:
			if fr.ID == "" || len(fr.Bytes) == 0 {
				t.Fatalf("a chunk passed without its id or bytes: %q", data)
			}
		}
	})
}
