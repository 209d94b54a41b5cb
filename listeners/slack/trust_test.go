package slack_test

// Trust in shared places (issue 21), tried as a person in the same
// workspace would: joining someone else's thread, writing or clicking in
// a thread joined by invite without a code, clicking where the allow
// lists leave one out, undoing the owner's /role by being a configured
// approver, and replaying a signed click.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard/listeners/slack"
	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

var (
	mallory = slacktest.User{ID: "U0MALLORY", Name: "mallory", DisplayName: "Mallory"}
	dave    = slacktest.User{ID: "U0DAVE", Name: "dave", DisplayName: "Dave"}
)

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

// aliceThread starts a conversation of Alice's in a thread of C1 and
// returns the thread's root.
func (r *rig) aliceThread() string {
	r.t.Helper()
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hello Alice."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "my private plans"})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("Alice answered", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Hello Alice.") })
	return root
}

// Bob mentions the bot in Alice's thread with a code of Mallory's: the
// thread keeps showing Alice's conversation, Bob is told why and where a
// join works, the code is not spent, and what Alice writes next reaches
// her conversation, never Mallory's.
func TestJoinNeverRebindsSomeoneElsesThread(t *testing.T) {
	r := newRig(t, nil)
	root := r.aliceThread()
	addr := slacktest.DefaultTeamID + ":C1:" + root
	before, err := r.gw.Manager.Binding(context.Background(), slack.Channel, addr)
	if err != nil {
		t.Fatal(err)
	}
	w := r.webConversation() // Mallory's, on the web
	code := w.Share("member")

	r.send(r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: bob.ID, ThreadTS: root, Text: "join " + code}))
	r.eventually("Bob told why", func() bool { return r.ephemeralFor("C1", bob.ID, "already shows another conversation") })
	if !r.ephemeralFor("C1", bob.ID, "the code is not used") || !r.ephemeralFor("C1", bob.ID, "top level of a channel") {
		t.Fatalf("the refusal does not say the code is kept and where to join: %+v", r.fake.Ephemerals("C1"))
	}
	if b, err := r.gw.Manager.Binding(context.Background(), slack.Channel, addr); err != nil || b.SessionID != before.SessionID {
		t.Fatalf("Alice's thread now shows %+v (%v), want her conversation %s", b, err, before.SessionID)
	}
	if n := r.usesLeft(code); n != 10 {
		t.Fatalf("the code has %d uses left, want all 10", n)
	}
	if text := allText(r.botReplies("C1", root)); strings.Contains(text, "Opening a shared conversation") || strings.Contains(text, "joined a shared conversation") {
		t.Fatalf("the refused join wrote in Alice's thread:\n%s", text)
	}

	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Still yours."}})
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "the secret is 42"}))
	r.eventually("Alice's answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Still yours.") })
	rec, err := r.gw.DB.EventsAfter(context.Background(), w.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range rec {
		if strings.Contains(string(ev.Data), "the secret is 42") {
			t.Fatalf("Alice's message reached Mallory's conversation: %s", ev.Data)
		}
	}
}

