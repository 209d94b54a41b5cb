package discord_test

// Trust in shared places (issue 21), tried as a member of the same server
// would: joining someone else's thread, writing or clicking in a thread
// joined by invite without a code, and acting in a channel the allow lists
// leave out, including when the channel cannot be read.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/discord"
	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

const dave = "1400000000000000004"

// usesLeft is how many uses code has left.
func (r *rig) usesLeft(code string) int {
	r.t.Helper()
	sum := sha256.Sum256([]byte(code))
	inv, err := r.gw.DB.Invite(context.Background(), hex.EncodeToString(sum[:]))
	if err != nil {
		r.t.Fatal(err)
	}
	return inv.UsesLeft
}

// told is how many times user was told text in place: privately, or in a
// message that names them.
func (r *rig) told(place, user, text string) int {
	n := 0
	for _, m := range append(r.fake.Messages(place), r.fake.Ephemerals(place)...) {
		if strings.Contains(m.Content, text) && (m.Ephemeral || strings.Contains(m.Content, "<@"+user+">")) {
			n++
		}
	}
	return n
}

// Bob runs /switchboard join in Alice's thread, then mentions the bot there
// with the code, both with a code of the web owner's: the thread keeps
// showing Alice's conversation, Bob is told why and where joining works,
// and the code is not spent.
func TestJoinNeverRebindsSomeoneElsesThread(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hello Alice."}})
	_, th := r.mention(alice, "my private plans")
	r.eventually("Alice answered", func() bool { return strings.Contains(allContent(r.botMessages(th)), "Hello Alice.") })
	before, err := r.gw.Manager.Binding(context.Background(), discord.Channel, th)
	if err != nil {
		t.Fatal(err)
	}
	w := r.webConversation()
	code := w.Share("member")

	r.command(th, bob, discordtest.Subcommand("join", discordtest.StringOption("code", code)))
	r.eventually("Bob told why, privately", func() bool { return r.ephemeral(th, "already shows another conversation") })
	if !r.ephemeral(th, "the code is not used") {
		t.Fatalf("the refusal does not say the code is kept: %+v", r.fake.Ephemerals(th))
	}
	r.post(discordtest.UserMessage{ChannelID: th, AuthorID: bob, Content: "/join " + code, MentionBot: true})
	r.eventually("Bob's mention refused", func() bool {
		return strings.Contains(allContent(r.botMessages(th)), "already shows another conversation")
	})
	if b, err := r.gw.Manager.Binding(context.Background(), discord.Channel, th); err != nil || b.SessionID != before.SessionID {
		t.Fatalf("Alice's thread now shows %+v (%v), want her conversation %s", b, err, before.SessionID)
	}
	if n := r.usesLeft(code); n != 10 {
		t.Fatalf("the code has %d uses left, want all 10", n)
	}
	if text := allContent(r.botMessages(th)); strings.Contains(text, "joined a shared conversation") {
		t.Fatalf("a join was announced in Alice's thread:\n%s", text)
	}
}

