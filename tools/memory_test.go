package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// fullMemories is a store whose person keeps as many memories as they may.
type fullMemories struct{ noMemories }

func (fullMemories) AddMemory(context.Context, switchboard.Memory) error {
	return fmt.Errorf("storage: add memory: %w", switchboard.ErrMemoriesFull)
}

// A person who keeps the most memories they may is told, through the
// model, how to make room.
func TestRememberWhenFull(t *testing.T) {
	r := newTestRegistry(t, MemoryTools(fullMemories{}, time.Now)...)
	ctx := WithAuthor(WithSession(context.Background(), "s_1"), switchboard.Author{Channel: "web", ID: "alice", Name: "Alice"})
	_, err := r.Run(ctx, "remember", json.RawMessage(`{"text":"prefers tea"}`))
	if err == nil || !strings.Contains(err.Error(), "Alice keeps 200 memories") || !strings.Contains(err.Error(), "/forget <id>") {
		t.Fatalf("remember when full: %v", err)
	}
}
