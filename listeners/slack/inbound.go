package slack

// Inbound: Slack events, clicks and commands become session inputs.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
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
			at: place{channel: e.Channel, threadTS: thread}, start: true, files: e.Files,
		})
	case *slackevents.MessageEvent:
		switch e.SubType {
		case "", "thread_broadcast", "file_share":
		default:
			return // edits, deletions, joins: not messages to answer
		}
		in := incoming{user: e.User, botID: e.BotID, text: e.Text, ts: e.TimeStamp}
		if e.Message != nil {
			in.files = e.Message.Files // shared with the message (subtype file_share)
		}
		switch {
		case e.ChannelType == "im" || isDM(e.Channel):
			// A DM needs no mention; its threads (the AI-app surface makes
			// one per conversation) are conversations of their own, but
			// for the thread of a message an answer was streamed under:
			// a reply there goes on with the DM's conversation.
			in.at, in.start = place{channel: e.Channel, threadTS: e.ThreadTimeStamp}, true
			if e.ThreadTimeStamp != "" && l.asks.threadRoot(l.address(place{channel: e.Channel}), e.ThreadTimeStamp) {
				in.at.threadTS, in.under = "", e.ThreadTimeStamp
			}
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
	if len(l.cfg.Suggestions) == 0 || !l.allowed(th.ChannelID, th.UserID) {
		return
	}
	params := slackapi.AssistantThreadsSetSuggestedPromptsParameters{
		ChannelID: th.ChannelID, ThreadTS: th.ThreadTimeStamp, Title: places.Clip(l.cfg.Greeting, 150),
	}
	for _, p := range l.cfg.Suggestions {
		params.Prompts = append(params.Prompts, slackapi.AssistantThreadsPrompt{Title: places.Clip(p, 75), Message: p})
	}
	if err := l.retry(ctx, func() error { return l.api.SetAssistantThreadsSuggestedPromptsContext(ctx, params) }); err != nil {
		l.log.Warn("slack: suggested prompts", "channel", th.ChannelID, "err", err)
	}
}

// incoming is a message someone wrote.
type incoming struct {
	user, botID, text, ts string
	at                    place
	// under is the thread a reply at a DM's top level was written in (see
	// asks.threadRoot): its answer streams there too.
	under string
	// start: the message may start a session (a mention, a DM); a thread
	// reply without a mention only continues one.
	start bool
	// files are those shared with the message (files.go).
	files []slackapi.File
}

// onMessage submits a message to its place's session, creating and
// binding the session when the message starts one.
func (l *Listener) onMessage(ctx context.Context, in incoming) {
	if in.user == "" || in.user == l.botUserID || in.botID != "" {
		return // ourselves, or another bot: bots talking to bots never end
	}
	addr := l.address(in.at)
	l.places.Run(addr, func() {
		if !l.allowed(in.at.channel, in.user) {
			if in.start {
				l.ephemeral(ctx, in.at, in.user, notAllowed)
			}
			return
		}
		author, isBot := l.users.author(ctx, in.user)
		if isBot {
			return
		}
		text := strings.TrimSpace(strings.ReplaceAll(in.text, "<@"+l.botUserID+">", ""))
		if code, ok := places.JoinCode(text); ok && (in.start || isDM(in.at.channel)) {
			l.join(ctx, in.at, author, code, l.ephemeralTo(in.at, in.user))
			return
		}
		b, err := l.places.SessionAt(ctx, addr, author, in.start)
		if err != nil {
			if !errors.Is(err, switchboard.ErrNotFound) {
				l.log.Error("slack: session for a message", "place", addr, "err", err)
				l.ephemeral(ctx, in.at, in.user, "Sorry, I could not open this conversation. Please try again.")
			}
			return
		}
		if len(in.files) == 0 {
			text = places.TypedAnswer(cmp.Or(text, "Hello!"))
		}
		l.remember(in.at, in.user)
		// The message's ts is its id: an event Slack redelivers, or the
		// app_mention and message events of one message, answer it once.
		l.asks.note(addr, in.at, in.user, text, cmp.Or(in.under, in.ts)) // a stream answers under it
		if len(in.files) > 0 {
			l.submitFiles(addr, b, in.at, author, text, in.at.channel+":"+in.ts, in.files)
			return
		}
		l.submitText(ctx, b, in.at, author, text, in.at.channel+":"+in.ts)
	})
}

