package slack_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/health"
	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// healthRig runs a listener whose health and log the test reads; start
// does not wait for a connection.
type healthRig struct {
	t    *testing.T
	fake *slacktest.Server
	logs *syncBuffer
	rep  *health.Reporter
	reg  *health.Registry
	done chan error
	stop context.CancelFunc
}

func newHealthRig(t *testing.T, tune func(*slack.Config), before func(*slacktest.Server)) *healthRig {
	t.Helper()
	fake := slacktest.New(t, slacktest.WithUsers(alice, bob))
	if before != nil {
		before(fake)
	}
	h := &healthRig{t: t, fake: fake, logs: &syncBuffer{}, reg: health.New(nil), done: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(h.logs, nil))
	gw := sessionstest.NewTuned(t, "../../guides", log, nil)
	h.rep = h.reg.Add(slack.Channel, "listener", true)
	cfg := slack.Config{BotToken: fake.BotToken(), AppToken: fake.AppToken(), APIURL: fake.APIURL(), Health: h.rep,
		RetryMin: 10 * time.Millisecond, AppTokenFrom: "the environment variable SLACK_APP_TOKEN (listeners.slack.app_token_env)",
		BotTokenFrom: "the environment variable SLACK_BOT_TOKEN (listeners.slack.bot_token_env)"}
	if tune != nil {
		tune(&cfg)
	}
	l, err := slack.New(cfg, gw.Manager, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	go func() { h.done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-h.done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

func (h *healthRig) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("never happened: %s; state %s; log:\n%s", what, h.rep.State(), h.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A refused app token is an ERROR naming the variable that holds it, the
// listener is down (not ready) and tries again with backoff; "slack
// connected" is said only once the socket is up. Here Slack refuses the
// first apps.connections.open and takes the next.
func TestRefusedAppTokenIsDownThenUp(t *testing.T) {
	h := newHealthRig(t, nil, func(f *slacktest.Server) { f.FailNext("apps.connections.open", "invalid_auth") })
	h.eventually("connected after the refusal", func() bool { return h.rep.State() == health.Up })
	log := h.logs.String()
	refused := strings.Index(log, "Slack refused the app-level token in the environment variable SLACK_APP_TOKEN")
	connected := strings.Index(log, `msg="slack connected"`)
	if refused < 0 || !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "invalid_auth") || !strings.Contains(log, "connections:write") {
		t.Fatalf("the refusal is not an ERROR naming the variable and the fix:\n%s", log)
	}
	if connected < refused {
		t.Fatalf("said connected before the socket was up:\n%s", log)
	}
	if n := h.fake.Calls("apps.connections.open"); n < 2 {
		t.Fatalf("apps.connections.open called %d times, want a retry", n)
	}
}

// An app token Slack keeps refusing leaves the listener down with the
// reason and the fix, trying again, and Run going on until it is stopped.
func TestWrongAppTokenStaysDown(t *testing.T) {
	h := newHealthRig(t, func(c *slack.Config) { c.AppToken = "xapp-1-A0-0-wrong" }, nil)
	h.eventually("down, tried again", func() bool {
		return h.rep.State() == health.Down && h.fake.Calls("apps.connections.open") >= 3
	})
	st := h.reg.Snapshot()[0]
	if !strings.Contains(st.Reason, "app-level token in the environment variable SLACK_APP_TOKEN") || !strings.Contains(st.Fix, "xapp-") || health.Ready(h.reg.Snapshot()) {
		t.Fatalf("status %+v", st)
	}
	if strings.Contains(h.logs.String(), `msg="slack connected"`) {
		t.Fatalf("said connected:\n%s", h.logs.String())
	}
	select {
	case err := <-h.done:
		t.Fatalf("Run returned %v while Slack refused: the gateway would stop", err)
	default:
	}
}

// A refused bot token is the same: an ERROR naming its variable, down,
// tried again.
func TestWrongBotTokenStaysDown(t *testing.T) {
	h := newHealthRig(t, func(c *slack.Config) { c.BotToken = "xoxb-wrong" }, nil)
	h.eventually("down, tried again", func() bool {
		return h.rep.State() == health.Down && h.fake.Calls("auth.test") >= 3
	})
	if st := h.reg.Snapshot()[0]; !strings.Contains(st.Reason, "bot token in the environment variable SLACK_BOT_TOKEN") || !strings.Contains(st.Fix, "xoxb-") {
		t.Fatalf("status %+v", st)
	}
}
