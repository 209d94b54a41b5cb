package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-gw/switchboard/config"
)

// What retention deletes of a session outside the database: its sandbox
// workspace and the images the terminal saved; other sessions' stay, and
// an id that is no session id touches nothing.
func TestForgetDeletesASessionsFiles(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Load("", []string{"storage.dsn=" + filepath.Join(dir, "switchboard.db"), "tools.sandbox.enabled=true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := buildTools(cfg, nil, nil, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	made := func(parts ...string) string {
		p := filepath.Join(append([]string{dir}, parts...)...)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := []string{made("sandbox", "s_0a1b", "data.csv"), made("images", "s_0a1b", "ui_1.png")}
	kept := []string{made("sandbox", "s_ffee", "data.csv"), made("images", "s_ffee", "ui_2.png"), made("images", "keep", "x")}
	tb.forget([]string{"s_0a1b", "../images", ""})
	for _, p := range gone {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", p, err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was deleted: %v", p, err)
		}
	}
}
