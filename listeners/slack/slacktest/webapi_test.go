package slacktest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
)

const (
	channel = "C0GENERAL01"
	dm      = "D0DIRECT001"
	alice   = "U0ALICE0001"
)

func newServer(t *testing.T, opts ...slacktest.Option) (*slacktest.Server, *slack.Client) {
	t.Helper()
	opts = append([]slacktest.Option{slacktest.WithUsers(slacktest.User{
		ID: alice, Name: "alice", RealName: "Alice Liddell", DisplayName: "alice.l",
	})}, opts...)
	srv := slacktest.New(t, opts...)
	api := slack.New(srv.BotToken(), slack.OptionAPIURL(srv.APIURL()), slack.OptionAppLevelToken(srv.AppToken()))
	return srv, api
}

// slackErr asserts err is Slack's error response with code and returns it.
func slackErr(t *testing.T, err error, code string) slack.SlackErrorResponse {
	t.Helper()
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) {
		t.Fatalf("error = %v (%T), want slack.SlackErrorResponse %q", err, err, code)
	}
	if se.Err != code {
		t.Fatalf("error code = %q, want %q (messages %v)", se.Err, code, se.ResponseMetadata.Messages)
	}
	return se
}

func TestAuth(t *testing.T) {
	srv, api := newServer(t)

	got, err := api.AuthTest()
	if err != nil {
		t.Fatal(err)
	}
	if got.UserID != srv.BotUserID() || got.BotID != srv.BotID() || got.TeamID != srv.TeamID() ||
		got.User != slacktest.DefaultBotName || got.Team != slacktest.DefaultTeamName ||
		got.URL != "https://"+slacktest.DefaultTeamHost+".slack.com/" {
		t.Errorf("auth.test = %+v", got)
	}

	for _, tc := range []struct {
		name, token, code string
	}{
		{"unknown token", "xoxb-wrong", "invalid_auth"},
		{"app token on a bot method", srv.AppToken(), "not_allowed_token_type"},
		{"no token", "", "not_authed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := slack.New(tc.token, slack.OptionAPIURL(srv.APIURL()))
			_, _, err := bad.PostMessage(channel, slack.MsgOptionText("hi", false))
			slackErr(t, err, tc.code)
		})
	}
	if n := len(srv.Messages(channel)); n != 0 {
		t.Errorf("rejected posts stored %d messages", n)
	}

	// apps.connections.open takes only the app-level token.
	botOnly := slack.New(srv.BotToken(), slack.OptionAPIURL(srv.APIURL()), slack.OptionAppLevelToken(srv.BotToken()))
	_, _, err = botOnly.StartSocketModeContext(context.Background())
	slackErr(t, err, "not_allowed_token_type")
}

func TestPostAndUpdateInThread(t *testing.T) {
	srv, api := newServer(t)
	question := srv.PostUserMessage(slacktest.UserMessage{Channel: channel, User: alice, Text: srv.Mention() + " what is 2+2?"})

	ch, ts, msg, err := api.PostMessageWithResponse(channel, slack.MsgOptionText("Thinking…", false), slack.MsgOptionTS(question.TS))
	if err != nil {
		t.Fatal(err)
	}
	if ch != channel || msg.ThreadTimestamp != question.TS || msg.User != srv.BotUserID() || msg.BotID != srv.BotID() {
		t.Errorf("post answered channel %q, message %+v", ch, msg.Msg)
	}
	for _, text := range []string{"It is", "It is 4."} {
		if _, _, _, err := api.UpdateMessage(channel, ts, slack.MsgOptionText(text, false)); err != nil {
			t.Fatal(err)
		}
	}

	thread := srv.Thread(channel, question.TS)
	if len(thread) != 2 {
		t.Fatalf("thread has %d messages, want question and reply: %+v", len(thread), thread)
	}
	if thread[0].User != alice || thread[0].ReplyCount != 1 {
		t.Errorf("parent = %+v, want alice's message with one reply", thread[0])
	}
	reply := thread[1]
	if reply.TS != ts || reply.ThreadTS != question.TS || reply.Text != "It is 4." || reply.User != srv.BotUserID() {
		t.Errorf("reply = %+v", reply)
	}
	var texts []string
	for _, r := range reply.History {
		texts = append(texts, r.Text)
	}
	if got := strings.Join(texts, "|"); got != "Thinking…|It is|It is 4." || reply.Edits() != 2 {
		t.Errorf("history = %q (%d edits), want the message to grow by two edits", got, reply.Edits())
	}
	if n := srv.Calls("chat.update"); n != 2 {
		t.Errorf("chat.update calls = %d, want 2", n)
	}
	reqs := srv.Requests("chat.postMessage")
	if len(reqs) != 1 || reqs[0].Params.Get("thread_ts") != question.TS || reqs[0].Token != srv.BotToken() {
		t.Errorf("recorded postMessage = %+v", reqs)
	}

	// A reply to a reply lands in the parent's thread, as in Slack.
	_, ts2, err := api.PostMessage(channel, slack.MsgOptionText("follow-up", false), slack.MsgOptionTS(ts))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(channel, ts2); m.ThreadTS != question.TS {
		t.Errorf("reply to a reply has thread_ts %q, want %q", m.ThreadTS, question.TS)
	}

	// Timestamps are unique and increasing.
	if !(question.TS < ts && ts < ts2) {
		t.Errorf("timestamps not increasing: %s %s %s", question.TS, ts, ts2)
	}

	// Only the bot's own messages can be edited or deleted.
	_, _, _, err = api.UpdateMessage(channel, question.TS, slack.MsgOptionText("hijack", false))
	slackErr(t, err, "cant_update_message")
	_, _, err = api.DeleteMessage(channel, question.TS)
	slackErr(t, err, "cant_delete_message")
	_, _, _, err = api.UpdateMessage(channel, "1.000001", slack.MsgOptionText("x", false))
	slackErr(t, err, "message_not_found")
	if _, _, err := api.DeleteMessage(channel, ts2); err != nil {
		t.Fatal(err)
	}
	if m, ok := srv.Message(channel, ts2); !ok || !m.Deleted || len(srv.Thread(channel, question.TS)) != 2 {
		t.Errorf("deleted message still listed in the thread")
	}
}