// submitText gives a place's session a message or command; a refusal is
// told to its writer alone.
func (l *Listener) submitText(ctx context.Context, b switchboard.Binding, at place, author switchboard.Author, text, clientID string) {
	if err := l.places.SubmitText(ctx, b, switchboard.Input{Author: author, Text: text, ClientID: clientID}); err != nil {
		l.refused(ctx, at, author.ID, err)
	}
}

// gate is the listener's say on every input from Slack — message,
// command, click, form — before the session's (places.Config.Gate): the
// allow lists are checked once more (a click on a card in a thread its
// clicker may not write in is refused like their message would be), and
// a configured approver's role goes with the input (Input.Grant) for the
// session to weigh (sessions' access.go).
func (l *Listener) gate(_ context.Context, b switchboard.Binding, in *switchboard.Input) error {
	at, err := parseAddress(b.Address)
	if err != nil {
		return err
	}
	if !l.allowed(at.channel, in.Author.ID) {
		return errNotAllowed
	}
	in.Grant = string(l.role(in.Author.ID))
	return nil
}

// join puts this place into the shared session an invite code names
// (places' Join): the place (a new thread, a DM) then shows that session,
// beginning with a short recap. tell answers the person privately.
func (l *Listener) join(ctx context.Context, at place, author switchboard.Author, code string, tell func(context.Context, string)) {
	if !l.allowed(at.channel, author.ID) {
		tell(ctx, notAllowed)
		return
	}
	where := places.Where{Address: l.address(at), Direct: isDM(at.channel), Noun: placeKind(at)}
	l.places.Join(ctx, where, author, code, joinLine{l, at}, func(text string) { tell(ctx, text) }, false)
}

// joinLine is a join's line in a Slack place (places.Line).
type joinLine struct {
	l  *Listener
	at place
}

func (j joinLine) Post(ctx context.Context, text string) (string, error) {
	return j.l.postLine(ctx, j.at, text)
}
func (j joinLine) Delete(ctx context.Context, ts string) { j.l.deleteLine(ctx, j.at, ts) }
func (j joinLine) CannotPost(err error) string           { return j.l.cannotPost(err) }

func (j joinLine) Edit(ctx context.Context, ts, text string) {
	if err := j.l.retry(ctx, func() error {
		_, _, _, err := j.l.api.UpdateMessageContext(ctx, j.at.channel, ts, slackapi.MsgOptionText(text, false))
		return err
	}); err != nil {
		j.l.log.Warn("slack: the joined line", "channel", j.at.channel, "err", err)
	}
}

// postLine posts a line of the listener's own (no event's metadata) in a
// place and returns its ts.
func (l *Listener) postLine(ctx context.Context, at place, text string) (string, error) {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(text, false)}
	if at.threadTS != "" {
		opts = append(opts, slackapi.MsgOptionTS(at.threadTS))
	}
	var ts string
	err := l.retry(ctx, func() (err error) {
		_, ts, err = l.api.PostMessageContext(ctx, at.channel, opts...)
		return err
	})
	return ts, err
}

func (l *Listener) deleteLine(ctx context.Context, at place, ts string) {
	if err := l.retry(ctx, func() error {
		_, _, err := l.api.DeleteMessageContext(ctx, at.channel, ts)
		return err
	}); err != nil {
		l.log.Warn("slack: delete a line", "channel", at.channel, "err", err)
	}
}

// cannotPost says in plain words why Slack refused a post of the bot's,
// naming Slack's reason.
func (l *Listener) cannotPost(err error) string {
	var se slackapi.SlackErrorResponse
	if !errors.As(err, &se) {
		return "I could not post here just now; try again in a moment."
	}
	switch se.Err {
	case "not_in_channel":
		return "I am not in this channel, so I cannot post in it (Slack: not_in_channel). Add me with /invite @" + l.botName + " and try again."
	case "channel_not_found":
		return "I cannot see this conversation, so I cannot post in it (Slack: channel_not_found): it is private and I am not in it, " +
			"or a direct message between other people. Add me to it, or write join CODE to me in a direct message."
	case "is_archived":
		return "This channel is archived: nothing can be posted in it (Slack: is_archived)."
	case "restricted_action":
		return "Only some people may post in this channel, and I am not one of them (Slack: restricted_action)."
	}
	return "I cannot post here (Slack: " + se.Err + ")."
}

