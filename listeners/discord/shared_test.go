package discord_test

// Shared conversations in Discord (issue 14): joining where the bot can
// and cannot post, the limit on places, who decided from where, viewers,
// and the sharing subcommands, against the fake Discord.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/discord"
	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// webConversation starts a conversation on the web, owned by Alice there.
func (r *rig) webConversation() *sessionstest.Person {
	r.t.Helper()
	return r.gw.Open(switchboard.Author{Channel: "web", ID: "alice-web", Name: "Alice"}, sessions.AttachOptions{})
}

// thread adds a thread of the default channel the bot has not seen yet.
func (r *rig) thread(id string, denied int64) string {
	r.fake.AddChannel(discordtest.Channel{ID: id, Type: discordtest.ChannelTypePublicThread, ParentID: discordtest.DefaultChannelID, Name: "thread " + id, BotDenied: denied})
	return id
}

// command runs /switchboard sub in channel as user and waits for its ack.
func (r *rig) command(channel, user string, sub discordtest.CommandOption) {
	r.t.Helper()
	in, err := r.fake.RunCommand(discordtest.CommandInteraction{ChannelID: channel, UserID: user, Name: "switchboard", Options: []discordtest.CommandOption{sub}})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.fake.WaitForAck(ctx, in.ID); err != nil {
		r.t.Fatalf("/switchboard %s was not acknowledged: %v", sub.Name, err)
	}
}

// ephemeral is whether channel holds an ephemeral answer containing text.
func (r *rig) ephemeral(channel, text string) bool {
	for _, m := range r.fake.Ephemerals(channel) {
		if strings.Contains(m.Content, text) {
			return true
		}
	}
	return false
}

// joinDM joins Bob's DM with the code and waits for the joined line.
func (r *rig) joinDM(code string) string {
	r.t.Helper()
	dm := r.fake.DM(bob)
	r.post(discordtest.UserMessage{ChannelID: dm.ID, AuthorID: bob, Content: "/join " + code})
	r.eventually("Bob's DM joined", func() bool {
		return strings.Contains(allContent(r.botMessages(dm.ID)), "**Bob** joined a shared conversation")
	})
	return dm.ID
}

// A place the bot cannot post in is refused before the code is spent,
// with Discord's reason: privately for /switchboard join in a thread it
// cannot see (50001) or post in (50013), in a reply for a mention in a
// channel where it may not open threads. The one-use code then works in
// Bob's DM.
func TestJoinWhereTheBotCannotPost(t *testing.T) {
	r := newRig(t, nil)
	w := r.webConversation()
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Before you came."}})
	w.Say("an early question")
	code := w.Share("member uses 1")

	hidden := r.thread("1200000000000000201", discordtest.PermissionViewChannel)
	r.command(hidden, alice, discordtest.Subcommand("join", discordtest.StringOption("code", code)))
	r.eventually("the reason, privately", func() bool { return r.ephemeral(hidden, "50001 Missing Access") })
	if !r.ephemeral(hidden, "the code is not used") {
		t.Fatalf("the answer does not say the code is kept: %+v", r.fake.Ephemerals(hidden))
	}
	mute := r.thread("1200000000000000202", discordtest.PermissionSendMessagesInThreads)
	r.command(mute, alice, discordtest.Subcommand("join", discordtest.StringOption("code", code)))
	r.eventually("the reason, privately", func() bool { return r.ephemeral(mute, "50013 Missing Permissions") })

	const nothreads = "1200000000000000203"
	r.fake.AddChannel(discordtest.Channel{ID: nothreads, Type: discordtest.ChannelTypeGuildText, GuildID: discordtest.DefaultGuildID, Name: "nothreads",
		BotDenied: discordtest.PermissionCreatePublicThreads})
	m := r.post(discordtest.UserMessage{ChannelID: nothreads, AuthorID: alice, Content: "/join " + code, MentionBot: true})
	r.eventually("the reason in a reply", func() bool {
		return strings.Contains(allContent(r.botMessages(nothreads)), "50013 Missing Permissions")
	})
	if got, _ := r.fake.Message(nothreads, m.ID); got.ThreadID != "" {
		t.Fatalf("a thread was opened: %s", got.ThreadID)
	}
	for _, place := range []string{hidden, mute, nothreads} {
		if _, err := r.gw.Manager.Binding(context.Background(), discord.Channel, place); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("%s was bound: %v", place, err)
		}
	}

	dm := r.joinDM(code)
	r.eventually("the recap in the DM", func() bool {
		text := allContent(r.botMessages(dm))
		return strings.Contains(text, "Before you came.") && strings.Contains(text, "Alice · Web")
	})
	if text := allContent(r.botMessages(dm)); !strings.Contains(text, "as a member") {
		t.Fatalf("the joined line: %s", text)
	}
}

