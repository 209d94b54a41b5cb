package discordtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
)

func TestAuthorizationRequired(t *testing.T) {
	srv := newServer(t)
	for _, auth := range []string{"", "Bearer " + srv.Token(), "Bot wrong", srv.Token()} {
		req, _ := http.NewRequest(http.MethodGet, srv.APIURL()+"users/@me", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || string(body) != `{"code":0,"message":"401: Unauthorized"}` {
			t.Errorf("auth %q: %d %s", auth, resp.StatusCode, body)
		}
	}
	// GET /gateway needs no token.
	resp, err := http.Get(srv.APIURL() + "gateway")
	if err != nil {
		t.Fatal(err)
	}
	var gw struct{ URL string }
	_ = json.NewDecoder(resp.Body).Decode(&gw)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || gw.URL != srv.GatewayURL() {
		t.Errorf("GET /gateway = %d %+v", resp.StatusCode, gw)
	}
	// discordgo with a wrong token gets a RESTError with status 401.
	bad, _ := discordgo.New("Bot wrong")
	bad.Client = srv.Client()
	_, err = bad.User("@me")
	if _, status, _ := restErr(t, err); status != http.StatusUnauthorized {
		t.Errorf("status = %d", status)
	}
}

func TestCurrentUserAndGatewayBot(t *testing.T) {
	srv := newServer(t)
	s := restSession(t, srv)
	u, err := s.User("@me")
	if err != nil {
		t.Fatal(err)
	}
	if u.ID != srv.BotUserID() || !u.Bot || u.Username != discordtest.DefaultBotUsername || u.Discriminator != "0" {
		t.Errorf("user = %+v", u)
	}
	gb, err := s.GatewayBot()
	if err != nil {
		t.Fatal(err)
	}
	if gb.Shards != 1 || !strings.HasPrefix(gb.URL, srv.GatewayURL()) || gb.SessionStartLimit.Total != 1000 || gb.SessionStartLimit.MaxConcurrency != 1 {
		t.Errorf("gateway/bot = %+v", gb)
	}
	// Every routed answer carries rate-limit headers.
	r := srv.Requests(discordtest.RouteGetCurrentUser)
	if len(r) != 1 || r[0].Bucket == "" || r[0].Token != srv.Token() || r[0].APIVersion != "10" {
		t.Errorf("request = %+v", r)
	}
}

func TestSendEditDeleteMessage(t *testing.T) {
	srv := newServer(t)
	s := restSession(t, srv)
	ch := discordtest.DefaultChannelID

	sent, err := s.ChannelMessageSend(ch, "draft <@"+alice+">")
	if err != nil {
		t.Fatal(err)
	}
	if sent.Author.ID != srv.BotUserID() || sent.ChannelID != ch || sent.Content != "draft <@"+alice+">" || len(sent.Mentions) != 1 {
		t.Errorf("sent = %+v", sent)
	}
	for _, text := range []string{"draft 2", "final"} {
		if _, err := s.ChannelMessageEdit(ch, sent.ID, text); err != nil {
			t.Fatal(err)
		}
	}
	m, ok := srv.Message(ch, sent.ID)
	if !ok || m.Content != "final" || m.Edits() != 2 || len(m.EditTimes()) != 2 || m.EditedAt.IsZero() || m.AuthorID != srv.BotUserID() {
		t.Errorf("stored = %+v", m)
	}
	if m.History[0].Content != "draft <@"+alice+">" || m.History[1].Route != discordtest.RouteEditMessage {
		t.Errorf("history = %+v", m.History)
	}

	// An edit that leaves nothing is refused like a send.
	_, err = s.ChannelMessageEdit(ch, sent.ID, "")
	if code, status, _ := restErr(t, err); code != discordtest.CodeEmptyMessage || status != http.StatusBadRequest {
		t.Errorf("empty edit: %d %d", code, status)
	}
	// Someone else's message cannot be edited.
	theirs, _ := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "mine"})
	_, err = s.ChannelMessageEdit(ch, theirs.ID, "hijack")
	if code, status, _ := restErr(t, err); code != discordtest.CodeCannotEditOthersMessage || status != http.StatusForbidden {
		t.Errorf("foreign edit: %d %d", code, status)
	}
	// Unknown channel and message.
	_, err = s.ChannelMessageSend("999", "x")
	if code, _, _ := restErr(t, err); code != discordtest.CodeUnknownChannel {
		t.Errorf("unknown channel code %d", code)
	}
	_, err = s.ChannelMessageEdit(ch, "123", "x")
	if code, _, _ := restErr(t, err); code != discordtest.CodeUnknownMessage {
		t.Errorf("unknown message code %d", code)
	}

	// Replies carry a message reference.
	reply, err := s.ChannelMessageSendReply(ch, "answer", &discordgo.MessageReference{MessageID: theirs.ID, ChannelID: ch})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Type != discordgo.MessageTypeReply || reply.MessageReference == nil || reply.MessageReference.MessageID != theirs.ID {
		t.Errorf("reply = %+v", reply)
	}

	if err := s.ChannelMessageDelete(ch, sent.ID); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(ch, sent.ID); !m.Deleted {
		t.Error("message not deleted")
	}
	for _, m := range srv.Messages(ch) {
		if m.ID == sent.ID {
			t.Error("deleted message still listed")
		}
	}
	if got, err := s.ChannelMessages(ch, 10, "", "", ""); err != nil || len(got) != 2 || got[0].ID != reply.ID {
		t.Errorf("ChannelMessages = %d, %v; want newest first", len(got), err)
	}
}

