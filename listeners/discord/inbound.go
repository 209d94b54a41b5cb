package discord

// Inbound: Discord messages, clicks, modal submissions and commands become
// session inputs. A place (a thread, a DM) is addressed by its channel id:
// a thread started from a message has that message's id, so a replayed
// MESSAGE_CREATE finds the thread it already opened.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/places"
)

// noMentions: what the bot writes never pings anyone; a model's "@everyone"
// stays text.
var noMentions = &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}

// onMessage submits a message to its place's session: a DM, a thread that
// is a session, or a mention, which opens a thread from the message.
func (l *Listener) onMessage(ctx context.Context, m *discordgo.Message) {
	if m.Author == nil || m.Author.Bot || m.Author.ID == l.botUserID || m.WebhookID != "" {
		return // ourselves, other bots, webhooks: bots talking to bots never end
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return // joins, pins, thread notices
	}
	mentioned := false
	for _, u := range m.Mentions {
		if u.ID == l.botUserID {
			mentioned = true
		}
	}
	author := authorOf(m.Author, m.Member)
	var roles []string
	if m.Member != nil {
		roles = m.Member.Roles
	}
	// The thread a mention opens has the message's id: work on it in that
	// place's order, so a replay of the message finds it.
	place := m.ChannelID
	if mentioned && m.GuildID != "" {
		place = m.ID
	}
	l.places.Run(place, func() {
		text := strings.TrimSpace(strings.NewReplacer("<@"+l.botUserID+">", "", "<@!"+l.botUserID+">", "").Replace(m.Content))
		if code, ok := places.JoinCode(text); ok && (mentioned || m.GuildID == "") {
			l.joinFrom(ctx, m, code, author)
			return
		}
		b, err := l.placeOf(ctx, m, mentioned, cmp.Or(text, attachmentsTitle(m.Attachments)), author, roles)
		if err != nil {
			if !errors.Is(err, switchboard.ErrNotFound) && !errors.Is(err, errNotHere) {
				l.log.Error("discord: session for a message", "channel", m.ChannelID, "err", err)
			}
			if errors.Is(err, errNotHere) && (mentioned || m.GuildID == "") {
				l.reply(ctx, m, "Sorry, I'm not set up to answer here. Ask the server's admins to add this channel.")
			}
			return
		}
		if len(m.Attachments) > 0 {
			l.submitFiles(place, b, author, roles, text, m.ID, m.Attachments)
			return
		}
		l.submitText(ctx, b, author, roles, cmp.Or(text, "Hello!"), m.ID, whereOf(m))
	})
}

// errNotHere refuses what comes from a place the allow lists leave out.
var errNotHere = places.NotAllowed("I'm not set up to answer here; ask the server's admins to add this channel")

// gate is the listener's say on every input before the session's
// (places.Config.Gate): the place must be one the allow lists let in.
// The role the listener vouches for (Input.Grant) needs the person's
// server roles, so the inbound paths set it (submit).
func (l *Listener) gate(ctx context.Context, b switchboard.Binding, _ *switchboard.Input) error {
	return l.permitted(ctx, b.Address)
}

// permitted is the one check of where the bot answers (allowed_guilds,
// allowed_channels) that every inbound path passes, submit included: a
// DM always; in a server, the channel or the thread's parent must be
// allowed. A channel that cannot be read is not (it fails closed).
func (l *Listener) permitted(ctx context.Context, channelID string) error {
	if acc := l.accessNow(); len(acc.AllowedGuilds) == 0 && len(acc.AllowedChannels) == 0 {
		return nil
	}
	ch, err := l.channel(ctx, channelID)
	if err != nil {
		l.log.Warn("discord: the channel of an input could not be read; refused", "channel", channelID, "err", err)
		return errNotHere
	}
	if ch.GuildID != "" && !l.allowed(ch.GuildID, ch.ID, ch.ParentID) {
		return errNotHere
	}
	return nil
}