// A conversation shown in as many places as it may be: /switchboard join
// in a thread is told so, privately, with what to do, and the thread
// shows nothing.
func TestJoinWhenShownInTooManyPlaces(t *testing.T) {
	r := newTunedRig(t, func(c *sessions.Config) { c.MaxBindings = 1 })
	w := r.webConversation()
	code := w.Share("member")
	r.joinDM(code)

	th := r.thread("1200000000000000301", 0)
	r.command(th, alice, discordtest.Subcommand("join", discordtest.StringOption("code", code)))
	r.eventually("Alice told why", func() bool { return r.ephemeral(th, "already shown in as many places as it may be") })
	if !r.ephemeral(th, "leave there") {
		t.Fatalf("the answer does not say what to do: %+v", r.fake.Ephemerals(th))
	}
	// The code was not spent: one use went to the DM's join, no more.
	sum := sha256.Sum256([]byte(code))
	if inv, err := r.gw.DB.Invite(context.Background(), hex.EncodeToString(sum[:])); err != nil || inv.UsesLeft != 9 {
		t.Fatalf("the code after a refused join: %+v, %v; want 9 of 10 uses left", inv, err)
	}
	if m := r.botMessages(th); len(m) != 0 {
		t.Fatalf("the thread shows %d bot messages: %s", len(m), allContent(m))
	}
}