func TestMessageValidation(t *testing.T) {
	srv := newServer(t)
	s := restSession(t, srv)
	ch := discordtest.DefaultChannelID
	ids := 0
	buttons := func(n int) []discordgo.MessageComponent {
		var out []discordgo.MessageComponent
		for range n {
			ids++
			out = append(out, discordgo.Button{Label: "b", CustomID: "b" + strconv.Itoa(ids)})
		}
		return out
	}
	options := func(n int) []discordgo.SelectMenuOption {
		var out []discordgo.SelectMenuOption
		for i := range n {
			out = append(out, discordgo.SelectMenuOption{Label: "o" + strconv.Itoa(i), Value: "o" + strconv.Itoa(i)})
		}
		return out
	}
	cases := []struct {
		name     string
		msg      *discordgo.MessageSend
		code     int
		path     string // in the error JSON
		wantCode string
	}{
		{"six buttons", &discordgo.MessageSend{Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: buttons(6)}}},
			50035, `"components":{"0":{"components":{"_errors":[{"code":"BASE_TYPE_BAD_LENGTH"`, "BASE_TYPE_BAD_LENGTH"},
		{"26 options", &discordgo.MessageSend{Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.SelectMenu{CustomID: "pick", Options: options(26)}}}}},
			50035, `"options":{"_errors"`, "BASE_TYPE_BAD_LENGTH"},
		{"2001 characters", &discordgo.MessageSend{Content: strings.Repeat("x", 2001)},
			50035, `"content":{"_errors":[{"code":"BASE_TYPE_MAX_LENGTH","message":"Must be 2000 or fewer in length."}]}`, "BASE_TYPE_MAX_LENGTH"},
		{"empty", &discordgo.MessageSend{}, 50006, `"message":"Cannot send an empty message"`, ""},
		{"six rows", &discordgo.MessageSend{Content: "x", Components: []discordgo.MessageComponent{
			discordgo.ActionsRow{Components: buttons(1)}, discordgo.ActionsRow{Components: buttons(1)}, discordgo.ActionsRow{Components: buttons(1)},
			discordgo.ActionsRow{Components: buttons(1)}, discordgo.ActionsRow{Components: buttons(1)}, discordgo.ActionsRow{Components: buttons(1)}}},
			50035, `"_errors":[{"code":"BASE_TYPE_MAX_LENGTH","message":"Must be 5 or fewer in length."}]`, "BASE_TYPE_MAX_LENGTH"},
		{"select beside a button", &discordgo.MessageSend{Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "a", CustomID: "a"}, discordgo.SelectMenu{CustomID: "pick", Options: options(2)}}}}},
			50035, "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "COMPONENT_LAYOUT_WIDTH_EXCEEDED"},
		{"link button with custom_id", &discordgo.MessageSend{Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "docs", Style: discordgo.LinkButton, URL: "https://example.com", CustomID: "docs"}}}}},
			50035, `"custom_id"`, "BUTTON_COMPONENT_CUSTOM_ID_NOT_ALLOWED"},
		{"duplicate custom_id", &discordgo.MessageSend{Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "a", CustomID: "same"}, discordgo.Button{Label: "b", CustomID: "same"}}}}},
			50035, "COMPONENT_CUSTOM_ID_DUPLICATED", "COMPONENT_CUSTOM_ID_DUPLICATED"},
		{"label of 81", &discordgo.MessageSend{Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: strings.Repeat("l", 81), CustomID: "a"}}}}},
			50035, `"label":{"_errors"`, "BASE_TYPE_MAX_LENGTH"},
		{"embed description", &discordgo.MessageSend{Embeds: []*discordgo.MessageEmbed{{Description: strings.Repeat("d", 4097)}}},
			50035, `"embeds":{"0":{"description"`, "BASE_TYPE_MAX_LENGTH"},
		{"embed total", &discordgo.MessageSend{Embeds: []*discordgo.MessageEmbed{{Description: strings.Repeat("d", 4000)}, {Description: strings.Repeat("d", 2001)}}},
			50035, "MAX_EMBED_SIZE_EXCEEDED", "MAX_EMBED_SIZE_EXCEEDED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.ChannelMessageSendComplex(ch, tc.msg)
			code, status, body := restErr(t, err)
			if code != tc.code || status != http.StatusBadRequest || !strings.Contains(body, tc.path) {
				t.Errorf("got %d %d %s, want code %d with %s", code, status, body, tc.code, tc.path)
			}
			if tc.wantCode != "" {
				raw, _ := json.Marshal(tc.msg)
				if err := discordtest.ValidateMessage(raw); err == nil || !strings.HasPrefix(err.Error(), "50035") || !strings.Contains(err.Error(), tc.wantCode) {
					t.Errorf("ValidateMessage = %v", err)
				}
			}
		})
	}
	if n := len(srv.Messages(ch)); n != 0 {
		t.Errorf("%d refused messages were stored", n)
	}
}

