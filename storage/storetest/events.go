package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// Sessions appending at once, some an event a call, some several: each
// session's events are stored, every one and in order.
func testEventsFromManySessionsLandInOrder(t *testing.T, db Store) {
	ctx := context.Background()
	const sessions, perSession = 8, 300
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("s%d", s)
			for seq := int64(1); seq <= perSession; seq++ {
				// Some one by one, some several per call.
				if seq%3 == 0 && seq < perSession {
					if err := db.AppendEvents(ctx, nil,
						Event(id, seq, switchboard.EventDelta, fmt.Sprintf(`{"content":"%s-%d"}`, id, seq)),
						Event(id, seq+1, switchboard.EventDelta, fmt.Sprintf(`{"content":"%s-%d"}`, id, seq+1)),
					); err != nil {
						errs <- err
						return
					}
					seq++
					continue
				}
				if err := db.AppendEvents(ctx, nil, Event(id, seq, switchboard.EventDelta, fmt.Sprintf(`{"content":"%s-%d"}`, id, seq))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	flush(t, db)

	for s := range sessions {
		id := fmt.Sprintf("s%d", s)
		got, err := db.EventsAfter(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != perSession {
			t.Fatalf("%s: %d events stored, want %d", id, len(got), perSession)
		}
		for i, e := range got {
			want := Event(id, int64(i+1), switchboard.EventDelta, fmt.Sprintf(`{"content":"%s-%d"}`, id, i+1))
			if e.Seq != want.Seq || string(e.Data) != string(want.Data) || e.Session != id {
				t.Fatalf("%s: event %d = %+v, want %+v", id, i, e, want)
			}
		}
		if last, err := db.LastSeq(ctx, id); err != nil || last != perSession {
			t.Errorf("%s: LastSeq = %d, %v; want %d", id, last, err, perSession)
		}
	}
}

func testEventsAfterPagesAndRoundTrips(t *testing.T, db Store) {
	ctx := context.Background()
	var evs []switchboard.Event
	for seq := int64(1); seq <= 25; seq++ {
		e := Event("s1", seq, switchboard.EventMessage, fmt.Sprintf(`{"id":"m%d","content":"x"}`, seq))
		e.Time = e.Time.Add(456 * time.Microsecond) // below a millisecond: a store may drop it
		evs = append(evs, e)
	}
	if err := db.AppendEvents(ctx, nil, evs...); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	// A repeated (session, seq) is refused, not dropped in silence: the
	// first one stays, and another session's event beside it is stored.
	if err := db.AppendEvents(ctx, nil, Event("s1", 3, switchboard.EventError, `{"code":"dup"}`), Event("other", 1, switchboard.EventState, `{}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(ctx); err == nil {
		t.Error("Flush after a repeated seq = nil, want its write error")
	}
	if last, err := db.LastSeq(ctx, "other"); err != nil || last != 1 {
		t.Errorf("LastSeq(other) = %d, %v; want 1: its event shared a call with the refused one", last, err)
	}

	var got []switchboard.Event
	var pages []int
	after := int64(0)
	for {
		page, err := db.EventsAfter(ctx, "s1", after, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		pages = append(pages, len(page))
		got = append(got, page...)
		after = page[len(page)-1].Seq
	}
	if fmt.Sprint(pages) != "[10 10 5]" {
		t.Errorf("page sizes = %v, want [10 10 5]", pages)
	}
	if len(got) != len(evs) {
		t.Fatalf("got %d events, want %d", len(got), len(evs))
	}
	for i, e := range got {
		w := evs[i]
		// Kept to the millisecond at least, and never later than it was.
		earliest := w.Time.Truncate(time.Millisecond)
		if e.Seq != w.Seq || e.Session != w.Session || e.Agent != w.Agent || e.Type != w.Type || string(e.Data) != string(w.Data) ||
			e.Time.Before(earliest) || e.Time.After(w.Time) || e.Time.Location() != time.UTC {
			t.Errorf("event %d = %+v, want %+v (time from %v to %v, in UTC)", i, e, w, earliest, w.Time)
		}
	}
	if last, err := db.LastSeq(ctx, "s1"); err != nil || last != 25 {
		t.Errorf("LastSeq = %d, %v; want 25", last, err)
	}
	if last, err := db.LastSeq(ctx, "nobody"); err != nil || last != 0 {
		t.Errorf("LastSeq of an empty session = %d, %v; want 0", last, err)
	}
}

func testAppendEventsRejectsUnnumberedEvents(t *testing.T, db Store) {
	for _, e := range []switchboard.Event{Event("", 1, switchboard.EventState, `{}`), Event("s", 0, switchboard.EventState, `{}`)} {
		if err := db.AppendEvents(context.Background(), nil, e); err == nil {
			t.Errorf("AppendEvents(%q/%d) succeeded", e.Session, e.Seq)
		}
	}
}

// FindUI finds a session's UI segment by its id, the latest if several
// carry it, among its ui events only; a row it cannot read is passed over.
func testFindUI(t *testing.T, db Store) {
	ctx := context.Background()
	first := switchboard.UI{ID: "ui_1", Title: "Pick", Buttons: []switchboard.UIButton{{ActionID: "a0", Label: "No"}}}
	card := switchboard.UI{ID: "ui_1", Title: "Pick again", Buttons: []switchboard.UIButton{{ActionID: "a1", Label: "Yes"}}}
	var data [2][]byte
	for i, ui := range []switchboard.UI{first, card} {
		b, err := json.Marshal(ui)
		if err != nil {
			t.Fatal(err)
		}
		data[i] = b
	}
	if err := db.AppendEvents(ctx, nil,
		Event("s1", 1, switchboard.EventMessage, `{"id":"ui_2","content":"not a ui event"}`),
		Event("s1", 2, switchboard.EventUI, string(data[0])),
		Event("s1", 3, switchboard.EventUI, `not json`),
		Event("s1", 4, switchboard.EventUI, string(data[1])),
		Event("s2", 1, switchboard.EventUI, `{"id":"ui_3"}`),
	); err != nil {
		t.Fatal(err)
	}
	flush(t, db)

	got, err := db.FindUI(ctx, "s1", "ui_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != card.Title || len(got.Buttons) != 1 || got.Buttons[0].ActionID != "a1" {
		t.Errorf("FindUI = %+v, want %+v", got, card)
	}
	for _, id := range []string{"ui_2", "ui_3", "missing"} {
		if _, err := db.FindUI(ctx, "s1", id); !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("FindUI(s1, %s) err = %v, want ErrNotFound", id, err)
		}
	}
}

// A session's events are stored without a hole: an event whose seq-1 is
// not stored is refused with ErrGap, and so is every later one until the
// numbering continues from the last stored event, also inside one call.
// Another session's events queued with them are stored all the same.
func testGapIsRefusedAndOtherSessionsAreStored(t *testing.T, db Store) {
	ctx := context.Background()
	// a's events and b's, which start at 2, are queued together.
	var a, b Recorder
	for seq := int64(1); seq <= 3; seq++ {
		if err := db.AppendEvents(ctx, a.Published, Event("a", seq, switchboard.EventDelta, fmt.Sprintf(`{"a":%d}`, seq))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AppendEvents(ctx, b.Published, Event("b", 2, switchboard.EventDelta, `{"try":1}`), Event("b", 3, switchboard.EventDelta, `{"try":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(ctx); !errors.Is(err, switchboard.ErrGap) {
		t.Errorf("Flush after a gap = %v, want ErrGap", err)
	}
	if got := fmt.Sprint(a.Seqs(true)); got != "[1 2 3]" || len(a.Seqs(false)) != 0 {
		t.Errorf("a published as stored %v, refused %v; want [1 2 3] stored", got, a.Seqs(false))
	}
	if got := b.Seqs(false); fmt.Sprint(got) != "[2 3]" || len(b.Seqs(true)) != 0 {
		t.Errorf("b published as refused %v, stored %v; want [2 3] refused", got, b.Seqs(true))
	}
	for _, p := range b.Calls() {
		if !errors.Is(p.Err, switchboard.ErrGap) {
			t.Errorf("b's events refused with %v, want ErrGap", p.Err)
		}
	}
	if last, err := db.LastSeq(ctx, "a"); err != nil || last != 3 {
		t.Errorf("LastSeq(a) = %d, %v; want 3", last, err)
	}
	if last, err := db.LastSeq(ctx, "b"); err != nil || last != 0 {
		t.Errorf("LastSeq(b) = %d, %v; want 0", last, err)
	}

	// b keeps numbering past its refused events: still refused.
	appendAndFlush := func(r *Recorder, evs ...switchboard.Event) error {
		t.Helper()
		if err := db.AppendEvents(ctx, r.Published, evs...); err != nil {
			t.Fatal(err)
		}
		return db.Flush(ctx)
	}
	if err := appendAndFlush(&b, Event("b", 4, switchboard.EventDelta, `{"try":2}`)); !errors.Is(err, switchboard.ErrGap) {
		t.Errorf("b/4 after refused b/2-3: Flush = %v, want ErrGap", err)
	}
	// It numbers from its last stored event (none): stored again.
	if err := appendAndFlush(&b, Event("b", 1, switchboard.EventDelta, `{"try":3}`), Event("b", 2, switchboard.EventDelta, `{"try":3}`)); err != nil {
		t.Fatalf("b/1-2 after the gap: %v", err)
	}
	// A gap past stored events: refused, and the one after it too.
	if err := appendAndFlush(&b, Event("b", 4, switchboard.EventDelta, `{"try":4}`)); !errors.Is(err, switchboard.ErrGap) {
		t.Errorf("b/4 after b/2: Flush = %v, want ErrGap", err)
	}
	if err := appendAndFlush(&b, Event("b", 5, switchboard.EventDelta, `{"try":5}`)); !errors.Is(err, switchboard.ErrGap) {
		t.Errorf("b/5 after refused b/4: Flush = %v, want ErrGap", err)
	}
	if err := appendAndFlush(&b, Event("b", 3, switchboard.EventDelta, `{"try":6}`)); err != nil {
		t.Errorf("b/3 after b/2: %v", err)
	}
	if got := fmt.Sprint(b.Seqs(true)); got != "[1 2 3]" {
		t.Errorf("b published as stored %v, want [1 2 3]", got)
	}
	if got := fmt.Sprint(b.Seqs(false)); got != "[2 3 4 4 5]" {
		t.Errorf("b published as refused %v, want [2 3 4 4 5]", got)
	}
	if last, err := db.LastSeq(ctx, "b"); err != nil || last != 3 {
		t.Errorf("LastSeq(b) = %d, %v; want 3", last, err)
	}
	// A gap inside one call: the event past it is refused.
	var c Recorder
	if err := appendAndFlush(&c, Event("c", 1, switchboard.EventDelta, `{"c":1}`), Event("c", 3, switchboard.EventDelta, `{"c":3}`)); !errors.Is(err, switchboard.ErrGap) {
		t.Errorf("c/1 and c/3 in one call: Flush = %v, want ErrGap", err)
	}
	if evs, err := db.EventsAfter(ctx, "c", 1, 0); err != nil || len(evs) != 0 {
		t.Errorf("c's events after c/1 = %+v, %v; want none: c/3 is refused", evs, err)
	}
	if !slices.Contains(c.Seqs(false), 3) {
		t.Errorf("c published as refused %v, want c/3 among them", c.Seqs(false))
	}
	CheckPublished(t, db, &a)
	CheckPublished(t, db, &b)
	CheckPublished(t, db, &c)
}

// A seq is stored once: a second event with it is refused, not dropped in
// silence, and the first one stays.
func testRepeatedSeqIsRefused(t *testing.T, db Store) {
	ctx := context.Background()
	var r Recorder
	if err := db.AppendEvents(ctx, r.Published, Event("s", 1, switchboard.EventDelta, `{"v":1}`), Event("s", 2, switchboard.EventDelta, `{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	for _, seq := range []int64{1, 2} {
		if err := db.AppendEvents(ctx, r.Published, Event("s", seq, switchboard.EventError, `{"v":"again"}`)); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(ctx); err == nil {
			t.Errorf("s/%d stored twice: Flush = nil, want an error", seq)
		}
	}
	// Twice in one call.
	if err := db.AppendEvents(ctx, r.Published, Event("s", 3, switchboard.EventDelta, `{"v":3}`), Event("s", 3, switchboard.EventDelta, `{"v":"again"}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(ctx); err == nil {
		t.Error("s/3 twice in one call: Flush = nil, want an error")
	}
	got, err := db.EventsAfter(ctx, "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 2 || string(got[0].Data) != `{"v":1}` || string(got[1].Data) != `{"v":2}` || got[1].Type != switchboard.EventDelta {
		t.Errorf("events = %+v, want the first s/1 and s/2 kept", got)
	}
	for _, e := range got {
		if string(e.Data) == `{"v":"again"}` {
			t.Errorf("repeated s/%d stored", e.Seq)
		}
	}
	if refused := r.Seqs(false); len(refused) < 2 || fmt.Sprint(refused[:2]) != "[1 2]" {
		t.Errorf("published as refused %v, want the repeated 1 and 2 first", r.Seqs(false))
	}
	CheckPublished(t, db, &r)
}

// A publisher is told once the events are committed (a reader sees them
// from inside the callback), and in seq order.
func testPublishedInSeqOrderAfterCommit(t *testing.T, db Store) {
	ctx := context.Background()
	const n = 400
	var (
		mu        sync.Mutex
		order     []int64
		problems  []string
		published = make(chan struct{})
	)
	cb := func(evs []switchboard.Event, err error) {
		// After the commit: a reader (in the SQLite store, another
		// connection than the writer's) sees every event it is told about.
		var problem string
		if err != nil {
			problem = fmt.Sprintf("events %d-%d refused: %v", evs[0].Seq, evs[len(evs)-1].Seq, err)
		} else if got, qerr := db.EventsAfter(ctx, "s", evs[0].Seq-1, len(evs)); qerr != nil || len(got) != len(evs) {
			problem = fmt.Sprintf("published %d-%d, a reader sees %d of them (%v)", evs[0].Seq, evs[len(evs)-1].Seq, len(got), qerr)
		}
		mu.Lock()
		defer mu.Unlock()
		if problem != "" {
			problems = append(problems, problem)
		}
		for _, e := range evs {
			order = append(order, e.Seq)
		}
		if len(order) == n {
			close(published)
		}
	}
	for seq := int64(1); seq <= n; seq++ {
		if err := db.AppendEvents(ctx, cb, Event("s", seq, switchboard.EventDelta, `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, db)
	<-published // the test's timeout stands for a publisher never told of some
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	for i, seq := range order {
		if seq != int64(i+1) {
			t.Fatalf("published in order %v…, want 1..%d", order[:i+1], n)
		}
	}
}

// A recap is the last n user and assistant messages up to a seq, in
// order, leaving out system messages and every other event.
func testRecentMessages(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	evs := []switchboard.Event{
		Event("s1", 1, switchboard.EventMessage, `{"role":"user","content":"one"}`),
		Event("s1", 2, switchboard.EventDelta, `{"content":"t"}`),
		Event("s1", 3, switchboard.EventMessage, `{"role":"assistant","content":"two"}`),
		Event("s1", 4, switchboard.EventMessage, `{"role":"system","content":"help text"}`),
		Event("s1", 5, switchboard.EventMessage, `{"role":"user","content":"three"}`),
		Event("s1", 6, switchboard.EventToolCall, `{"name":"calculator"}`),
		Event("s1", 7, switchboard.EventMessage, `{"role":"assistant","content":"four"}`),
		Event("s1", 8, switchboard.EventMessage, `{"role":"user","content":"five"}`),
	}
	if err := db.AppendEvents(ctx, nil, evs...); err != nil {
		t.Fatal(err)
	}
	flush(t, db)
	got, err := db.RecentMessages(ctx, "s1", 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, e := range got {
		seqs = append(seqs, e.Seq)
	}
	if fmt.Sprint(seqs) != "[3 5 7]" {
		t.Fatalf("recap seqs = %v, want [3 5 7]", seqs)
	}
	if none, err := db.RecentMessages(ctx, "nobody", 3, 100); err != nil || len(none) != 0 {
		t.Fatalf("recap of an unknown session = %v, %v", none, err)
	}
}

func testDecisionsPairAnswersWithTheirRequests(t *testing.T, db Store) {
	ctx := context.Background()
	NewSession(t, db, "s1", "")
	NewSession(t, db, "s2", "")
	evs := []switchboard.Event{
		Event("s1", 1, switchboard.EventConfirmationRequest, `{"confirmation_id":"c1","tool_name":"shell","args":{"cmd":"ls"}}`),
		Event("s1", 2, switchboard.EventConfirmationResolved, `{"confirmation_id":"c1","approved":true,"by":"Carol","channel":"slack"}`),
		Event("s1", 3, switchboard.EventConfirmationRequest, `{"confirmation_id":"c2","tool_name":"deploy","args":{}}`),
		Event("s1", 4, switchboard.EventMessage, `{"role":"user","content":"hi"}`),
		Event("s1", 5, switchboard.EventConfirmationResolved, `{"confirmation_id":"c2","approved":false,"by":"expired"}`),
		Event("s1", 6, switchboard.EventConfirmationResolved, `not json`),
		Event("s1", 7, switchboard.EventConfirmationResolved, `{"confirmation_id":"c9","approved":true,"by":"Dan","channel":"discord"}`),
	}
	if err := writeTurn(ctx, db, "s1", switchboard.TurnWrite{Events: evs}); err != nil {
		t.Fatal(err)
	}
	if err := writeTurn(ctx, db, "s2", switchboard.TurnWrite{Events: []switchboard.Event{
		Event("s2", 1, switchboard.EventConfirmationResolved, `{"confirmation_id":"c1","approved":false,"by":"Eve"}`),
	}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Decisions(ctx, "s1", 10)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		seq             int64
		tool, by, where string
		approved        bool
	}
	var rows []row
	for _, d := range got {
		rows = append(rows, row{d.Seq, d.Request.ToolName, d.Resolved.By, d.Resolved.Channel, d.Resolved.Approved})
	}
	want := []row{{2, "shell", "Carol", "slack", true}, {5, "deploy", "expired", "", false}, {7, "", "Dan", "discord", true}}
	if !slices.Equal(rows, want) {
		t.Errorf("Decisions = %+v, want %+v (oldest first; a request that is gone leaves the tool empty; other sessions' and malformed rows left out)", rows, want)
	}
	if got, _ := db.Decisions(ctx, "s1", 1); len(got) != 1 || got[0].Seq != 7 {
		t.Errorf("Decisions(1) = %+v, want the last answer only", got)
	}
	// n answers are the last n.
	NewSession(t, db, "s3", "")
	var three []switchboard.Event
	for i := range int64(3) {
		three = append(three,
			Event("s3", 2*i+1, switchboard.EventConfirmationRequest, fmt.Sprintf(`{"confirmation_id":"c%d","tool_name":"shell","args":{}}`, i)),
			Event("s3", 2*i+2, switchboard.EventConfirmationResolved, fmt.Sprintf(`{"confirmation_id":"c%d","approved":true,"by":"Carol"}`, i)))
	}
	if err := writeTurn(ctx, db, "s3", switchboard.TurnWrite{Events: three}); err != nil {
		t.Fatal(err)
	}
	got, err = db.Decisions(ctx, "s3", 2)
	var seqs []int64
	for _, d := range got {
		seqs = append(seqs, d.Seq)
	}
	if err != nil || fmt.Sprint(seqs) != "[4 6]" {
		t.Errorf("Decisions(s3, 2) answered at %v, %v; want the last two, at [4 6]", seqs, err)
	}
}
