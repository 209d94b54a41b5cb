package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
)

const upSession = "s_0123abcd"

func newUploads(t *testing.T, quota int64) (Uploads, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := New(Config{Dir: dir, QuotaBytes: quota}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.Uploads(), filepath.Join(dir, upSession)
}

// leftovers are the names in the session's uploads folder.
func leftovers(t *testing.T, ws string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(ws, UploadsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestUploadsSaveReadRemove(t *testing.T) {
	u, ws := newUploads(t, 1<<20)
	ctx := context.Background()
	p1, n, err := u.Save(ctx, upSession, "data.csv", strings.NewReader("a,b\n1,2\n"), 1024)
	if err != nil || p1 != "uploads/data.csv" || n != 8 {
		t.Fatalf("Save = %q, %d, %v", p1, n, err)
	}
	// The same name again: a name of its own, the first file untouched.
	p2, _, err := u.Save(ctx, upSession, "data.csv", strings.NewReader("c,d\n"), 1024)
	if err != nil || p2 != "uploads/data-2.csv" {
		t.Fatalf("second Save = %q, %v", p2, err)
	}
	if got, err := u.Read(ctx, upSession, p1, 1024); err != nil || string(got) != "a,b\n1,2\n" {
		t.Fatalf("Read(%s) = %q, %v", p1, got, err)
	}
	if got, err := u.Read(ctx, upSession, p1, 3); err != nil || string(got) != "a,b" {
		t.Fatalf("Read with a limit = %q, %v", got, err)
	}
	if err := u.Remove(ctx, upSession, p1); err != nil {
		t.Fatal(err)
	}
	if err := u.Remove(ctx, upSession, p1); err != nil {
		t.Fatalf("removing a file already gone: %v", err)
	}
	if got := leftovers(t, ws); len(got) != 1 || got[0] != "data-2.csv" {
		t.Fatalf("uploads/ holds %v", got)
	}
}

func TestUploadsRefuseAndLeaveNothing(t *testing.T) {
	u, ws := newUploads(t, 4096)
	ctx := context.Background()
	if _, _, err := u.Save(ctx, upSession, "big.bin", bytes.NewReader(make([]byte, 2000)), 1000); !errors.Is(err, switchboard.ErrFileTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, _, err := u.Save(ctx, upSession, "huge.bin", bytes.NewReader(make([]byte, 5000)), 1<<20); !errors.Is(err, switchboard.ErrWorkspaceFull) {
		t.Fatalf("over the quota: %v", err)
	}
	broken := io.MultiReader(strings.NewReader("half of it"), iotestErr{})
	if _, _, err := u.Save(ctx, upSession, "cut.txt", broken, 1<<20); err == nil {
		t.Fatal("a download cut short was saved")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := u.Save(cancelled, upSession, "late.txt", strings.NewReader("x"), 1<<20); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled save: %v", err)
	}
	if got := leftovers(t, ws); len(got) != 0 {
		t.Fatalf("refused saves left %v behind", got)
	}
	for _, name := range []string{"", ".", "..", "../escape", "a/b", `a\b`, "nul\x00"} {
		if _, _, err := u.Save(ctx, upSession, name, strings.NewReader("x"), 10); err == nil {
			t.Errorf("Save(%q) was taken", name)
		}
	}
	for _, p := range []string{"../x", "uploads/../secret", "uploads/", "secret.txt", "uploads/a/b", "/etc/passwd"} {
		if _, err := u.Read(ctx, upSession, p, 10); err == nil {
			t.Errorf("Read(%q) was allowed", p)
		}
	}
	if _, _, err := u.Save(ctx, "../s_0123", "a.txt", strings.NewReader("x"), 10); err == nil {
		t.Error("a session id that is a path was taken")
	}
}

// A link the code planted in the workspace leads nowhere outside it.
func TestUploadsStayInTheWorkspace(t *testing.T) {
	u, ws := newUploads(t, 1<<20)
	outside := t.TempDir()
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, UploadsDir)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := u.Save(context.Background(), upSession, "a.txt", strings.NewReader("x"), 10); err == nil {
		t.Fatal("a save followed a link out of the workspace")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("a file landed outside the workspace: %v", ents)
	}
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// A slow download does not hold the workspace: the session's other work
// (here, another upload) goes on while it is read.
func TestASlowUploadDoesNotHoldTheWorkspace(t *testing.T) {
	u, _ := newUploads(t, 1<<20)
	ctx := context.Background()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, _, err := u.Save(ctx, upSession, "slow.txt", pr, 1024)
		done <- err
	}()
	if _, err := pw.Write([]byte("first half ")); err != nil { // the slow one is under way
		t.Fatal(err)
	}
	if _, _, err := u.Save(ctx, upSession, "quick.txt", strings.NewReader("here"), 1024); err != nil {
		t.Fatalf("an upload beside a slow one: %v", err)
	}
	if _, err := u.Read(ctx, upSession, "uploads/quick.txt", 10); err != nil {
		t.Fatalf("a read beside a slow upload: %v", err)
	}
	pw.Write([]byte("second half"))
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, err := u.Read(ctx, upSession, "uploads/slow.txt", 100); err != nil || string(got) != "first half second half" {
		t.Fatalf("the slow upload saved %q (%v)", got, err)
	}
}
