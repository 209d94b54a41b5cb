package discord_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/health"
	"github.com/switchboard-gw/switchboard/listeners/discord"
	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// logBuffer is a log sink a test reads while the listener writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// With the Message Content intent off in the developer portal, Discord
// closes the Gateway with 4014: the listener says so at once, as an ERROR
// with the fix, and is down (not ready), instead of retrying in silence;
// it keeps running, so the gateway serves its other channels.
func TestMessageContentIntentOffIsDown(t *testing.T) {
	fake := discordtest.New(t, discordtest.WithPrivilegedIntents(1<<1)) // server members only
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	gw := sessionstest.NewTuned(t, "../../guides", log, nil)
	parts := health.New(nil)
	rep := parts.Add(discord.Channel, "listener", true)
	l, err := discord.New(discord.Config{Token: fake.Token(), APIURL: fake.APIURL(), Health: rep}, gw.Manager, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()

	deadline := time.Now().Add(15 * time.Second)
	for rep.State() != health.Down || !strings.Contains(logs.String(), "Privileged Gateway Intents") {
		if time.Now().After(deadline) {
			t.Fatalf("state %s, log:\n%s", rep.State(), logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := parts.Snapshot()[0]
	if !strings.Contains(st.Reason, "Message Content") || !strings.Contains(st.Fix, "Message Content Intent") || health.Ready(parts.Snapshot()) {
		t.Fatalf("status %+v", st)
	}
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("no ERROR:\n%s", logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// A connected listener is up.
func TestConnectedListenerIsUp(t *testing.T) {
	parts := health.New(nil)
	rep := parts.Add(discord.Channel, "listener", true)
	r := newRig(t, func(c *discord.Config, _ *discordtest.Server) { c.Health = rep })
	r.eventually("up", func() bool { return rep.State() == health.Up })
}
