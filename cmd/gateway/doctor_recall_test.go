package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage"
)

// storeMessages fills the setup's database with a conversation of 40
// messages, 20 of them indexed for recall, and leaves the store open.
func storeMessages(t *testing.T, s *doctorSetup) *storage.DB {
	t.Helper()
	ctx := context.Background()
	db, err := storage.Open(ctx, s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateSession(ctx, switchboard.Session{ID: "s1", Guide: "assistant"}); err != nil {
		t.Fatal(err)
	}
	var msgs []switchboard.Message
	for i := range 10 {
		msgs = append(msgs,
			switchboard.Message{Role: switchboard.RoleUser, Content: fmt.Sprintf("what is %d times 7?", i)},
			switchboard.Message{Role: switchboard.RoleAssistant, ToolCalls: []switchboard.ToolCall{{ID: fmt.Sprint("c", i), Name: "calculator", Args: []byte(`{}`)}}},
			switchboard.Message{Role: switchboard.RoleTool, ToolCallID: fmt.Sprint("c", i), ToolName: "calculator", Content: fmt.Sprint(i * 7)},
			switchboard.Message{Role: switchboard.RoleAssistant, Content: fmt.Sprintf("%d times 7 is %d.", i, i*7)},
		)
	}
	if err := db.AppendMessages(ctx, "s1", msgs, false); err != nil {
		t.Fatal(err)
	}
	return db
}

// sqlOn runs SQL on the database file while no gateway uses it, as an
// operator's sqlite3 shell would.
func sqlOn(t *testing.T, path, query string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// The recall index row: OK for an index as the gateway keeps it; a
// PROBLEM with the rebuild as its fix once rows are deleted from FTS5's
// own tables; a WARN when messages are missing from it; and OK again
// after the fix it prints is run. The doctor changes nothing in the
// data directory meanwhile.
func TestDoctorRecallIndex(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	if err := storeMessages(t, s).Close(); err != nil {
		t.Fatal(err)
	}
	before := dirNames(t, filepath.Dir(s.dsn))
	out, err := s.doctor(t, nil)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	wantRow(t, out, "recall index", "OK", "20 messages indexed, every stored one", "integrity check passed")

	// Rows deleted from the index's own table: its pages are gone.
	sqlOn(t, s.dsn, `DELETE FROM messages_fts_data WHERE id > 10`)
	out, err = s.doctor(t, nil)
	if err == nil || !strings.Contains(err.Error(), "1 problem") {
		t.Fatalf("doctor with a broken recall index = %v, want 1 problem:\n%s", err, out)
	}
	text := wantRow(t, out, "recall index", "PROBLEM", "FTS5's integrity check failed", "corrupt", "storing new messages fails",
		"fix: stop the gateway, back up "+s.dsn, "sqlite3 "+s.dsn, storage.RebuildRecallSQL)
	fix := text[strings.Index(text, "BEGIN;"):]
	if fix != storage.RebuildRecallSQL {
		t.Fatalf("the fix does not end with the SQL to run:\n%s", text)
	}
	sqlOn(t, s.dsn, fix)
	out, err = s.doctor(t, nil)
	if err != nil {
		t.Fatalf("doctor after the fix: %v\n%s", err, out)
	}
	wantRow(t, out, "recall index", "OK", "20 messages indexed, every stored one")

	// Messages left out of the index: recall misses them, nothing fails.
	sqlOn(t, s.dsn, `DELETE FROM messages_fts WHERE rowid % 8 = 0`)
	out, err = s.doctor(t, nil)
	if err != nil {
		t.Fatalf("doctor with messages missing from the index: %v\n%s", err, out)
	}
	wantRow(t, out, "recall index", "WARN", "15 messages indexed; 5 stored messages are not in the index", "fix: stop the gateway")
	if after := dirNames(t, filepath.Dir(s.dsn)); after != before {
		t.Errorf("the doctor changed the data directory: %s, was %s", after, before)
	}

	// An index too large to read within --timeout is not judged.
	out, _ = s.doctor(t, nil, "--timeout", "1ns")
	wantRow(t, out, "recall index", "WARN", "not checked", "did not finish within 1ns", "fix: run gateway doctor --timeout")
}

// Beside a store that holds the file (as a running gateway does), the
// index is checked read-only through the WAL: it sees the store's latest
// messages, creates no file, and the store goes on writing.
func TestDoctorRecallIndexBesideARunningGateway(t *testing.T) {
	s := newDoctorSetup(t, "  - name: main\n    kind: demo", "")
	db := storeMessages(t, s)
	defer db.Close()
	before := dirNames(t, filepath.Dir(s.dsn))
	out, err := s.doctor(t, nil)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	wantRow(t, out, "database", "INFO", fmt.Sprintf("in use by a running gateway (pid %d)", os.Getpid()))
	wantRow(t, out, "recall index", "OK", "20 messages indexed, every stored one")
	if after := dirNames(t, filepath.Dir(s.dsn)); after != before {
		t.Errorf("the doctor changed the data directory: %s, was %s", after, before)
	}
	if err := db.AppendMessages(context.Background(), "s1", []switchboard.Message{{Role: switchboard.RoleUser, Content: "and 11 times 7?"}}, false); err != nil {
		t.Fatalf("the store cannot write after the doctor: %v", err)
	}
	out, _ = s.doctor(t, nil)
	wantRow(t, out, "recall index", "OK", "21 messages indexed")
}
