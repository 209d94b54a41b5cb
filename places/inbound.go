package places

// Inbound: what every chat app does the same way with what people do in a
// place — a message, a command, a click, a form — once it has decoded it.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/tools"
)

// SessionAt returns the binding of a place; with create, a place without
// one gets a new session owned by author, bound to it.
func (l *Layer) SessionAt(ctx context.Context, address string, author switchboard.Author, create bool) (switchboard.Binding, error) {
	s := l.cfg.Sessions
	b, err := s.Binding(ctx, l.cfg.Channel, address)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, switchboard.ErrNotFound) || !create {
		return b, err
	}
	// The key finds the session again if we stopped between creating and
	// binding it.
	sub, err := s.Attach(ctx, sessions.AttachOptions{Key: l.cfg.Channel + ":" + address, Author: author, AfterSeq: -1})
	if err != nil {
		return b, err
	}
	sub.Close()
	return s.Bind(ctx, l.cfg.Channel, address, sub.Ready.Session)
}

// SetState keeps what a place's Room needs after a restart with its
// binding (Binding.State).
func (l *Layer) SetState(ctx context.Context, b switchboard.Binding, state string) error {
	return l.cfg.Sessions.SetState(ctx, b, state)
}

// Binding is the binding of a place.
func (l *Layer) Binding(ctx context.Context, address string) (switchboard.Binding, error) {
	return l.cfg.Sessions.Binding(ctx, l.cfg.Channel, address)
}

// Submit gives b's session an input written in b's place. Every input of
// the chat app — message, command, click, form — passes here: the chat
// app's Gate first (its allow lists, the role it vouches for), then the
// session's own decision (sessions' access.go). The place is noted as
// where its author asks (AskedIn).
func (l *Layer) Submit(ctx context.Context, b switchboard.Binding, in switchboard.Input) (r *sessions.Receipt, err error) {
	if tm := l.cfg.Telemetry; tm != nil {
		var end func(error)
		ctx, in.Trace, end = tm.Inbound(ctx, l.cfg.Channel, string(in.Kind), b.SessionID)
		defer func() { end(err) }()
	}
	if err := l.admit(ctx, b, &in); err != nil {
		return nil, err
	}
	return l.cfg.Sessions.Submit(ctx, b.SessionID, in)
}

// admit is what every input passes before the session's own decision:
// the chat app's Gate; then it is marked with its place, noted as where
// its author asks (AskedIn).
func (l *Layer) admit(ctx context.Context, b switchboard.Binding, in *switchboard.Input) error {
	if l.cfg.Gate != nil {
		if err := l.cfg.Gate(ctx, b, in); err != nil {
			return err
		}
	}
	in.Place = l.cfg.Channel + ":" + b.Address
	l.askedMu.Lock()
	if len(l.asked) > 10_000 {
		clear(l.asked) // bounded; forgetting shows an answer in every place
	}
	l.asked[b.SessionID+"/"+in.Author.ID] = b.Address
	l.askedMu.Unlock()
	return nil
}

