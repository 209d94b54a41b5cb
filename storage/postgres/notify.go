package postgres

// Notifications: how a replica learns, without polling, that another one
// stored a conversation's events or accepted an input for it.
//
// The transaction that stores a session's events runs pg_notify on the
// channel "switchboard" with the session and its last stored seq (one
// notification per part of the batch), and the one that accepts an input
// with the session and the inbox id. PostgreSQL delivers them when, and
// only if, the transaction commits, in commit order; a part that is rolled
// back takes its notification with it. A listener that was disconnected
// has missed whatever was sent meanwhile: Listen then says "resync".

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Kinds of Note.
const (
	// NoteEvents: a session's events through Seq are stored.
	NoteEvents = "events"
	// NoteInput: an input was accepted for Session (InboxID).
	NoteInput = "input"
	// NoteBound: a place was bound to Session (Bind): the replica that
	// runs it has the place's renderer follow it.
	NoteBound = "bound"
	// NoteMembers: Session's people changed (SetMember, RemoveMember):
	// every replica showing it reads them again.
	NoteMembers = "members"
	// NoteResync: notifications may have been missed (the listening
	// connection was lost and is back): re-read what matters.
	NoteResync = "resync"
)

// Note is one notification.
type Note struct {
	Kind    string
	Session string
	Seq     int64
	InboxID int64
}

// wireNote is a Note as sent: short keys, nothing empty.
type wireNote struct {
	Kind    string `json:"k"`
	Session string `json:"s,omitempty"`
	Seq     int64  `json:"q,omitempty"`
	InboxID int64  `json:"i,omitempty"`
}

// maxPayload is PostgreSQL's bound on a notification's payload (8000
// bytes, less one).
const maxPayload = 7999

// payload encodes n for pg_notify. One too long for PostgreSQL (a session
// id of thousands of bytes: the gateway makes short ones) is sent as a
// resync, which costs the listeners a re-read but loses nothing.
func payload(n Note) string {
	b, _ := json.Marshal(wireNote(n)) // strings and numbers: cannot fail
	if len(b) > maxPayload {
		b, _ = json.Marshal(wireNote{Kind: NoteResync})
	}
	return string(b)
}

// inputPayloadHead and inputPayloadTail surround the inbox id, which only
// the INSERT knows, in an input's payload.
func inputPayloadHead(sessionID string) string {
	head := `{"k":"input","s":` + quote(sessionID) + `,"i":`
	if len(head)+len(inputPayloadTail)+20 > maxPayload { // 20: an int64's digits
		return `{"k":"resync","i":`
	}
	return head
}

const inputPayloadTail = `}`

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// parseNote decodes a payload; one that is not a Note reads as a resync.
func parseNote(s string) Note {
	var w wireNote
	if json.Unmarshal([]byte(s), &w) != nil || w.Kind == "" {
		return Note{Kind: NoteResync}
	}
	if w.Kind == NoteResync {
		return Note{Kind: NoteResync}
	}
	return Note(w)
}

// Backoff between reconnections of Listen.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 10 * time.Second
)

// Listen holds one connection of its own (not the pool's) listening on
// the channel "switchboard", and calls fn with each notification, in the
// order the database delivers them, on the calling goroutine. When the
// connection is lost it logs an ERROR, reconnects with backoff, and once
// listening again calls fn with a Note of kind NoteResync, since what was
// sent in between is lost. It returns nil when ctx ends, and ErrClosed
// when the store is closed. fn should be quick: notifications wait while
// it runs (the server queues them, up to its notification queue's size).
func (db *DB) Listen(ctx context.Context, fn func(Note)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-db.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	cfg := db.pool.Config().ConnConfig.Copy()
	backoff := listenBackoffMin
	for {
		err := db.listen(ctx, cfg, fn, func() { backoff = listenBackoffMin })
		select {
		case <-db.closing:
			return fmt.Errorf("postgres: listen: %w", ErrClosed)
		default:
		}
		if ctx.Err() != nil {
			return nil
		}
		db.log.Error("postgres: the connection listening for other replicas' writes is lost; reconnecting (check that the database server runs and is reachable, and its max_connections)",
			"err", err, "retry_in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			continue // reports how it ended, above
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// listen connects, listens, and delivers notifications until the
// connection fails or ctx ends. The first thing fn is told once listening
// is to resync, the first time too: what was committed before LISTEN took
// effect (a replica starting while another writes, or after a lost
// connection) is heard by no one. Listening resets the backoff.
func (db *DB) listen(ctx context.Context, cfg *pgx.ConnConfig, fn func(Note), listening func()) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, `LISTEN switchboard`); err != nil {
		return err
	}
	listening()
	fn(Note{Kind: NoteResync})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		fn(parseNote(n.Payload))
	}
}
