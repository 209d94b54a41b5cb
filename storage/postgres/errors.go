package postgres

import "github.com/switchboard-gw/switchboard"

// The sentinels the store's errors wrap are the domain's, as the SQLite
// store's are: callers test with errors.Is whichever store they have.
var (
	// ErrNotFound is returned (wrapped) for a missing record.
	ErrNotFound = switchboard.ErrNotFound
	// ErrExists is returned (wrapped) when a record would break a
	// uniqueness rule, such as a second session taking a key another holds.
	ErrExists = switchboard.ErrExists
	// ErrClosed is returned by calls made after Close.
	ErrClosed = switchboard.ErrClosed
	// ErrGap is returned (wrapped) for events that would leave a gap in a
	// session's numbering: an event is only stored after the one before it.
	ErrGap = switchboard.ErrGap
)