// SubmitText gives a place's session a message or command (in.Text),
// after TypedAnswer. /reset starts a new conversation there: the place is
// bound to it once it exists. /leave takes the place out of the
// conversation: once the session has unbound it, the place is shown the
// session's line about it and no more. The error is Submit's: the chat
// app tells the writer (Refused).
func (l *Layer) SubmitText(ctx context.Context, b switchboard.Binding, in switchboard.Input) error {
	in.Kind, in.Text = switchboard.InputText, TypedAnswer(in.Text)
	r, err := l.Submit(ctx, b, in)
	if err != nil {
		return err
	}
	reset, leave := IsCommand(in.Text, "reset"), IsCommand(in.Text, "leave")
	if !reset && !leave {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	last, err := r.Wait(wctx)
	if err != nil {
		return nil // the session said why, or is stopping
	}
	if leave {
		if _, err := l.Binding(ctx, b.Address); errors.Is(err, switchboard.ErrNotFound) {
			l.UnfollowAfter(b.Address, last)
		}
		return nil
	}
	if r.NewSession == "" {
		return nil // refused (not the owner), told by the session
	}
	if _, err := l.cfg.Sessions.Bind(ctx, l.cfg.Channel, b.Address, r.NewSession); err != nil {
		l.log.Error(l.cfg.Channel+": bind the new conversation", "place", b.Address, "err", err)
	}
	return nil
}

// AskedIn is the place a person last gave a session input in through this
// chat app. A notice for them alone (a command's answer, a refusal) goes
// to every place of the session; it is shown in that place only.
func (l *Layer) AskedIn(sessionID, user string) (string, bool) {
	l.askedMu.Lock()
	defer l.askedMu.Unlock()
	a, ok := l.asked[sessionID+"/"+user]
	return a, ok
}

// Audience is who in b's place is shown an error event: everyone, one
// person of this chat app alone (user: a command's answer, their
// mistake), or no one (show false: someone else's, an answer shown where
// they asked, a redelivery's "already received", which is not the
// person's doing).
func (l *Layer) Audience(b switchboard.Binding, ev switchboard.Event, d *switchboard.ErrorData) (user string, show bool) {
	if d.Code == switchboard.ErrCodeDuplicate {
		return "", false
	}
	if d.For == "" || ev.Seq > 0 {
		return "", true
	}
	user, ours := strings.CutPrefix(d.For, l.cfg.Channel+":")
	if !ours {
		return "", false // someone else's, in another channel
	}
	if where, known := l.AskedIn(b.SessionID, user); known && where != b.Address {
		return "", false // an answer to what they asked in another place of this session
	}
	return user, true
}

// WrittenHere reports whether a person's message was written in b's
// place (it is there already) rather than elsewhere (shown with Byline).
func (l *Layer) WrittenHere(b switchboard.Binding, d *switchboard.MessageData) bool {
	return d.Place == l.cfg.Channel+":"+b.Address || d.Place == "" && d.Channel == l.cfg.Channel
}

// Byline is who wrote a message and where, "Carol · Slack", for a place
// other than where it was written.
func Byline(d *switchboard.MessageData) string {
	if d.Channel == "" {
		return d.Author
	}
	return d.Author + " · " + switchboard.ChannelName(d.Channel)
}

// Card finds the stored card an action id belongs to.
func (l *Layer) Card(ctx context.Context, sessionID, actionID string) (switchboard.UI, error) {
	uiID, _, _, err := tools.ParseActionID(actionID)
	if err != nil {
		return switchboard.UI{}, err
	}
	return l.cfg.Sessions.FindUI(ctx, sessionID, uiID)
}

// OptionValue is what a card's select option carries back when chosen,
// kept short for the platforms' limits whatever the model chose: the
// select's action id and the option's position, read back by Choice
// against the stored card.
func OptionValue(actionID string, i int) string { return actionID + "|" + strconv.Itoa(i) }

// Choice is the input of an option chosen from a card's select (value is
// OptionValue's), false for a card that is gone.
func (l *Layer) Choice(ctx context.Context, sessionID, value string, author switchboard.Author) (switchboard.Input, bool) {
	actionID, pos, _ := strings.Cut(value, "|")
	i, err := strconv.Atoi(pos)
	ui, uerr := l.Card(ctx, sessionID, actionID)
	if err != nil || uerr != nil || ui.Select == nil || i < 0 || i >= len(ui.Select.Options) {
		l.log.Warn(l.cfg.Channel+": a choice from a card that is gone", "session", sessionID, "value", value)
		return switchboard.Input{}, false
	}
	return switchboard.Input{Kind: switchboard.InputAction, Author: author, ActionID: actionID, Value: ui.Select.Options[i].Value}, true
}

// Decided is the input of an approval's button: approve (always: for
// the rest of the session) or deny.
func Decided(author switchboard.Author, confirmationID string, approved, always bool) switchboard.Input {
	in := switchboard.Input{Kind: switchboard.InputConfirm, Author: author, ConfirmationID: confirmationID, Approved: approved}
	if always {
		in.Scope = switchboard.ScopeSession
	}
	return in
}
