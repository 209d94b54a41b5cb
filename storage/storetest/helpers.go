package storetest

// What the suite's tests share, and a store's own tests too (the exported
// ones): making sessions and events, and telling what a publisher heard.

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// NewSession stores a session with the given id and key (none when key is
// ""), created at a fixed time, and returns it as stored.
func NewSession(t testing.TB, db Store, id, key string) switchboard.Session {
	t.Helper()
	s := switchboard.Session{
		ID: id, Key: key, Guide: "assistant", Owner: "stdin:me",
		CreatedAt: time.Date(2026, 11, 22, 10, 30, 0, 123_000_000, time.UTC),
	}
	if err := db.CreateSession(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// writeTurn is WriteTurn for tests that only care whether it failed.
func writeTurn(ctx context.Context, db Store, sessionID string, w switchboard.TurnWrite) error {
	_, err := db.WriteTurn(ctx, sessionID, w)
	return err
}

// Event is the numbered event seq of session, of type typ with data as its
// JSON, made by the assistant agent at a fixed time seq milliseconds into
// the day.
func Event(session string, seq int64, typ switchboard.EventType, data string) switchboard.Event {
	return switchboard.Event{
		Seq: seq, Session: session, Agent: "assistant", Type: typ, Data: json.RawMessage(data),
		Time: time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC).Add(time.Duration(seq) * time.Millisecond),
	}
}

// flush is Flush for tests that need the queued events stored.
func flush(t testing.TB, db Store) {
	t.Helper()
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Publication is one call of a publisher (AppendEvents' published,
// TurnWrite.Published): the events it was told of, and the error that
// kept them out (nil: they are stored).
type Publication struct {
	Events []switchboard.Event
	Err    error
}

// Recorder records the calls of a publisher, its Published. It is safe
// for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	pubs []Publication
}

// Published is the publisher: it records the call.
func (r *Recorder) Published(evs []switchboard.Event, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pubs = append(r.pubs, Publication{append([]switchboard.Event(nil), evs...), err})
}

// Calls are the calls recorded so far, in order.
func (r *Recorder) Calls() []Publication {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Publication(nil), r.pubs...)
}

// Seqs lists the seqs of the events published as stored (stored) or as
// refused (!stored), in the order they were told.
func (r *Recorder) Seqs(stored bool) []int64 {
	var out []int64
	for _, p := range r.Calls() {
		if (p.Err == nil) == stored {
			for _, e := range p.Events {
				out = append(out, e.Seq)
			}
		}
	}
	return out
}

// CheckPublished fails t if r was told an event was stored that is not
// (or is stored with other data), or that an event was refused that is
// stored with its data.
func CheckPublished(t *testing.T, db Store, r *Recorder) {
	t.Helper()
	stored := map[string]map[int64]string{}
	for _, p := range r.Calls() {
		for _, e := range p.Events {
			if stored[e.Session] == nil {
				got, err := db.EventsAfter(context.Background(), e.Session, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				stored[e.Session] = map[int64]string{}
				for _, g := range got {
					stored[e.Session][g.Seq] = string(g.Data)
				}
			}
			data, ok := stored[e.Session][e.Seq]
			switch {
			case p.Err == nil && (!ok || data != string(e.Data)):
				t.Errorf("%s/%d %s published as stored, but the store has %q", e.Session, e.Seq, e.Data, data)
			case p.Err != nil && ok && data == string(e.Data):
				t.Errorf("%s/%d %s published as refused (%v), but it is stored", e.Session, e.Seq, e.Data, p.Err)
			}
		}
	}
}