// placeOf finds the binding of the place a message belongs to, opening one
// for a mention or a DM.
func (l *Listener) placeOf(ctx context.Context, m *discordgo.Message, mentioned bool, text string, author switchboard.Author, roles []string) (switchboard.Binding, error) {
	if m.GuildID == "" { // a DM: always a conversation
		return l.places.SessionAt(ctx, m.ChannelID, author, true)
	}
	if b, err := l.places.Binding(ctx, m.ChannelID); err == nil {
		return b, l.permitted(ctx, m.ChannelID)
	} else if !errors.Is(err, switchboard.ErrNotFound) {
		return b, err
	}
	if !mentioned {
		return switchboard.Binding{}, switchboard.ErrNotFound // not for us
	}
	ch, err := l.channel(ctx, m.ChannelID)
	if err != nil {
		return switchboard.Binding{}, err
	}
	if !l.allowed(m.GuildID, ch.ID, ch.ParentID) {
		return switchboard.Binding{}, errNotHere
	}
	if ch.IsThread() { // a mention in a thread someone else opened: it becomes one
		return l.places.SessionAt(ctx, ch.ID, author, true)
	}
	if b, err := l.places.Binding(ctx, m.ID); err == nil {
		return b, nil // replayed: the thread is open already
	}
	th, err := l.dg.MessageThreadStartComplex(m.ChannelID, m.ID, &discordgo.ThreadStart{
		Name: threadName(text), AutoArchiveDuration: 1440,
	}, discordgo.WithContext(ctx))
	if err != nil {
		return switchboard.Binding{}, err
	}
	return l.places.SessionAt(ctx, th.ID, author, true)
}

// threadName is a thread's title from the message that opened it.
func threadName(text string) string {
	name := strings.Join(strings.Fields(text), " ")
	if name == "" {
		name = "Conversation"
	}
	if r := []rune(name); len(r) > 90 {
		name = string(r[:89]) + "…"
	}
	return name
}

// submitText gives a place's session a message or command; a refusal is
// told to its writer.
func (l *Listener) submitText(ctx context.Context, b switchboard.Binding, author switchboard.Author, roles []string, text, clientID string, where []string) {
	in := switchboard.Input{Author: author, Text: text, ClientID: clientID, Grant: string(l.role(author.ID, roles)), Where: where}
	if err := l.places.SubmitText(ctx, b, in); err != nil {
		l.refused(ctx, b.Address, author.ID, err)
	}
}

// submit gives b's session an input from a person with their server
// roles: the role the listener vouches for goes with it (Input.Grant) for
// the session to weigh (sessions' access.go); the layer checks the place
// (gate) once more.
func (l *Listener) submit(ctx context.Context, b switchboard.Binding, in switchboard.Input, roles []string) error {
	in.Grant = string(l.role(in.Author.ID, roles))
	_, err := l.places.Submit(ctx, b, in)
	return err
}

// joinCommand is /switchboard join code: in a DM or a thread, that place
// shows the shared conversation; in a channel, a mention opens a thread.
// It is answered at once, privately, and the answer is filled in once the
// place is proven and the code used.
func (l *Listener) joinCommand(ctx context.Context, i *discordgo.Interaction, place string, author switchboard.Author, sub *discordgo.ApplicationCommandInteractionDataOption, httpOut func(*discordgo.InteractionResponse)) {
	code := ""
	for _, o := range sub.Options {
		if o.Name == "code" {
			code = strings.TrimSpace(o.StringValue())
		}
	}
	l.respond(ctx, i, deferredEphemeral, httpOut)
	answer := func(text string) {
		if _, err := l.dg.InteractionResponseEdit(i, &discordgo.WebhookEdit{Content: &text, AllowedMentions: noMentions}, discordgo.WithContext(ctx)); err != nil {
			l.log.Warn("discord: answering /switchboard join", "err", err)
		}
	}
	l.places.Run(place, func() {
		if i.GuildID != "" {
			ch, err := l.channel(ctx, place)
			switch {
			case err != nil:
				l.log.Info("discord: join refused: the channel could not be read", "place", place, "err", err)
				answer("Not joined, and the code is not used: " + cannotPost(err))
				return
			case !l.allowed(i.GuildID, ch.ID, ch.ParentID):
				answer("Sorry, I'm not set up to answer here. Ask the server's admins to add this channel.")
				return
			case !ch.IsThread():
				answer("To join in a channel, mention me with the code: @Switchboard /join " + code + " (a thread opens from your message).")
				return
			}
		}
		if role, ok := l.join(ctx, place, i.GuildID == "", author, code, answer, false); ok {
			answer(fmt.Sprintf("Joined as %s: this place now shows the shared conversation.", places.WithArticle(role)))
		}
	})
}

