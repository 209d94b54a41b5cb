package discordtest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// postButtons has the bot post a message with two buttons and a select.
func postButtons(t *testing.T, s *discordgo.Session) *discordgo.Message {
	t.Helper()
	m, err := s.ChannelMessageSendComplex(discordtest.DefaultChannelID, &discordgo.MessageSend{
		Content: "Pick one",
		Components: []discordgo.MessageComponent{
			discordgo.ActionsRow{Components: []discordgo.MessageComponent{
				discordgo.Button{Label: "Approve", CustomID: "sb:approve"},
				discordgo.Button{Label: "Deny", Style: discordgo.DangerButton, CustomID: "sb:deny"},
			}},
			discordgo.ActionsRow{Components: []discordgo.MessageComponent{
				discordgo.SelectMenu{CustomID: "sb:model", MaxValues: 2, Options: []discordgo.SelectMenuOption{
					{Label: "Fast", Value: "fast"}, {Label: "Smart", Value: "smart"}, {Label: "Cheap", Value: "cheap"}}},
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestButtonClickAckedOnce(t *testing.T) {
	srv := newServer(t)
	s, ev := openSession(t, srv, defaultIntents)
	msg := postButtons(t, s)

	sent, err := srv.ClickButton(msg.ChannelID, msg.ID, alice, "sb:approve")
	if err != nil {
		t.Fatal(err)
	}
	ic := next(t, ev.inters, "INTERACTION_CREATE")
	if ic.ID != sent.ID || ic.Type != discordgo.InteractionMessageComponent || ic.Token != sent.Token || ic.AppID != srv.ApplicationID() {
		t.Fatalf("interaction = %+v", ic.Interaction)
	}
	data := ic.MessageComponentData()
	if data.CustomID != "sb:approve" || data.ComponentType != discordgo.ButtonComponent {
		t.Errorf("data = %+v", data)
	}
	if ic.Member == nil || ic.Member.User.ID != alice || ic.Member.Nick != "Al" || ic.Member.Permissions == 0 || ic.User != nil {
		t.Errorf("member = %+v user %+v", ic.Member, ic.User)
	}
	if ic.Message == nil || ic.Message.ID != msg.ID || ic.GuildID != discordtest.DefaultGuildID || ic.ChannelID != msg.ChannelID {
		t.Errorf("message %+v guild %s channel %s", ic.Message, ic.GuildID, ic.ChannelID)
	}

	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: "Approved by <@" + alice + ">", Flags: discordgo.MessageFlagsEphemeral}}
	if err := s.InteractionRespond(ic.Interaction, resp); err != nil {
		t.Fatal(err)
	}
	ack, err := srv.WaitForAck(waitCtx(t), ic.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Type != discordtest.CallbackChannelMessageWithSource || ack.Latency <= 0 || ack.Latency >= discordtest.InteractionAckWindow {
		t.Errorf("ack = %+v", ack)
	}
	// The ephemeral answer is not part of channel history.
	eph := srv.Ephemerals(msg.ChannelID)
	if len(eph) != 1 || eph[0].InteractionID != ic.ID || eph[0].WebhookID != srv.ApplicationID() || eph[0].Flags&discordtest.FlagEphemeral == 0 {
		t.Errorf("ephemerals = %+v", eph)
	}

	// A second response is refused.
	err = s.InteractionRespond(ic.Interaction, resp)
	if code, status, _ := restErr(t, err); code != discordtest.CodeAlreadyAcknowledged || status != http.StatusBadRequest {
		t.Errorf("second response: %d %d", code, status)
	}
	if n := len(srv.Acks()); n != 1 {
		t.Errorf("acks = %d", n)
	}
	rs := srv.InteractionResponses()
	if len(rs) != 2 || rs[0].Status != http.StatusNoContent || rs[1].Code != discordtest.CodeAlreadyAcknowledged {
		t.Errorf("responses = %+v", rs)
	}

	// Unknown components cannot be clicked.
	if _, err := srv.ClickButton(msg.ChannelID, msg.ID, alice, "sb:nope"); err == nil {
		t.Error("click on a missing component succeeded")
	}
}

func TestCallbackAfterThreeSecondsIsUnknown(t *testing.T) {
	clock := &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	srv := newServer(t, discordtest.WithClock(clock.Now))
	s, ev := openSession(t, srv, defaultIntents)
	msg := postButtons(t, s)
	if _, err := srv.ClickButton(msg.ChannelID, msg.ID, alice, "sb:deny"); err != nil {
		t.Fatal(err)
	}
	ic := next(t, ev.inters, "INTERACTION_CREATE")
	clock.Advance(discordtest.InteractionAckWindow + time.Millisecond)
	err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate})
	if code, status, _ := restErr(t, err); code != discordtest.CodeUnknownInteraction || status != http.StatusNotFound {
		t.Errorf("late response: %d %d", code, status)
	}
	// The token is invalidated with it.
	_, err = s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "too late"})
	if code, _, _ := restErr(t, err); code != discordtest.CodeInvalidWebhookToken {
		t.Errorf("late follow-up: %d", code)
	}
	if len(srv.Acks()) != 0 {
		t.Errorf("acks = %+v", srv.Acks())
	}
}

func TestSelectAndUpdateMessage(t *testing.T) {
	srv := newServer(t)
	s, ev := openSession(t, srv, defaultIntents)
	msg := postButtons(t, s)
	if _, err := srv.ChooseOptions(msg.ChannelID, msg.ID, alice, "sb:model", "fast", "smart"); err != nil {
		t.Fatal(err)
	}
	ic := next(t, ev.inters, "INTERACTION_CREATE")
	data := ic.MessageComponentData()
	if data.ComponentType != discordgo.SelectMenuComponent || len(data.Values) != 2 || data.Values[1] != "smart" {
		t.Errorf("data = %+v", data)
	}
	// UPDATE_MESSAGE edits the message the select is on.
	err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseUpdateMessage,
		Data: &discordgo.InteractionResponseData{Content: "Using fast, smart", Components: []discordgo.MessageComponent{}}})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := srv.Message(msg.ChannelID, msg.ID)
	if m.Content != "Using fast, smart" || m.Components != nil || m.Edits() != 1 || m.History[1].Route != discordtest.RouteCreateInteractionResponse {
		t.Errorf("updated message = %+v", m)
	}
	// @original is the component's message; editing it works for 15 minutes.
	content := "Using fast, smart (saved)"
	if _, err := s.InteractionResponseEdit(ic.Interaction, &discordgo.WebhookEdit{Content: &content}); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(msg.ChannelID, msg.ID); m.Content != content {
		t.Errorf("after @original edit: %q", m.Content)
	}
}