func TestValidEmbedAndComponentsAccepted(t *testing.T) {
	srv := newServer(t)
	s := restSession(t, srv)
	msg := &discordgo.MessageSend{
		Content: "Here is your answer",
		Embeds: []*discordgo.MessageEmbed{{
			Title:       "Answer",
			Description: strings.Repeat("d", 4096),
			Color:       0x5865F2,
			Fields:      []*discordgo.MessageEmbedField{{Name: "model", Value: "fake", Inline: true}},
			Footer:      &discordgo.MessageEmbedFooter{Text: "switchboard"},
			Author:      &discordgo.MessageEmbedAuthor{Name: "bot"},
			Timestamp:   time.Now().Format(time.RFC3339),
		}},
		Components: []discordgo.MessageComponent{
			discordgo.ActionsRow{Components: []discordgo.MessageComponent{
				discordgo.Button{Label: "Retry", Style: discordgo.PrimaryButton, CustomID: "sb:retry"},
				discordgo.Button{Label: "Stop", Style: discordgo.DangerButton, CustomID: "sb:stop"},
				discordgo.Button{Label: "Docs", Style: discordgo.LinkButton, URL: "https://example.com/docs"},
				discordgo.Button{Style: discordgo.SecondaryButton, CustomID: "sb:emoji", Emoji: &discordgo.ComponentEmoji{Name: "👍"}},
			}},
			discordgo.ActionsRow{Components: []discordgo.MessageComponent{
				discordgo.SelectMenu{CustomID: "sb:model", Placeholder: "Model", MaxValues: 2, Options: []discordgo.SelectMenuOption{
					{Label: "Fast", Value: "fast", Description: "quick"}, {Label: "Smart", Value: "smart"}}},
			}},
		},
	}
	sent, err := s.ChannelMessageSendComplex(discordtest.DefaultChannelID, msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Embeds) != 1 || sent.Embeds[0].Title != "Answer" || len(sent.Components) != 2 {
		t.Errorf("sent = %+v", sent)
	}
	row, ok := sent.Components[0].(*discordgo.ActionsRow)
	if !ok || len(row.Components) != 4 || row.Components[0].(*discordgo.Button).CustomID != "sb:retry" {
		t.Errorf("components = %#v", sent.Components)
	}
	m, _ := srv.Message(discordtest.DefaultChannelID, sent.ID)
	if !strings.Contains(string(m.Components), `"sb:model"`) || !strings.Contains(string(m.Embeds), `"Answer"`) {
		t.Errorf("stored components %s embeds %s", m.Components, m.Embeds)
	}
}

func TestComponentsV2(t *testing.T) {
	srv := newServer(t)
	s := restSession(t, srv)
	ch := discordtest.DefaultChannelID
	v2 := func(comps ...discordgo.MessageComponent) *discordgo.MessageSend {
		return &discordgo.MessageSend{Flags: discordgo.MessageFlagsIsComponentsV2, Components: comps}
	}
	good := v2(
		discordgo.Container{Components: []discordgo.MessageComponent{
			discordgo.TextDisplay{Content: "# Answer\nsome **markdown**"},
			discordgo.Separator{},
			discordgo.Section{
				Components: []discordgo.MessageComponent{discordgo.TextDisplay{Content: "Was this useful?"}},
				Accessory:  discordgo.Button{Label: "Yes", CustomID: "v2:yes"},
			},
		}},
		discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.Button{Label: "More", CustomID: "v2:more"}}},
	)
	sent, err := s.ChannelMessageSendComplex(ch, good)
	if err != nil {
		t.Fatalf("valid V2 message refused: %v", err)
	}
	if sent.Flags&discordgo.MessageFlagsIsComponentsV2 == 0 {
		t.Errorf("flags = %d", sent.Flags)
	}

	withContent := v2(discordgo.TextDisplay{Content: "hi"})
	withContent.Content = "legacy"
	_, err = s.ChannelMessageSendComplex(ch, withContent)
	if code, _, body := restErr(t, err); code != 50035 || !strings.Contains(body, "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2") {
		t.Errorf("content with V2: %d %s", code, body)
	}

	var many []discordgo.MessageComponent
	for range 41 {
		many = append(many, discordgo.TextDisplay{Content: "x"})
	}
	_, err = s.ChannelMessageSendComplex(ch, v2(many...))
	if code, _, body := restErr(t, err); code != 50035 || !strings.Contains(body, "Must be 40 or fewer") {
		t.Errorf("41 components: %d %s", code, body)
	}

	_, err = s.ChannelMessageSendComplex(ch, v2(discordgo.TextDisplay{Content: strings.Repeat("a", 2500)}, discordgo.TextDisplay{Content: strings.Repeat("b", 1501)}))
	if code, _, body := restErr(t, err); code != 50035 || !strings.Contains(body, "MAX_TEXT_DISPLAY_LENGTH_EXCEEDED") {
		t.Errorf("4001 characters: %d %s", code, body)
	}

	// Once set, the V2 flag stays.
	_, err = s.ChannelMessageEditComplex(&discordgo.MessageEdit{Channel: ch, ID: sent.ID, Flags: discordgo.MessageFlagsSuppressEmbeds})
	if code, _, body := restErr(t, err); code != 50035 || !strings.Contains(body, "flags") {
		t.Errorf("removing the V2 flag: %d %s", code, body)
	}
}