// joinFrom joins the shared session a code names from a message: a DM
// joins itself, a mention in a channel opens a thread from the message and
// that thread joins. What goes wrong is said in a reply to the message,
// or, once the place holds the bot's line, in that line.
func (l *Listener) joinFrom(ctx context.Context, m *discordgo.Message, code string, author switchboard.Author) {
	place := m.ChannelID
	if m.GuildID != "" {
		ch, err := l.channel(ctx, m.ChannelID)
		if err != nil || !l.allowed(m.GuildID, ch.ID, ch.ParentID) {
			l.reply(ctx, m, "Sorry, I'm not set up to answer here. Ask the server's admins to add this channel.")
			return
		}
		if !ch.IsThread() {
			th, err := l.dg.MessageThreadStartComplex(m.ChannelID, m.ID, &discordgo.ThreadStart{Name: "Shared conversation", AutoArchiveDuration: 1440}, discordgo.WithContext(ctx))
			if err != nil {
				l.log.Info("discord: a thread for a joined conversation", "channel", m.ChannelID, "err", err)
				l.reply(ctx, m, "Not joined, and the code is not used: I could not open a thread here. "+cannotPost(err))
				return
			}
			place = th.ID
		}
	}
	if _, ok := l.join(ctx, place, m.GuildID == "", author, code, func(text string) { l.reply(ctx, m, text) }, true); ok {
		l.log.Info("discord: joined a shared session", "place", place)
	}
}

// join shows in a place the shared session an invite code names
// (places' Join). tell says what went wrong; public says it in the line
// instead.
func (l *Listener) join(ctx context.Context, place string, dm bool, author switchboard.Author, code string, tell func(string), public bool) (collaboration.Role, bool) {
	where := places.Where{Address: place, Direct: dm, Noun: "place"}
	return l.places.Join(ctx, where, author, code, joinLine{l, place}, tell, public)
}

// joinLine is a join's line in a Discord place (places.Line).
type joinLine struct {
	l     *Listener
	place string
}

func (j joinLine) CannotPost(err error) string { return cannotPost(err) }

func (j joinLine) Post(ctx context.Context, text string) (string, error) {
	m, err := j.l.dg.ChannelMessageSendComplex(j.place, &discordgo.MessageSend{Content: text, AllowedMentions: noMentions}, discordgo.WithContext(ctx))
	if err != nil {
		return "", err
	}
	return m.ID, nil
}

func (j joinLine) Edit(ctx context.Context, id, text string) {
	if _, err := j.l.dg.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: id, Channel: j.place, Content: &text, AllowedMentions: noMentions}, discordgo.WithContext(ctx)); err != nil {
		j.l.log.Warn("discord: edit a line", "place", j.place, "err", err)
	}
}

func (j joinLine) Delete(ctx context.Context, id string) {
	if err := j.l.dg.ChannelMessageDelete(j.place, id, discordgo.WithContext(ctx)); err != nil {
		j.l.log.Warn("discord: delete a line", "place", j.place, "err", err)
	}
}