// Carol joins with a one-use viewer code at the top level of C1: a thread
// opens under her message. Dave, never invited, writes and clicks there,
// and so does a configured approver: each is refused privately with the
// reason, nothing reaches the model, and neither becomes one of the
// conversation's people.
func TestThreadJoinedByInviteIsForItsPeopleOnly(t *testing.T) {
	r := newRig(t, func(c *slack.Config) { c.Approvers = []string{bob.ID} })
	r.fake.AddUser(dave)
	w := r.webConversation()
	code := w.Share("viewer uses 1")
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: carol.ID, Text: "join " + code})
	r.send(ev)
	root := ev["ts"].(string)
	r.eventually("Carol's thread joined", func() bool {
		return strings.Contains(allText(r.botReplies("C1", root)), "Carol joined a shared conversation as a viewer")
	})
	b, err := r.gw.Manager.Binding(context.Background(), slack.Channel, slacktest.DefaultTeamID+":C1:"+root)
	if err != nil || !b.ByInvite {
		t.Fatalf("the joined thread: %+v, %v; want bound by invite", b, err)
	}

	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{}`}}},
		openaitest.Reply{Text: []string{"It is now."}},
	)
	w.Say("what time is it?")
	var card slacktest.Message
	r.eventually("the card in Carol's thread", func() (ok bool) { card, ok = r.approvalCard("C1", root); return ok })
	asked := len(r.gw.LLM.Requests())

	for _, u := range []slacktest.User{dave, bob} {
		r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: u.ID, ThreadTS: root, Text: "let me in"}))
		r.eventually(u.ID+"'s message refused", func() bool { return r.ephemeralFor("C1", u.ID, "shared with particular people") })
		r.click(u.ID, "C1", card.TS, "sb_approve")
		r.eventually(u.ID+"'s click refused", func() bool {
			n := 0
			for _, e := range r.fake.Ephemerals("C1") {
				if e.User == u.ID && strings.Contains(e.Text, "shared with particular people") {
					n++
				}
			}
			return n == 2
		})
	}
	if m, _ := r.fake.Message("C1", card.TS); !strings.Contains(string(m.Blocks), `"sb_approve"`) {
		t.Fatalf("an outsider's click closed the card: %s", m.Blocks)
	}
	if n := len(r.gw.LLM.Requests()); n != asked {
		t.Fatalf("the model was asked %d more times", n-asked)
	}
	members, err := r.gw.DB.Members(context.Background(), w.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.Key == "slack:"+dave.ID || m.Key == "slack:"+bob.ID {
			t.Fatalf("an outsider became a member: %+v", members)
		}
	}
	// The conversation's own people still act there: Carol, a viewer,
	// is told she may not write, not that she is a stranger.
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: carol.ID, ThreadTS: root, Text: "hi"}))
	r.eventually("Carol refused as a viewer", func() bool { return r.ephemeralFor("C1", carol.ID, "Carol is a viewer") })
}

// A person the allow lists leave out is refused on every path, not only
// when writing: their click on a card's button and their form submission
// in a thread they can see reach nothing, and they are told why.
func TestAllowListsHoldForClicksAndForms(t *testing.T) {
	r := newRig(t, func(c *slack.Config) { c.AllowedUsers = []string{alice.ID} })
	card := `{"title":"Danger","buttons":[{"label":"Delete everything","value":"rm"}],
		"form":{"submit_label":"Send","inputs":[{"name":"name","label":"Name"}]}}`
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "present", Args: card}}},
		openaitest.Reply{Text: []string{"Shown."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "show me"})
	r.send(ev)
	root := ev["ts"].(string)
	var msg slacktest.Message
	r.eventually("the card", func() (ok bool) { msg, ok = r.cardMessage("C1", root, "sb_btn_0"); return ok })
	r.eventually("the model's answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Shown.") })
	asked := len(r.gw.LLM.Requests())

	r.interact(r.fake.BlockActions(slacktest.BlockActionsSpec{User: bob.ID, Channel: "C1", MessageTS: msg.TS, Actions: []slacktest.Action{{ActionID: "sb_btn_0"}}}))
	r.eventually("Bob's click refused", func() bool { return r.ephemeralFor("C1", bob.ID, "not set up to answer you here") })
	r.interact(r.fake.BlockActions(slacktest.BlockActionsSpec{User: bob.ID, Channel: "C1", MessageTS: msg.TS, Actions: []slacktest.Action{{ActionID: "sb_form_0"}}}))
	if n := len(r.fake.Views()); n != 0 {
		t.Fatalf("a form opened for someone left out: %d views", n)
	}
	// A submission forged for a form Alice opened, as Bob.
	r.interact(r.fake.BlockActions(slacktest.BlockActionsSpec{User: alice.ID, Channel: "C1", MessageTS: msg.TS, Actions: []slacktest.Action{{ActionID: "sb_form_0"}}}))
	var view slacktest.View
	r.eventually("Alice's modal", func() (ok bool) {
		views := r.fake.Views()
		if len(views) == 0 {
			return false
		}
		view = views[0]
		return true
	})
	r.interact(r.fake.ViewSubmission(slacktest.ViewSubmissionSpec{User: bob.ID, ViewID: view.ID, Values: map[string]map[string]string{"sb_in_0": {"sb_in_0": "Bob"}}}))
	r.eventually("Bob's form refused", func() bool {
		n := 0
		for _, e := range r.fake.Ephemerals("C1") {
			if e.User == bob.ID && strings.Contains(e.Text, "not set up to answer you here") {
				n++
			}
		}
		return n >= 3
	})
	if n := len(r.gw.LLM.Requests()); n != asked {
		t.Fatalf("the model was asked %d more times; last told %q", n-asked, r.lastUserText())
	}
}

// The owner makes Bob, a configured approver, a viewer with /role: his
// next message and click are refused, and a restart does not give the
// role back. A configured approver who owns a thread stays its owner.
func TestOwnersRoleBeatsConfiguredApprovers(t *testing.T) {
	r := newRig(t, func(c *slack.Config) { c.Approvers = []string{bob.ID} })
	root := r.aliceThread()
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Hi Bob."}})
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: bob.ID, ThreadTS: root, Text: "hello"}))
	r.eventually("Bob answered", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Hi Bob.") })
	r.command(alice.ID, "C1", "who")
	r.eventually("Bob an approver", func() bool { return r.ephemeralFor("C1", alice.ID, "Bob Stone · Slack · approver") })

	r.command(alice.ID, "C1", "role Bob Stone viewer")
	r.eventually("the role change", func() bool {
		return strings.Contains(allText(r.botReplies("C1", root)), "Alice made Bob Stone a viewer.")
	})
	refusals := func() (n int) {
		for _, e := range r.fake.Ephemerals("C1") {
			if e.User == bob.ID && strings.Contains(e.Text, "Bob Stone is a viewer") {
				n++
			}
		}
		return n
	}
	for i := range 2 {
		asked := len(r.gw.LLM.Requests())
		r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: bob.ID, ThreadTS: root, Text: "and now?"}))
		r.eventually("Bob refused", func() bool { return refusals() == i+1 })
		if n := len(r.gw.LLM.Requests()); n != asked {
			t.Fatalf("a demoted approver's message reached the model")
		}
		r.restart() // the role is stored pinned: a restart keeps it
	}

	// Bob's own thread: he owns it, approver list or not.
	r.gw.LLM.Push(openaitest.Reply{Text: []string{"One."}}, openaitest.Reply{Text: []string{"Two."}})
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: bob.ID, Text: "mine"})
	r.send(ev)
	own := ev["ts"].(string)
	r.eventually("one", func() bool { return strings.Contains(allText(r.botReplies("C1", own)), "One.") })
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: bob.ID, ThreadTS: own, Text: "again"}))
	r.eventually("two", func() bool { return strings.Contains(allText(r.botReplies("C1", own)), "Two.") })
	b, err := r.gw.Manager.Binding(context.Background(), slack.Channel, slacktest.DefaultTeamID+":C1:"+own)
	if err != nil {
		t.Fatal(err)
	}
	members, _ := r.gw.DB.Members(context.Background(), b.SessionID)
	if len(members) != 1 || members[0].Role != "owner" {
		t.Fatalf("Bob's own thread: %+v, want him its owner", members)
	}
}

// A click sent again (Slack's retry, or a replay of the signed request
// within its five minutes) is taken once.
func TestReplayedClickIsTakenOnce(t *testing.T) {
	r := newRig(t, nil)
	r.gw.LLM.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "present", Args: `{"title":"Pay","buttons":[{"label":"Pay 100","value":"pay"}]}`}}},
		openaitest.Reply{Text: []string{"Shown."}},
		openaitest.Reply{Text: []string{"Paid."}},
	)
	ev := r.fake.AppMentionEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, Text: "bill"})
	r.send(ev)
	root := ev["ts"].(string)
	var msg slacktest.Message
	r.eventually("the card", func() (ok bool) { msg, ok = r.cardMessage("C1", root, "sb_btn_0"); return ok })
	r.eventually("shown", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Shown.") })
	payload, err := r.fake.BlockActions(slacktest.BlockActionsSpec{User: alice.ID, Channel: "C1", MessageTS: msg.TS, Actions: []slacktest.Action{{ActionID: "sb_btn_0"}}})
	if err != nil {
		t.Fatal(err)
	}
	r.interact(payload, nil)
	r.eventually("paid", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Paid.") })
	asked := len(r.gw.LLM.Requests())

	r.gw.LLM.Push(openaitest.Reply{Text: []string{"Thanks."}}, openaitest.Reply{Text: []string{"Extra."}})
	r.interact(payload, nil) // the same click again
	// A message after it: the place's inputs are taken in order, so once
	// the model is asked about it, a replay taken would have been asked
	// about first.
	r.send(r.fake.MessageEvent(slacktest.UserMessage{Channel: "C1", User: alice.ID, ThreadTS: root, Text: "done"}))
	r.eventually("the model asked about the message", func() bool { return r.lastUserText() == "done" })
	if n := len(r.gw.LLM.Requests()); n != asked+1 {
		t.Fatalf("the model was asked %d times after the replay, want once (the message)", n-asked)
	}
	r.eventually("the answer", func() bool { return strings.Contains(allText(r.botReplies("C1", root)), "Thanks.") })
}