func TestRateLimitIsHonoured(t *testing.T) {
	srv := newServer(t)
	s := restSession(t, srv)
	const wait = 300 * time.Millisecond
	srv.RateLimit(discordtest.RouteCreateMessage, wait, 1, false)
	if _, err := s.ChannelMessageSend(discordtest.DefaultChannelID, "patient"); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests(discordtest.RouteCreateMessage)
	if len(reqs) != 2 || reqs[0].Status != http.StatusTooManyRequests || reqs[1].Status != http.StatusOK {
		t.Fatalf("requests = %+v", reqs)
	}
	if gap := reqs[1].Received.Sub(reqs[0].Received); gap < wait {
		t.Errorf("retry came %v after the 429, want ≥ %v", gap, wait)
	}
	if n := len(srv.Messages(discordtest.DefaultChannelID)); n != 1 {
		t.Errorf("messages = %d", n)
	}

	// A global limit works the same way for discordgo.
	srv.RateLimit(discordtest.RouteTriggerTyping, 200*time.Millisecond, 1, true)
	start := time.Now()
	if err := s.ChannelTyping(discordtest.DefaultChannelID); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 200*time.Millisecond || srv.Calls(discordtest.RouteTriggerTyping) != 2 {
		t.Errorf("global 429 not waited: %v, %d calls", time.Since(start), srv.Calls(discordtest.RouteTriggerTyping))
	}

	// Without retries discordgo reports the limit.
	srv.RateLimit(discordtest.RouteCreateMessage, time.Second, 1, false)
	_, err := s.ChannelMessageSend(discordtest.DefaultChannelID, "impatient", discordgo.WithRetryOnRatelimit(false))
	var rl *discordgo.RateLimitError
	if !asRateLimit(err, &rl) || rl.RetryAfter != time.Second {
		t.Errorf("err = %v, want a RateLimitError with retry after 1s", err)
	}
}

func asRateLimit(err error, target **discordgo.RateLimitError) bool {
	rl, ok := err.(*discordgo.RateLimitError)
	if ok {
		*target = rl
	}
	return ok
}

func TestRateLimitHeadersAndBuckets(t *testing.T) {
	srv := newServer(t)
	req, _ := http.NewRequest(http.MethodPost, srv.APIURL()+"channels/"+discordtest.DefaultChannelID+"/typing", nil)
	req.Header.Set("Authorization", "Bot "+srv.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Reset-After", "X-RateLimit-Bucket"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("missing %s", h)
		}
	}
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-RateLimit-Remaining") != "49" {
		t.Errorf("typing = %d remaining %s", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}

	// A tight bucket: discordgo waits out Reset-After instead of meeting a 429.
	const window = 400 * time.Millisecond
	srv.SetRouteLimit(discordtest.RouteEditMessage, 2, window)
	s := restSession(t, srv)
	sent, err := s.ChannelMessageSend(discordtest.DefaultChannelID, "v0")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := s.ChannelMessageEdit(discordtest.DefaultChannelID, sent.ID, "v"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	edits := srv.Requests(discordtest.RouteEditMessage)
	for _, r := range edits {
		if r.Status != http.StatusOK {
			t.Errorf("edit answered %d", r.Status)
		}
	}
	if gap := edits[2].Received.Sub(edits[0].Received); gap < window-20*time.Millisecond {
		t.Errorf("third edit %v after the first, want about %v", gap, window)
	}
	m, _ := srv.Message(discordtest.DefaultChannelID, sent.ID)
	if m.Edits() != 3 {
		t.Errorf("edits = %d", m.Edits())
	}
}

func TestFailNext(t *testing.T) {
	srv := newServer(t)
	s := restSession(t, srv)
	// discordgo retries a 502 by itself.
	srv.FailNext(discordtest.RouteCreateMessage, http.StatusBadGateway, "")
	if _, err := s.ChannelMessageSend(discordtest.DefaultChannelID, "again"); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls(discordtest.RouteCreateMessage); n != 2 {
		t.Errorf("calls = %d, want the 502 and the retry", n)
	}
	srv.FailNext(discordtest.RouteCreateMessage, http.StatusInternalServerError, `{"message":"boom","code":0}`)
	_, err := s.ChannelMessageSend(discordtest.DefaultChannelID, "x")
	if _, status, body := restErr(t, err); status != 500 || body != `{"message":"boom","code":0}` {
		t.Errorf("got %d %s", status, body)
	}
}