// ephemeralTo tells one person something in a place, privately: where
// Slack refuses even that (a channel only some may post in), in their DM
// with the bot.
func (l *Listener) ephemeralTo(at place, user string) func(context.Context, string) {
	return func(ctx context.Context, text string) {
		opts := []slackapi.MsgOption{slackapi.MsgOptionText(text, false)}
		if at.threadTS != "" {
			opts = append(opts, slackapi.MsgOptionTS(at.threadTS))
		}
		err := l.retry(ctx, func() error {
			_, err := l.api.PostEphemeralContext(ctx, at.channel, user, opts...)
			return err
		})
		if err == nil {
			return
		}
		im, _, _, oerr := l.api.OpenConversationContext(ctx, &slackapi.OpenConversationParameters{Users: []string{user}})
		if oerr == nil {
			if _, err = l.postLine(ctx, place{channel: im.ID}, text); err == nil {
				return
			}
		}
		l.log.Warn("slack: telling someone privately", "channel", at.channel, "err", err, "open_dm_err", oerr)
	}
}

// toResponseURL answers a slash command privately through its
// response_url, which works wherever the command was typed, even where
// the bot may not post.
func (l *Listener) toResponseURL(url string) func(context.Context, string) {
	return func(ctx context.Context, text string) {
		err := slackapi.PostWebhookCustomHTTPContext(ctx, url, l.http, &slackapi.WebhookMessage{Text: text, ResponseType: "ephemeral"})
		if err != nil {
			l.log.Warn("slack: answering a command", "err", err)
		}
	}
}