// cannotPost says in plain words why Discord refused a post of the bot's,
// naming Discord's reason.
func cannotPost(err error) string {
	var re *discordgo.RESTError
	if !errors.As(err, &re) || re.Message == nil {
		return "I could not post here just now; try again in a moment."
	}
	reason := fmt.Sprintf("(Discord: %d %s)", re.Message.Code, re.Message.Message)
	switch re.Message.Code {
	case discordgo.ErrCodeMissingAccess:
		return "I cannot see this channel " + reason + ". A server admin can let me view it (in a private thread: add me to it)."
	case discordgo.ErrCodeMissingPermissions:
		return "I may not post here " + reason + ". A server admin can give me Send Messages in Threads, and Create Public Threads to open one, in this channel."
	case discordgo.ErrCodeUnknownChannel:
		return "This channel no longer exists " + reason + "."
	case discordgo.ErrCodePerformedOperationOnArchivedThread:
		return "This thread is archived " + reason + "; open it again, or mention me in a channel."
	case discordgo.ErrCodeCannotSendMessagesToThisUser:
		return "Discord does not let me write to you " + reason + "."
	}
	return "I cannot post here " + reason + "."
}

// refused tells the writer why their input was not taken: privately when
// an interaction of theirs allows it, else in the place.
func (l *Listener) refused(ctx context.Context, place, user string, err error) {
	l.log.Info("discord: input refused", "place", place, "user", user, "err", err)
	l.tell(ctx, place, user, mdEscape(places.Refused(err)))
}

// tell shows text to one person: an ephemeral follow-up of their latest
// interaction in the place (valid 15 minutes), else a message there that
// names them.
func (l *Listener) tell(ctx context.Context, place, user, text string) {
	l.tokensMu.Lock()
	tok, ok := l.tokens[place+"/"+user]
	l.tokensMu.Unlock()
	if ok && time.Since(tok.at) < 14*time.Minute {
		_, err := l.dg.FollowupMessageCreate(tok.i, false, &discordgo.WebhookParams{
			Content: text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions,
		}, discordgo.WithContext(ctx))
		if err == nil {
			return
		}
		l.log.Info("discord: ephemeral follow-up failed, writing in the place", "err", err)
	}
	_, err := l.dg.ChannelMessageSendComplex(place, &discordgo.MessageSend{
		Content: "<@" + user + "> " + text, AllowedMentions: &discordgo.MessageAllowedMentions{Users: []string{user}},
	}, discordgo.WithContext(ctx))
	if err != nil {
		l.log.Warn("discord: telling someone", "place", place, "err", err)
	}
}

// reply answers a message in its channel.
func (l *Listener) reply(ctx context.Context, m *discordgo.Message, text string) {
	_, err := l.dg.ChannelMessageSendComplex(m.ChannelID, &discordgo.MessageSend{
		Content: text, Reference: m.Reference(), AllowedMentions: noMentions,
	}, discordgo.WithContext(ctx))
	if err != nil {
		l.log.Warn("discord: reply", "channel", m.ChannelID, "err", err)
	}
}

// respond answers an interaction: over HTTP when it came that way (httpOut
// set), else with the callback endpoint. Every interaction is answered
// first, within Discord's 3 seconds, and worked on after.
func (l *Listener) respond(ctx context.Context, i *discordgo.Interaction, resp *discordgo.InteractionResponse, httpOut func(*discordgo.InteractionResponse)) {
	if httpOut != nil {
		httpOut(resp)
		return
	}
	if err := l.dg.InteractionRespond(i, resp, discordgo.WithContext(ctx)); err != nil {
		l.log.Warn("discord: answering an interaction", "type", i.Type, "err", err)
	}
}

func ephemeral(text string) *discordgo.InteractionResponse {
	return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions}}
}

var deferredUpdate = &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}

// deferredEphemeral answers an interaction with "thinking…" shown to its
// user alone, filled in later (InteractionResponseEdit).
var deferredEphemeral = &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
	Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}}