func TestThreads(t *testing.T) {
	srv := newServer(t)
	_, ev := openSession(t, srv, defaultIntents)
	s := restSession(t, srv)
	ch := discordtest.DefaultChannelID
	root, err := s.ChannelMessageSend(ch, "thread root")
	if err != nil {
		t.Fatal(err)
	}
	th, err := s.MessageThreadStartComplex(ch, root.ID, &discordgo.ThreadStart{Name: "Conversation", AutoArchiveDuration: 60})
	if err != nil {
		t.Fatal(err)
	}
	if th.ID != root.ID || th.ParentID != ch || th.Type != discordgo.ChannelTypeGuildPublicThread || th.GuildID != discordtest.DefaultGuildID || th.ThreadMetadata.AutoArchiveDuration != 60 {
		t.Errorf("thread = %+v", th)
	}
	tc := next(t, ev.threads, "THREAD_CREATE")
	if tc.ID != th.ID || !tc.NewlyCreated || tc.ParentID != ch {
		t.Errorf("THREAD_CREATE = %+v", tc.Channel)
	}
	threads := srv.Threads()
	if len(threads) != 1 || threads[0].ParentID != ch || threads[0].StarterMessageID != root.ID || threads[0].Name != "Conversation" {
		t.Errorf("threads = %+v", threads)
	}
	m, _ := srv.Message(ch, root.ID)
	if m.ThreadID != th.ID || m.Flags&discordtest.FlagHasThread == 0 {
		t.Errorf("root = %+v", m)
	}
	_, err = s.MessageThreadStartComplex(ch, root.ID, &discordgo.ThreadStart{Name: "again"})
	if code, _, _ := restErr(t, err); code != discordtest.CodeThreadAlreadyCreated {
		t.Errorf("second thread code %d", code)
	}
	_, err = s.MessageThreadStartComplex(ch, root.ID, &discordgo.ThreadStart{})
	if code, _, body := restErr(t, err); code != 50035 || !strings.Contains(body, `"name"`) {
		t.Errorf("thread without name: %d %s", code, body)
	}
	if _, err := s.ChannelMessageSend(th.ID, "in the thread"); err != nil {
		t.Fatal(err)
	}
	if c, _ := srv.Channel(th.ID); c.MessageCount != 1 {
		t.Errorf("thread message count = %d", c.MessageCount)
	}

	// API v10 requires a type for threads without a message.
	_, err = s.ThreadStartComplex(ch, &discordgo.ThreadStart{Name: "no type"})
	if code, _, body := restErr(t, err); code != 50035 || !strings.Contains(body, `"type"`) {
		t.Errorf("thread without type: %d %s", code, body)
	}
	loose, err := s.ThreadStart(ch, "loose", discordgo.ChannelTypeGuildPublicThread, 1440)
	if err != nil || loose.ParentID != ch || loose.ID == root.ID {
		t.Errorf("thread without message = %+v, %v", loose, err)
	}
}

func TestDMsMembersChannelsTyping(t *testing.T) {
	srv := newServer(t)
	s := restSession(t, srv)
	dm, err := s.UserChannelCreate(alice)
	if err != nil {
		t.Fatal(err)
	}
	if dm.Type != discordgo.ChannelTypeDM || len(dm.Recipients) != 1 || dm.Recipients[0].ID != alice || dm.GuildID != "" {
		t.Errorf("DM = %+v", dm)
	}
	again, err := s.UserChannelCreate(alice)
	if err != nil || again.ID != dm.ID {
		t.Errorf("second DM create = %+v, %v; want the same channel", again, err)
	}
	if _, err := s.ChannelMessageSend(dm.ID, "hi alice"); err != nil {
		t.Fatal(err)
	}
	if msgs := srv.Messages(dm.ID); len(msgs) != 1 || msgs[0].GuildID != "" {
		t.Errorf("DM messages = %+v", msgs)
	}
	_, err = s.UserChannelCreate("999")
	if code, _, _ := restErr(t, err); code != discordtest.CodeUnknownUser {
		t.Errorf("DM with unknown user: %d", code)
	}

	mem, err := s.GuildMember(discordtest.DefaultGuildID, alice)
	if err != nil {
		t.Fatal(err)
	}
	if mem.Nick != "Al" || len(mem.Roles) != 1 || mem.User.GlobalName != "Alice Liddell" || mem.User.Username != "alice" {
		t.Errorf("member = %+v user %+v", mem, mem.User)
	}
	_, err = s.GuildMember(discordtest.DefaultGuildID, bob)
	if code, _, _ := restErr(t, err); code != discordtest.CodeUnknownMember {
		t.Errorf("non-member: %d", code)
	}

	c, err := s.Channel(discordtest.DefaultChannelID)
	if err != nil || c.Name != discordtest.DefaultChannelName || c.GuildID != discordtest.DefaultGuildID || c.Type != discordgo.ChannelTypeGuildText {
		t.Errorf("channel = %+v, %v", c, err)
	}
	if err := s.ChannelTyping(discordtest.DefaultChannelID); err != nil {
		t.Fatal(err)
	}
	if tc := srv.TypingCalls(); len(tc) != 1 || tc[0].ChannelID != discordtest.DefaultChannelID {
		t.Errorf("typing = %+v", tc)
	}
}

