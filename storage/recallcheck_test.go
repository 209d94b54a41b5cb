package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// recallStore is a closed store file holding 300 messages of two sessions
// (200 indexed: people's and the assistant's; 100 tool results, not).
func recallStore(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	db, path := openFile(t)
	for _, id := range []string{"s1", "s2"} {
		storetest.NewSession(t, db, id, "")
		if err := db.SetMember(ctx, id, switchboard.Member{Key: "web:alice", Role: "owner"}); err != nil {
			t.Fatal(err)
		}
		var msgs []switchboard.Message
		for i := range 50 {
			msgs = append(msgs,
				switchboard.Message{Role: switchboard.RoleUser, Content: fmt.Sprintf("%s question %d about lockers", id, i)},
				switchboard.Message{Role: switchboard.RoleAssistant, ToolCalls: []switchboard.ToolCall{{ID: fmt.Sprint("c", i), Name: "calculator", Args: []byte(`{}`)}}},
				switchboard.Message{Role: switchboard.RoleTool, ToolCallID: fmt.Sprint("c", i), ToolName: "calculator", Content: "42"},
				switchboard.Message{Role: switchboard.RoleAssistant, Content: fmt.Sprintf("%s answer %d: the code is %d", id, i, 4700+i)},
			)
		}
		if err := writeTurn(ctx, db, id, switchboard.TurnWrite{Messages: msgs}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkFile runs CheckRecallIndex on the file opened read-only, as gateway
// doctor opens it.
func checkFile(t *testing.T, path string) RecallCheck {
	t.Helper()
	ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro&immutable=1")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	c, err := CheckRecallIndex(context.Background(), ro)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// execFile runs SQL on the closed store's file, as an operator's sqlite3
// shell would.
func execFile(t *testing.T, path, query string) {
	t.Helper()
	rw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.Exec(query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// The recall index checked read-only: sound as the store leaves it; each
// way of breaking it is found (rows deleted from FTS5's own tables, which
// its integrity check sees; messages left out of it, or rows left for
// messages that are gone, which the comparison with the messages sees);
// and RebuildRecallSQL repairs every one, leaving the table as migration
// 0012 made it and the store working.
func TestCheckRecallIndex(t *testing.T) {
	sound := checkFile(t, recallStore(t))
	if !sound.Sound() || sound.Indexed != 200 || sound.Bytes <= 0 {
		t.Fatalf("a store as the gateway leaves it: %+v", sound)
	}
	for _, tc := range []struct {
		name, breakIt string
		want          func(RecallCheck) bool
		// writesFail: the broken index fails the store's next message.
		writesFail bool
	}{
		{name: "index pages deleted", breakIt: `DELETE FROM messages_fts_data WHERE id > 10`,
			want: func(c RecallCheck) bool { return strings.Contains(c.Problem, "corrupt") }, writesFail: true},
		{name: "doc sizes deleted", breakIt: `DELETE FROM messages_fts_docsize WHERE id % 8 = 0`,
			want: func(c RecallCheck) bool { return c.Problem != "" && c.Missing == 50 && c.Indexed == 150 }},
		{name: "text copies deleted", breakIt: `DELETE FROM messages_fts_content WHERE id % 8 = 0`,
			want: func(c RecallCheck) bool { return c.Problem != "" }},
		{name: "messages not indexed", breakIt: `DELETE FROM messages_fts WHERE rowid % 8 = 0`,
			want: func(c RecallCheck) bool {
				return c.Problem == "" && c.Missing == 50 && c.Orphans == 0 && c.Indexed == 150
			}},
		{name: "messages gone", breakIt: `DELETE FROM messages WHERE id % 8 = 0`,
			want: func(c RecallCheck) bool { return c.Problem == "" && c.Orphans == 50 && c.Missing == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := recallStore(t)
			var schema string
			ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro&immutable=1")
			if err != nil {
				t.Fatal(err)
			}
			if err := ro.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'messages_fts'`).Scan(&schema); err != nil {
				t.Fatal(err)
			}
			ro.Close()

			execFile(t, path, tc.breakIt)
			broken := checkFile(t, path)
			if broken.Sound() || !tc.want(broken) {
				t.Fatalf("after %s: %+v", tc.breakIt, broken)
			}
			if tc.writesFail {
				db, err := Open(context.Background(), path)
				if err != nil {
					t.Fatal(err)
				}
				// Each write adds a segment to the index; once enough
				// have piled up, FTS5 merges them, reading the broken
				// ones (at the 14th write here).
				stored := 0
				for i := range 16 {
					err = writeTurn(context.Background(), db, "s1", switchboard.TurnWrite{Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: fmt.Sprint("lockers again ", i)}}})
					if err != nil {
						break
					}
					stored++
				}
				db.Close()
				if err == nil || !strings.Contains(err.Error(), "corrupt") {
					t.Fatalf("%d messages stored with the index broken (%v): the doctor's PROBLEM overstates it", stored, err)
				}
				if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "gateway doctor") {
					t.Fatalf("the failed write does not point at gateway doctor: %v", err)
				}
				t.Logf("message %d failed: %v", stored+1, err)
			}

			execFile(t, path, RebuildRecallSQL)
			repaired := checkFile(t, path)
			if !repaired.Sound() || repaired.Indexed < 150 {
				t.Fatalf("after RebuildRecallSQL: %+v", repaired)
			}
			db, err := Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var rebuilt string
			if err := db.read.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'messages_fts'`).Scan(&rebuilt); err != nil || rebuilt != schema {
				t.Fatalf("the rebuilt table is %q (%v), migration 0012 made %q", rebuilt, err, schema)
			}
			if err := writeTurn(context.Background(), db, "s1", switchboard.TurnWrite{Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "the zeppelin hangar"}}}); err != nil {
				t.Fatal(err)
			}
			if found, err := db.Search(context.Background(), "web:alice", "zeppelin", 3); err != nil || len(found) != 1 {
				t.Fatalf("after the rebuild, a new message is found %d times (%v)", len(found), err)
			}
			if found, err := db.Search(context.Background(), "web:alice", "answer 1", 3); err != nil || len(found) == 0 {
				t.Fatalf("after the rebuild, an old message is found %d times (%v)", len(found), err)
			}
		})
	}
}

// A database from before migration 0012 has no index to check.
func TestCheckRecallIndexWithoutTheIndex(t *testing.T) {
	path := recallStore(t)
	execFile(t, path, `DROP TABLE messages_fts`)
	ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro&immutable=1")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := CheckRecallIndex(context.Background(), ro); !errors.Is(err, ErrNotFound) {
		t.Fatalf("CheckRecallIndex without messages_fts = %v, want ErrNotFound", err)
	}
}