func TestUpdateKeepsOrClearsBlocksLikeSlack(t *testing.T) {
	srv, api := newServer(t)
	card := slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*card*", false, false), nil, nil)
	_, ts, err := api.PostMessage(channel, slack.MsgOptionText("fallback", false), slack.MsgOptionBlocks(card))
	if err != nil {
		t.Fatal(err)
	}
	// No text and no blocks: the blocks stay; metadata alone is an update.
	meta := slack.SlackMetadata{EventType: "run", EventPayload: map[string]any{"id": "r1"}}
	if _, _, _, err := api.UpdateMessage(channel, ts, slack.MsgOptionMetadata(meta)); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(channel, ts); m.Blocks == nil || m.Text != "fallback" || !strings.Contains(string(m.Metadata), `"run"`) {
		t.Errorf("after metadata update: %+v", m)
	}
	// Text without blocks unsets the blocks.
	if _, _, _, err := api.UpdateMessage(channel, ts, slack.MsgOptionText("plain now", false)); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(channel, ts); m.Blocks != nil || m.Text != "plain now" {
		t.Errorf("after text update: blocks %s text %q", m.Blocks, m.Text)
	}
	// Nothing to update at all.
	_, _, _, err = api.UpdateMessage(channel, ts)
	slackErr(t, err, "no_text")
}

// Card parts used by the validation tests.
func button(id, text string) *slack.ButtonBlockElement {
	return slack.NewButtonBlockElement(id, "v-"+id, slack.NewTextBlockObject(slack.PlainTextType, text, false, false))
}

func options(n int) []*slack.OptionBlockObject {
	out := make([]*slack.OptionBlockObject, n)
	for i := range out {
		v := "opt-" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		out[i] = slack.NewOptionBlockObject(v, slack.NewTextBlockObject(slack.PlainTextType, "Option "+v, false, false), nil)
	}
	return out
}