// One conversation in the web, Bob's DM and a thread Alice joined with
// /switchboard join: messages from elsewhere carry who and where, never
// echoed where they were written; an approval from Discord closes the
// card everywhere with who and where; /switchboard who is answered to its
// asker alone, in the place asked.
func TestSharedConversationAcrossDiscordPlaces(t *testing.T) {
	r := newRig(t, nil)
	w := r.webConversation()
	code := w.Share("approver")
	dm := r.joinDM(code)
	th := r.thread("1200000000000000401", 0)
	r.command(th, alice, discordtest.Subcommand("join", discordtest.StringOption("code", code)))
	r.eventually("Alice told she joined", func() bool { return r.ephemeral(th, "Joined as an approver") })
	r.eventually("the joined line", func() bool {
		return strings.Contains(allContent(r.botMessages(th)), "**Ali** joined a shared conversation as an approver")
	})

	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"Asia/Tokyo"}`}}},
		openaitest.Reply{Text: []string{"Late in Tokyo."}},
	)
	r.post(discordtest.UserMessage{ChannelID: dm, AuthorID: bob, Content: "time in Tokyo?"})
	r.eventually("Bob's message in the thread", func() bool {
		return strings.Contains(allContent(r.botMessages(th)), "**Bob · Discord**: time in Tokyo?")
	})
	var dmCard, thCard discordtest.Message
	r.eventually("the cards", func() (ok bool) {
		var ok2 bool
		dmCard, ok = r.approvalMessage(dm)
		thCard, ok2 = r.approvalMessage(th)
		return ok && ok2
	})
	r.click(dm, dmCard.ID, bob, customID(t, dmCard, "sb:approve:"))
	for _, c := range []struct{ channel, id string }{{dm, dmCard.ID}, {th, thCard.ID}} {
		r.eventually("the card closed in "+c.channel, func() bool {
			m, _ := r.fake.Message(c.channel, c.id)
			return strings.Contains(string(m.Embeds), "Approved by Bob · Discord") && !strings.Contains(string(m.Components), "sb:approve:")
		})
	}
	r.eventually("the answer in both", func() bool {
		return strings.Contains(allContent(r.botMessages(dm)), "Late in Tokyo.") && strings.Contains(allContent(r.botMessages(th)), "Late in Tokyo.")
	})
	if strings.Contains(allContent(r.botMessages(dm)), "time in Tokyo?") {
		t.Fatal("Bob's message was echoed into his DM")
	}

	r.command(th, alice, discordtest.Subcommand("who"))
	r.eventually("/who answered to Alice", func() bool { return r.ephemeral(th, "3 people in this conversation") })
	for _, want := range []string{"Alice · Web · owner", "Ali · Discord · approver", "Bob · Discord · approver"} {
		if !r.ephemeral(th, want) {
			t.Errorf("/who lacks %q: %+v", want, r.fake.Ephemerals(th))
		}
	}
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Noted."}})
	r.post(discordtest.UserMessage{ChannelID: th, AuthorID: alice, Content: "thanks"})
	r.eventually("the next answer in Bob's DM", func() bool { return strings.Contains(allContent(r.botMessages(dm)), "Noted.") })
	if text := allContent(r.botMessages(dm)) + allContent(r.botMessages(th)); strings.Contains(text, "people in this conversation") {
		t.Fatalf("/who was answered in public:\n%s", text)
	}
}

// A viewer's message and click are refused with the reason; the model is
// not asked and the card stays open.
func TestViewerIsRefusedWithTheReason(t *testing.T) {
	r := newRig(t, nil)
	w := r.webConversation()
	code := w.Share("viewer")
	dm := r.joinDM(code)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{}`}}},
		openaitest.Reply{Text: []string{"It is now."}},
	)
	asked := len(r.gw.LLM.Requests())
	w.Say("what time is it?")
	var card discordtest.Message
	r.eventually("the card in the viewer's DM", func() (ok bool) { card, ok = r.approvalMessage(dm); return ok })

	r.post(discordtest.UserMessage{ChannelID: dm, AuthorID: bob, Content: "may I?"})
	r.eventually("the message refused", func() bool {
		return strings.Contains(allContent(r.botMessages(dm)), "Not sent: Bob is a viewer in this session and may not write")
	})
	r.click(dm, card.ID, bob, customID(t, card, "sb:approve:"))
	r.eventually("the click refused, privately", func() bool { return r.ephemeral(dm, "Bob is a viewer") })
	if m, _ := r.fake.Message(dm, card.ID); !strings.Contains(string(m.Components), "sb:approve:") {
		t.Fatalf("a viewer's click closed the card: %s", m.Components)
	}
	if n := len(r.gw.LLM.Requests()); n != asked+1 {
		t.Fatalf("the model was asked %d times, want once (the web's question)", n-asked)
	}
	r.command(dm, bob, discordtest.Subcommand("who"))
	r.eventually("/who to the viewer", func() bool { return r.ephemeral(dm, "Bob · Discord · viewer") })
}

