package discord_test

// The gateway as several replicas on one PostgreSQL database (issue 27),
// each with its Discord listener (and, for a shared conversation, its
// Slack listener), the real clients against one fake Discord and one fake
// Slack: one replica holds the bot's Gateway connection, another takes it
// over when that one dies; every replica posts through REST and answers
// HTTP interactions; a conversation run by one replica is shown in every
// place it is bound to, once and in order, whichever replica a message
// reaches. A crash stops a replica at once (its sessions, its cluster and
// its listeners, under one context), and its leases are run out through
// SQL rather than waited for.

import (
	"context"
	"encoding/hex"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/health"
	"github.com/switchboard-gw/switchboard/listeners/discord"
	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
	"github.com/switchboard-gw/switchboard/storage/postgres"
)

// replicated is one gateway run as replicas.
type replicated struct {
	t     *testing.T
	rs    *sessionstest.Replicas
	fake  *discordtest.Server
	slack *slacktest.Server // nil: no Slack listeners
	log   *slog.Logger
}

// node is one replica and its listeners.
type node struct {
	id     string
	gw     *sessionstest.Gateway
	health *health.Registry
	l      *discord.Listener
	// http serves the Discord listener's interactions endpoint.
	http *httptest.Server
	// slackConn is the number of its Socket Mode connection (0: none).
	slackConn int
	done      []chan error
}

func newReplicated(t *testing.T, withSlack bool) *replicated {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c := &replicated{t: t, log: log, rs: sessionstest.NewReplicas(t, "../../guides", log, nil)}
	c.fake = discordtest.New(t,
		discordtest.WithUsers(discordtest.User{ID: alice, Username: "alice", GlobalName: "Alice"}, discordtest.User{ID: bob, Username: "bob", GlobalName: "Bob"}),
		discordtest.WithMembers(discordtest.Member{GuildID: discordtest.DefaultGuildID, UserID: alice, Nick: "Ali"},
			discordtest.Member{GuildID: discordtest.DefaultGuildID, UserID: bob}))
	if withSlack {
		c.slack = slacktest.New(t, slacktest.WithUsers(slackAlice))
	}
	return c
}

var slackAlice = slacktest.User{ID: "U0ALICE", Name: "alice", DisplayName: "Alice"}

// start starts replica id with its listeners, made before the manager
// recovers, as the gateway does; it waits for its Slack connection.
func (c *replicated) start(id string) *node {
	c.t.Helper()
	gw := c.rs.Start(id)
	n := &node{id: id, gw: gw, health: health.New(nil)}
	log := c.log.With("replica", id)
	l, err := discord.New(discord.Config{
		Token: c.fake.Token(), APIURL: c.fake.APIURL(), EditInterval: 20 * time.Millisecond,
		PublicKey: hex.EncodeToString(c.fake.PublicKey()),
		Health:    n.health.Add(discord.Channel, "listener", true),
		Leader:    gw.Cluster.Lead,
	}, gw.Manager, log)
	if err != nil {
		c.t.Fatal(err)
	}
	n.l = l
	var sl *slack.Listener
	if c.slack != nil {
		sl, err = slack.New(slack.Config{BotToken: c.slack.BotToken(), AppToken: c.slack.AppToken(), APIURL: c.slack.APIURL(), UpdateInterval: 20 * time.Millisecond},
			gw.Manager, log)
		if err != nil {
			c.t.Fatal(err)
		}
	}
	if err := gw.Manager.Recover(context.Background()); err != nil {
		c.t.Fatal(err)
	}
	n.http = httptest.NewServer(l.Handler())
	run := func(f func(context.Context) error) {
		done := make(chan error, 1)
		go func() { done <- f(gw.Context()) }()
		n.done = append(n.done, done)
	}
	conns := 0
	if sl != nil {
		conns = c.slack.Connections()
		run(sl.Run)
	}
	run(l.Run)
	c.t.Cleanup(n.crash) // before the replica's store closes
	if sl != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := c.slack.WaitForConnections(ctx, conns+1); err != nil {
			c.t.Fatalf("%s: the Slack listener did not connect: %v", id, err)
		}
		n.slackConn = conns + 1
	}
	return n
}

