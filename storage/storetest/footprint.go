package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// Footprint counts memories, summaries and the messages the recall index
// holds (people's and the assistant's with text, not tool results); a
// deleted session leaves the index. The index's bytes are some once it
// holds text (how many is the store's own: storage's test weighs them).
func testFootprint(t *testing.T, db Store) {
	ctx := context.Background()
	empty, err := db.Footprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Memories != 0 || empty.Summaries != 0 || empty.IndexedMessages != 0 {
		t.Fatalf("an empty store's footprint: %+v", empty)
	}
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	for i, owner := range []string{"web:alice", "web:alice", "slack:U2"} {
		if err := db.AddMemory(ctx, switchboard.Memory{ID: fmt.Sprint("mem_", i), Owner: owner, Text: "likes tea", SessionID: "s1", Channel: "web", CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	NewSession(t, db, "s1", "")
	NewSession(t, db, "s2", "")
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
	if got.Memories != 3 || got.Summaries != 1 || got.IndexedMessages != 2 || got.IndexBytes <= 0 {
		t.Fatalf("footprint %+v, want 3 memories, 1 summary, 2 indexed messages and their bytes", got)
	}

	msgs := make([]switchboard.Message, 20)
	for i := range msgs {
		msgs[i] = switchboard.Message{Role: switchboard.RoleUser, Content: fmt.Sprintf("message %d", i)}
	}
	if err := writeTurn(ctx, db, "s2", switchboard.TurnWrite{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	if grown, err := db.Footprint(ctx); err != nil || grown.IndexedMessages != 22 {
		t.Fatalf("after 20 messages more: %+v, %v; want 22 indexed", grown, err)
	}
	if err := db.DeleteSessions(ctx, []string{"s2"}); err != nil {
		t.Fatal(err)
	}
	if after, err := db.Footprint(ctx); err != nil || after.IndexedMessages != 2 || after.Memories != 3 || after.Summaries != 1 {
		t.Fatalf("after deleting the session: %+v, %v; want s1's 2 indexed messages, 3 memories and 1 summary", after, err)
	}
}
