package sessionstest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/tools/sandbox"
)

// WithUploads keeps people's files in workspaces under dir, as the gateway
// does (the sandbox's store, with a quota of 1 MiB), within lim.
func WithUploads(t testing.TB, dir string, lim sessions.UploadLimits) func(*sessions.Config) {
	return func(c *sessions.Config) {
		sb, err := sandbox.New(sandbox.Config{Dir: dir, QuotaBytes: 1 << 20}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Uploads, c.UploadLimits = sb.Uploads(), lim
	}
}

// Uploaded is what a conversation's workspace under dir holds in
// uploads/: each file's content by its name.
func Uploaded(t testing.TB, dir, sessionID string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(filepath.Join(dir, sessionID, "uploads"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, sessionID, "uploads", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(data)
	}
	return out
}