func TestCommandsBulkOverwrite(t *testing.T) {
	srv := newServer(t)
	s := restSession(t, srv)
	cmds := []*discordgo.ApplicationCommand{{
		Name:        "switchboard",
		Description: "Talk to the gateway",
		Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "ask", Description: "Ask something",
				Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "prompt", Description: "What to ask", Required: true}}},
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "reset", Description: "Start over"},
		},
	}}
	got, err := s.ApplicationCommandBulkOverwrite(srv.ApplicationID(), "", cmds)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID == "" || got[0].ApplicationID != srv.ApplicationID() || got[0].Name != "switchboard" || len(got[0].Options) != 2 {
		t.Fatalf("created = %+v", got)
	}
	again, err := s.ApplicationCommandBulkOverwrite(srv.ApplicationID(), "", cmds)
	if err != nil || again[0].ID != got[0].ID {
		t.Errorf("overwrite changed the ID: %+v, %v", again, err)
	}
	guild, err := s.ApplicationCommandBulkOverwrite(srv.ApplicationID(), discordtest.DefaultGuildID, cmds)
	if err != nil || guild[0].GuildID != discordtest.DefaultGuildID || guild[0].ID == got[0].ID {
		t.Errorf("guild commands = %+v, %v", guild, err)
	}
	list, err := s.ApplicationCommands(srv.ApplicationID(), "")
	if err != nil || len(list) != 1 || list[0].ID != got[0].ID {
		t.Errorf("list = %+v, %v", list, err)
	}
	log := srv.CommandOverwrites()
	if len(log) != 3 || log[0].GuildID != "" || log[2].GuildID != discordtest.DefaultGuildID || !strings.Contains(string(log[0].Commands), `"ask"`) {
		t.Errorf("overwrites = %+v", log)
	}

	// Invalid names are refused and recorded.
	_, err = s.ApplicationCommandBulkOverwrite(srv.ApplicationID(), "", []*discordgo.ApplicationCommand{{Name: "Bad Name", Description: "x"}})
	if code, _, body := restErr(t, err); code != 50035 || !strings.Contains(body, "APPLICATION_COMMAND_INVALID_NAME") {
		t.Errorf("bad name: %d %s", code, body)
	}
	if log := srv.CommandOverwrites(); log[3].Status != http.StatusBadRequest {
		t.Errorf("refused overwrite = %+v", log[3])
	}
	_, err = s.ApplicationCommandBulkOverwrite("1", "", cmds)
	if code, _, _ := restErr(t, err); code != discordtest.CodeMissingAccess {
		t.Errorf("other application: %d", code)
	}
}

// Commands are refused where they break Discord's documented rules for
// options, choices and size, each with the field's path.
func TestCommandOptionRules(t *testing.T) {
	srv := newServer(t)
	s := restSession(t, srv)
	str := func(name string, required bool) *discordgo.ApplicationCommandOption {
		return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: name, Description: "d", Required: required}
	}
	sub := func(name string, opts ...*discordgo.ApplicationCommandOption) *discordgo.ApplicationCommandOption {
		return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionSubCommand, Name: name, Description: "d", Options: opts}
	}
	minTen := 10.0
	var many []*discordgo.ApplicationCommandOption
	for i := range 26 {
		many = append(many, sub(fmt.Sprintf("s%d", i)))
	}
	var big []*discordgo.ApplicationCommandOption
	for i := range 25 {
		o := str(fmt.Sprintf("o%d", i), false)
		for j := range 4 {
			o.Choices = append(o.Choices, &discordgo.ApplicationCommandOptionChoice{Name: strings.Repeat("n", 90), Value: fmt.Sprintf("v%d", j)})
		}
		big = append(big, o)
	}
	for _, tc := range []struct {
		name string
		opts []*discordgo.ApplicationCommandOption
		want string
	}{
		{"26 subcommands", many, `"options":{"_errors":[{"code":"BASE_TYPE_MAX_LENGTH"`},
		{"same name twice", []*discordgo.ApplicationCommandOption{sub("a"), sub("a")}, "APPLICATION_COMMAND_OPTIONS_DUPLICATE_NAME"},
		{"required after optional", []*discordgo.ApplicationCommandOption{str("a", false), str("b", true)}, "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID"},
		{"subcommand beside an option", []*discordgo.ApplicationCommandOption{sub("a"), str("b", false)}, "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID"},
		{"choices on a boolean", []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionBoolean, Name: "b", Description: "d",
			Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "yes", Value: true}}}}, `"choices":{"_errors":[{"code":"APPLICATION_COMMAND_OPTION_INVALID"`},
		{"a number for a string", []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "s", Description: "d",
			Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "one", Value: 1}}}}, `"value":{"_errors":[{"code":"BASE_TYPE_STRING"`},
		{"a long choice name", []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "s", Description: "d",
			Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: strings.Repeat("x", 101), Value: "x"}}}}, `"name":{"_errors":[{"code":"BASE_TYPE_MAX_LENGTH"`},
		{"min above max", []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionInteger, Name: "n", Description: "d", MinValue: &minTen, MaxValue: 5}},
			`"min_value":{"_errors":[{"code":"APPLICATION_COMMAND_OPTION_INVALID","message":"min_value must be`},
		{"bounds on a string", []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "s", Description: "d", MaxValue: 5}},
			`"min_value":{"_errors":[{"code":"APPLICATION_COMMAND_OPTION_INVALID","message":"min_value and max_value are`},
		{"over 8000 characters", big, "APPLICATION_COMMAND_TOO_LARGE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.ApplicationCommandBulkOverwrite(srv.ApplicationID(), "", []*discordgo.ApplicationCommand{{Name: "cmd", Description: "d", Options: tc.opts}})
			if code, _, body := restErr(t, err); code != discordtest.CodeInvalidFormBody || !strings.Contains(body, tc.want) {
				t.Errorf("%d %s, want %s", code, body, tc.want)
			}
		})
	}
	ok := []*discordgo.ApplicationCommandOption{sub("share",
		&discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: "role", Description: "d",
			Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "viewer", Value: "viewer"}}},
		&discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionInteger, Name: "uses", Description: "d", MinValue: &minTen, MaxValue: 1000})}
	if _, err := s.ApplicationCommandBulkOverwrite(srv.ApplicationID(), "", []*discordgo.ApplicationCommand{{Name: "cmd", Description: "d", Options: ok}}); err != nil {
		t.Fatalf("a valid command refused: %v", err)
	}
}

