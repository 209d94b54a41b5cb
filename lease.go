package switchboard

import "errors"

// ErrLeaseLost is returned (wrapped) by a store for a conversation's write
// made by a replica that no longer runs the conversation: another replica
// took its lease over (the first paused too long, or lost the database
// for a while), and the database refused the stale write whole (fencing:
// docs/architecture.md, "Replicas"). The session that gets it stops
// running the conversation and shows what the new owner stores.
var ErrLeaseLost = errors.New("another replica runs this conversation now")
