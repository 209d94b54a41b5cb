package slack_test

// Shared conversations in Slack (issue 14): joining where the bot can and
// cannot post, the limit on places, who decided from where, viewers, and
// the sharing commands, against the fake Slack.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

var carol = slacktest.User{ID: "U0CAROL", Name: "carol", DisplayName: "Carol"}

// bobDM is Bob's direct message with the bot.
const bobDM = "D0BOBDM1"

// webConversation starts a conversation on the web, owned by Alice there;
// the fake Slack knows Carol and Bob's DM.
func (r *rig) webConversation() *sessionstest.Person {
	r.t.Helper()
	r.fake.AddUser(carol)
	r.fake.AddChannel(slacktest.Channel{ID: bobDM, User: bob.ID})
	return r.gw.Open(switchboard.Author{Channel: "web", ID: "alice-web", Name: "Alice"}, sessions.AttachOptions{})
}

// command runs /switchboard text as user in channel and returns its ack.
func (r *rig) command(user, channel, text string) slacktest.Ack {
	r.t.Helper()
	env, err := r.fake.SendSlashCommand(r.fake.SlashCommand(user, channel, "/switchboard", text))
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := r.fake.WaitForAck(ctx, env.EnvelopeID)
	if err != nil {
		r.t.Fatal(err)
	}
	return ack
}

// ephemeralFor is whether user was shown text privately in channel.
func (r *rig) ephemeralFor(channel, user, text string) bool {
	for _, e := range r.fake.Ephemerals(channel) {
		if e.User == user && strings.Contains(e.Text, text) {
			return true
		}
	}
	return false
}

// joinDM joins Bob's DM with the code and waits for the joined line.
func (r *rig) joinDM(code string) {
	r.t.Helper()
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: bobDM, User: bob.ID, Text: "/join " + code}))
	r.eventually("Bob's DM joined", func() bool {
		return strings.Contains(allText(r.botReplies(bobDM, "")), "Bob Stone joined a shared conversation")
	})
}

// A place the bot cannot post in is refused before the code is spent,
// with Slack's reason, privately: a slash command in a DM between two
// people is answered on its response_url; a mention in a channel where
// only some may post, in the person's DM with the bot. The one-use code
// then still works in Bob's DM, which shows the conversation.
func TestJoinWhereTheBotCannotPost(t *testing.T) {
	r := newRig(t, nil)
	w := r.webConversation()
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Before you came."}})
	w.Say("an early question")
	code := w.Share("member uses 1")

	const between = "D0ALICEBOB1" // Alice and Bob's DM, which the bot is not in
	r.fake.AddChannel(slacktest.Channel{ID: between, NotMember: true})
	if ack := r.command(bob.ID, between, "join "+code); strings.Contains(string(ack.Payload), "Joined") {
		t.Fatalf("ack %s", ack.Payload)
	}
	r.eventually("the reason, privately", func() bool { return r.ephemeralFor(between, bob.ID, "channel_not_found") })
	if !r.ephemeralFor(between, bob.ID, "the code is not used") {
		t.Fatalf("the refusal does not say the code is kept: %+v", r.fake.Ephemerals(between))
	}
	if _, err := r.gw.Manager.Binding(context.Background(), slack.Channel, slacktest.DefaultTeamID+":"+between); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("a place the bot cannot post in was bound: %v", err)
	}

	const news = "C0NEWS1" // only admins post here; Bob is one, the bot is not
	r.fake.AddChannel(slacktest.Channel{ID: news, Name: "news", Restricted: true})
	r.send(r.fake.AppMentionEvent(slacktest.UserMessage{Channel: news, User: bob.ID, Text: "/join " + code}))
	r.eventually("the reason in Bob's DM", func() bool { return strings.Contains(allText(r.botReplies(bobDM, "")), "restricted_action") })
	if n := len(r.botReplies(news, "")); n != 0 {
		t.Fatalf("%d bot messages in the restricted channel", n)
	}

	r.joinDM(code)
	r.eventually("the recap in the DM", func() bool {
		text := allText(r.botReplies(bobDM, ""))
		return strings.Contains(text, "Before you came.") && strings.Contains(text, "Alice · Web")
	})
	if text := allText(r.botReplies(bobDM, "")); !strings.Contains(text, "as a member") {
		t.Fatalf("the joined line: %s", text)
	}
}

