package places

// Words: what people type in a place that means more than its text, and
// the sentences a refusal is told with — the same in every chat app.

import (
	"errors"
	"strings"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/sessions"
)

// TypedAnswer lets a person answer an approval by writing, where buttons
// are not at hand (some clients, some workspaces' policies): "approve",
// "deny" or "approve always" alone is the command. Slack takes a message
// starting with "/" as a slash command, so the words go bare.
func TypedAnswer(text string) string {
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

// JoinCode reads "/join CODE" (or "join CODE").
func JoinCode(text string) (string, bool) {
	f := strings.Fields(text)
	if len(f) == 2 && (strings.EqualFold(f[0], "/join") || strings.EqualFold(f[0], "join")) {
		return f[1], true
	}
	return "", false
}

// IsCommand reports whether text is the command /name.
func IsCommand(text, name string) bool {
	first, _, _ := strings.Cut(strings.TrimSpace(text), " ")
	return strings.EqualFold(first, "/"+name)
}

// Private reports whether a command's answer is for the one who asked
// alone: the session answers it with a notice for that person, so a chat
// app's acknowledgement says so.
func Private(command string) bool {
	switch strings.ToLower(command) {
	case "who", "approvals", "share", "unshare", "files", "memory", "memories", "forget":
		return true
	}
	return false
}

// NotAllowed is the error a chat app's Gate refuses an input with that
// its allow lists leave out; reason is told to the person ("I'm not set
// up to answer here; ask …").
func NotAllowed(reason string) error {
	return &sessions.Refusal{Kind: sessions.ErrForbidden, Reason: reason}
}

// Refused is why an input was not taken, as one sentence for its writer
// alone (plain text: the chat app escapes it).
func Refused(err error) string {
	switch {
	case errors.Is(err, sessions.ErrBusy):
		return "I'm still working on the previous messages here; send this again in a moment."
	case errors.Is(err, sessions.ErrForbidden):
		return "Not sent: " + sessions.Reason(err, "you may not do that in this conversation") + "."
	case errors.Is(err, sessions.ErrFileTooLarge), errors.Is(err, sessions.ErrFileType), errors.Is(err, sessions.ErrWorkspaceFull),
		errors.Is(err, sessions.ErrNoUploads), errors.Is(err, ErrNotDownloaded):
		return "Not sent: " + sessions.Reason(err, "your files could not be taken") + "."
	case errors.Is(err, sessions.ErrNotStored):
		return "Not sent: " + sessions.ErrNotStored.Error() + "."
	case errors.Is(err, sessions.ErrDraining):
		return "Not sent: " + sessions.ErrDraining.Error() + "."
	}
	return "Sorry, that did not go through. Please try again."
}

// JoinRefusal is why an invite code did not work, as the end of a
// sentence ("that invite code has expired"); known is false for a failure
// of the gateway's own, which the caller logs: its text is an error
// chain, not a sentence.
func JoinRefusal(err error) (reason string, known bool) {
	for _, e := range []error{switchboard.ErrInviteUnknown, switchboard.ErrInviteExpired, switchboard.ErrInviteUsedUp, switchboard.ErrInviteRevoked,
		sessions.ErrTooManyJoins, sessions.ErrFull, sessions.ErrClosed} {
		if errors.Is(err, e) {
			return e.Error(), true
		}
	}
	return "the gateway could not redeem the code; try again", false
}

// WithArticle is a role as a person holds it: "its owner", "an
// approver", "a viewer".
func WithArticle(r collaboration.Role) string {
	switch r {
	case collaboration.Owner:
		return "its owner"
	case collaboration.Approver:
		return "an approver"
	case "":
		return "a member"
	}
	return "a " + string(r)
}
