package switchboard

// The records a store hands out besides the conversation types above:
// what a search found, and what semantic recall embeds and stores. They
// are the store's contract, so that every implementation (the SQLite one in
// storage, another on PostgreSQL) speaks them without importing another.

// Hit is a message a search found, with its id.
type Hit struct {
	ID int64
	Found
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