func TestValidationRejections(t *testing.T) {
	srv, api := newServer(t)
	var buttons []slack.BlockElement
	for i := range 26 {
		buttons = append(buttons, button("b"+string(rune('a'+i)), "Button"))
	}
	selectWith := func(n int) slack.Block {
		sel := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic,
			slack.NewTextBlockObject(slack.PlainTextType, "Pick", false, false), "pick", options(n)...)
		return slack.NewActionBlock("pick-block", sel)
	}

	for _, tc := range []struct {
		name    string
		opts    []slack.MsgOption
		code    string
		pointer string // a json-pointer the explanation must name
	}{
		{"26 buttons in one actions block", []slack.MsgOption{slack.MsgOptionBlocks(slack.NewActionBlock("acts", buttons...))},
			"invalid_blocks", "/blocks/0/elements"},
		{"101 options", []slack.MsgOption{slack.MsgOptionBlocks(selectWith(101))},
			"invalid_blocks", "/blocks/0/elements/0/options"},
		{"76-character button text", []slack.MsgOption{slack.MsgOptionBlocks(slack.NewActionBlock("acts", button("long", strings.Repeat("b", 76))))},
			"invalid_blocks", "/blocks/0/elements/0/text/text"},
		{"3001-character section", []slack.MsgOption{slack.MsgOptionBlocks(slack.NewSectionBlock(
			slack.NewTextBlockObject(slack.MarkdownType, strings.Repeat("s", 3001), false, false), nil, nil))},
			"invalid_blocks", "/blocks/0/text/text"},
		{"text over 40,000 characters", []slack.MsgOption{slack.MsgOptionText(strings.Repeat("t", 40001), false)}, "msg_too_long", ""},
		{"markdown_text over 12,000 characters", []slack.MsgOption{slack.MsgOptionMarkdownText(strings.Repeat("m", 12001))}, "msg_too_long", ""},
		{"markdown_text with text", []slack.MsgOption{slack.MsgOptionMarkdownText("**x**"), slack.MsgOptionText("x", false)}, "markdown_text_conflict", ""},
		{"nothing to show", []slack.MsgOption{slack.MsgOptionBlocks()}, "no_text", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := api.PostMessage(channel, tc.opts...)
			se := slackErr(t, err, tc.code)
			if tc.pointer != "" {
				msgs := strings.Join(se.ResponseMetadata.Messages, "\n")
				if !strings.Contains(msgs, "[json-pointer:"+tc.pointer+"]") || !strings.HasPrefix(msgs, "[ERROR] ") {
					t.Errorf("response_metadata.messages = %q, want an [ERROR] naming %s", msgs, tc.pointer)
				}
			}
		})
	}
	if n := len(srv.Messages(channel)); n != 0 {
		t.Errorf("%d rejected messages were stored", n)
	}

	// The limits themselves pass: exactly 25 buttons, 100 options, 75
	// characters, 3000 characters, 40,000 characters of text.
	for name, opts := range map[string][]slack.MsgOption{
		"25 buttons":  {slack.MsgOptionText("f", false), slack.MsgOptionBlocks(slack.NewActionBlock("acts", buttons[:25]...))},
		"100 options": {slack.MsgOptionText("f", false), slack.MsgOptionBlocks(selectWith(100))},
		"75 chars":    {slack.MsgOptionText("f", false), slack.MsgOptionBlocks(slack.NewActionBlock("acts", button("b", strings.Repeat("b", 75))))},
		"3000 chars": {slack.MsgOptionText("f", false), slack.MsgOptionBlocks(slack.NewSectionBlock(
			slack.NewTextBlockObject(slack.MarkdownType, strings.Repeat("s", 3000), false, false), nil, nil))},
		"40000 chars": {slack.MsgOptionText(strings.Repeat("t", 40000), false)},
	} {
		if _, _, err := api.PostMessage(channel, opts...); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestValidCardIsAccepted(t *testing.T) {
	srv, api := newServer(t)
	approve := button("approve", "Approve")
	approve.Style = slack.StylePrimary
	deny := button("deny", "Deny")
	deny.Style = slack.StyleDanger
	deny.Confirm = slack.NewConfirmationBlockObject(
		slack.NewTextBlockObject(slack.PlainTextType, "Sure?", false, false),
		slack.NewTextBlockObject(slack.MarkdownType, "This *denies* the run.", false, false),
		slack.NewTextBlockObject(slack.PlainTextType, "Deny", false, false),
		slack.NewTextBlockObject(slack.PlainTextType, "Cancel", false, false))
	model := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic,
		slack.NewTextBlockObject(slack.PlainTextType, "Model", false, false), "model", options(3)...)
	blocks := []slack.Block{
		slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, "Tool approval", true, false)),
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*shell* wants to run `ls`", false, false),
			[]*slack.TextBlockObject{
				slack.NewTextBlockObject(slack.MarkdownType, "*Session*\ns-1", false, false),
				slack.NewTextBlockObject(slack.MarkdownType, "*Cost*\n$0.01", false, false),
			}, nil, slack.SectionBlockOptionBlockID("details")),
		slack.NewDividerBlock(),
		slack.NewActionBlock("decision", approve, deny, model),
		slack.NewContextBlock("ctx", slack.NewTextBlockObject(slack.MarkdownType, "requested by <@"+alice+">", false, false)),
		slack.NewImageBlock("https://example.com/chart.png", "usage chart", "chart", nil),
	}
	if err := slacktest.ValidateBlocks(mustJSON(t, blocks)); err != nil {
		t.Fatalf("ValidateBlocks: %v", err)
	}
	_, ts, err := api.PostMessage(channel, slack.MsgOptionText("Tool approval", false), slack.MsgOptionBlocks(blocks...))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := srv.Message(channel, ts)
	var stored []map[string]any
	if err := json.Unmarshal(m.Blocks, &stored); err != nil || len(stored) != len(blocks) || stored[3]["block_id"] != "decision" {
		t.Errorf("stored blocks = %s (%v)", m.Blocks, err)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRateLimitBecomesRateLimitedError(t *testing.T) {
	srv, api := newServer(t)
	srv.RateLimit("chat.postMessage", 1500*time.Millisecond, 2)

	for range 2 {
		_, _, err := api.PostMessage(channel, slack.MsgOptionText("hi", false))
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) {
			t.Fatalf("error = %v (%T), want *slack.RateLimitedError", err, err)
		}
		if rl.RetryAfter != 2*time.Second {
			t.Errorf("RetryAfter = %v, want 2s (Retry-After is whole seconds, rounded up)", rl.RetryAfter)
		}
	}
	if _, _, err := api.PostMessage(channel, slack.MsgOptionText("hi", false)); err != nil {
		t.Fatalf("after the limit: %v", err)
	}
	reqs := srv.Requests("chat.postMessage")
	if len(reqs) != 3 || reqs[0].Status != http.StatusTooManyRequests || reqs[0].Error != "ratelimited" || reqs[2].Status != http.StatusOK {
		t.Errorf("recorded = %+v", reqs)
	}
	if n := len(srv.Messages(channel)); n != 1 {
		t.Errorf("stored %d messages, want only the accepted one", n)
	}

	// Other methods are unaffected; slack-go's retry option honours 429s.
	srv.RateLimit("chat.update", 0, 1)
	retrying := slack.New(srv.BotToken(), slack.OptionAPIURL(srv.APIURL()), slack.OptionRetry(1))
	ts := srv.Messages(channel)[0].TS
	if _, _, _, err := retrying.UpdateMessage(channel, ts, slack.MsgOptionText("edited", false)); err != nil {
		t.Fatalf("retrying client: %v", err)
	}
	if n := srv.Calls("chat.update"); n != 2 {
		t.Errorf("chat.update calls = %d, want the 429 and the retry", n)
	}
}