// What the bot may not do in a channel is refused as Discord refuses it:
// 50001 where it cannot see the channel, 50013 where it lacks the one
// permission; a thread takes its parent's denials; interactions still
// arrive, saying in app_permissions what is left.
func TestBotPermissions(t *testing.T) {
	srv := newServer(t)
	s := restSession(t, srv)
	const hidden, quiet, nothreads = "1200000000000000101", "1200000000000000102", "1200000000000000103"
	srv.AddChannel(discordtest.Channel{ID: hidden, Type: discordtest.ChannelTypeGuildText, GuildID: discordtest.DefaultGuildID, Name: "hidden", BotDenied: discordtest.PermissionViewChannel})
	srv.AddChannel(discordtest.Channel{ID: quiet, Type: discordtest.ChannelTypeGuildText, GuildID: discordtest.DefaultGuildID, Name: "quiet",
		BotDenied: discordtest.PermissionSendMessages | discordtest.PermissionSendMessagesInThreads})
	srv.AddChannel(discordtest.Channel{ID: nothreads, Type: discordtest.ChannelTypeGuildText, GuildID: discordtest.DefaultGuildID, Name: "nothreads",
		BotDenied: discordtest.PermissionCreatePublicThreads})

	_, err := s.Channel(hidden)
	if code, status, _ := restErr(t, err); code != discordtest.CodeMissingAccess || status != http.StatusForbidden {
		t.Errorf("a hidden channel: %d %d", code, status)
	}
	_, err = s.ChannelMessageSend(hidden, "hi")
	if code, _, _ := restErr(t, err); code != discordtest.CodeMissingAccess {
		t.Errorf("posting where the bot cannot see: %d", code)
	}
	if _, err := s.Channel(quiet); err != nil {
		t.Errorf("a channel the bot sees: %v", err)
	}
	_, err = s.ChannelMessageSend(quiet, "hi")
	if code, status, body := restErr(t, err); code != discordtest.CodeMissingPermissions || status != http.StatusForbidden || !strings.Contains(body, "Missing Permissions") {
		t.Errorf("posting without Send Messages: %d %d %s", code, status, body)
	}
	if err := s.ChannelTyping(quiet); err == nil {
		t.Error("typing without Send Messages")
	}
	// A thread in #quiet: the bot may open it, not post in it.
	m, _ := srv.PostUserMessage(discordtest.UserMessage{ChannelID: quiet, AuthorID: alice, Content: "start"})
	th, err := s.MessageThreadStart(quiet, m.ID, "a thread", 60)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ChannelMessageSend(th.ID, "hi")
	if code, _, _ := restErr(t, err); code != discordtest.CodeMissingPermissions {
		t.Errorf("posting in a thread without Send Messages in Threads: %d", code)
	}
	m2, _ := srv.PostUserMessage(discordtest.UserMessage{ChannelID: nothreads, AuthorID: alice, Content: "start"})
	_, err = s.MessageThreadStart(nothreads, m2.ID, "a thread", 60)
	if code, _, _ := restErr(t, err); code != discordtest.CodeMissingPermissions {
		t.Errorf("a thread without Create Public Threads: %d", code)
	}
	if _, err := s.ChannelMessageSend(nothreads, "but this"); err != nil {
		t.Errorf("posting in #nothreads: %v", err)
	}
	if n := len(srv.Messages(hidden)) + len(srv.Messages(th.ID)); n != 0 {
		t.Errorf("%d refused messages stored", n)
	}

	for _, tc := range []struct {
		channel string
		allowed int64
		denied  int64
	}{
		{discordtest.DefaultChannelID, discordtest.PermissionViewChannel | discordtest.PermissionSendMessages | discordtest.PermissionCreatePublicThreads, 0},
		{hidden, 0, discordtest.PermissionViewChannel},
		{th.ID, discordtest.PermissionViewChannel, discordtest.PermissionSendMessagesInThreads},
	} {
		in, err := srv.NewCommandInteraction(discordtest.CommandInteraction{ChannelID: tc.channel, UserID: alice})
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			AppPermissions int64 `json:"app_permissions,string"`
		}
		if err := json.Unmarshal(in.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.AppPermissions&tc.allowed != tc.allowed || p.AppPermissions&tc.denied != 0 {
			t.Errorf("app_permissions in %s = %b", tc.channel, p.AppPermissions)
		}
	}

	// What is written where the bot cannot see never reaches it.
	_, ev := openSession(t, srv, defaultIntents)
	next(t, ev.ready, "READY")
	if _, err := srv.PostUserMessage(discordtest.UserMessage{ChannelID: hidden, AuthorID: alice, Content: "secret"}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "public"}); err != nil {
		t.Fatal(err)
	}
	if m := nextUserMessage(t, ev, srv.BotUserID()); m.Content != "public" {
		t.Errorf("the bot got %q from channel %s", m.Content, m.ChannelID)
	}
}

