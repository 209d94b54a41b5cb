package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/storage/storetest"
)

// Under LimitSize the store fails writes as a full disk would, without
// losing or half-storing anything; lifting the limit lets writes go on.
func TestLimitSizeFailsWritesLikeAFullDisk(t *testing.T) {
	ctx := context.Background()
	db, path := openFile(t)
	storetest.NewSession(t, db, "s1", "")
	big := strings.Repeat("x", 2000)

	// Some history before the limit.
	var r storetest.Recorder
	seq := int64(0)
	for range 5 {
		appendMsgs(t, db, "s1", user(big))
		seq++
		if err := db.AppendEvents(ctx, r.Published, ev("s1", seq, switchboard.EventMessage, fmt.Sprintf(`{"n":%d}`, seq))); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, db)

	if err := db.LimitSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Messages: stored until the file cannot grow.
	messages := int64(5)
	var msgErr error
	for range 10_000 {
		if msgErr = db.AppendMessages(ctx, "s1", []switchboard.Message{user(big)}, false); msgErr != nil {
			break
		}
		messages++
	}
	if msgErr == nil || !strings.Contains(msgErr.Error(), "full") {
		t.Fatalf("AppendMessages under a tiny limit = %v, want a full-disk error", msgErr)
	}
	// Events: likewise; a refused event leaves LastSeq where it was.
	var evErr error
	for range 10_000 {
		last, err := db.LastSeq(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if last != seq {
			t.Fatalf("LastSeq = %d, want %d", last, seq)
		}
		if err := db.AppendEvents(ctx, r.Published, ev("s1", seq+1, switchboard.EventMessage, fmt.Sprintf(`{"n":%d,"pad":%q}`, seq+1, big))); err != nil {
			t.Fatal(err)
		}
		if evErr = db.Flush(ctx); evErr != nil {
			break
		}
		seq++
	}
	if evErr == nil || !strings.Contains(evErr.Error(), "full") {
		t.Fatalf("events under a tiny limit: Flush = %v, want a full-disk error", evErr)
	}
	if last, err := db.LastSeq(ctx, "s1"); err != nil || last != seq {
		t.Errorf("LastSeq after a refused event = %d, %v; want %d", last, err, seq)
	}
	calls := r.Calls()
	if len(calls) == 0 {
		t.Fatal("published never called")
	}
	if lastCall := calls[len(calls)-1]; lastCall.Err == nil || !strings.Contains(lastCall.Err.Error(), "full") || lastCall.Events[0].Seq != seq+1 {
		t.Errorf("last publication = seq %d, %v; want %d refused with a full-disk error", lastCall.Events[0].Seq, lastCall.Err, seq+1)
	}
	// A whole turn is refused whole.
	_, err := db.WriteTurn(ctx, "s1", switchboard.TurnWrite{
		ClientID: "c1",
		Messages: []switchboard.Message{user(big), {Role: switchboard.RoleAssistant, Content: big}},
		Events:   []switchboard.Event{ev("s1", seq+1, switchboard.EventMessage, fmt.Sprintf(`{"pad":%q}`, big))},
		Turn:     []byte(big),
	})
	if err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("WriteTurn under the limit = %v, want a full-disk error", err)
	}
	stored, err := db.MessageCount(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := db.EventsAfter(ctx, "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM seen_inputs WHERE session_id = 's1'`).Scan(&seen); err != nil {
		t.Fatal(err)
	}
	_, perr := db.LoadPending(ctx, "s1")
	if stored != messages || int64(len(kept)) != seq || seen != 0 || !errors.Is(perr, switchboard.ErrNotFound) {
		t.Errorf("after refused writes: %d messages, %d events, %d seen ids, open turn %v; want %d, %d, none, none",
			stored, len(kept), seen, perr, messages, seq)
	}

	// Lifted: writes go on, from where they stopped.
	if err := db.LimitSize(ctx, 0); err != nil {
		t.Fatal(err)
	}
	appendMsgs(t, db, "s1", user("after"))
	messages++
	if err := db.AppendEvents(ctx, r.Published, ev("s1", seq+1, switchboard.EventMessage, `{"after":true}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	seq++
	storetest.CheckPublished(t, db, &r)

	// Nothing written before, under or after the limit is lost, reopened too.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n, err := db.MessageCount(ctx, "s1"); err != nil || n != messages {
		t.Errorf("MessageCount = %d, %v; want %d", n, err, messages)
	}
	evs, err := db.EventsAfter(ctx, "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 {
		t.Fatal("no events after reopen")
	}
	if int64(len(evs)) != seq || evs[len(evs)-1].Seq != seq || string(evs[len(evs)-1].Data) != `{"after":true}` {
		t.Errorf("%d events, the last %+v; want 1..%d, the last the one written after the limit", len(evs), evs[len(evs)-1], seq)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: a hole", i, e.Seq)
		}
	}
	w, err := db.Window(ctx, "s1", 1)
	if err != nil || len(w) != 1 || w[0].Content != "after" {
		t.Errorf("last message = %+v, %v; want the one written after the limit", w, err)
	}
}