func TestInjectedFailures(t *testing.T) {
	srv, api := newServer(t)
	srv.FailNext("chat.postMessage", "channel_not_found")
	srv.FailNextStatus("chat.postMessage", http.StatusServiceUnavailable)

	_, _, err := api.PostMessage(channel, slack.MsgOptionText("1", false))
	slackErr(t, err, "channel_not_found")
	_, _, err = api.PostMessage(channel, slack.MsgOptionText("2", false))
	var sc slack.StatusCodeError
	if !errors.As(err, &sc) || sc.Code != http.StatusServiceUnavailable {
		t.Fatalf("error = %v, want StatusCodeError 503", err)
	}
	if _, _, err := api.PostMessage(channel, slack.MsgOptionText("3", false)); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls("chat.postMessage"); n != 3 {
		t.Errorf("calls = %d, want 3", n)
	}
	// Unknown channels and methods are rejected like Slack does.
	_, _, err = api.PostMessage("#not-an-id", slack.MsgOptionText("x", false))
	slackErr(t, err, "channel_not_found")
	_, err = api.GetUserPresence(alice)
	slackErr(t, err, "unknown_method")
}

func TestStreaming(t *testing.T) {
	srv, api := newServer(t)
	q := srv.PostUserMessage(slacktest.UserMessage{Channel: channel, User: alice, Text: "explain"})
	recipient := []slack.MsgOption{slack.MsgOptionTS(q.TS), slack.MsgOptionRecipientUserID(alice), slack.MsgOptionRecipientTeamID(srv.TeamID())}

	_, ts, err := api.StartStream(channel, append(recipient, slack.MsgOptionMarkdownText("Hello"))...)
	if err != nil {
		t.Fatal(err)
	}
	// Edits are refused while streaming.
	_, _, _, err = api.UpdateMessage(channel, ts, slack.MsgOptionText("x", false))
	slackErr(t, err, "streaming_state_conflict")
	for _, chunk := range []string{", ", "world"} {
		if _, _, err := api.AppendStream(channel, ts, slack.MsgOptionMarkdownText(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = api.AppendStream(channel, ts, slack.MsgOptionMarkdownText(strings.Repeat("m", 12001)))
	slackErr(t, err, "msg_too_long")
	_, _, err = api.AppendStream(channel, ts)
	slackErr(t, err, "no_text")
	if _, _, err := api.StopStream(channel, ts, slack.MsgOptionMarkdownText("!")); err != nil {
		t.Fatal(err)
	}
	_, _, err = api.AppendStream(channel, ts, slack.MsgOptionMarkdownText("late"))
	slackErr(t, err, "message_not_in_streaming_state")

	m, _ := srv.Message(channel, ts)
	if m.Text != "Hello, world!" || m.Streaming || m.ThreadTS != q.TS || m.Edits() != 3 {
		t.Errorf("streamed message = %+v", m)
	}
	if got := m.History[1].Method + "," + m.History[3].Method; got != "chat.appendStream,chat.stopStream" {
		t.Errorf("history methods = %s", got)
	}
	if p := srv.Requests("chat.startStream")[0].Params; p.Get("markdown_text") != "Hello" || p.Get("recipient_user_id") != alice {
		t.Errorf("startStream params = %v", p)
	}

	// Channels need the recipient; DMs do not.
	_, _, err = api.StartStream(channel, slack.MsgOptionTS(q.TS))
	slackErr(t, err, "missing_recipient_user_id")
	dq := srv.PostUserMessage(slacktest.UserMessage{Channel: dm, User: alice, Text: "hi"})
	inDM := slack.MsgOptionTS(dq.TS)
	if _, _, err := api.StartStream(dm, inDM, slack.MsgOptionMarkdownText("hi")); err != nil {
		t.Errorf("stream in a DM: %v", err)
	}

	// A stream is always a reply: without thread_ts, in a channel or a
	// DM, Slack refuses it as a missing required argument, saying which.
	for _, where := range []string{channel, dm} {
		_, _, err = api.StartStream(where, slack.MsgOptionMarkdownText("hi"), slack.MsgOptionRecipientUserID(alice), slack.MsgOptionRecipientTeamID(srv.TeamID()))
		if se := slackErr(t, err, "invalid_arguments"); len(se.ResponseMetadata.Messages) != 1 || !strings.Contains(se.ResponseMetadata.Messages[0], "thread_ts") {
			t.Errorf("%s: a stream without thread_ts answered %v, want the missing field named", where, se.ResponseMetadata.Messages)
		}
	}
	_, _, err = api.StartStream(dm, slack.MsgOptionTS("yesterday"), slack.MsgOptionMarkdownText("hi"))
	slackErr(t, err, "invalid_thread_ts")

	// The per-server switch makes startStream unavailable, for fallbacks.
	srv.SetStartStreamError("feature_not_enabled")
	_, _, err = api.StartStream(dm, inDM, slack.MsgOptionMarkdownText("hi"))
	slackErr(t, err, "feature_not_enabled")
	srv.SetStartStreamError("")
	if _, _, err := api.StartStream(dm, inDM, slack.MsgOptionMarkdownText("hi")); err != nil {
		t.Errorf("re-enabled: %v", err)
	}
	off, offAPI := newServer(t, slacktest.WithStartStreamError("not_allowed"))
	_, _, err = offAPI.StartStream(dm, inDM, slack.MsgOptionMarkdownText("hi"))
	slackErr(t, err, "not_allowed")
	if n := off.Calls("chat.startStream"); n != 1 {
		t.Errorf("calls = %d", n)
	}
}

func TestUsersAndConversations(t *testing.T) {
	srv, api := newServer(t)
	srv.AddChannel(slacktest.Channel{ID: dm, User: alice})

	u, err := api.GetUserInfo(alice)
	if err != nil {
		t.Fatal(err)
	}
	if u.Name != "alice" || u.RealName != "Alice Liddell" || u.Profile.DisplayName != "alice.l" || u.IsBot {
		t.Errorf("users.info = %+v", u)
	}
	bot, err := api.GetUserInfo(srv.BotUserID())
	if err != nil || !bot.IsBot || bot.Profile.BotID != srv.BotID() {
		t.Errorf("bot user = %+v, %v", bot, err)
	}
	_, err = api.GetUserInfo("U0NOBODY")
	slackErr(t, err, "user_not_found")

	c, err := api.GetConversationInfo(&slack.GetConversationInfoInput{ChannelID: dm})
	if err != nil || !c.IsIM || c.User != alice {
		t.Errorf("DM info = %+v, %v", c, err)
	}
	c, err = api.GetConversationInfo(&slack.GetConversationInfoInput{ChannelID: channel})
	if err != nil || c.IsIM || !c.IsChannel || c.Name == "" {
		t.Errorf("channel info = %+v, %v", c, err)
	}

	// History and replies come from the same model.
	q := srv.PostUserMessage(slacktest.UserMessage{Channel: channel, User: alice, Text: "q"})
	if _, _, err := api.PostMessage(channel, slack.MsgOptionText("a", false), slack.MsgOptionTS(q.TS)); err != nil {
		t.Fatal(err)
	}
	msgs, more, _, err := api.GetConversationRepliesContext(context.Background(),
		&slack.GetConversationRepliesParameters{ChannelID: channel, Timestamp: q.TS})
	if err != nil || more || len(msgs) != 2 || msgs[0].Text != "q" || msgs[1].Text != "a" {
		t.Errorf("replies = %+v more=%v err=%v", msgs, more, err)
	}
	link, err := api.GetPermalink(&slack.PermalinkParameters{Channel: channel, Ts: q.TS})
	if err != nil || !strings.HasSuffix(link, "/archives/"+channel+"/p"+strings.ReplaceAll(q.TS, ".", "")) {
		t.Errorf("permalink = %q, %v", link, err)
	}
	// People who post are members users.info knows.
	srv.PostUserMessage(slacktest.UserMessage{Channel: channel, User: "U0BOB000001", Text: "hi"})
	if bob, err := api.GetUserInfo("U0BOB000001"); err != nil || bob.IsBot {
		t.Errorf("poster = %+v, %v", bob, err)
	}
	if err := api.AddReaction("eyes", slack.NewRefToMessage(channel, q.TS)); err != nil {
		t.Fatal(err)
	}
	err = api.AddReaction("eyes", slack.NewRefToMessage(channel, q.TS))
	slackErr(t, err, "already_reacted")
	if m, _ := srv.Message(channel, q.TS); len(m.Reactions["eyes"]) != 1 {
		t.Errorf("reactions = %v", m.Reactions)
	}
}

// Where the bot is not a member, or a channel is archived or restricted,
// posting and reading are refused with Slack's codes and store nothing;
// conversations.info tells what it may know; a response_url still answers.
func TestConversationsTheBotMayNotPostIn(t *testing.T) {
	srv, api := newServer(t)
	srv.AddChannel(slacktest.Channel{ID: "C0OUTSIDE01", Name: "outside", NotMember: true})
	srv.AddChannel(slacktest.Channel{ID: "G0PRIVATE01", Name: "secret", NotMember: true})
	srv.AddChannel(slacktest.Channel{ID: "D0OTHERS001", User: alice, NotMember: true})
	srv.AddChannel(slacktest.Channel{ID: "C0ARCHIVE01", Name: "old", Archived: true})
	srv.AddChannel(slacktest.Channel{ID: "C0ANNOUNCE1", Name: "news", Restricted: true})
	for _, tc := range []struct{ channel, code string }{
		{"C0OUTSIDE01", "not_in_channel"},
		{"G0PRIVATE01", "channel_not_found"},
		{"D0OTHERS001", "channel_not_found"},
		{"C0ARCHIVE01", "is_archived"},
		{"C0ANNOUNCE1", "restricted_action"},
	} {
		t.Run(tc.channel, func(t *testing.T) {
			_, _, err := api.PostMessage(tc.channel, slack.MsgOptionText("hi", false))
			slackErr(t, err, tc.code)
			_, err = api.PostEphemeral(tc.channel, alice, slack.MsgOptionText("hi", false))
			slackErr(t, err, tc.code)
			_, _, err = api.StartStream(tc.channel, slack.MsgOptionTS("1700000000.000100"), slack.MsgOptionMarkdownText("hi"), slack.MsgOptionRecipientUserID(alice), slack.MsgOptionRecipientTeamID(srv.TeamID()))
			slackErr(t, err, tc.code)
			if n := len(srv.Messages(tc.channel)) + len(srv.Ephemerals(tc.channel)); n != 0 {
				t.Errorf("%d messages stored", n)
			}
			// A slash command's response_url answers wherever it was typed.
			cmd := srv.SlashCommand(alice, tc.channel, "", "help")
			if err := slack.PostWebhook(cmd.ResponseURL, &slack.WebhookMessage{Text: "for you"}); err != nil {
				t.Fatal(err)
			}
			if e := srv.Ephemerals(tc.channel); len(e) != 1 || e[0].Text != "for you" {
				t.Errorf("response_url ephemerals = %+v", e)
			}
		})
	}

	c, err := api.GetConversationInfo(&slack.GetConversationInfoInput{ChannelID: "C0OUTSIDE01"})
	if err != nil || c.IsMember || c.Name != "outside" {
		t.Errorf("a public channel the bot is not in: %+v, %v", c, err)
	}
	_, err = api.GetConversationInfo(&slack.GetConversationInfoInput{ChannelID: "G0PRIVATE01"})
	slackErr(t, err, "channel_not_found")
	c, err = api.GetConversationInfo(&slack.GetConversationInfoInput{ChannelID: "C0ARCHIVE01"})
	if err != nil || !c.IsArchived || !c.IsMember {
		t.Errorf("an archived channel: %+v, %v", c, err)
	}
	_, _, _, err = api.GetConversationRepliesContext(context.Background(), &slack.GetConversationRepliesParameters{ChannelID: "C0OUTSIDE01", Timestamp: "1700000000.000100"})
	slackErr(t, err, "not_in_channel")
	_, err = api.GetConversationHistory(&slack.GetConversationHistoryParameters{ChannelID: "D0OTHERS001"})
	slackErr(t, err, "channel_not_found")

	// The bot's own DM with a person is always open to it, and the same
	// one each time; not a DM between other people.
	im, _, _, err := api.OpenConversation(&slack.OpenConversationParameters{Users: []string{alice}})
	if err != nil || im.ID == "D0OTHERS001" || !strings.HasPrefix(im.ID, "D") {
		t.Fatalf("conversations.open = %+v, %v", im, err)
	}
	if _, _, err := api.PostMessage(im.ID, slack.MsgOptionText("just you", false)); err != nil {
		t.Fatal(err)
	}
	again, _, open, err := api.OpenConversation(&slack.OpenConversationParameters{Users: []string{alice}})
	if err != nil || again.ID != im.ID || !open {
		t.Errorf("opened again: %+v, already open %v, %v", again, open, err)
	}
	_, _, _, err = api.OpenConversation(&slack.OpenConversationParameters{Users: []string{"U0NOBODY"}})
	slackErr(t, err, "user_not_found")
}

func TestEphemeralAndAssistant(t *testing.T) {
	srv, api := newServer(t)
	if _, err := api.PostEphemeral(channel, alice, slack.MsgOptionText("only you", false)); err != nil {
		t.Fatal(err)
	}
	if e := srv.Ephemerals(channel); len(e) != 1 || e[0].User != alice || e[0].Text != "only you" || len(srv.Messages(channel)) != 0 {
		t.Errorf("ephemerals = %+v", e)
	}

	ev, threadTS := srv.AssistantThreadStartedEvent(alice, dm, channel)
	if ev["type"] != "assistant_thread_started" {
		t.Fatalf("event = %v", ev)
	}
	if err := api.SetAssistantThreadsStatus(slack.AssistantThreadsSetStatusParameters{
		ChannelID: dm, ThreadTS: threadTS, Status: "is thinking…", LoadingMessages: []string{"Reading", "Writing"},
	}); err != nil {
		t.Fatal(err)
	}
	prompts := slack.AssistantThreadsSetSuggestedPromptsParameters{ChannelID: dm, ThreadTS: threadTS, Title: "Try"}
	prompts.AddPrompt("Summarize", "Summarize this channel")
	if err := api.SetAssistantThreadsSuggestedPrompts(prompts); err != nil {
		t.Fatal(err)
	}
	st := srv.AssistantStatuses()
	if len(st) != 1 || st[0].Status != "is thinking…" || st[0].ThreadTS != threadTS || len(st[0].LoadingMessages) != 2 {
		t.Errorf("statuses = %+v", st)
	}
	sp := srv.SuggestedPrompts()
	if len(sp) != 1 || sp[0].Title != "Try" || sp[0].Prompts[0].Message != "Summarize this channel" {
		t.Errorf("prompts = %+v", sp)
	}
	err := api.SetAssistantThreadsStatus(slack.AssistantThreadsSetStatusParameters{ChannelID: dm, Status: "x"})
	slackErr(t, err, "invalid_thread_ts")
}

func TestFileUploadV2(t *testing.T) {
	srv, api := newServer(t)
	q := srv.PostUserMessage(slacktest.UserMessage{Channel: channel, User: alice, Text: "send me the report"})
	content := "col1,col2\n1,2\n"

	f, err := api.UploadFile(slack.UploadFileParameters{
		Filename: "report.csv", FileSize: len(content), Content: content, Title: "Report",
		Channel: channel, ThreadTimestamp: q.TS, InitialComment: "Here it is",
	})
	if err != nil {
		t.Fatal(err)
	}
	files := srv.Files()
	if len(files) != 1 {
		t.Fatalf("files = %+v", files)
	}
	got := files[0]
	if got.ID != f.ID || f.Title != "Report" || string(got.Content) != content || got.Length != len(content) ||
		!got.Uploaded || !got.Completed || got.ThreadTS != q.TS || got.Channels[0] != channel {
		t.Errorf("file = %+v (summary %+v)", got, f)
	}
	thread := srv.Thread(channel, q.TS)
	if len(thread) != 2 || thread[1].Text != "Here it is" || len(thread[1].Files) != 1 || thread[1].Files[0] != f.ID {
		t.Errorf("thread after upload = %+v", thread)
	}
	for _, m := range []string{"files.getUploadURLExternal", "files.completeUploadExternal"} {
		if srv.Calls(m) != 1 {
			t.Errorf("%s calls = %d", m, srv.Calls(m))
		}
	}

	// Completing a file whose bytes never arrived fails.
	u, err := api.GetUploadURLExternalContext(context.Background(), slack.GetUploadURLExternalParameters{FileName: "x.txt", FileSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.CompleteUploadExternalContext(context.Background(), slack.CompleteUploadExternalParameters{
		Files: []slack.FileSummary{{ID: u.FileID}}, Channel: channel})
	slackErr(t, err, "file_not_found")
}

func TestJSONBodies(t *testing.T) {
	srv, _ := newServer(t)
	post := func(token string, body any) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.APIURL()+"chat.postMessage", bytes.NewReader(mustJSON(t, body)))
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := post(srv.BotToken(), map[string]any{
		"channel": channel, "text": "json",
		"blocks": []any{map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": "*json*"}}},
	})
	if got["ok"] != true {
		t.Fatalf("JSON post = %v", got)
	}
	if m := srv.Messages(channel); len(m) != 1 || m[0].Text != "json" || !strings.Contains(string(m[0].Blocks), "*json*") {
		t.Errorf("stored = %+v", m)
	}
	// A token inside a JSON body does not authenticate.
	if got := post("", map[string]any{"token": srv.BotToken(), "channel": channel, "text": "x"}); got["error"] != "not_authed" {
		t.Errorf("token in JSON body = %v, want not_authed", got)
	}
	// Form posts may carry the token as a field (slack-go does) or a header.
	resp, err := http.PostForm(srv.APIURL()+"auth.test", url.Values{"token": {srv.BotToken()}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"ok":true`) {
		t.Errorf("form token: %s", body)
	}
}

func TestResponseURLs(t *testing.T) {
	srv, api := newServer(t)
	cmd := srv.SlashCommand(alice, channel, "", "status")
	if cmd.Command != "/switchboard" || cmd.TriggerID == "" || !strings.HasPrefix(cmd.ResponseURL, srv.URL()) {
		t.Fatalf("command = %+v", cmd)
	}
	// slack-go posts to response URLs with MsgOptionResponseURL.
	if _, _, err := api.PostMessage(channel, slack.MsgOptionText("working…", false), slack.MsgOptionResponseURL(cmd.ResponseURL, slack.ResponseTypeEphemeral)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.PostMessage(channel, slack.MsgOptionText("all good", false), slack.MsgOptionResponseURL(cmd.ResponseURL, slack.ResponseTypeInChannel)); err != nil {
		t.Fatal(err)
	}
	posts := srv.ResponseURLPosts()
	if len(posts) != 2 || posts[0].ResponseType != "ephemeral" || posts[1].ResponseType != "in_channel" {
		t.Errorf("posts = %+v", posts)
	}
	if e := srv.Ephemerals(channel); len(e) != 1 || e[0].Text != "working…" || e[0].User != alice {
		t.Errorf("ephemerals = %+v", e)
	}
	if m := srv.Messages(channel); len(m) != 1 || m[0].Text != "all good" {
		t.Errorf("messages = %+v", m)
	}

	// An action's response_url can replace the message it came from.
	_, ts, err := api.PostMessage(channel, slack.MsgOptionText("approve?", false),
		slack.MsgOptionBlocks(slack.NewActionBlock("decision", button("approve", "Approve"))))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := srv.BlockActions(slacktest.BlockActionsSpec{User: alice, Channel: channel, MessageTS: ts,
		Actions: []slacktest.Action{{ActionID: "approve"}}})
	if err != nil {
		t.Fatal(err)
	}
	respURL := payload["response_url"].(string)
	if _, _, err := api.PostMessage(channel, slack.MsgOptionText("Approved by alice", false), slack.MsgOptionReplaceOriginal(respURL)); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(channel, ts); m.Text != "Approved by alice" || m.Blocks != nil || m.History[1].Method != "response_url" {
		t.Errorf("replaced message = %+v", m)
	}
}