// onInteraction handles a click, a modal's submission or /switchboard.
func (l *Listener) onInteraction(ctx context.Context, i *discordgo.Interaction, httpOut func(*discordgo.InteractionResponse)) {
	user, member := i.User, i.Member
	if member != nil && member.User != nil {
		user = member.User
	}
	if user == nil {
		return
	}
	author := authorOf(user, member)
	var roles []string
	if member != nil {
		roles = member.Roles
	}
	place := i.ChannelID
	l.tokensMu.Lock()
	if len(l.tokens) > 10_000 {
		clear(l.tokens)
	}
	l.tokens[place+"/"+user.ID] = interactionToken{i: i, at: time.Now()}
	l.tokensMu.Unlock()

	if i.Type != discordgo.InteractionPing {
		// Clicks, forms and commands from a place the allow lists leave
		// out are refused like messages are (submit checks again).
		if err := l.permitted(ctx, place); err != nil {
			l.respond(ctx, i, ephemeral("Sorry, I'm not set up to answer here. Ask the server's admins to add this channel."), httpOut)
			return
		}
	}
	switch i.Type {
	case discordgo.InteractionPing:
		l.respond(ctx, i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponsePong}, httpOut)
	case discordgo.InteractionMessageComponent:
		data := i.MessageComponentData()
		if actionID, ok := strings.CutPrefix(data.CustomID, "sb:form:"); ok {
			l.openForm(ctx, i, place, actionID, httpOut) // a modal must be the first answer
			return
		}
		l.respond(ctx, i, deferredUpdate, httpOut)
		l.places.Run(place, func() {
			b, err := l.places.SessionAt(ctx, place, author, false)
			if err != nil {
				l.tell(ctx, place, user.ID, "This conversation is no longer here; mention me to start a new one.")
				return
			}
			in, ok := l.componentInput(ctx, b.SessionID, data, author)
			if !ok {
				return
			}
			if err := l.submit(ctx, b, in, roles); err != nil {
				l.refused(ctx, place, user.ID, err)
			}
		})
	case discordgo.InteractionModalSubmit:
		data := i.ModalSubmitData()
		actionID, ok := strings.CutPrefix(data.CustomID, "sb:modal:")
		l.respond(ctx, i, deferredUpdate, httpOut)
		if !ok {
			return
		}
		l.places.Run(place, func() {
			b, err := l.places.SessionAt(ctx, place, author, false)
			if err != nil {
				return
			}
			ui, err := l.places.Card(ctx, b.SessionID, actionID)
			if err != nil || ui.Form == nil {
				l.tell(ctx, place, user.ID, "That form is no longer available.")
				return
			}
			in := switchboard.Input{Kind: switchboard.InputAction, Author: author, ActionID: actionID, Value: formValues(*ui.Form, data)}
			if err := l.submit(ctx, b, in, roles); err != nil {
				l.refused(ctx, place, user.ID, err)
			}
		})
	case discordgo.InteractionApplicationCommand:
		l.onCommand(ctx, i, place, author, roles, httpOut)
	}
}

// componentInput turns a click or a choice into the session's input.
func (l *Listener) componentInput(ctx context.Context, sessionID string, data discordgo.MessageComponentInteractionData, author switchboard.Author) (switchboard.Input, bool) {
	id := data.CustomID
	for prefix, approved := range map[string]bool{"sb:approve:": true, "sb:deny:": false, "sb:always:": true} {
		if conf, ok := strings.CutPrefix(id, prefix); ok {
			return places.Decided(author, conf, approved, prefix == "sb:always:"), true
		}
	}
	if actionID, ok := strings.CutPrefix(id, "sb:btn:"); ok {
		return switchboard.Input{Kind: switchboard.InputAction, Author: author, ActionID: actionID}, true
	}
	if strings.HasPrefix(id, "sb:sel:") && len(data.Values) == 1 {
		return l.places.Choice(ctx, sessionID, data.Values[0], author)
	}
	return switchboard.Input{}, false
}

// openForm answers a form's button with its modal.
func (l *Listener) openForm(ctx context.Context, i *discordgo.Interaction, place, actionID string, httpOut func(*discordgo.InteractionResponse)) {
	b, err := l.places.Binding(ctx, place)
	if err != nil {
		l.respond(ctx, i, ephemeral("This conversation is no longer here; mention me to start a new one."), httpOut)
		return
	}
	ui, err := l.places.Card(ctx, b.SessionID, actionID)
	if err != nil || ui.Form == nil {
		l.respond(ctx, i, ephemeral("That form is no longer available."), httpOut)
		return
	}
	l.respond(ctx, i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: formModal(*ui.Form, ui.Title, actionID)}, httpOut)
}