// Alice joins a thread with a one-use viewer code; Dave, never invited,
// and Bob, a configured approver, write and click there: each is refused
// with the reason, nothing reaches the model, and the card stays open.
func TestThreadJoinedByInviteIsForItsPeopleOnly(t *testing.T) {
	r := newRig(t, func(c *discord.Config, _ *discordtest.Server) { c.Approvers = []string{bob} })
	r.fake.AddUser(discordtest.User{ID: dave, Username: "dave", GlobalName: "Dave"})
	r.fake.AddMember(discordtest.Member{GuildID: discordtest.DefaultGuildID, UserID: dave})
	w := r.webConversation()
	code := w.Share("viewer uses 1")
	th := r.thread("1200000000000000501", 0)
	r.command(th, alice, discordtest.Subcommand("join", discordtest.StringOption("code", code)))
	r.eventually("Alice joined", func() bool { return r.ephemeral(th, "Joined as a viewer") })

	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{}`}}},
		openaitest.Reply{Text: []string{"It is now."}},
	)
	w.Say("what time is it?")
	var card discordtest.Message
	r.eventually("the card in the thread", func() (ok bool) { card, ok = r.approvalMessage(th); return ok })
	asked := len(r.gw.LLM.Requests())

	for _, u := range []string{dave, bob} {
		r.post(discordtest.UserMessage{ChannelID: th, AuthorID: u, Content: "let me in"})
		r.eventually(u+"'s message refused", func() bool { return r.told(th, u, "shared with particular people") == 1 })
		in, err := r.fake.ClickButton(th, card.ID, u, customID(t, card, "sb:approve:"))
		if err != nil {
			t.Fatal(err)
		}
		r.eventually(u+"'s click refused, to them", func() bool {
			for _, m := range r.fake.Ephemerals(th) {
				if m.InteractionID == in.ID && strings.Contains(m.Content, "shared with particular people") {
					return true
				}
			}
			return false
		})
	}
	if m, _ := r.fake.Message(th, card.ID); !strings.Contains(string(m.Components), "sb:approve:") {
		t.Fatalf("an outsider's click closed the card: %s", m.Components)
	}
	if n := len(r.gw.LLM.Requests()); n != asked {
		t.Fatalf("the model was asked %d more times", n-asked)
	}
	members, err := r.gw.DB.Members(context.Background(), w.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.Key == "discord:"+dave || m.Key == "discord:"+bob {
			t.Fatalf("an outsider became a member: %+v", members)
		}
	}
}

// The allow lists hold for clicks as for messages: a click in a channel
// no longer allowed is refused and the card stays open, whether the
// listener restarted with the narrower list or was given it running
// (SetAccess: a configuration reload).
func TestAllowListsHoldForClicks(t *testing.T) {
	for _, narrow := range []struct {
		how string
		do  func(r *rig, channels []string)
	}{
		{"restart", func(r *rig, channels []string) { r.cfg.AllowedChannels = channels; r.restart() }},
		{"SetAccess", func(r *rig, channels []string) { r.l.SetAccess(discord.Access{AllowedChannels: channels}) }},
	} {
		t.Run(narrow.how, func(t *testing.T) {
			r := newRig(t, func(c *discord.Config, _ *discordtest.Server) {
				c.AllowedChannels = []string{discordtest.DefaultChannelID}
			})
			r.gw.LLM.Push(
				openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{}`}}},
				openaitest.Reply{Text: []string{"It is now."}},
			)
			_, th := r.mention(alice, "time?")
			var card discordtest.Message
			r.eventually("the card", func() (ok bool) { card, ok = r.approvalMessage(th); return ok })

			// The admins narrow the list.
			narrow.do(r, []string{"1100000000000000999"})
			r.click(th, card.ID, alice, customID(t, card, "sb:approve:"))
			r.eventually("the click refused", func() bool { return r.ephemeral(th, "not set up to answer here") })
			if m, _ := r.fake.Message(th, card.ID); !strings.Contains(string(m.Components), "sb:approve:") {
				t.Fatalf("a click from a channel left out approved: %s", m.Components)
			}
		})
	}
}

// Where the allow lists apply, a thread whose channel cannot be read is
// not answered (fail closed); the next message, once it can be, is.
func TestAllowListsFailClosed(t *testing.T) {
	r := newRig(t, func(c *discord.Config, _ *discordtest.Server) {
		c.AllowedChannels = []string{discordtest.DefaultChannelID}
	})
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hello."}})
	_, th := r.mention(alice, "hi")
	r.eventually("the answer", func() bool { return strings.Contains(allContent(r.botMessages(th)), "Hello.") })
	r.restart() // forgets the channels it read
	r.fake.FailNext(discordtest.RouteGetChannel, 500, "")
	r.post(discordtest.UserMessage{ChannelID: th, AuthorID: alice, Content: "unchecked"})
	r.eventually("the channel's lookup failed", func() bool {
		for _, req := range r.fake.Requests(discordtest.RouteGetChannel) {
			if req.Status == 500 {
				if !strings.HasSuffix(req.Path, "/"+th) {
					t.Fatalf("the failed lookup was of %s, not of the thread %s", req.Path, th)
				}
				return true
			}
		}
		return false
	})
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Checked."}})
	r.post(discordtest.UserMessage{ChannelID: th, AuthorID: alice, Content: "checked"})
	r.eventually("the next message answered", func() bool { return strings.Contains(allContent(r.botMessages(th)), "Checked.") })
	for _, req := range r.gw.LLM.Requests() {
		for _, m := range req.Messages {
			if strings.Contains(openaitest.Text(m.Content), "unchecked") {
				t.Fatal("a message was taken while its channel could not be checked")
			}
		}
	}
}