// /switchboard registers the sharing subcommands within Discord's limits
// (the fake refuses a bulk overwrite that breaks them); share, who,
// approvals and unshare are answered to their user alone, role to
// everyone, and leave takes the DM out of the conversation.
func TestSharingSubcommands(t *testing.T) {
	r := newRig(t, nil)
	var cmds []struct {
		Options []struct {
			Name    string `json:"name"`
			Options []struct {
				Name     string           `json:"name"`
				Type     int              `json:"type"`
				Required bool             `json:"required"`
				Choices  []map[string]any `json:"choices"`
				MinValue float64          `json:"min_value"`
				MaxValue float64          `json:"max_value"`
			} `json:"options"`
		} `json:"options"`
	}
	if err := json.Unmarshal(r.fake.Commands(""), &cmds); err != nil || len(cmds) != 1 {
		t.Fatalf("commands %s: %v", r.fake.Commands(""), err)
	}
	subs := map[string]int{}
	for i, o := range cmds[0].Options {
		subs[o.Name] = i
	}
	for _, name := range []string{"share", "unshare", "who", "role", "leave", "approvals", "join"} {
		if _, ok := subs[name]; !ok {
			t.Errorf("no %s subcommand in %s", name, r.fake.Commands(""))
		}
	}
	share := cmds[0].Options[subs["share"]].Options
	if len(share) != 3 || len(share[0].Choices) != 3 || share[1].Type != 4 || share[1].MinValue != 1 || share[1].MaxValue != 1000 {
		t.Errorf("share's options: %+v", share)
	}
	if role := cmds[0].Options[subs["role"]].Options; len(role) != 2 || !role[0].Required || !role[1].Required || len(role[1].Choices) != 3 {
		t.Errorf("role's options: %+v", role)
	}

	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hi."}}, openaitest.Reply{Text: []string{"Hi Bob."}})
	_, th := r.mention(alice, "hi")
	r.eventually("the answer", func() bool { return strings.Contains(allContent(r.botMessages(th)), "Hi.") })
	r.post(discordtest.UserMessage{ChannelID: th, AuthorID: bob, Content: "me too"})
	r.eventually("Bob answered", func() bool { return strings.Contains(allContent(r.botMessages(th)), "Hi Bob.") })

	r.command(th, alice, discordtest.Subcommand("share", discordtest.StringOption("role", "viewer"), discordtest.IntegerOption("uses", 2), discordtest.StringOption("expires", "2h")))
	r.eventually("the code, to Alice alone", func() bool { return r.ephemeral(th, "joins as viewer, 2 use(s)") })
	r.command(th, bob, discordtest.Subcommand("share"))
	r.eventually("Bob may not share", func() bool { return r.ephemeral(th, "Only the session's owner") })
	r.command(th, alice, discordtest.Subcommand("approvals"))
	r.eventually("/approvals to Alice", func() bool { return r.ephemeral(th, "No tool call has been approved or denied") })
	for _, m := range r.botMessages(th) {
		if strings.Contains(m.Content, "Invite code") || strings.Contains(m.Content, "approved or denied") {
			t.Fatalf("an answer for one person was posted in the thread: %q", m.Content)
		}
	}
	r.command(th, alice, discordtest.Subcommand("role", discordtest.StringOption("name", "Bob"), discordtest.StringOption("role", "viewer")))
	r.eventually("the role change, for everyone", func() bool { return strings.Contains(allContent(r.botMessages(th)), "Ali made Bob a viewer.") })
	r.command(th, alice, discordtest.Subcommand("unshare"))
	r.eventually("the codes withdrawn", func() bool { return r.ephemeral(th, "1 open invite code(s) withdrawn") })
}

// /switchboard leave in a joined DM takes the conversation out of it: the
// DM is told, then shows nothing more, while the conversation goes on in
// the thread that joined.
func TestLeaveStopsShowingThePlace(t *testing.T) {
	r := newRig(t, nil)
	w := r.webConversation()
	code := w.Share("member")
	dm := r.joinDM(code)
	th := r.thread("1200000000000000501", 0)
	r.command(th, alice, discordtest.Subcommand("join", discordtest.StringOption("code", code)))
	r.eventually("the thread joined", func() bool { return strings.Contains(allContent(r.botMessages(th)), "joined a shared conversation") })

	r.command(dm, bob, discordtest.Subcommand("leave"))
	r.eventually("the DM told", func() bool {
		return strings.Contains(allContent(r.botMessages(dm)), "Bob took this conversation out of a Discord place")
	})
	if _, err := r.gw.Manager.Binding(context.Background(), discord.Channel, dm); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("the DM is still bound: %v", err)
	}
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"After Bob left."}})
	w.Say("are you there?")
	r.eventually("the thread goes on", func() bool { return strings.Contains(allContent(r.botMessages(th)), "After Bob left.") })
	if text := allContent(r.botMessages(dm)); strings.Contains(text, "are you there?") || strings.Contains(text, "After Bob left.") {
		t.Fatalf("the DM still shows the conversation:\n%s", text)
	}
}
