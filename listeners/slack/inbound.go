package slack

// Inbound: Slack events, clicks and commands become session inputs.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/tools"
)

// place is where a session is shown: a thread in a channel, a DM, or a
// thread in a DM (an AI-app assistant thread is one).
type place struct {
	channel  string
	threadTS string // "" for a DM's top level: replies go to the conversation
}

// address is the place in bindings and session keys: "T1:C1:1700000000.000100",
// or "T1:D1" for a DM.
func (l *Listener) address(p place) string {
	if p.threadTS == "" {
		return l.teamID + ":" + p.channel
	}
	return l.teamID + ":" + p.channel + ":" + p.threadTS
}

// parseAddress is the inverse of address.
func parseAddress(a string) (place, error) {
	parts := strings.Split(a, ":")
	switch len(parts) {
	case 2:
		return place{channel: parts[1]}, nil
	case 3:
		return place{channel: parts[1], threadTS: parts[2]}, nil
	}
	return place{}, fmt.Errorf("slack: not a place: %q", a)
}

// isDM reports whether a channel id is a direct message conversation.
func isDM(channelID string) bool { return strings.HasPrefix(channelID, "D") }

// onEventsAPI handles one Events API callback, already acknowledged.
func (l *Listener) onEventsAPI(ctx context.Context, ev slackevents.EventsAPIEvent) {
	if ev.Type != slackevents.CallbackEvent {
		return
	}
	switch e := ev.InnerEvent.Data.(type) {
	case *slackevents.AppMentionEvent:
		if isDM(e.Channel) {
			return // the message event answers it
		}
		thread := e.ThreadTimeStamp
		if thread == "" {
			thread = e.TimeStamp // a mention at the top level starts a thread under it
		}
		l.onMessage(ctx, incoming{
			user: e.User, botID: e.BotID, text: e.Text, ts: e.TimeStamp,
			at: place{channel: e.Channel, threadTS: thread}, start: true,
		})
	case *slackevents.MessageEvent:
		switch e.SubType {
		case "", "thread_broadcast", "file_share":
		default:
			return // edits, deletions, joins: not messages to answer
		}
		in := incoming{user: e.User, botID: e.BotID, text: e.Text, ts: e.TimeStamp}
		switch {
		case e.ChannelType == "im" || isDM(e.Channel):
			// A DM needs no mention; its threads (the AI-app surface makes
			// one per conversation) are conversations of their own.
			in.at, in.start = place{channel: e.Channel, threadTS: e.ThreadTimeStamp}, true
		case e.ThreadTimeStamp != "" && !strings.Contains(e.Text, "<@"+l.botUserID+">"):
			// A reply in a thread: answered when the thread is a session.
			// With a mention, app_mention answers it (same ts, same input).
			in.at = place{channel: e.Channel, threadTS: e.ThreadTimeStamp}
		default:
			return // a channel message without a mention is not for us
		}
		l.onMessage(ctx, in)
	case *slackevents.AssistantThreadStartedEvent:
		l.onAssistantThread(ctx, e.AssistantThread)
	}
}

// onAssistantThread offers the guide's suggested prompts in a new AI-app
// thread, under its greeting.
func (l *Listener) onAssistantThread(ctx context.Context, th slackevents.AssistantThread) {
	if len(l.cfg.Suggestions) == 0 {
		return
	}
	params := slackapi.AssistantThreadsSetSuggestedPromptsParameters{
		ChannelID: th.ChannelID, ThreadTS: th.ThreadTimeStamp, Title: truncateText(l.cfg.Greeting, 150),
	}
	for _, p := range l.cfg.Suggestions {
		params.Prompts = append(params.Prompts, slackapi.AssistantThreadsPrompt{Title: truncateText(p, 75), Message: p})
	}
	if err := l.retry(ctx, func() error { return l.api.SetAssistantThreadsSuggestedPromptsContext(ctx, params) }); err != nil {
		l.log.Warn("slack: suggested prompts", "channel", th.ChannelID, "err", err)
	}
}

// incoming is a message someone wrote.
type incoming struct {
	user, botID, text, ts string
	at                    place
	// start: the message may start a session (a mention, a DM); a thread
	// reply without a mention only continues one.
	start bool
}

