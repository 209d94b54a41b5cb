package sessions

// Access: who may do what in a place, decided here for every channel.
//
// A listener decides only whom its platform lets in at all (its allow
// lists, the token a /ws client shows); from there on every input —
// message, command, click, form, approval, stop — passes Manager.Submit,
// which asks enter first, and every join of a place passes JoinPlace,
// which asks mayShowIn. The rules, with the sentences people are shown,
// are tabled in docs/security.md ("Who may act in a place"):
//
//   - One of the session's people acts with their role (collaboration).
//   - Anyone else who writes where the conversation started (a thread a
//     person opened by mentioning the bot) is a newcomer and joins with
//     the join role; in a place joined by invite (Binding.ByInvite) only
//     the people the conversation was shared with act, and the others are
//     refused, so a one-use viewer code opens a thread to nobody else.
//   - A role a channel vouches for (Input.Grant: a configured approver)
//     raises the person's role where the conversation started, never
//     lowers it, and never changes a role the owner set with /role
//     (pinned); in a place joined by invite roles come from the
//     conversation alone.
//   - A join never re-binds a thread that shows another conversation:
//     only a place one person writes in (a DM, the terminal) may be
//     pointed elsewhere by that person's own join, and /reset by an owner
//     or approver is the other way a place changes conversation.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
)

// ErrPlaceTaken: a join was asked for in a thread that shows another
// conversation; the listener says where a join works instead.
var ErrPlaceTaken = errors.New("this place already shows another conversation")

// Refusal is an input or a join the session did not take, with the
// sentence for the person it concerns: errors.Is matches Kind
// (ErrForbidden, ErrPlaceTaken), and a listener shows Reason as it is,
// never parsing it back out of Error.
type Refusal struct {
	Kind error
	// Reason is for the person: one sentence, no final period ("Dan is a
	// viewer in this session and may not write").
	Reason string
}

func (r *Refusal) Error() string { return r.Kind.Error() + ": " + r.Reason }
func (r *Refusal) Unwrap() error { return r.Kind }

func refuse(kind error, format string, args ...any) *Refusal {
	return &Refusal{Kind: kind, Reason: fmt.Sprintf(format, args...)}
}

// Reason is the sentence for the person in a refusal, or fallback when
// err carries none.
func Reason(err error, fallback string) string {
	if r, ok := errors.AsType[*Refusal](err); ok && r.Reason != "" {
		return r.Reason
	}
	return fallback
}

// Place is where a channel shows a conversation: a Slack or Discord
// thread or DM, the terminal.
type Place struct {
	Channel string // "slack"
	Address string // in the channel's own terms
	// Direct: one person writes there (a DM with the bot, the terminal),
	// so their own join may point it at another conversation. A thread in
	// a channel is not: once it shows a conversation, no join changes it.
	Direct bool
}

// notShared is what a person who is not one of a conversation's people
// is told where it was joined by invite.
const notShared = "this conversation was shared with particular people, and you are not one of them; ask its owner for an invite code"

// enter decides whether in's author may act in the session from where
// they are (in.Place), before anything else looks at the input, and
// brings in the role their channel vouches for (in.Grant). A Refusal
// says why not.
func (s *session) enter(ctx context.Context, in switchboard.Input) error {
	key := in.Author.Key()
	s.mu.Lock()
	cur, member := s.roles[key]
	pinned := s.pinned[key]
	s.mu.Unlock()
	if !member {
		cur = s.m.cfg.JoinRole
	}
	grant := collaboration.Role(in.Grant)
	if _, err := collaboration.ParseRole(in.Grant); err != nil || pinned || grant == collaboration.Owner || rank(grant) <= rank(cur) {
		grant = "" // a channel vouches for an approver at most, and never over the owner's word
	}
	if member && grant == "" {
		return nil // the common case: no look-up
	}
	invited, err := s.joinedByInvite(ctx, in.Place)
	switch {
	case err != nil:
		return err
	case invited && !member:
		s.m.cfg.Metrics.Refused("not_shared")
		return refuse(ErrForbidden, notShared)
	case invited || grant == "":
		return nil // where it was shared, roles come from the conversation alone
	}
	_, err = s.joinAndTell(ctx, in.Author, grant)
	return err
}

// joinedByInvite reports whether place shows the session by invite
// (Binding.ByInvite), where only its people act. A place whose binding
// cannot be read is refused (it fails closed), and so is one that shows
// another session now.
func (s *session) joinedByInvite(ctx context.Context, place string) (bool, error) {
	ch, addr, ok := strings.Cut(place, ":")
	if !ok {
		return false, nil // a channel that shows sessions in no place: the web
	}
	b, err := s.m.cfg.Store.Binding(ctx, ch, addr)
	switch {
	case errors.Is(err, switchboard.ErrNotFound):
		return false, nil // not bound (the terminal's own conversation)
	case err != nil:
		return false, fmt.Errorf("sessions: who may act in %s: %w", place, err)
	case b.SessionID != s.id:
		return false, refuse(ErrForbidden, "this place shows another conversation now")
	}
	return b.ByInvite, nil
}

// mayShowIn says whether a join may make place show sessionID: a place
// that shows nothing, or this session already, may; a direct place is
// its one person's to point elsewhere; a thread that shows another
// conversation may not (ErrPlaceTaken).
func (m *Manager) mayShowIn(ctx context.Context, sessionID string, p Place) error {
	b, err := m.cfg.Store.Binding(ctx, p.Channel, p.Address)
	switch {
	case errors.Is(err, switchboard.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("sessions: join %s: %w", p.Address, err)
	case b.SessionID == sessionID || p.Direct:
		return nil
	}
	m.cfg.Metrics.Refused("place_taken")
	return refuse(ErrPlaceTaken, "this thread already shows another conversation, and a join never changes what a thread shows")
}