func TestAttachments(t *testing.T) {
	srv := newServer(t, discordtest.WithMaxAttachmentSize(1<<10))
	s := restSession(t, srv)
	ch := discordtest.DefaultChannelID
	sent, err := s.ChannelMessageSendComplex(ch, &discordgo.MessageSend{
		Files: []*discordgo.File{{Name: "notes.txt", ContentType: "text/plain", Reader: strings.NewReader("hello file")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Attachments) != 1 || sent.Attachments[0].Filename != "notes.txt" || sent.Attachments[0].Size != 10 {
		t.Fatalf("attachments = %+v", sent.Attachments)
	}
	resp, err := http.Get(sent.Attachments[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello file" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("CDN = %q %s", body, resp.Header.Get("Content-Type"))
	}
	if r := srv.Requests(discordtest.RouteCreateMessage); len(r[0].Files) != 1 || !strings.HasPrefix(r[0].ContentType, "multipart/form-data") {
		t.Errorf("recorded request = %+v", r[0])
	}

	// Editing with a new file appends it.
	content := "with two files"
	edited, err := s.ChannelMessageEditComplex(&discordgo.MessageEdit{Channel: ch, ID: sent.ID, Content: &content,
		Files: []*discordgo.File{{Name: "more.txt", Reader: strings.NewReader("more")}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(edited.Attachments) != 2 {
		t.Errorf("after edit attachments = %+v", edited.Attachments)
	}

	_, err = s.ChannelMessageSendComplex(ch, &discordgo.MessageSend{
		Files: []*discordgo.File{{Name: "big.bin", Reader: bytes.NewReader(make([]byte, 2<<10))}},
	})
	if code, status, _ := restErr(t, err); code != discordtest.CodeRequestEntityTooLarge || status != http.StatusRequestEntityTooLarge {
		t.Errorf("big file: %d %d", code, status)
	}
}

func TestReactions(t *testing.T) {
	srv := newServer(t)
	s := restSession(t, srv)
	m, _ := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "react to me"})
	if err := s.MessageReactionAdd(m.ChannelID, m.ID, "👀"); err != nil {
		t.Fatal(err)
	}
	got, _ := srv.Message(m.ChannelID, m.ID)
	if users := got.Reactions["👀"]; len(users) != 1 || users[0] != srv.BotUserID() {
		t.Errorf("reactions = %+v", got.Reactions)
	}
	if err := s.MessageReactionRemove(m.ChannelID, m.ID, "👀", "@me"); err != nil {
		t.Fatal(err)
	}
	if got, _ := srv.Message(m.ChannelID, m.ID); len(got.Reactions) != 0 {
		t.Errorf("reactions after removal = %+v", got.Reactions)
	}
	err := s.MessageReactionAdd(m.ChannelID, m.ID, "notanemoji")
	if code, _, _ := restErr(t, err); code != discordtest.CodeUnknownEmoji {
		t.Errorf("bad emoji: %d", code)
	}
}

// Attachments' CDN URLs are signed and expire, as Discord's: the file for
// the URL as given, "This content is no longer available." (404) for it
// unsigned, altered or past its expiry.
func TestAttachmentURLsAreSigned(t *testing.T) {
	srv := newServer(t)
	m, err := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "see", Attachments: []discordtest.Attachment{
		{Filename: "rain data.csv", ContentType: "text/csv", Data: []byte("a,b\n")},
		{Filename: "old.csv", Data: []byte("x"), Expires: time.Now().Add(-time.Minute)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(u string) (int, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	u := m.Attachments[0].URL
	q, _ := url.Parse(u)
	if q.Query().Get("ex") == "" || q.Query().Get("is") == "" || q.Query().Get("hm") == "" || !m.Attachments[0].Expires.After(time.Now().Add(23*time.Hour)) {
		t.Fatalf("not a signed URL: %s (expires %s)", u, m.Attachments[0].Expires)
	}
	if status, body := fetch(u); status != 200 || body != "a,b\n" {
		t.Fatalf("signed: %d %q", status, body)
	}
	unsigned, _, _ := strings.Cut(u, "?")
	altered := strings.Replace(u, "ex=", "ex=f", 1)
	for _, bad := range []string{unsigned, altered, m.Attachments[1].URL} {
		if status, body := fetch(bad); status != 404 || body != "This content is no longer available." {
			t.Errorf("%s: %d %q", bad, status, body)
		}
	}
}