// onMessage submits a message to its place's session, creating and
// binding the session when the message starts one.
func (l *Listener) onMessage(ctx context.Context, in incoming) {
	if in.user == "" || in.user == l.botUserID || in.botID != "" {
		return // ourselves, or another bot: bots talking to bots never end
	}
	addr := l.address(in.at)
	l.run(addr, func() {
		if !l.allowed(in.at.channel, in.user) {
			if in.start {
				l.ephemeral(ctx, in.at, in.user, "Sorry, I'm not set up to answer you here. Ask the person who runs me to add you or this channel.")
			}
			return
		}
		author, isBot := l.users.author(ctx, in.user)
		if isBot {
			return
		}
		text := strings.TrimSpace(strings.ReplaceAll(in.text, "<@"+l.botUserID+">", ""))
		if code, ok := joinCode(text); ok && (in.start || isDM(in.at.channel)) {
			l.join(ctx, in.at, author, code)
			return
		}
		b, err := l.sessionAt(ctx, addr, author, in.start)
		if err != nil {
			if !errors.Is(err, switchboard.ErrNotFound) {
				l.log.Error("slack: session for a message", "place", addr, "err", err)
				l.ephemeral(ctx, in.at, in.user, "Sorry, I could not open this conversation. Please try again.")
			}
			return
		}
		if text == "" {
			text = "Hello!"
		}
		text = typedAnswer(text)
		l.remember(in.at, in.user)
		// The message's ts is its id: an event Slack redelivers, or the
		// app_mention and message events of one message, answer it once.
		l.submitText(ctx, b, in.at, author, text, in.at.channel+":"+in.ts)
	})
}

