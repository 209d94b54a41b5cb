package postgres

// What the store's methods share with the domain package and, until the
// rest moves there, with package storage (the recall bound, the vector
// format).

import (
	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage"
)

// The sentinels the store's errors wrap, the domain's: callers test with
// errors.Is whichever store they have.
var (
	ErrNotFound = switchboard.ErrNotFound
	ErrExists   = switchboard.ErrExists
	ErrClosed   = switchboard.ErrClosed
	ErrGap      = switchboard.ErrGap
)

// The records some methods take and return.
type (
	Hit        = switchboard.Hit
	Vector     = switchboard.Vector
	Unembedded = switchboard.Unembedded
	Footprint  = switchboard.Footprint
)

// MaxQuery bounds a search's words; MaxVectorDims a stored vector's length.
const (
	MaxQuery      = storage.MaxQuery
	MaxVectorDims = switchboard.MaxVectorDims
)

// Vectors are stored as the SQLite store stores them.
var (
	encodeVector = storage.EncodeVector
	decodeVector = storage.DecodeVector
)