func placeKind(at place) string {
	if at.threadTS == "" {
		return "DM"
	}
	return "thread"
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

// refused tells the writer, and only them, why their input was not taken.
func (l *Listener) refused(ctx context.Context, at place, user string, err error) {
	l.log.Info("slack: input refused", "channel", at.channel, "user", user, "err", err)
	l.ephemeral(ctx, at, user, mrkdwnEscape(places.Refused(err)))
}

// notAllowed is what a person the allow lists leave out is told
// (allowed_channels, allowed_users).
const notAllowed = "Sorry, I'm not set up to answer you here. Ask the person who runs me to add you or this channel."

// errNotAllowed refuses an input from a person or channel the allow lists
// leave out, with that sentence.
var errNotAllowed = places.NotAllowed("I'm not set up to answer you here; ask the person who runs me to add you or this channel")

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
	if !l.allowed(at.channel, user) {
		l.ephemeral(ctx, at, user, notAllowed)
		return nil
	}
	for _, a := range cb.ActionCallback.BlockActions {
		// A signed request can be sent again within Slack's five minutes
		// (a replay): each click is taken once.
		if !l.clicks.first(user + "/" + a.ActionID + "/" + a.ActionTs) {
			l.log.Info("slack: a click seen before, ignored", "user", user, "action", a.ActionID)
			continue
		}
		if strings.HasPrefix(a.ActionID, "sb_form_") {
			// A form is a modal, opened now: the click's trigger_id is
			// good for 3 seconds.
			l.openForm(ctx, cb, at, a)
			continue
		}
		l.places.Run(addr, func() {
			author, _ := l.users.author(ctx, user)
			b, err := l.places.SessionAt(ctx, addr, author, false)
			if err != nil {
				l.ephemeral(ctx, at, user, "This conversation is no longer here; start a new one by mentioning me.")
				return
			}
			in, ok := l.actionInput(ctx, b.SessionID, a, author)
			if !ok {
				return
			}
			if _, err := l.places.Submit(ctx, b, in); err != nil {
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
		return places.Decided(author, a.Value, a.ActionID != denyActionID, a.ActionID == alwaysActionID), true
	case strings.HasPrefix(a.ActionID, "sb_btn_"):
		return switchboard.Input{Kind: switchboard.InputAction, Author: author, ActionID: a.Value}, true
	case strings.HasPrefix(a.ActionID, "sb_sel_"):
		return l.places.Choice(ctx, sessionID, a.SelectedOption.Value, author)
	}
	return switchboard.Input{}, false
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
	b, err := l.places.Binding(ctx, addr)
	if err != nil {
		l.ephemeral(ctx, at, cb.User.ID, "This conversation is no longer here; start a new one by mentioning me.")
		return
	}
	ui, err := l.places.Card(ctx, b.SessionID, a.Value)
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
	if !l.clicks.first(user + "/view/" + cb.View.ID) {
		l.log.Info("slack: a form submission seen before, ignored", "user", user, "view", cb.View.ID)
		return
	}
	if !l.allowed(at.channel, user) {
		l.ephemeral(ctx, at, user, notAllowed)
		return
	}
	l.places.Run(meta.Address, func() {
		author, _ := l.users.author(ctx, user)
		b, err := l.places.SessionAt(ctx, meta.Address, author, false)
		if err != nil {
			return
		}
		ui, err := l.places.Card(ctx, b.SessionID, meta.ActionID)
		if err != nil || ui.Form == nil {
			return
		}
		in := switchboard.Input{Kind: switchboard.InputAction, Author: author, ActionID: meta.ActionID,
			Value: formSubmission(*ui.Form, cb.View.State.Values)}
		if _, err := l.places.Submit(ctx, b, in); err != nil {
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
		return reply(notAllowed)
	}
	at, ok := place{channel: cmd.ChannelID}, true
	if code, isJoin := places.JoinCode(text); isJoin {
		if !isDM(cmd.ChannelID) {
			return reply("To join here, mention me with the code: @" + l.botName + " /join " + code + " (a thread opens under your message).")
		}
		user, tell := cmd.UserID, l.ephemeralTo(at, cmd.UserID)
		if cmd.ResponseURL != "" {
			tell = l.toResponseURL(cmd.ResponseURL)
		}
		l.places.Run(l.address(at), func() {
			author, _ := l.users.author(ctx, user)
			l.join(ctx, at, author, code, tell)
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
	l.places.Run(addr, func() {
		author, _ := l.users.author(ctx, user)
		b, err := l.places.SessionAt(ctx, addr, author, isDM(at.channel))
		if err != nil {
			l.ephemeral(ctx, at, user, "That conversation is no longer here; start a new one by mentioning me.")
			return
		}
		l.submitText(ctx, b, at, author, "/"+text, "cmd:"+cmd.TriggerID)
	})
	if at.threadTS != "" {
		if name, _, _ := strings.Cut(text, " "); places.Private(name) {
			return reply("/" + text + ": answered in your last thread here, to you alone.")
		}
		return reply("/" + text + ": answered in your last thread here.")
	}
	return nil
}

const commandHelp = "Mention me in a channel to start a conversation in a thread, or write to me directly; " +
	"in a thread I answer every message. Tool calls that need consent show Approve and Deny buttons.\n" +
	"`/switchboard <command>` runs a command in the conversation you last wrote in here (or this DM): " +
	"`help`, `guide [name]`, `tools`, `usage`, `pending`, `stop`, `reset`. In a thread, mention me with the command: `@switchboard /usage`.\n" +
	"Sharing: `share [viewer|member|approver] [uses N] [expires 24h]` gives you an invite code, `unshare` withdraws the codes, " +
	"`who` lists the people, `approvals` the last decisions (both to you alone), `role <name> <role>` changes someone's role (owner), " +
	"`leave` takes the conversation out of that thread. `memory` lists what I remember about you and `forget <id>` deletes one (to you alone). " +
	"`join CODE` in a DM with me shows a shared conversation there; " +
	"in a channel, mention me with `/join CODE`."

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

// onceSet remembers keys for a while, so that what Slack (or a replay of
// its signed request) delivers again is taken once: a click is known by
// its user, action and action_ts, a form by its view. Bounded: past
// maxOnce keys, those older than the window go; past that, all.
type onceSet struct {
	mu   sync.Mutex
	seen map[string]time.Time
	now  func() time.Time
}

const (
	onceWindow = 10 * time.Minute // Slack takes a signature for 5
	maxOnce    = 50_000
)

func newOnceSet() *onceSet { return &onceSet{seen: map[string]time.Time{}, now: time.Now} }

// first reports whether key is new within the window, and remembers it.
func (o *onceSet) first(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if t, ok := o.seen[key]; ok && now.Sub(t) < onceWindow {
		return false
	}
	if len(o.seen) >= maxOnce {
		for k, t := range o.seen {
			if now.Sub(t) >= onceWindow {
				delete(o.seen, k)
			}
		}
		if len(o.seen) >= maxOnce {
			clear(o.seen)
		}
	}
	o.seen[key] = now
	return true
}