// A conversation shown in as many places as it may be: a third place is
// told so, privately, with what to do, and shows nothing.
func TestJoinWhenShownInTooManyPlaces(t *testing.T) {
	r := newTunedRig(t, func(c *sessions.Config) { c.MaxBindings = 1 }, nil)
	w := r.webConversation()
	code := w.Share("member")
	r.joinDM(code)

	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: carol.ID, Text: "/join " + code})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("Carol told why", func() bool { return r.ephemeralFor("C1", carol.ID, "already shown in as many places as it may be") })
	if !r.ephemeralFor("C1", carol.ID, "leave there") {
		t.Fatalf("the refusal does not say what to do: %+v", r.fake.Ephemerals("C1"))
	}
	// The code was not spent: one use went to the DM's join, no more.
	sum := sha256.Sum256([]byte(code))
	if inv, err := r.gw.DB.Invite(context.Background(), hex.EncodeToString(sum[:])); err != nil || inv.UsesLeft != 9 {
		t.Fatalf("the code after a refused join: %+v, %v; want 9 of 10 uses left", inv, err)
	}
	if m := r.botReplies("C1", root); len(m) != 0 {
		t.Fatalf("the thread shows %d bot messages: %s", len(m), allText(m))
	}
	if _, err := r.gw.Manager.Binding(context.Background(), slack.Channel, slacktest.DefaultTeamID+":C1:"+root); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("the thread was bound: %v", err)
	}
}

// One conversation in the web, Bob's DM and Carol's thread: messages from
// elsewhere carry who and where ("Bob Stone · Slack" in Carol's thread),
// never echoed where they were written; an approval from Slack closes the
// card everywhere with who and where; a notice for one person is shown in
// the place they asked in only.
func TestSharedConversationAcrossSlackPlaces(t *testing.T) {
	r := newRig(t, nil)
	w := r.webConversation()
	code := w.Share("approver")
	r.joinDM(code)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: carol.ID, Text: "/join " + code})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("Carol's thread joined", func() bool {
		return strings.Contains(allText(r.botReplies("C1", root)), "Carol joined a shared conversation")
	})

	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"Asia/Tokyo"}`}}},
		openaitest.Reply{Text: []string{"Late in Tokyo."}},
	)
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: bobDM, User: bob.ID, Text: "time in Tokyo?"}))
	r.eventually("Bob's message in Carol's thread", func() bool {
		return strings.Contains(allText(r.botReplies("C1", root)), "Bob Stone · Slack: time in Tokyo?")
	})
	var dmCard, threadCard slacktest.Message
	r.eventually("the cards", func() (ok bool) {
		var ok2 bool
		dmCard, ok = r.approvalCard(bobDM, "")
		threadCard, ok2 = r.approvalCard("C1", root)
		return ok && ok2
	})
	r.click(bob.ID, bobDM, dmCard.TS, "sb_approve")
	for _, c := range []struct{ channel, ts string }{{bobDM, dmCard.TS}, {"C1", threadCard.TS}} {
		r.eventually("the card closed in "+c.channel, func() bool {
			m, _ := r.fake.Message(c.channel, c.ts)
			return strings.Contains(string(m.Blocks), "Approved by Bob Stone · Slack") && !strings.Contains(string(m.Blocks), `"actions"`)
		})
	}
	r.eventually("the answer in both", func() bool {
		return strings.Contains(allText(r.botReplies(bobDM, "")), "Late in Tokyo.") && strings.Contains(allText(r.botReplies("C1", root)), "Late in Tokyo.")
	})
	if strings.Contains(allText(r.botReplies(bobDM, "")), "time in Tokyo?") {
		t.Fatal("Bob's message was echoed into his DM")
	}
	w.Await("the decision with its channel", func(ev switchboard.Event) bool {
		return ev.Type == switchboard.EventConfirmationResolved && strings.Contains(string(ev.Data), `"channel":"slack"`)
	})

	// Carol asks who is here in her thread: the answer is hers, there.
	r.send(r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: carol.ID, ThreadTS: root, Text: "/who"}))
	r.eventually("/who answered to Carol", func() bool { return r.ephemeralFor("C1", carol.ID, "3 people in this conversation") })
	for _, want := range []string{"Alice · Web · owner", "Bob Stone · Slack · approver", "Carol · Slack · approver"} {
		if !r.ephemeralFor("C1", carol.ID, want) {
			t.Errorf("/who lacks %q: %+v", want, r.fake.Ephemerals("C1"))
		}
	}
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Noted."}})
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: carol.ID, ThreadTS: root, Text: "thanks"}))
	r.eventually("the next answer in Bob's DM", func() bool { return strings.Contains(allText(r.botReplies(bobDM, "")), "Noted.") })
	if e := r.fake.Ephemerals(bobDM); len(e) != 0 {
		t.Fatalf("Carol's answer was shown in Bob's DM too: %+v", e)
	}
	if strings.Contains(allText(r.botReplies("C1", root)), "3 people") {
		t.Fatal("/who was answered in public")
	}
}

// A viewer's message and click are refused with the reason, privately;
// the model is not asked and the card stays open.
func TestViewerIsRefusedWithTheReason(t *testing.T) {
	r := newRig(t, nil)
	w := r.webConversation()
	code := w.Share("viewer")
	r.joinDM(code)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{}`}}},
		openaitest.Reply{Text: []string{"It is now."}},
	)
	asked := len(r.gw.LLM.Requests())
	w.Say("what time is it?") // done with it once the turn waits for approval
	var card slacktest.Message
	r.eventually("the card in the viewer's DM", func() (ok bool) { card, ok = r.approvalCard(bobDM, ""); return ok })

	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: bobDM, User: bob.ID, Text: "may I?"}))
	r.eventually("the message refused", func() bool {
		return r.ephemeralFor(bobDM, bob.ID, "Bob Stone is a viewer in this session and may not write")
	})
	r.click(bob.ID, bobDM, card.TS, "sb_approve")
	r.eventually("the click refused", func() bool {
		n := 0
		for _, e := range r.fake.Ephemerals(bobDM) {
			if strings.Contains(e.Text, "is a viewer") {
				n++
			}
		}
		return n == 2
	})
	if m, _ := r.fake.Message(bobDM, card.TS); !strings.Contains(string(m.Blocks), `"sb_approve"`) {
		t.Fatalf("a viewer's click closed the card: %s", m.Blocks)
	}
	if n := len(r.gw.LLM.Requests()); n != asked+1 {
		t.Fatalf("the model was asked %d times, want once (the web's question)", n-asked)
	}
	// The viewer may still read: /who is answered to him.
	r.command(bob.ID, bobDM, "who")
	r.eventually("/who to the viewer", func() bool { return r.ephemeralFor(bobDM, bob.ID, "Bob Stone · Slack · viewer") })
}

