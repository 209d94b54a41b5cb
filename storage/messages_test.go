package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// user is a person's message saying s.
func user(s string) switchboard.Message {
	return switchboard.Message{Role: switchboard.RoleUser, Content: s, Author: "me"}
}

// appendMsgs stores msgs in a session's context.
func appendMsgs(t testing.TB, db *DB, session string, msgs ...switchboard.Message) {
	t.Helper()
	if err := db.AppendMessages(context.Background(), session, msgs, false); err != nil {
		t.Fatal(err)
	}
}

func TestWindowQueryUsesTheIndex(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	storetest.NewSession(t, db, "s1", "")
	for i := range 50 {
		appendMsgs(t, db, "s1", user(fmt.Sprint(i)))
	}
	if _, err := db.write.ExecContext(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	rows, err := db.read.QueryContext(ctx, "EXPLAIN QUERY PLAN "+windowQuery, "s1", 20)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(plan, "\n")
	if !strings.Contains(all, "USING INDEX messages_session") && !strings.Contains(all, "USING COVERING INDEX messages_session") {
		t.Errorf("window query does not use the (session_id, id) index:\n%s", all)
	}
	// No full scan, and no sort: the index is read backwards, in order.
	if strings.Contains(all, "SCAN") || strings.Contains(all, "TEMP B-TREE") {
		t.Errorf("window query scans or sorts:\n%s", all)
	}
}

func BenchmarkWindow(b *testing.B) {
	for _, stored := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("stored=%d", stored), func(b *testing.B) {
			ctx := context.Background()
			db, _ := openFile(b)
			storetest.NewSession(b, db, "s1", "")
			seedMessages(b, db, "s1", stored)
			b.ResetTimer()
			for b.Loop() {
				w, err := db.Window(ctx, "s1", 20)
				if err != nil {
					b.Fatal(err)
				}
				if len(w) != 20 {
					b.Fatalf("window has %d messages", len(w))
				}
			}
		})
	}
}

// seedMessages inserts n messages in one transaction, which is what keeps
// the 100k setup quick.
func seedMessages(b *testing.B, db *DB, session string, n int) {
	b.Helper()
	ctx := context.Background()
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO messages (session_id, role, data) VALUES (?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	defer stmt.Close()
	for i := range n {
		m := user(fmt.Sprintf("message %d", i))
		if i%2 == 1 {
			m = switchboard.Message{Role: switchboard.RoleAssistant, Content: fmt.Sprintf("reply %d", i)}
		}
		data, err := json.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := stmt.ExecContext(ctx, session, string(m.Role), string(data)); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
