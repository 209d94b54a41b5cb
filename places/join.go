package places

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/sessions"
)

// joinRecap is how many of the last messages a joined place is shown.
const joinRecap = 6

// Where is the place a join is for: its address, whether it is one
// person's (a DM: their own join may switch it to another conversation),
// and what the chat app calls it to people ("thread", "DM", "place").
type Where struct {
	Address string
	Direct  bool
	Noun    string
}

// A Line is the line a join posts in the place, which proves that the bot
// may post there and then says who joined. The chat app implements it.
type Line interface {
	// Post posts text in the place and returns the line's id.
	Post(ctx context.Context, text string) (id string, err error)
	// Edit replaces the line's text; Delete takes it away. Each logs
	// what fails.
	Edit(ctx context.Context, id, text string)
	Delete(ctx context.Context, id string)
	// CannotPost says in a sentence why the platform refused Post,
	// naming the platform's reason and the fix.
	CannotPost(err error) string
}

// Join shows in a place the shared session an invite code names, the code
// making the person a member with its role. Whether it may is the session
// manager's decision (never a thread that shows another conversation);
// then the place is proven by posting the line that then says who joined:
// a place the bot cannot post in is refused with the platform's reason.
// Either way the code is not spent. tell says what went wrong; public
// says it in the line instead, where the person's message is answered in
// the open anyway. It reports the role the person joined with.
func (l *Layer) Join(ctx context.Context, at Where, author switchboard.Author, code string, line Line, tell func(string), public bool) (collaboration.Role, bool) {
	var id string
	var postErr error
	prove := func(ctx context.Context) error {
		id, postErr = line.Post(ctx, "Opening a shared conversation here…")
		return postErr
	}
	p := sessions.Place{Channel: l.cfg.Channel, Address: at.Address, Direct: at.Direct}
	sessionID, role, err := l.cfg.Sessions.JoinPlace(ctx, code, author, p, joinRecap, prove)
	const notUsed = "Not joined, and the code is not used: "
	if postErr != nil {
		l.log.Info(l.cfg.Channel+": join refused: the bot cannot post in the place", "place", at.Address, "err", postErr)
		tell(notUsed + line.CannotPost(postErr))
		return "", false
	}
	if err == nil {
		line.Edit(ctx, id, fmt.Sprintf("%s joined a shared conversation as %s: this %s shows it from now on, beginning with its last messages.",
			l.cfg.Words.Strong(author.DisplayName()), WithArticle(role), at.Noun))
		return role, true
	}
	var why string
	switch {
	case errors.Is(err, sessions.ErrPlaceTaken):
		why = notUsed + sessions.Reason(err, "this thread shows another conversation") + ". " + l.cfg.Words.JoinHint
	case errors.Is(err, sessions.ErrTooManyPlaces):
		why = notUsed + "this conversation is already shown in as many places as it may be. " +
			"Once it is taken out of one (/switchboard leave there), join in this " + at.Noun + " again."
	case sessionID != "":
		l.log.Error(l.cfg.Channel+": bind a joined session", "place", at.Address, "err", err)
		why = fmt.Sprintf("%s joined as %s, but this %s could not show the conversation; join here again.",
			l.cfg.Words.Strong(author.DisplayName()), WithArticle(role), at.Noun)
	default:
		reason, known := JoinRefusal(err)
		if !known {
			l.log.Error(l.cfg.Channel+": join by invite", "place", at.Address, "err", err)
		}
		why = "Not joined: " + reason + "."
	}
	switch {
	case id == "":
		tell(why)
	case public:
		line.Edit(ctx, id, why)
	default:
		line.Delete(ctx, id)
		tell(why)
	}
	return "", false
}