// /switchboard share, who, approvals, role and unshare reach the thread's
// conversation as its commands; the answers meant for one person are
// shown to them alone, a role change to everyone.
func TestSharingCommands(t *testing.T) {
	r := newRig(t, nil)
	r.fake.AddUser(carol)
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hi."}}, openaitest.Reply{Text: []string{"Hi Carol."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "hi"})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Hi.") })
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: carol.ID, ThreadTS: root, Text: "me too"}))
	r.eventually("Carol answered", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Hi Carol.") })

	if ack := r.command(alice.ID, "C1", "share viewer uses 2"); !strings.Contains(string(ack.Payload), "answered in your last thread here, to you alone") {
		t.Fatalf("ack %s", ack.Payload)
	}
	r.eventually("the code, to Alice alone", func() bool { return r.ephemeralFor("C1", alice.ID, "joins as viewer, 2 use(s)") })
	r.command(carol.ID, "C1", "share")
	r.eventually("Carol may not share", func() bool { return r.ephemeralFor("C1", carol.ID, "Only the session's owner") })
	r.command(alice.ID, "C1", "who")
	r.eventually("/who to Alice", func() bool { return r.ephemeralFor("C1", alice.ID, "2 people in this conversation") })
	r.command(alice.ID, "C1", "approvals")
	r.eventually("/approvals to Alice", func() bool { return r.ephemeralFor("C1", alice.ID, "No tool call has been approved or denied") })
	for _, m := range r.botReplies("C1", root) {
		if strings.Contains(m.Text, "Invite code") || strings.Contains(m.Text, "people in this conversation") {
			t.Fatalf("an answer for one person was posted in the thread: %q", m.Text)
		}
	}

	r.command(alice.ID, "C1", "role Carol viewer")
	r.eventually("the role change, for everyone", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Alice made Carol a viewer.") })
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: carol.ID, ThreadTS: root, Text: "still me"}))
	r.eventually("Carol refused", func() bool { return r.ephemeralFor("C1", carol.ID, "Carol is a viewer") })
	r.command(alice.ID, "C1", "unshare")
	r.eventually("the codes withdrawn", func() bool { return r.ephemeralFor("C1", alice.ID, "1 open invite code(s) withdrawn") })
}

// /switchboard leave in a joined DM takes the conversation out of it: the
// DM is told, then shows nothing more, while the conversation goes on in
// Carol's thread.
func TestLeaveStopsShowingThePlace(t *testing.T) {
	r := newRig(t, nil)
	w := r.webConversation()
	code := w.Share("member")
	r.joinDM(code)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: carol.ID, Text: "/join " + code})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("Carol's thread joined", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Carol joined") })

	r.command(bob.ID, bobDM, "leave")
	r.eventually("the DM told", func() bool {
		return strings.Contains(allText(r.botReplies(bobDM, "")), "Bob Stone took this conversation out of a Slack place")
	})
	if _, err := r.gw.Manager.Binding(context.Background(), slack.Channel, slacktest.DefaultTeamID+":"+bobDM); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("the DM is still bound: %v", err)
	}
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"After Bob left."}})
	w.Say("are you there?")
	r.eventually("the thread goes on", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "After Bob left.") })
	if text := allText(r.botReplies(bobDM, "")); strings.Contains(text, "are you there?") || strings.Contains(text, "After Bob left.") {
		t.Fatalf("the DM still shows the conversation:\n%s", text)
	}
	// Bob is still a member: the conversation lists him.
	sub, err := r.gw.Manager.Attach(context.Background(), sessions.AttachOptions{SessionID: w.ID, Author: w.Author, AfterSeq: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	found := false
	for _, m := range sub.Ready.Members {
		found = found || m.Channel == slack.Channel && m.ID == bob.ID && m.Role == string(collaboration.Member)
	}
	if !found {
		t.Fatalf("members after /leave: %+v", sub.Ready.Members)
	}
}
