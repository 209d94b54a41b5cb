package slack

import "slices"

// Access is who may talk to the bot, where, and who approves in every
// conversation: Config's AllowedChannels, AllowedUsers and Approvers as
// they are now. SetAccess changes them while the listener runs (the
// gateway's configuration reload); each inbound event reads them once.
type Access struct {
	AllowedChannels, AllowedUsers, Approvers []string
}

// SetAccess puts a in force from the next inbound event on. A
// conversation under way is not touched: a person no longer allowed is
// refused their next message, as anyone not allowed is.
func (l *Listener) SetAccess(a Access) {
	a.AllowedChannels, a.AllowedUsers, a.Approvers = slices.Clone(a.AllowedChannels), slices.Clone(a.AllowedUsers), slices.Clone(a.Approvers)
	l.access.Store(&a)
}

func (l *Listener) accessNow() *Access { return l.access.Load() }