// commandHelp is /switchboard help, for the caller alone.
const commandHelp = "Mention me in a channel and I answer in a thread opened from your message; " +
	"in that thread I answer every message, and in a DM every message too. Tool calls that need consent " +
	"show Approve and Deny buttons (or write `approve` / `deny`).\n" +
	"`/switchboard guide|tools|usage|stop|reset` in a thread or DM runs that command in its conversation.\n" +
	"Sharing: `/switchboard share` gives you an invite code (choose the role, uses and expiry), `unshare` withdraws the codes, " +
	"`who` lists the people and `approvals` the last decisions (to you alone), `role` changes someone's role (the owner), " +
	"`leave` takes the conversation out of this thread or DM. `memory` lists what I remember about you and `forget` deletes one (to you alone). " +
	"`/switchboard join code` in a DM or a thread shows a shared conversation there; " +
	"in a channel, mention me with `/join CODE`."

// onCommand handles /switchboard <subcommand>: help for the caller alone,
// the rest in the conversation of the thread or DM it was used in.
func (l *Listener) onCommand(ctx context.Context, i *discordgo.Interaction, place string, author switchboard.Author, roles []string, httpOut func(*discordgo.InteractionResponse)) {
	data := i.ApplicationCommandData()
	if data.Name != "switchboard" || len(data.Options) == 0 {
		l.respond(ctx, i, ephemeral(commandHelp), httpOut)
		return
	}
	sub := data.Options[0]
	if sub.Name == "help" {
		l.respond(ctx, i, ephemeral(commandHelp), httpOut)
		return
	}
	if sub.Name == "join" {
		l.joinCommand(ctx, i, place, author, sub, httpOut)
		return
	}
	text := commandText(sub)
	b, err := l.places.Binding(ctx, place)
	if err != nil && i.GuildID != "" {
		l.respond(ctx, i, ephemeral("Use this in a thread I answer in, or mention me to start one."), httpOut)
		return
	}
	if places.Private(sub.Name) {
		l.respond(ctx, i, ephemeral(text+": answered below, to you alone."), httpOut)
	} else {
		l.respond(ctx, i, ephemeral(text+": answered in this conversation, for everyone in it."), httpOut)
	}
	l.places.Run(place, func() {
		if err != nil { // a DM without a conversation yet
			if b, err = l.places.SessionAt(ctx, place, author, true); err != nil {
				return
			}
		}
		l.submitText(ctx, b, author, roles, text, "cmd:"+i.ID, nil)
	})
}

// commandText is a subcommand as the session's command: "/share viewer
// uses 3 expires 2h", "/role Dan viewer".
func commandText(sub *discordgo.ApplicationCommandInteractionDataOption) string {
	opts := map[string]*discordgo.ApplicationCommandInteractionDataOption{}
	for _, o := range sub.Options {
		opts[o.Name] = o
	}
	arg := func(name string) string {
		o := opts[name]
		switch {
		case o == nil:
			return ""
		case o.Type == discordgo.ApplicationCommandOptionInteger:
			return strconv.FormatInt(o.IntValue(), 10)
		}
		return strings.Join(strings.Fields(o.StringValue()), " ")
	}
	text := "/" + sub.Name
	add := func(words ...string) {
		if w := strings.TrimSpace(strings.Join(words, " ")); w != "" && words[len(words)-1] != "" {
			text += " " + w
		}
	}
	switch sub.Name {
	case "guide":
		add(arg("name"))
	case "share":
		add(arg("role"))
		add("uses", arg("uses"))
		add("expires", arg("expires"))
	case "role":
		add(arg("name"), arg("role"))
	case "forget":
		add(arg("id"))
	}
	return text
}

// whereOf are the ids a message's place is known by besides its own
// (switchboard.Input.Where), for routing a conversation it starts
// (docs/routing.md): in a server, the server and the channel the message
// was written in; a thread it opens is the place.
func whereOf(m *discordgo.Message) []string {
	if m.GuildID == "" {
		return nil
	}
	return []string{m.GuildID, m.ChannelID}
}