// crash stops the replica at once, its listeners with it.
func (n *node) crash() {
	n.gw.Crash()
	for _, d := range n.done {
		<-d
	}
	n.done = nil
	n.http.Close()
}

// discordState is what the replica's Discord listener says of itself.
func (n *node) discordState() health.Status {
	return n.health.Snapshot()[0]
}

// eventually allows 30 s: a takeover waits for the next look (a second).
func (c *replicated) eventually(what string, cond func() bool) {
	c.t.Helper()
	waitFor(c.t, 30*time.Second, what, cond)
}

// startTwo starts replica a, which takes the Discord role, then b, which
// stands by.
func (c *replicated) startTwo() (a, b *node) {
	c.t.Helper()
	a = c.start("a")
	c.leads(a)
	b = c.start("b")
	c.standsBy(b)
	return a, b
}

// leads waits until n holds the Discord role and its listener is
// connected, standing by no more.
func (c *replicated) leads(n *node) {
	c.t.Helper()
	c.eventually(n.id+" holds Discord's Gateway", func() bool {
		st := n.discordState()
		return c.rs.Holder("role:"+discord.Role) == n.id && st.State == health.Up && st.Reason == ""
	})
}

// standsBy waits until n says it stands by: up, with the reason.
func (c *replicated) standsBy(n *node) {
	c.t.Helper()
	c.eventually(n.id+" standing by", func() bool {
		st := n.discordState()
		return st.State == health.Up && strings.Contains(st.Reason, "standby")
	})
}

// botMessages are the bot's messages in a Discord channel.
func (c *replicated) botMessages(channel string) []discordtest.Message {
	return botMessagesIn(c.fake, channel)
}

// identified are the Gateway sessions the bot's replicas started.
func (c *replicated) identified() int {
	n := 0
	for _, id := range c.fake.Identifies() {
		if id.SessionID != "" {
			n++
		}
	}
	return n
}

