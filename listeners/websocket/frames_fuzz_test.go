package websocket

import (
	"testing"
)

// FuzzDecodeFrame: any bytes a client sends decode without a panic, and a
// frame that decodes has a known type and ids within the limits.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","session":"s_1","resume_after":3,"user":{"id":"u","name":"Ann"}}`,
		`{"type":"input","id":"c1","text":"hi"}`,
		`{"type":"confirm","confirmation_id":"k1","approved":true,"scope":"session"}`,
		`{"type":"action","action_id":"ui_1:button:0","value":"x"}`,
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
		case frameHello, frameInput, frameConfirm, frameAction, frameCancel:
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
	})
}
