package switchboard

import "errors"

// What a store hands out besides the conversation types of switchboard.go
// (what a search found, what semantic recall embeds and stores, how much
// the store holds) and why it refuses a call. They are the stores'
// contract, so every implementation (the SQLite one in storage, another
// on PostgreSQL) speaks them without importing another.

// Hit is a message a search found, with its id.
type Hit struct {
	ID int64
	Found
}

// Founds are the messages of hits, in their order.
func Founds(hits []Hit) []Found {
	if len(hits) == 0 {
		return nil
	}
	found := make([]Found, len(hits))
	for i, h := range hits {
		found[i] = h.Found
	}
	return found
}

// Unembedded is a message that has no vector of a space yet.
type Unembedded struct {
	ID        int64
	SessionID string
	Text      string
}

// Vector is a message's vector; an empty one marks a message with nothing
// to embed, so it is not offered again.
type Vector struct {
	MessageID int64
	Values    []float32
}

// MaxVectorDims bounds a stored vector's length (the longest embedding
// models make 3,072 numbers).
const MaxVectorDims = 16384

// Footprint is the size of what grows with use besides the conversations
// themselves.
type Footprint struct {
	// Memories are the memories people asked the assistant to keep
	// (remember), everyone's.
	Memories int64
	// Summaries are the compacted sessions' summaries: one a session.
	Summaries int64
	// IndexedMessages are the messages in the recall index.
	IndexedMessages int64
	// IndexBytes is the recall index on disk (in the SQLite store, FTS5's
	// tables, its own copy of the messages' text among them).
	IndexBytes int64
}

// Why a store refuses a write or a call (wrapped), whichever store it is.
var (
	// ErrExists: the record would break a uniqueness rule, such as a
	// second session taking a key another one holds.
	ErrExists = errors.New("already exists")
	// ErrGap: the events would leave a hole in a session's numbering: an
	// event is only stored after the one before it. After one event of a
	// session fails, every later one does too until the session numbers
	// from its last stored event again, so a client is never shown a
	// history with a hole in it.
	ErrGap = errors.New("events would leave a gap")
	// ErrClosed: the call was made after the store was closed.
	ErrClosed = errors.New("store is closed")
)