func TestInvalidCallbackTypes(t *testing.T) {
	srv := newServer(t)
	s, ev := openSession(t, srv, defaultIntents)
	if _, err := srv.RunCommand(discordtest.CommandInteraction{ChannelID: discordtest.DefaultChannelID, UserID: alice}); err != nil {
		t.Fatal(err)
	}
	ic := next(t, ev.inters, "INTERACTION_CREATE")
	err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseUpdateMessage,
		Data: &discordgo.InteractionResponseData{Content: "x"}})
	if code, _, body := restErr(t, err); code != 50035 || !strings.Contains(body, `"type"`) {
		t.Errorf("UPDATE_MESSAGE for a command: %d %s", code, body)
	}
	// A deferred response may only carry EPHEMERAL.
	err = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsIsComponentsV2}})
	if code, _, body := restErr(t, err); code != 50035 || !strings.Contains(body, `"flags"`) {
		t.Errorf("deferred with V2 flag: %d %s", code, body)
	}
	// Refused responses do not acknowledge: a valid one still can.
	if err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}); err != nil {
		t.Fatal(err)
	}
}

func TestModalResponseValidation(t *testing.T) {
	srv := newServer(t)
	s, ev := openSession(t, srv, defaultIntents)
	if _, err := srv.RunCommand(discordtest.CommandInteraction{ChannelID: discordtest.DefaultChannelID, UserID: alice}); err != nil {
		t.Fatal(err)
	}
	ic := next(t, ev.inters, "INTERACTION_CREATE")
	modal := func(title string, input discordgo.TextInput) *discordgo.InteractionResponse {
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: &discordgo.InteractionResponseData{
			CustomID: "sb:prompt", Title: title,
			Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{input}}},
		}}
	}
	input := discordgo.TextInput{CustomID: "prompt", Label: "Prompt", Style: discordgo.TextInputParagraph, Required: true, MaxLength: 4000}

	err := s.InteractionRespond(ic.Interaction, modal(strings.Repeat("t", 46), input))
	if code, _, body := restErr(t, err); code != 50035 || !strings.Contains(body, `"data":{"title":{"_errors":[{"code":"BASE_TYPE_MAX_LENGTH"`) {
		t.Errorf("46-char title: %d %s", code, body)
	}
	bad := input
	bad.Label = strings.Repeat("l", 46)
	err = s.InteractionRespond(ic.Interaction, modal("Ask", bad))
	if code, _, body := restErr(t, err); code != 50035 || !strings.Contains(body, `"label"`) {
		t.Errorf("46-char label: %d %s", code, body)
	}
	if err := s.InteractionRespond(ic.Interaction, modal("Ask switchboard", input)); err != nil {
		t.Fatalf("valid modal refused: %v", err)
	}
	mods := srv.Modals()
	if len(mods) != 1 || mods[0].CustomID != "sb:prompt" || mods[0].Title != "Ask switchboard" || mods[0].InteractionID != ic.ID {
		t.Errorf("modals = %+v", mods)
	}
	if acks := srv.Acks(); len(acks) != 1 || acks[0].Type != discordtest.CallbackModal {
		t.Errorf("acks = %+v", acks)
	}
}

