package discordtest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
)

// Sessions reach each test's own fake through its Client; discordgo's
// APIVersion is set once, in TestMain, before any session opens.
func TestMain(m *testing.M) {
	discordgo.APIVersion = "10"
	os.Exit(m.Run())
}

// deadline turns a hang into a failure; no test relies on it passing. It
// is generous: on a loaded 2-core machine under the race detector,
// discordgo's reconnect after a missed heartbeat ACK (its backoff doubles
// from 1 s) can take several seconds before a replayed dispatch arrives.
const deadline = 30 * time.Second

const (
	alice = "1300000000000000011"
	bob   = "1300000000000000012"
)

const defaultIntents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages |
	discordgo.IntentsMessageContent | discordgo.IntentsGuildMessageReactions

// newServer starts a fake with alice and bob as guild members.
func newServer(t *testing.T, opts ...discordtest.Option) *discordtest.Server {
	t.Helper()
	opts = append([]discordtest.Option{
		discordtest.WithUsers(
			discordtest.User{ID: alice, Username: "alice", GlobalName: "Alice Liddell"},
			discordtest.User{ID: bob, Username: "bob"},
		),
		discordtest.WithMembers(
			discordtest.Member{GuildID: discordtest.DefaultGuildID, UserID: alice, Nick: "Al", Roles: []string{"1400000000000000001"}},
		),
	}, opts...)
	return discordtest.New(t, opts...)
}

// restSession is a discordgo session used for REST calls only.
func restSession(t *testing.T, srv *discordtest.Server) *discordgo.Session {
	t.Helper()
	s, err := discordgo.New("Bot " + srv.Token())
	if err != nil {
		t.Fatal(err)
	}
	s.Client = srv.Client()
	s.Client.Timeout = deadline
	return s
}

// events collects what a discordgo session's handlers receive.
type events struct {
	ready    chan *discordgo.Ready
	resumed  chan *discordgo.Resumed
	messages chan *discordgo.MessageCreate
	updates  chan *discordgo.MessageUpdate
	threads  chan *discordgo.ThreadCreate
	inters   chan *discordgo.InteractionCreate
	guilds   chan *discordgo.GuildCreate
}

// openSession opens a real discordgo gateway session with intents against
// srv and closes it when the test ends.
func openSession(t *testing.T, srv *discordtest.Server, intents discordgo.Intent) (*discordgo.Session, *events) {
	t.Helper()
	s := restSession(t, srv)
	s.Identify.Intents = intents
	ev := &events{
		ready:    make(chan *discordgo.Ready, 16),
		resumed:  make(chan *discordgo.Resumed, 16),
		messages: make(chan *discordgo.MessageCreate, 64),
		updates:  make(chan *discordgo.MessageUpdate, 64),
		threads:  make(chan *discordgo.ThreadCreate, 16),
		inters:   make(chan *discordgo.InteractionCreate, 16),
		guilds:   make(chan *discordgo.GuildCreate, 16),
	}
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { ev.ready <- r })
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.Resumed) { ev.resumed <- r })
	s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { ev.messages <- m })
	s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageUpdate) { ev.updates <- m })
	s.AddHandler(func(_ *discordgo.Session, c *discordgo.ThreadCreate) { ev.threads <- c })
	s.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) { ev.inters <- i })
	s.AddHandler(func(_ *discordgo.Session, g *discordgo.GuildCreate) { ev.guilds <- g })
	if err := s.Open(); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, ev
}

// next receives from ch or fails after the deadline.
func next[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deadline):
		t.Fatalf("no %s within %v", what, deadline)
		panic("unreachable")
	}
}

// nextMessage returns the next MESSAGE_CREATE not authored by the bot
// (Discord echoes the bot's own messages).
func nextUserMessage(t *testing.T, ev *events, botID string) *discordgo.MessageCreate {
	t.Helper()
	for {
		m := next(t, ev.messages, "MESSAGE_CREATE")
		if m.Author == nil || m.Author.ID != botID {
			return m
		}
	}
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// restErr returns the Discord error code and HTTP status of a discordgo
// REST error, failing the test for anything else.
func restErr(t *testing.T, err error) (code, status int, body string) {
	t.Helper()
	var re *discordgo.RESTError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v (%T), want *discordgo.RESTError", err, err)
	}
	if re.Message != nil {
		code = re.Message.Code
	}
	return code, re.Response.StatusCode, string(re.ResponseBody)
}