// One replica holds the bot's Gateway connection, the other stands by
// (up, saying so) yet posts and answers HTTP interactions: a conversation
// in a Discord thread reaches the holder over the Gateway, its approval
// is clicked through the other replica's interactions endpoint, and the
// answer is posted once. When the holder dies, the other takes the
// connection over (one new IDENTIFY) and answers the thread once.
func TestOneReplicaHoldsDiscordsGateway(t *testing.T) {
	c := newReplicated(t, false)
	a, b := c.startTwo()
	if !health.Ready(b.health.Snapshot()) {
		t.Fatalf("the replica standing by is not ready: %+v", b.health.Snapshot())
	}

	c.rs.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{}`}}},
		openaitest.Reply{Text: []string{"Approved through b."}},
	)
	m, err := c.fake.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "time?", MentionBot: true})
	if err != nil {
		t.Fatal(err)
	}
	var thread string
	c.eventually("a thread opened from the mention", func() bool {
		got, _ := c.fake.Message(m.ChannelID, m.ID)
		thread = got.ThreadID
		return thread != ""
	})
	var card discordtest.Message
	c.eventually("the approval card", func() (ok bool) { card, ok = approvalIn(c.botMessages(thread)); return ok })
	click, err := c.fake.NewComponentInteraction(discordtest.ComponentInteraction{ChannelID: thread, MessageID: card.ID, UserID: alice, CustomID: customID(t, card, "sb:approve:")})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.fake.PostInteraction(context.Background(), b.http.URL+discord.InteractionsPath, click)
	if err != nil || !d.Accepted {
		t.Fatalf("the click through b: %+v, %v", d, err)
	}
	c.eventually("the answer", func() bool { return strings.Contains(allContent(c.botMessages(thread)), "Approved through b.") })
	if n := c.identified(); n != 1 || c.fake.ActiveConnections() != 1 {
		t.Fatalf("%d Gateway sessions identified, %d connections open; want one of each: a's", n, c.fake.ActiveConnections())
	}

	// a dies; its leases run out; b takes the connection over.
	a.crash()
	c.rs.RunOut("a")
	c.leads(b)
	c.eventually("b identified", func() bool { return c.identified() == 2 })
	c.rs.LLM.Push(openaitest.Reply{Text: []string{"Answered by b."}})
	if _, err := c.fake.PostUserMessage(discordtest.UserMessage{ChannelID: thread, AuthorID: bob, Content: "still there?"}); err != nil {
		t.Fatal(err)
	}
	c.eventually("b's answer in the thread", func() bool { return strings.Contains(allContent(c.botMessages(thread)), "Answered by b.") })
	if got := strings.Count(allContent(c.botMessages(thread)), "Answered by b."); got != 1 {
		t.Fatalf("the answer posted %d times:\n%s", got, showsAll(c.botMessages(thread)))
	}
	if n := len(c.rs.LLM.Requests()); n != 3 {
		t.Fatalf("the model was asked %d times, want 3", n)
	}
	if h := c.rs.Holder(postgres.SessionLease(sessionOf(t, b, thread))); h != "b" {
		t.Fatalf("the thread's conversation is %q's, want b's", h)
	}
}

// sessionOf is the conversation a Discord place shows, read through n.
func sessionOf(t *testing.T, n *node, address string) string {
	t.Helper()
	b, err := n.gw.Manager.Binding(context.Background(), discord.Channel, address)
	if err != nil {
		t.Fatal(err)
	}
	return b.SessionID
}

// sendSlack delivers a Slack event over connection conn (0: the next in
// turn, as Slack spreads them) and waits for its acknowledgement.
func (c *replicated) sendSlack(conn int, event map[string]any) slacktest.Envelope {
	c.t.Helper()
	var env slacktest.Envelope
	var err error
	if conn == 0 {
		env, err = c.slack.SendEvent(event)
	} else {
		env, err = c.slack.SendEventOn(conn, event)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := c.slack.WaitForAck(ctx, env.EnvelopeID); err != nil {
		c.t.Fatalf("Slack's envelope was not acknowledged: %v", err)
	}
	return env
}

// slackThread is the bot's messages in a Slack thread, as text.
func (c *replicated) slackThread(channel, root string) string {
	var b strings.Builder
	for _, m := range c.slack.Thread(channel, root) {
		if m.User == c.slack.BotUserID() {
			b.WriteString(m.Text + "\n")
		}
	}
	return b.String()
}

// shareToBobsDM shares the conversation of Alice's Slack thread in C1
// (her /share sent over Slack connection conn), joins Bob's Discord DM
// to it with the code, and returns the DM once it says he joined.
func (c *replicated) shareToBobsDM(conn int, root string) string {
	c.t.Helper()
	c.sendSlack(conn, c.slack.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: slackAlice.ID, ThreadTS: root, Text: "/share member"}))
	var code string
	c.eventually("the invite code, in Slack", func() bool {
		for _, e := range c.slack.Ephemerals("C1") {
			if m := sessionstest.InviteCode.FindStringSubmatch(e.Text); m != nil {
				code = m[1]
			}
		}
		return code != ""
	})
	dm := c.fake.DM(bob).ID
	if _, err := c.fake.PostUserMessage(discordtest.UserMessage{ChannelID: dm, AuthorID: bob, Content: "/join " + code}); err != nil {
		c.t.Fatal(err)
	}
	c.eventually("Bob's DM joined", func() bool {
		return strings.Contains(allContent(c.botMessages(dm)), "**Bob** joined a shared conversation")
	})
	return dm
}

// markerModel answers "Noted M-X." to a message carrying the marker m-x
// (people's markers lower case, the answers upper case).
func markerModel(r openaitest.Request) openaitest.Reply {
	text := openaitest.Text(r.Messages[len(r.Messages)-1].Content)
	return openaitest.Reply{Text: []string{"Noted ", strings.ToUpper(marker.FindString(text)), "."}}
}

var marker = regexp.MustCompile(`(?i)m-[a-z]+`)

// One conversation in a Slack thread and in Bob's Discord DM, across two
// replicas: b runs it (Alice's first mention landed there), a holds the
// Discord Gateway. Slack's envelopes land on either replica, Bob's
// messages reach a over the Gateway; each is answered once, by b (one
// Slack redelivers to the other replica too), and
// every place shows every event once and in the same order: each answer
// and each message written in the other place, nothing posted twice.
func TestSharedConversationAcrossReplicas(t *testing.T) {
	c := newReplicated(t, true)
	c.rs.LLM.Respond(markerModel)
	a, b := c.startTwo()

	ev := c.slack.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: slackAlice.ID, Text: "m-one, hello"})
	c.sendSlack(b.slackConn, ev)
	root := ev["ts"].(string)
	c.eventually("the first answer in Slack", func() bool { return strings.Contains(c.slackThread("C1", root), "Noted M-ONE.") })
	addr := slacktest.DefaultTeamID + ":C1:" + root
	bound, err := b.gw.Manager.Binding(context.Background(), slack.Channel, addr)
	if err != nil {
		t.Fatal(err)
	}
	if h := c.rs.Holder(postgres.SessionLease(bound.SessionID)); h != "b" {
		t.Fatalf("the conversation is %q's, want b's: Alice's mention landed there", h)
	}

	// Shared from a, which does not run it; joined from Bob's DM, over
	// a's Gateway.
	dm := c.shareToBobsDM(a.slackConn, root)
	c.eventually("the recap in Bob's DM", func() bool { return strings.Contains(allContent(c.botMessages(dm)), "Noted M-ONE.") })

	answered := func(text string) {
		t.Helper()
		answer := "Noted " + strings.ToUpper(marker.FindString(text)) + "."
		c.eventually(answer+" in both places", func() bool {
			return strings.Contains(c.slackThread("C1", root), answer) && strings.Contains(allContent(c.botMessages(dm)), answer)
		})
	}
	say := []struct {
		who, text string
	}{{"bob", "m-two from the DM"}, {"alice", "m-three from the thread"}, {"bob", "m-four"}, {"alice", "m-five"}, {"alice", "m-six"}}
	for _, s := range say {
		if s.who == "bob" {
			if _, err := c.fake.PostUserMessage(discordtest.UserMessage{ChannelID: dm, AuthorID: bob, Content: s.text}); err != nil {
				t.Fatal(err)
			}
			answered(s.text)
			continue
		}
		env := c.sendSlack(0, c.slack.MessageEvent(slacktest.UserMessage{Channel: "C1", User: slackAlice.ID, ThreadTS: root, Text: s.text}))
		answered(s.text)
		if s.text == "m-three from the thread" {
			// Slack sends it again (no timely ack, it believed), over
			// the other replica's connection: still answered once.
			again, err := c.slack.Redeliver(env, "timeout")
			if err != nil || again.Conn == env.Conn {
				t.Fatalf("redelivered over connection %d (first over %d): %v", again.Conn, env.Conn, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			_, err = c.slack.WaitForAck(ctx, again.EnvelopeID)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	// Each was answered once, by the replica that runs the conversation.
	if n := len(c.rs.LLM.Requests()); n != 6 {
		t.Fatalf("the model was asked %d times, want 6: each message once", n)
	}
	if h := c.rs.Holder(postgres.SessionLease(bound.SessionID)); h != "b" {
		t.Fatalf("the conversation moved to %q: b is alive and runs it", h)
	}
	// Slack's envelopes landed on both replicas.
	landed := map[int]bool{}
	for _, ack := range c.slack.Acks() {
		landed[ack.Envelope.Conn] = true
	}
	if !landed[a.slackConn] || !landed[b.slackConn] {
		t.Fatalf("Slack's envelopes landed on connections %v, want a's (%d) and b's (%d)", landed, a.slackConn, b.slackConn)
	}
	// Every place shows every event once, in order: the answers, and what
	// was written in the other place.
	if got, want := strings.Join(marker.FindAllString(c.slackThread("C1", root), -1), " "),
		"M-ONE m-two M-TWO M-THREE m-four M-FOUR M-FIVE M-SIX"; got != want {
		t.Errorf("the Slack thread shows %s, want %s:\n%s", got, want, c.slackThread("C1", root))
	}
	dmText := allContent(c.botMessages(dm))
	if got, want := strings.Join(marker.FindAllString(dmText[strings.Index(dmText, "**Bob** joined"):], -1), " "),
		"m-one M-ONE M-TWO m-three M-THREE M-FOUR m-five M-FIVE m-six M-SIX"; got != want {
		t.Errorf("Bob's DM shows %s, want %s:\n%s", got, want, showsAll(c.botMessages(dm)))
	}
	if n := c.identified(); n != 1 {
		t.Fatalf("%d Gateway sessions identified, want a's alone", n)
	}
}

// A reply under way in a Slack thread and a Discord DM when the replica
// that runs the conversation (and holds the Discord Gateway) dies: the
// other takes the conversation over, says the answer was interrupted and
// answers again, and takes the Gateway over. The part of the reply posted
// before is in each place once, edited rather than posted again, and
// nothing is left streaming.
func TestReplyUnderWayFinishedByTheOtherReplica(t *testing.T) {
	c := newReplicated(t, true)
	a, b := c.startTwo()

	c.rs.LLM.Push(openaitest.Reply{Text: []string{"Hello."}})
	ev := c.slack.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: slackAlice.ID, Text: "hi"})
	c.sendSlack(a.slackConn, ev)
	root := ev["ts"].(string)
	c.eventually("the first answer in Slack", func() bool { return strings.Contains(c.slackThread("C1", root), "Hello.") })
	dm := c.shareToBobsDM(a.slackConn, root)

	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	c.rs.LLM.Push(
		openaitest.Reply{Text: []string{"First part. ", "never sent"}, Gate: gate},
		openaitest.Reply{Text: []string{"Whole answer."}},
	)
	c.sendSlack(a.slackConn, c.slack.MessageEvent(slacktest.UserMessage{Channel: "C1", User: slackAlice.ID, ThreadTS: root, Text: "tell me"}))
	c.eventually("the reply under way in both places", func() bool {
		return strings.Contains(c.slackThread("C1", root), "First part.") && strings.Contains(allContent(c.botMessages(dm)), "First part.")
	})
	// A message is noted with its place just after it is posted; a crash
	// between the two would leave the other replica nothing to edit (it
	// posts again). The test crashes a once the reply is noted: what this
	// test shows is that a noted reply is edited, not posted twice.
	c.eventually("the DM's reply under way noted with its place", func() bool {
		id := ""
		for _, m := range c.botMessages(dm) {
			if strings.Contains(m.Content, "First part.") {
				id = m.ID
			}
		}
		b, err := a.gw.PG.Binding(context.Background(), "discord", dm)
		return err == nil && id != "" && strings.Contains(b.State, id)
	})

	a.crash()
	c.rs.RunOut("a")
	c.eventually("the turn answered again in both places", func() bool {
		return strings.Contains(c.slackThread("C1", root), "Whole answer.") && strings.Contains(allContent(c.botMessages(dm)), "Whole answer.")
	})
	c.leads(b)
	c.eventually("nothing left streaming in Slack", func() bool {
		for _, m := range c.slack.Thread("C1", root) {
			if m.Streaming {
				return false
			}
		}
		return true
	})
	slackText, dmText := c.slackThread("C1", root), allContent(c.botMessages(dm))
	for place, text := range map[string]string{"the Slack thread": slackText, "Bob's DM": dmText} {
		if strings.Count(text, "First part.") != 1 || strings.Count(text, "Whole answer.") != 1 || !strings.Contains(text, "interrupted") {
			t.Errorf("%s after the takeover:\n%s", place, text)
		}
	}
	if n := len(c.rs.LLM.Requests()); n != 3 {
		t.Fatalf("the model was asked %d times, want 3 (the cut turn run again once)", n)
	}
}