func TestModalSubmitDecodes(t *testing.T) {
	srv := newServer(t)
	s, ev := openSession(t, srv, defaultIntents)
	if _, err := srv.SubmitModal(discordtest.ModalSubmitInteraction{ChannelID: discordtest.DefaultChannelID, UserID: alice, CustomID: "sb:prompt",
		Fields: []discordtest.ModalField{{CustomID: "prompt", Value: "What is 2+2?"}}}); err != nil {
		t.Fatal(err)
	}
	ic := next(t, ev.inters, "INTERACTION_CREATE")
	data := ic.ModalSubmitData()
	if data.CustomID != "sb:prompt" || len(data.Components) != 1 {
		t.Fatalf("data = %+v", data)
	}
	row := data.Components[0].(*discordgo.ActionsRow)
	in := row.Components[0].(*discordgo.TextInput)
	if in.CustomID != "prompt" || in.Value != "What is 2+2?" {
		t.Errorf("input = %+v", in)
	}
	// A modal cannot answer a modal.
	err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal,
		Data: &discordgo.InteractionResponseData{CustomID: "x", Title: "x"}})
	if code, _, _ := restErr(t, err); code != 50035 {
		t.Errorf("modal for a modal submit: %d", code)
	}
}

func TestCommandDeferEditAndFollowups(t *testing.T) {
	srv := newServer(t)
	s, ev := openSession(t, srv, defaultIntents)
	cmds, err := s.ApplicationCommandBulkOverwrite(srv.ApplicationID(), "", []*discordgo.ApplicationCommand{{
		Name: "switchboard", Description: "Talk",
		Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "ask", Description: "Ask",
			Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "prompt", Description: "p"}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.RunCommand(discordtest.CommandInteraction{ChannelID: discordtest.DefaultChannelID, UserID: alice,
		Options: []discordtest.CommandOption{discordtest.Subcommand("ask", discordtest.StringOption("prompt", "hi"))}}); err != nil {
		t.Fatal(err)
	}
	ic := next(t, ev.inters, "INTERACTION_CREATE")
	data := ic.ApplicationCommandData()
	if data.Name != "switchboard" || data.ID != cmds[0].ID || len(data.Options) != 1 || data.Options[0].Name != "ask" ||
		data.Options[0].Options[0].StringValue() != "hi" {
		t.Errorf("command data = %+v", data)
	}

	if err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages(discordtest.DefaultChannelID)
	loading := msgs[len(msgs)-1]
	if loading.Flags&discordtest.FlagLoading == 0 || loading.Type != discordtest.MessageTypeChatInputCommand || loading.InteractionID != ic.ID {
		t.Errorf("deferred message = %+v", loading)
	}
	content := "The answer is 4"
	orig, err := s.InteractionResponseEdit(ic.Interaction, &discordgo.WebhookEdit{Content: &content})
	if err != nil {
		t.Fatal(err)
	}
	if orig.ID != loading.ID || orig.Content != content || orig.Flags&discordgo.MessageFlagsLoading != 0 || orig.InteractionMetadata == nil {
		t.Errorf("original = %+v", orig)
	}
	f, err := s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "one more thing"})
	if err != nil {
		t.Fatal(err)
	}
	if f.ID == orig.ID || f.WebhookID != srv.ApplicationID() {
		t.Errorf("follow-up = %+v", f)
	}
	more := "one more thing, edited"
	if _, err := s.FollowupMessageEdit(ic.Interaction, f.ID, &discordgo.WebhookEdit{Content: &more}); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(discordtest.DefaultChannelID, f.ID); m.Content != more || m.Edits() != 1 {
		t.Errorf("follow-up after edit = %+v", m)
	}
	// Follow-up edits are limited to the interaction's own messages.
	other, _ := srv.PostUserMessage(discordtest.UserMessage{AuthorID: alice, Content: "not yours"})
	_, err = s.FollowupMessageEdit(ic.Interaction, other.ID, &discordgo.WebhookEdit{Content: &more})
	if code, _, _ := restErr(t, err); code != discordtest.CodeUnknownMessage {
		t.Errorf("editing a foreign message through the webhook: %d", code)
	}
	// Tokens last 15 minutes.
	srv.AgeInteraction(ic.ID, discordtest.InteractionTokenTTL+time.Second)
	_, err = s.InteractionResponseEdit(ic.Interaction, &discordgo.WebhookEdit{Content: &content})
	if code, status, _ := restErr(t, err); code != discordtest.CodeInvalidWebhookToken || status != http.StatusUnauthorized {
		t.Errorf("expired token: %d %d", code, status)
	}
}

