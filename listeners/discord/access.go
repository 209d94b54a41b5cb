package discord

import "slices"

// Access is where the bot answers and who approves in every
// conversation: Config's AllowedGuilds, AllowedChannels and Approvers as
// they are now. SetAccess changes them while the listener runs (the
// gateway's configuration reload); each inbound event reads them once.
type Access struct {
	AllowedGuilds, AllowedChannels, Approvers []string
}

// SetAccess puts a in force from the next inbound event on. A
// conversation under way is not touched: a place no longer allowed is
// refused its next message, as any place not allowed is.
func (l *Listener) SetAccess(a Access) {
	a.AllowedGuilds, a.AllowedChannels, a.Approvers = slices.Clone(a.AllowedGuilds), slices.Clone(a.AllowedChannels), slices.Clone(a.Approvers)
	l.access.Store(&a)
}

func (l *Listener) accessNow() *Access { return l.access.Load() }