// submitText gives a place's session a message or command. /reset starts
// a new conversation there: the place is bound to it once it exists.
func (l *Listener) submitText(ctx context.Context, b switchboard.Binding, at place, author switchboard.Author, text, clientID string) {
	r, err := l.sessions.Submit(ctx, b.SessionID, switchboard.Input{
		Kind: switchboard.InputText, Author: author, Text: text, ClientID: clientID, Place: Channel + ":" + b.Address,
	})
	if err != nil {
		l.refused(ctx, at, author.ID, err)
		return
	}
	if !isReset(text) {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := r.Wait(wctx); err != nil || r.NewSession == "" {
		return // refused (not the owner), told by the session
	}
	if _, err := l.sessions.Bind(ctx, Channel, b.Address, r.NewSession); err != nil {
		l.log.Error("slack: bind the new conversation", "place", b.Address, "err", err)
	}
}

// typedAnswer lets a person answer an approval by writing, where buttons
// are blocked (some clients, some workspaces' policies): "approve",
// "deny" or "approve always" alone is the command. Slack itself takes a
// message starting with "/" as a slash command, so the words go bare.
func typedAnswer(text string) string {
	switch strings.ToLower(strings.TrimRight(strings.TrimSpace(text), ".!")) {
	case "approve", "approved":
		return "/approve"
	case "deny", "denied":
		return "/deny"
	case "approve always", "always allow", "always":
		return "/approve always"
	}
	return text
}

// joinCode reads "/join CODE" (or "join CODE").
func joinCode(text string) (string, bool) {
	f := strings.Fields(text)
	if len(f) == 2 && (strings.EqualFold(f[0], "/join") || strings.EqualFold(f[0], "join")) {
		return f[1], true
	}
	return "", false
}

// join puts this place into the shared session an invite code names: the
// code makes the person a member with its role, and the place (a new
// thread, a DM) then shows that session, beginning with a short recap.
func (l *Listener) join(ctx context.Context, at place, author switchboard.Author, code string) {
	sessionID, role, err := l.sessions.Join(ctx, code, author)
	if err != nil {
		msg := "That invite code did not work. Ask for a new one."
		for _, known := range []error{switchboard.ErrInviteUnknown, switchboard.ErrInviteExpired, switchboard.ErrInviteUsedUp, switchboard.ErrInviteRevoked, sessions.ErrTooManyJoins} {
			if errors.Is(err, known) {
				msg = "Not joined: " + known.Error() + "."
			}
		}
		l.ephemeral(ctx, at, author.ID, msg)
		return
	}
	if _, err := l.sessions.BindWithRecap(ctx, Channel, l.address(at), sessionID, joinRecap); err != nil {
		l.log.Error("slack: bind a joined session", "place", l.address(at), "err", err)
		l.ephemeral(ctx, at, author.ID, "Joined, but this place could not show the conversation; try again.")
		return
	}
	l.ephemeral(ctx, at, author.ID, fmt.Sprintf("Joined as %s: this %s now shows the shared conversation.", role, placeKind(at)))
}

// joinRecap is how many of the last messages a joined place is shown.
const joinRecap = 6

func placeKind(at place) string {
	if at.threadTS == "" {
		return "conversation"
	}
	return "thread"
}

// isReset reports whether text is the /reset command.
func isReset(text string) bool {
	name, _, _ := strings.Cut(strings.TrimSpace(text), " ")
	return strings.EqualFold(name, "/reset")
}

// remember notes the thread a person last wrote in, per channel: a slash
// command (which Slack sends without its thread) goes there.
func (l *Listener) remember(at place, user string) {
	l.lastMu.Lock()
	defer l.lastMu.Unlock()
	if len(l.last) > 10_000 {
		clear(l.last) // bounded; forgetting only costs a hint to mention
	}
	l.last[at.channel+"/"+user] = at
}

func (l *Listener) lastPlace(channel, user string) (place, bool) {
	l.lastMu.Lock()
	defer l.lastMu.Unlock()
	p, ok := l.last[channel+"/"+user]
	return p, ok
}

// sessionAt returns the binding of a place; with create, a place without
// one gets a new session owned by author, bound to it.
func (l *Listener) sessionAt(ctx context.Context, addr string, author switchboard.Author, create bool) (switchboard.Binding, error) {
	b, err := l.sessions.Binding(ctx, Channel, addr)
	if err == nil {
		if role := l.role(author.ID); role != "" {
			// A configured approver approves in every thread.
			if err := l.grant(ctx, b.SessionID, author); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	if !errors.Is(err, switchboard.ErrNotFound) || !create {
		return b, err
	}
	// The key finds the session again if we stopped between creating and
	// binding it.
	sub, err := l.sessions.Attach(ctx, sessions.AttachOptions{Key: Channel + ":" + addr, Author: author, AfterSeq: -1})
	if err != nil {
		return b, err
	}
	sub.Close()
	return l.sessions.Bind(ctx, Channel, addr, sub.Ready.Session)
}

// grant makes a configured approver one in a session.
func (l *Listener) grant(ctx context.Context, sessionID string, a switchboard.Author) error {
	sub, err := l.sessions.Attach(ctx, sessions.AttachOptions{SessionID: sessionID, Author: a, Role: l.role(a.ID), AfterSeq: -1})
	if err != nil {
		return err
	}
	sub.Close()
	return nil
}

// refused tells the writer, and only them, why their input was not taken.
func (l *Listener) refused(ctx context.Context, at place, user string, err error) {
	msg := "Sorry, that did not go through. Please try again."
	switch {
	case errors.Is(err, sessions.ErrBusy):
		msg = "I'm still working on the previous messages here; send this again in a moment."
	case errors.Is(err, sessions.ErrForbidden):
		msg = "You can't do that in this conversation."
	}
	l.log.Warn("slack: input refused", "channel", at.channel, "user", user, "err", err)
	l.ephemeral(ctx, at, user, msg)
}

// onInteraction handles a click or a modal's submission; what it returns
// is the acknowledgement's payload (a modal's validation errors).
func (l *Listener) onInteraction(ctx context.Context, cb slackapi.InteractionCallback) any {
	if cb.Type == slackapi.InteractionTypeViewSubmission && cb.View.CallbackID == formCallbackID {
		l.onFormSubmitted(ctx, cb)
		return nil
	}
	if cb.Type != slackapi.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		return nil
	}
	at := place{channel: cb.Channel.ID, threadTS: cb.Message.ThreadTimestamp}
	if at.threadTS == "" && !isDM(at.channel) {
		at.threadTS = cb.Message.Timestamp
	}
	addr := l.address(at)
	user := cb.User.ID
	for _, a := range cb.ActionCallback.BlockActions {
		if strings.HasPrefix(a.ActionID, "sb_form_") {
			// A form is a modal, opened now: the click's trigger_id is
			// good for 3 seconds.
			l.openForm(ctx, cb, at, a)
			continue
		}
		l.run(addr, func() {
			author, _ := l.users.author(ctx, user)
			b, err := l.sessionAt(ctx, addr, author, false)
			if err != nil {
				l.ephemeral(ctx, at, user, "This conversation is no longer here; start a new one by mentioning me.")
				return
			}
			in, ok := l.actionInput(ctx, b.SessionID, a, author)
			if !ok {
				return
			}
			in.Place = Channel + ":" + b.Address
			if _, err := l.sessions.Submit(ctx, b.SessionID, in); err != nil {
				l.refused(ctx, at, user, err)
			}
		})
	}
	return nil
}

// actionInput turns a click into the session's input: an approval, or a
// card's button or select (see uiRef).
func (l *Listener) actionInput(ctx context.Context, sessionID string, a *slackapi.BlockAction, author switchboard.Author) (switchboard.Input, bool) {
	switch {
	case a.ActionID == approveActionID, a.ActionID == denyActionID, a.ActionID == alwaysActionID:
		in := switchboard.Input{Kind: switchboard.InputConfirm, Author: author, ConfirmationID: a.Value, Approved: a.ActionID != denyActionID}
		if a.ActionID == alwaysActionID {
			in.Scope = switchboard.ScopeSession
		}
		return in, true
	case strings.HasPrefix(a.ActionID, "sb_btn_"):
		return switchboard.Input{Kind: switchboard.InputAction, Author: author, ActionID: a.Value}, true
	case strings.HasPrefix(a.ActionID, "sb_sel_"):
		actionID, pos, _ := strings.Cut(a.SelectedOption.Value, "|")
		i, err := strconv.Atoi(pos)
		ui, uerr := l.card(ctx, sessionID, actionID)
		if err != nil || uerr != nil || ui.Select == nil || i < 0 || i >= len(ui.Select.Options) {
			l.log.Warn("slack: a choice from a card that is gone", "session", sessionID, "value", a.SelectedOption.Value)
			return switchboard.Input{}, false
		}
		return switchboard.Input{Kind: switchboard.InputAction, Author: author, ActionID: actionID, Value: ui.Select.Options[i].Value}, true
	}
	return switchboard.Input{}, false
}

// card finds the stored card an action id belongs to.
func (l *Listener) card(ctx context.Context, sessionID, actionID string) (switchboard.UI, error) {
	uiID, _, _, err := tools.ParseActionID(actionID)
	if err != nil {
		return switchboard.UI{}, err
	}
	return l.sessions.FindUI(ctx, sessionID, uiID)
}

// formMeta is what a form's modal carries (private_metadata) to its
// submission: where it was opened and which form it is.
type formMeta struct {
	Address  string `json:"a"`
	ActionID string `json:"f"`
}

// openForm opens a card's form as a modal.
func (l *Listener) openForm(ctx context.Context, cb slackapi.InteractionCallback, at place, a *slackapi.BlockAction) {
	addr := l.address(at)
	b, err := l.sessions.Binding(ctx, Channel, addr)
	if err != nil {
		l.ephemeral(ctx, at, cb.User.ID, "This conversation is no longer here; start a new one by mentioning me.")
		return
	}
	ui, err := l.card(ctx, b.SessionID, a.Value)
	if err != nil || ui.Form == nil {
		l.ephemeral(ctx, at, cb.User.ID, "That form is no longer available.")
		return
	}
	meta, _ := json.Marshal(formMeta{Address: addr, ActionID: a.Value})
	view := formModal(*ui.Form, ui.Title, string(meta))
	if _, err := l.api.OpenViewContext(ctx, cb.TriggerID, view); err != nil {
		l.log.Warn("slack: open a form", "place", addr, "err", err)
		l.ephemeral(ctx, at, cb.User.ID, "Sorry, the form could not be opened; click the button again.")
	}
}

// onFormSubmitted sends a modal's values to the session as the form's
// action.
func (l *Listener) onFormSubmitted(ctx context.Context, cb slackapi.InteractionCallback) {
	var meta formMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil {
		l.log.Warn("slack: a form submission without its origin", "err", err)
		return
	}
	at, err := parseAddress(meta.Address)
	if err != nil {
		return
	}
	user := cb.User.ID
	l.run(meta.Address, func() {
		author, _ := l.users.author(ctx, user)
		b, err := l.sessionAt(ctx, meta.Address, author, false)
		if err != nil {
			return
		}
		ui, err := l.card(ctx, b.SessionID, meta.ActionID)
		if err != nil || ui.Form == nil {
			return
		}
		in := switchboard.Input{Kind: switchboard.InputAction, Author: author, ActionID: meta.ActionID, Place: Channel + ":" + b.Address,
			Value: formSubmission(*ui.Form, cb.View.State.Values)}
		if _, err := l.sessions.Submit(ctx, b.SessionID, in); err != nil {
			l.refused(ctx, at, user, err)
		}
	})
}

// onCommand handles /switchboard <command>: the command goes to the
// conversation of the DM it was typed in, or in a channel to the thread the
// person last wrote in (Slack sends slash commands without their thread);
// the session answers there. What the acknowledgement says is for the
// caller alone.
func (l *Listener) onCommand(ctx context.Context, cmd slackapi.SlashCommand) any {
	reply := func(text string) any { return map[string]any{"response_type": "ephemeral", "text": text} }
	text := strings.TrimSpace(cmd.Text)
	if text == "" || text == "help" && !isDM(cmd.ChannelID) {
		return reply(commandHelp)
	}
	if !l.allowed(cmd.ChannelID, cmd.UserID) {
		return reply("Sorry, I'm not set up to answer you here.")
	}
	at, ok := place{channel: cmd.ChannelID}, true
	if code, isJoin := joinCode(text); isJoin {
		if !isDM(cmd.ChannelID) {
			return reply("To join here, mention me with the code: @" + l.botName + " /join " + code + " (a thread opens under your message).")
		}
		user := cmd.UserID
		l.run(l.address(at), func() {
			author, _ := l.users.author(ctx, user)
			l.join(ctx, at, author, code)
		})
		return nil
	}
	if !isDM(cmd.ChannelID) {
		if at, ok = l.lastPlace(cmd.ChannelID, cmd.UserID); !ok {
			return reply("Which conversation? Mention me in its thread with the command: @" + l.botName + " /" + text)
		}
	}
	addr := l.address(at)
	user := cmd.UserID
	l.run(addr, func() {
		author, _ := l.users.author(ctx, user)
		b, err := l.sessionAt(ctx, addr, author, isDM(at.channel))
		if err != nil {
			l.ephemeral(ctx, at, user, "That conversation is no longer here; start a new one by mentioning me.")
			return
		}
		l.submitText(ctx, b, at, author, "/"+text, "cmd:"+cmd.TriggerID)
	})
	if at.threadTS != "" {
		return reply("/" + text + ": answered in your last thread here.")
	}
	return nil
}

const commandHelp = "Mention me in a channel to start a conversation in a thread, or write to me directly; " +
	"in a thread I answer every message. Tool calls that need consent show Approve and Deny buttons.\n" +
	"`/switchboard <command>` runs a command in the conversation you last wrote in here (or this DM): " +
	"`help`, `guide [name]`, `tools`, `usage`, `pending`, `stop`, `reset`. In a thread, mention me with the command: `@switchboard /usage`."

// ephemeral shows text to one person in a place.
func (l *Listener) ephemeral(ctx context.Context, at place, user, text string) {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(text, false)}
	if at.threadTS != "" {
		opts = append(opts, slackapi.MsgOptionTS(at.threadTS))
	}
	if _, err := l.api.PostEphemeralContext(ctx, at.channel, user, opts...); err != nil {
		l.log.Warn("slack: ephemeral message", "channel", at.channel, "err", err)
	}
}