func TestFollowupRightAfterDeferFillsTheLoadingMessage(t *testing.T) {
	srv := newServer(t)
	s, ev := openSession(t, srv, defaultIntents)
	dm := srv.DM(alice)
	if _, err := srv.RunCommand(discordtest.CommandInteraction{ChannelID: dm.ID, UserID: alice}); err != nil {
		t.Fatal(err)
	}
	ic := next(t, ev.inters, "INTERACTION_CREATE")
	if ic.User == nil || ic.User.ID != alice || ic.Member != nil || ic.GuildID != "" {
		t.Errorf("DM interaction user %+v member %+v", ic.User, ic.Member)
	}
	// Before the initial response the webhook does not exist.
	_, err := s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "early"})
	if code, _, _ := restErr(t, err); code != discordtest.CodeUnknownWebhook {
		t.Errorf("follow-up before ack: %d", code)
	}
	if err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}}); err != nil {
		t.Fatal(err)
	}
	f, err := s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "done"})
	if err != nil {
		t.Fatal(err)
	}
	eph := srv.Ephemerals(dm.ID)
	if len(eph) != 1 || eph[0].ID != f.ID || eph[0].Content != "done" || eph[0].Flags&discordtest.FlagLoading != 0 {
		t.Errorf("ephemerals = %+v, want the deferred message filled in", eph)
	}
	// The next follow-up is a new message.
	g, err := s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "and more"})
	if err != nil || g.ID == f.ID {
		t.Errorf("second follow-up = %+v, %v", g, err)
	}
}

func TestCallbackWithResponseAndUnknownWebhook(t *testing.T) {
	srv := newServer(t)
	s, ev := openSession(t, srv, defaultIntents)
	if _, err := srv.RunCommand(discordtest.CommandInteraction{ChannelID: discordtest.DefaultChannelID, UserID: bob}); err != nil {
		t.Fatal(err)
	}
	ic := next(t, ev.inters, "INTERACTION_CREATE")
	body := strings.NewReader(`{"type":4,"data":{"content":"with response"}}`)
	resp, err := http.Post(srv.APIURL()+"interactions/"+ic.ID+"/"+ic.Token+"/callback?with_response=true", "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Interaction struct {
			ID                string `json:"id"`
			ResponseMessageID string `json:"response_message_id"`
		} `json:"interaction"`
		Resource struct {
			Type    int `json:"type"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"resource"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || out.Interaction.ID != ic.ID || out.Interaction.ResponseMessageID == "" ||
		out.Resource.Type != 4 || out.Resource.Message.Content != "with response" {
		t.Errorf("with_response = %d %+v", resp.StatusCode, out)
	}
	// Another application's ID in the webhook URL is an unknown webhook.
	other := *ic.Interaction
	other.AppID = "1"
	_, err = s.FollowupMessageCreate(&other, true, &discordgo.WebhookParams{Content: "x"})
	if code, status, _ := restErr(t, err); code != discordtest.CodeUnknownWebhook || status != http.StatusNotFound {
		t.Errorf("wrong application: %d %d", code, status)
	}
	// A made-up interaction is unknown.
	fake := *ic.Interaction
	fake.ID = "1"
	err = s.InteractionRespond(&fake, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource})
	if code, _, _ := restErr(t, err); code != discordtest.CodeUnknownInteraction {
		t.Errorf("unknown interaction: %d", code)
	}
}
