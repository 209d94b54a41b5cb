package storage

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// Footprint counts memories, summaries and the messages the recall index
// holds (people's and the assistant's with text, not tool results), and
// the index's bytes grow with what it holds; a deleted session leaves it.
func TestFootprint(t *testing.T) {
	ctx := context.Background()
	db, _ := openFile(t)
	empty, err := db.Footprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Memories != 0 || empty.Summaries != 0 || empty.IndexedMessages != 0 || empty.IndexBytes <= 0 {
		t.Fatalf("an empty store's footprint: %+v", empty)
	}
	for i, owner := range []string{"web:alice", "web:alice", "slack:U2"} {
		if err := db.AddMemory(ctx, switchboard.Memory{ID: fmt.Sprint("mem_", i), Owner: owner, Text: "likes tea", SessionID: "s1", Channel: "web", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	storetest.NewSession(t, db, "s1", "")
	storetest.NewSession(t, db, "s2", "")
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{Messages: []switchboard.Message{
		{Role: switchboard.RoleUser, Content: "what is 2+2?"},
		{Role: switchboard.RoleAssistant, ToolCalls: []switchboard.ToolCall{{ID: "c1", Name: "calculator", Args: []byte(`{"expression":"2+2"}`)}}},
		{Role: switchboard.RoleTool, ToolCallID: "c1", ToolName: "calculator", Content: "4"},
		{Role: switchboard.RoleAssistant, Content: "Four."},
	}, Summary: &switchboard.Summary{Text: "They asked sums.", Keep: 2}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Footprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Memories != 3 || got.Summaries != 1 || got.IndexedMessages != 2 {
		t.Fatalf("footprint %+v, want 3 memories, 1 summary, 2 indexed messages", got)
	}

	// 2,000 messages of 1 KiB: the index keeps a copy of their text, so
	// it grows by at least 2 MB.
	msgs := make([]switchboard.Message, 2000)
	for i := range msgs {
		msgs[i] = switchboard.Message{Role: switchboard.RoleUser, Content: fmt.Sprintf("message %d %s", i, strings.Repeat("words of a long message ", 43))}
	}
	if err := writeTurn(ctx, db, "s2", switchboard.TurnWrite{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	grown, err := db.Footprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if grown.IndexedMessages != 2002 || grown.IndexBytes-got.IndexBytes < 2_000_000 {
		t.Fatalf("after 2,000 messages of 1 KiB: %+v (was %+v)", grown, got)
	}
	if err := db.DeleteSessions(ctx, []string{"s2"}); err != nil {
		t.Fatal(err)
	}
	if after, err := db.Footprint(ctx); err != nil || after.IndexedMessages != 2 || after.Memories != 3 {
		t.Fatalf("after deleting the session: %+v, %v", after, err)
	}
}
