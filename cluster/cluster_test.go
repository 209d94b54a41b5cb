package cluster

// Replicas in one process: each has its own store (its own pool, writer
// and listening connection, opened WithReplica), its own session manager
// and its own Cluster, on one real PostgreSQL database, and they share one
// scripted model server. A crash is a replica whose manager and cluster
// stop at once without giving anything up; its leases are then run out
// through SQL, as the lease time would, so nothing waits on a clock.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/internal/pgtest"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/storage/postgres"
	"github.com/switchboard-gw/switchboard/tools"
)

var pg *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, &pg) }

// lease is long enough that a replica slowed by the race detector keeps
// its leases, short enough that one looks for conversations to take over
// every second; a test that needs a lease gone runs it out through SQL.
const lease = 4 * time.Second

type replica struct {
	t   *testing.T
	id  string
	db  *postgres.DB
	c   *Cluster
	m   *sessions.Manager
	llm *openaitest.Server

	stop    context.CancelFunc
	stopped chan struct{}
	once    sync.Once
}

var alice = switchboard.Author{Channel: "web", ID: "alice", Name: "Alice"}

func logger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startReplica starts replica id on the database dsn, with llm as its
// model; with changes to its cluster's Config.
func startReplica(t *testing.T, dsn, id string, llm *openaitest.Server, with ...func(*Config)) *replica {
	t.Helper()
	log := logger(t).With("replica", id)
	db, err := postgres.Open(context.Background(), dsn, postgres.WithReplica(id), postgres.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	catalog, err := guides.LoadDir("../guides")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tools.Builtins(time.Now)...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := openai.New(providers.Config{Name: "main", Kind: "openai", BaseURL: llm.BaseURL(), APIKey: "test", Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: db, Lease: lease, Logger: log}
	for _, f := range with {
		f(&cfg)
	}
	c := New(cfg)
	ctx, stop := context.WithCancel(context.Background())
	m := sessions.NewManager(ctx, sessions.Config{
		Store: db, Guides: catalog, DefaultGuide: "assistant", Tools: reg, Cluster: c,
		Providers:       map[string]*providers.Resilient{"main": {Name: "main", Provider: p, Policy: providers.Policy{MaxRetries: 0}}},
		DefaultProvider: "main", Logger: log, IdleTimeout: time.Hour,
	})
	r := &replica{t: t, id: id, db: db, c: c, m: m, llm: llm, stop: stop, stopped: make(chan struct{})}
	go func() {
		defer close(r.stopped)
		c.Run(ctx, m)
	}()
	t.Cleanup(r.crash)
	t.Cleanup(func() { db.Close() })
	return r
}

// crash stops the replica's manager and cluster at once: its leases stay
// as they were, unrenewed, as a killed process leaves them.
func (r *replica) crash() {
	r.once.Do(func() {
		r.stop()
		r.m.Wait()
		<-r.stopped
	})
}

// twoReplicas starts replicas "a" and "b" on a new database, answered by
// one fake model: the rig most tests here use.
func twoReplicas(t *testing.T) (dsn string, llm *openaitest.Server, a, b *replica) {
	t.Helper()
	dsn = pg.NewDatabase(t)
	llm = openaitest.New()
	t.Cleanup(llm.Close)
	return dsn, llm, startReplica(t, dsn, "a", llm), startReplica(t, dsn, "b", llm)
}

// connect is a connection of the test's own to the database dsn, closed
// when the test ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// runOut runs out the leases replica holder holds, as time would.
func runOut(t *testing.T, dsn, holder string) {
	t.Helper()
	if _, err := connect(t, dsn).Exec(context.Background(), `UPDATE leases SET expires_at = 0 WHERE holder = $1`, holder); err != nil {
		t.Fatal(err)
	}
}

// holder is who holds session id's lease, unexpired ("" for nobody).
func holder(t *testing.T, dsn, id string) string {
	t.Helper()
	var h string
	err := connect(t, dsn).QueryRow(context.Background(), `SELECT holder FROM leases WHERE name = $1 AND expires_at > (extract(epoch from clock_timestamp()) * 1000)::bigint`, postgres.SessionLease(id)).Scan(&h)
	if err == pgx.ErrNoRows {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// watcher collects a subscription's events.
type watcher struct {
	t   *testing.T
	sub *sessions.Subscription
	mu  sync.Mutex
	evs []switchboard.Event
	got chan struct{}
}

func watch(t *testing.T, r *replica, opts sessions.AttachOptions) *watcher {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := r.m.Attach(ctx, opts)
	if err != nil {
		t.Fatalf("%s: attach: %v", r.id, err)
	}
	w := &watcher{t: t, sub: sub, got: make(chan struct{}, 1)}
	go func() {
		for ev := range sub.Events() {
			w.mu.Lock()
			w.evs = append(w.evs, ev)
			w.mu.Unlock()
			select {
			case w.got <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(sub.Close)
	return w
}

// until waits for an event that ok accepts and returns it.
func (w *watcher) until(what string, ok func(switchboard.Event) bool) switchboard.Event {
	w.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		w.mu.Lock()
		for _, ev := range w.evs {
			if ok(ev) {
				w.mu.Unlock()
				return ev
			}
		}
		w.mu.Unlock()
		select {
		case <-w.got:
		case <-deadline:
			w.t.Fatalf("no %s among %s", what, w.describe())
		}
	}
}

func (w *watcher) stored() []switchboard.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []switchboard.Event
	for _, ev := range w.evs {
		if ev.Seq > 0 {
			out = append(out, ev)
		}
	}
	return out
}

func (w *watcher) describe() string {
	var b strings.Builder
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range w.evs {
		fmt.Fprintf(&b, "\n  %d %s %s", ev.Seq, ev.Type, ev.Data)
	}
	return b.String()
}

// answer is whether ev is the assistant's message with text.
func answer(text string) func(switchboard.Event) bool {
	return func(ev switchboard.Event) bool {
		if ev.Type != switchboard.EventMessage {
			return false
		}
		var m switchboard.MessageData
		return json.Unmarshal(ev.Data, &m) == nil && m.Role == switchboard.RoleAssistant && m.Content == text
	}
}

func errorCode(code string) func(switchboard.Event) bool {
	return func(ev switchboard.Event) bool {
		var d switchboard.ErrorData
		return ev.Type == switchboard.EventError && json.Unmarshal(ev.Data, &d) == nil && d.Code == code
	}
}

// gapless fails unless evs are numbered 1, 2, 3… with none twice.
func gapless(t *testing.T, who string, evs []switchboard.Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("%s was shown seq %d at position %d: a gap or a repeat", who, ev.Seq, i+1)
		}
	}
}

func submit(t *testing.T, r *replica, id string, in switchboard.Input) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.m.Submit(ctx, id, in); err != nil {
		t.Fatalf("%s: submit: %v", r.id, err)
	}
}

func text(s, clientID string) switchboard.Input {
	return switchboard.Input{Kind: switchboard.InputText, Author: alice, Text: s, ClientID: clientID}
}

// A conversation run by one replica is followed on another, whose
// listener sees every event the owner stores, numbered as the owner's
// listener sees them; what a person writes on the other replica is
// answered by the owner, once, and both see the answer.
func TestAMirrorShowsTheOwnersConversation(t *testing.T) {
	dsn, llm, a, b := twoReplicas(t)

	onA := watch(t, a, sessions.AttachOptions{Key: "web:k1", Author: alice, AfterSeq: 0})
	id := onA.sub.Ready.Session
	llm.Push(openaitest.Reply{Text: []string{"Hello ", "from a."}})
	submit(t, a, id, text("hi", "c1"))
	onA.until("a's answer on a", answer("Hello from a."))
	if h := holder(t, dsn, id); h != "a" {
		t.Fatalf("the lease is %q's, want a's: a created the session and ran its turn", h)
	}

	onB := watch(t, b, sessions.AttachOptions{SessionID: id, Author: alice, AfterSeq: 0})
	onB.until("a's answer replayed on b", answer("Hello from a."))

	// Written on b, answered by a.
	llm.Push(openaitest.Reply{Text: []string{"Answered ", "by a."}})
	submit(t, b, id, text("from b", "c2"))
	onB.until("the answer on b", answer("Answered by a."))
	onA.until("the answer on a", answer("Answered by a."))
	// Sent again (a client that did not see it taken): answered once.
	submit(t, b, id, text("from b", "c2"))
	if h := holder(t, dsn, id); h != "a" {
		t.Fatalf("the lease moved to %q: a is alive and runs the session", h)
	}
	if n := len(llm.Requests()); n != 2 {
		t.Fatalf("the model was asked %d times, want 2: each message once", n)
	}

	// Both were shown the same history, whole.
	llm.Push(openaitest.Reply{Text: []string{"Third."}})
	submit(t, a, id, text("third", "c3"))
	onB.until("the third answer on b", answer("Third."))
	onA.until("the third answer on a", answer("Third."))
	last, err := a.db.LastSeq(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	through := func(ev switchboard.Event) bool { return ev.Seq == last }
	onA.until("the last stored event on a", through)
	onB.until("the last stored event on b", through)
	sa, sb := onA.stored(), onB.stored()
	gapless(t, "a's listener", sa)
	gapless(t, "b's listener", sb)
	for i := range last {
		if sa[i].Type != sb[i].Type || string(sa[i].Data) != string(sb[i].Data) {
			t.Fatalf("event %d differs: a saw %s %s, b saw %s %s", i+1, sa[i].Type, sa[i].Data, sb[i].Type, sb[i].Data)
		}
	}
}

// A tool call that needs approval, asked for by the replica that runs the
// turn, is approved by a person on another replica.
func TestApprovedFromAnotherReplica(t *testing.T) {
	_, llm, a, b := twoReplicas(t)

	onA := watch(t, a, sessions.AttachOptions{Key: "web:k2", Author: alice, AfterSeq: 0})
	id := onA.sub.Ready.Session
	llm.Push(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
		openaitest.Reply{Text: []string{"It is now."}})
	submit(t, a, id, text("what time is it?", "c1"))
	onA.until("the approval request on a", func(ev switchboard.Event) bool { return ev.Type == switchboard.EventConfirmationRequest })

	onB := watch(t, b, sessions.AttachOptions{SessionID: id, Author: alice, AfterSeq: -1})
	if len(onB.sub.Ready.Pending) != 1 {
		t.Fatalf("b's ready lists %d open requests, want the one a asked", len(onB.sub.Ready.Pending))
	}
	submit(t, b, id, switchboard.Input{Kind: switchboard.InputConfirm, Author: alice, ConfirmationID: onB.sub.Ready.Pending[0].ConfirmationID, Approved: true})
	onB.until("the answer after the approval, on b", answer("It is now."))
	onA.until("the answer after the approval, on a", answer("It is now."))
	if got := llm.ToolResults(); len(got) != 1 {
		t.Fatalf("tool results sent to the model: %q, want the one approved call", got)
	}
}

// A replica killed in the middle of a turn leaves the conversation to
// another, which takes it over once the lease runs out: the turn is run
// again after an "interrupted" notice, and the one listening on the
// survivor sees the whole history with no gap.
func TestTakenOverWhenItsReplicaDies(t *testing.T) {
	dsn, llm, a, b := twoReplicas(t)

	onA := watch(t, a, sessions.AttachOptions{Key: "web:k3", Author: alice, AfterSeq: 0})
	id := onA.sub.Ready.Session
	onB := watch(t, b, sessions.AttachOptions{SessionID: id, Author: alice, AfterSeq: 0})
	gate := make(chan struct{}) // the first reply stops after its first text, until the end
	t.Cleanup(func() { close(gate) })
	llm.Push(openaitest.Reply{Text: []string{"Cut ", "short"}, Gate: gate}, openaitest.Reply{Text: []string{"Whole answer."}})
	submit(t, a, id, text("a long question", "c1"))
	onB.until("the streamed start on b", func(ev switchboard.Event) bool { return ev.Type == switchboard.EventDelta })

	a.crash()
	runOut(t, dsn, "a")
	onB.until("the interrupted notice on b", errorCode(switchboard.ErrCodeInterrupted))
	onB.until("the answer run again on b", answer("Whole answer."))
	if h := holder(t, dsn, id); h != "b" {
		t.Fatalf("the lease is %q's, want b's", h)
	}
	gapless(t, "b's listener", onB.stored())
}

// A replica that paused past its lease, while another took the
// conversation over, cannot write into it any more: the database refuses
// its writes, it stops running the conversation, and what its person
// sends goes to the new owner, answered once.
func TestAPausedOwnerIsFencedOut(t *testing.T) {
	dsn, llm, a, b := twoReplicas(t)

	onA := watch(t, a, sessions.AttachOptions{Key: "web:k4", Author: alice, AfterSeq: 0})
	id := onA.sub.Ready.Session
	llm.Push(openaitest.Reply{Text: []string{"One."}})
	submit(t, a, id, text("one", "c1"))
	onA.until("the first answer", answer("One."))

	// a "pauses": its lease runs out and b, asked to act, takes over.
	runOut(t, dsn, "a")
	onB := watch(t, b, sessions.AttachOptions{SessionID: id, Author: alice, AfterSeq: 0})
	llm.Push(openaitest.Reply{Text: []string{"Two, from b."}})
	submit(t, b, id, text("two", "c2"))
	onB.until("b's answer", answer("Two, from b."))
	if h := holder(t, dsn, id); h != "b" {
		t.Fatalf("the lease is %q's, want b's", h)
	}

	// a wakes up believing it runs the session: its person writes there.
	llm.Push(openaitest.Reply{Text: []string{"Three, from b."}})
	submit(t, a, id, text("three", "c3"))
	onB.until("the answer to what was written on a", answer("Three, from b."))
	onA.until("the same answer on a", answer("Three, from b."))
	if n := len(llm.Requests()); n != 3 {
		t.Fatalf("the model was asked %d times, want 3", n)
	}
	gapless(t, "a's listener", onA.stored())
	gapless(t, "b's listener", onB.stored())
}

// A replica that drains gives its conversations up at once: another runs
// them without waiting for the lease to run out.
func TestDrainGivesConversationsUp(t *testing.T) {
	dsn, llm, a, b := twoReplicas(t)

	onA := watch(t, a, sessions.AttachOptions{Key: "web:k5", Author: alice, AfterSeq: 0})
	id := onA.sub.Ready.Session
	llm.Push(openaitest.Reply{Text: []string{"Before."}})
	submit(t, a, id, text("before", "c1"))
	onA.until("the answer", answer("Before."))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.m.Drain(ctx)
	if h := holder(t, dsn, id); h != "" {
		t.Fatalf("after a drained, the lease is %q's, want nobody's", h)
	}
	llm.Push(openaitest.Reply{Text: []string{"After, from b."}})
	onB := watch(t, b, sessions.AttachOptions{SessionID: id, Author: alice, AfterSeq: 0})
	submit(t, b, id, text("after", "c2"))
	onB.until("b's answer", answer("After, from b."))
	if h := holder(t, dsn, id); h != "b" {
		t.Fatalf("the lease is %q's, want b's", h)
	}
}

// follows records what a channel's follower is told: the places to
// follow, and those to stop following after an event (UnfollowAfter).
type follows struct {
	mu       sync.Mutex
	bound    []switchboard.Binding
	unfollow map[string]int64
	told     chan struct{}
}

func (f *follows) UnfollowAfter(address string, seq int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unfollow == nil {
		f.unfollow = map[string]int64{}
	}
	f.unfollow[address] = seq
}

func (f *follows) unfollowed(address string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq, ok := f.unfollow[address]
	return seq, ok
}

// sawIn is whether f was told to follow address showing session id.
func (f *follows) sawIn(address, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.bound {
		if b.Address == address && b.SessionID == id {
			return true
		}
	}
	return false
}

func (f *follows) Follow(b switchboard.Binding) {
	f.mu.Lock()
	f.bound = append(f.bound, b)
	f.mu.Unlock()
	select {
	case f.told <- struct{}{}:
	default:
	}
}

func (f *follows) saw(address string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.bound {
		if b.Address == address {
			return true
		}
	}
	return false
}

// A place bound on a replica that does not run the conversation is
// rendered by the one that does: its follower is told.
func TestAPlaceBoundElsewhereIsRenderedByTheOwner(t *testing.T) {
	_, _, a, b := twoReplicas(t)
	onA, onB := &follows{told: make(chan struct{}, 1)}, &follows{told: make(chan struct{}, 1)}
	a.m.SetFollower("chat", onA)
	b.m.SetFollower("chat", onB)

	w := watch(t, a, sessions.AttachOptions{Key: "web:k6", Author: alice, AfterSeq: 0})
	id := w.sub.Ready.Session
	watch(t, b, sessions.AttachOptions{SessionID: id, Author: alice, AfterSeq: 0}) // b mirrors it
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.m.Bind(ctx, "chat", "room-1", id); err != nil {
		t.Fatal(err)
	}
	for !onA.saw("room-1") {
		select {
		case <-onA.told:
		case <-ctx.Done():
			t.Fatal("the replica that runs the conversation was not told of the place bound on the other")
		}
	}
	// b's own follower is refused the conversation (it renders nothing).
	if _, err := b.m.Attach(ctx, sessions.AttachOptions{SessionID: id, Follow: "chat"}); !errors.Is(err, sessions.ErrElsewhere) {
		t.Fatalf("a follower's attach on the mirror = %v, want ErrElsewhere", err)
	}
}

// Two replicas asked at once for the conversation of a new place (two
// messages of a new thread landing on different replicas) agree on one.
func TestOnePlaceOneConversationAcrossReplicas(t *testing.T) {
	dsn := pg.NewDatabase(t)
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	rs := []*replica{startReplica(t, dsn, "a", llm), startReplica(t, dsn, "b", llm)}
	for round := range 10 {
		key := fmt.Sprintf("web:race-%d", round)
		ids := make([]string, len(rs))
		var wg sync.WaitGroup
		for i, r := range rs {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				sub, err := r.m.Attach(ctx, sessions.AttachOptions{Key: key, Author: alice, AfterSeq: -1})
				if err != nil {
					t.Errorf("%s: attach %s: %v", r.id, key, err)
					return
				}
				ids[i] = sub.Ready.Session
				sub.Close()
			})
		}
		wg.Wait()
		if ids[0] == "" || ids[0] != ids[1] {
			t.Fatalf("one place, two conversations: %q and %q", ids[0], ids[1])
		}
	}
}

// A role given on one replica holds on the other: the owner, meeting a
// person it has not seen, reads the store rather than make them a member
// over the role they were given.
func TestARoleGivenElsewhereHolds(t *testing.T) {
	_, _, a, b := twoReplicas(t)
	bob := switchboard.Author{Channel: "web", ID: "bob", Name: "Bob"}

	onA := watch(t, a, sessions.AttachOptions{Key: "web:k7", Author: alice, AfterSeq: -1})
	id := onA.sub.Ready.Session
	onB := watch(t, b, sessions.AttachOptions{SessionID: id, Author: bob, Role: collaboration.Approver, AfterSeq: -1})
	if onB.sub.Ready.Role != string(collaboration.Approver) {
		t.Fatalf("bob's role on b: %q, want approver", onB.sub.Ready.Role)
	}
	again := watch(t, a, sessions.AttachOptions{SessionID: id, Author: bob, AfterSeq: -1})
	if again.sub.Ready.Role != string(collaboration.Approver) {
		t.Fatalf("bob's role on a, the owner: %q, want the approver he was made on b", again.sub.Ready.Role)
	}
	ctx := context.Background()
	members, err := a.db.Members(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.Key == bob.Key() && m.Role != string(collaboration.Approver) {
			t.Fatalf("stored role of bob: %q, want approver", m.Role)
		}
	}
}

// deaf is a store whose notifications never arrive: as if each were
// missed (one sent while the replica was loading the session, say).
type deaf struct{ Store }

func (deaf) Listen(ctx context.Context, _ func(postgres.Note)) error {
	<-ctx.Done()
	return nil
}

// Someone attaching on a mirror is shown what is stored, even when the
// mirror heard of none of it: a client resuming after the last event it
// was shown elsewhere is not told that event does not exist.
func TestAttachingToAMirrorShowsWhatIsStored(t *testing.T) {
	dsn := pg.NewDatabase(t)
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	a := startReplica(t, dsn, "a", llm)
	b := startReplica(t, dsn, "b", llm, func(c *Config) { c.Store = deaf{c.Store} })

	onA := watch(t, a, sessions.AttachOptions{Key: "web:k13", Author: alice, AfterSeq: 0})
	id := onA.sub.Ready.Session
	llm.Push(openaitest.Reply{Text: []string{"First."}})
	submit(t, a, id, text("one", "c1"))
	onA.until("the first answer", answer("First."))
	watch(t, b, sessions.AttachOptions{SessionID: id, Author: alice, AfterSeq: -1}) // b mirrors it from here

	llm.Push(openaitest.Reply{Text: []string{"Second."}})
	submit(t, a, id, text("two", "c2"))
	onA.until("the second answer", answer("Second."))
	ctx := context.Background()
	if err := a.db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	last, err := a.db.LastSeq(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	again := watch(t, b, sessions.AttachOptions{SessionID: id, Author: alice, AfterSeq: last})
	if got := again.sub.Ready.LastSeq; got != last {
		t.Fatalf("attached on the mirror after seq %d, the last stored: told the last is %d", last, got)
	}
}

// A viewer may send nothing but read-only commands, whichever replica
// they reach: the mirror refuses a click, an answer and a stop as the
// owner does, rather than forward them for the owner to run.
func TestAViewerIsRefusedOnEitherReplica(t *testing.T) {
	_, _, a, b := twoReplicas(t)
	vic := switchboard.Author{Channel: "web", ID: "vic", Name: "Vic"}
	onA := watch(t, a, sessions.AttachOptions{Key: "web:k12", Author: alice, AfterSeq: -1})
	id := onA.sub.Ready.Session
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range []*replica{a, b} {
		w := watch(t, r, sessions.AttachOptions{SessionID: id, Author: vic, Role: collaboration.Viewer, AfterSeq: -1})
		if w.sub.Ready.Role != string(collaboration.Viewer) {
			t.Fatalf("vic's role on %s: %q, want viewer", r.id, w.sub.Ready.Role)
		}
		for _, in := range []switchboard.Input{
			{Kind: switchboard.InputText, Text: "hello"},
			{Kind: switchboard.InputAction, ActionID: "ui_1:go", Value: "yes"},
			{Kind: switchboard.InputConfirm, ConfirmationID: "c_1", Approved: true},
			{Kind: switchboard.InputCancel},
			{Kind: switchboard.InputText, Text: "/stop"},
		} {
			in.Author = vic
			if _, err := r.m.Submit(ctx, id, in); !errors.Is(err, sessions.ErrForbidden) {
				t.Errorf("a viewer's %s %q on %s: %v, want refused as forbidden", in.Kind, in.Text, r.id, err)
			}
		}
	}
	if q, err := a.db.Inbox(ctx, id); err != nil || len(q) != 0 {
		t.Fatalf("inbox after the viewer's inputs: %d entries (%v), want none forwarded", len(q), err)
	}
}

// A role is held by one replica at a time, and moves to another when its
// holder dies.
func TestARoleHasOneHolder(t *testing.T) {
	dsn, _, a, b := twoReplicas(t)

	var mu sync.Mutex
	leading := map[string]bool{}
	started := make(chan string, 4)
	lead := func(r *replica) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go func() {
			<-r.stopped // the replica's crash ends its role too
			cancel()
		}()
		go r.c.Lead(ctx, "indexer", func(ctx context.Context) {
			mu.Lock()
			for other, on := range leading {
				if on {
					t.Errorf("%s holds the role while %s does", r.id, other)
				}
			}
			leading[r.id] = true
			mu.Unlock()
			started <- r.id
			<-ctx.Done()
			mu.Lock()
			leading[r.id] = false
			mu.Unlock()
		})
	}
	lead(a)
	lead(b)
	first := <-started
	dead, other := a, b
	if first == "b" {
		dead, other = b, a
	}
	dead.crash()
	runOut(t, dsn, dead.id)
	select {
	case second := <-started:
		if second != other.id {
			t.Fatalf("after %s died, %s took the role, want %s", dead.id, second, other.id)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("nobody took the role over after %s died", dead.id)
	}
}

// Someone who joins on one replica is on the roster the others show.
func TestTheRosterCrossesReplicas(t *testing.T) {
	_, _, a, b := twoReplicas(t)
	bob := switchboard.Author{Channel: "web", ID: "bob", Name: "Bob"}

	onA := watch(t, a, sessions.AttachOptions{Key: "web:k8", Author: alice, AfterSeq: -1})
	id := onA.sub.Ready.Session
	watch(t, b, sessions.AttachOptions{SessionID: id, Author: bob, AfterSeq: -1})
	onA.until("a roster with bob on a", func(ev switchboard.Event) bool {
		var d switchboard.MembersData
		if ev.Type != switchboard.EventMembers || json.Unmarshal(ev.Data, &d) != nil {
			return false
		}
		for _, m := range d.Members {
			if m.ID == "bob" {
				return true
			}
		}
		return false
	})
}

// /leave and /reset written in a place on a replica that does not run the
// conversation: the replica that runs it, whose listener renders the
// place, stops showing the conversation there after the line about it,
// or shows the new conversation there.
func TestLeaveAndResetFromAMirror(t *testing.T) {
	dsn, _, a, b := twoReplicas(t)
	fa, fb := &follows{told: make(chan struct{}, 1)}, &follows{told: make(chan struct{}, 1)}
	a.m.SetFollower("chat", fa)
	b.m.SetFollower("chat", fb)
	onA := watch(t, a, sessions.AttachOptions{Key: "web:k9", Author: alice, AfterSeq: 0})
	id := onA.sub.Ready.Session
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, room := range []string{"room-2", "room-3"} {
		if _, err := a.m.Bind(ctx, "chat", room, id); err != nil {
			t.Fatal(err)
		}
	}
	watch(t, b, sessions.AttachOptions{SessionID: id, Author: alice, AfterSeq: -1}) // b holds it as a mirror

	in := text("/leave", "c1")
	in.Place = "chat:room-2"
	submit(t, b, id, in)
	left := onA.until("the line about the place", func(ev switchboard.Event) bool {
		return ev.Type == switchboard.EventMessage && strings.Contains(string(ev.Data), "took this conversation out of")
	})
	for {
		if seq, ok := fa.unfollowed("room-2"); ok {
			if seq < left.Seq {
				t.Fatalf("the place stops after %d, before the line about it (%d)", seq, left.Seq)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the replica that runs the conversation goes on showing the place that left it")
		case <-time.After(10 * time.Millisecond):
		}
	}

	in = text("/reset", "c2")
	in.Place = "chat:room-3"
	submit(t, b, id, in)
	for {
		bound, err := a.db.Binding(ctx, "chat", "room-3")
		if err != nil {
			t.Fatal(err)
		}
		if bound.SessionID != id && fa.sawIn("room-3", bound.SessionID) {
			if h := holder(t, dsn, bound.SessionID); h != "a" {
				t.Fatalf("the new conversation is %q's, want a's", h)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the place where the conversation was reset on the other replica shows %s still", bound.SessionID)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A replica restarted under the same id (storage.replica set, as a
// StatefulSet's pod name would be) after a crash does not keep the leases
// of the conversations its predecessor held: it does not run them, so
// renewing them would leave them to nobody, and what a person writes on
// another replica would wait in the inbox for ever. They run out, and the
// others take them over.
func TestRestartedUnderTheSameID(t *testing.T) {
	dsn, llm, a, b := twoReplicas(t)

	onA := watch(t, a, sessions.AttachOptions{Key: "web:k6", Author: alice, AfterSeq: 0})
	id := onA.sub.Ready.Session
	llm.Push(openaitest.Reply{Text: []string{"Before."}})
	submit(t, a, id, text("before", "c1"))
	onA.until("the answer", answer("Before."))

	a.crash()
	before := leaseExpiry(t, dsn, id)
	again := startReplica(t, dsn, "a", llm)
	started := time.Now() // after New, before the first renewal (a third of the lease)
	renewed := func() bool {
		again.c.mu.Lock()
		defer again.c.mu.Unlock()
		return again.c.renewed.After(started)
	}
	for deadline := time.Now().Add(30 * time.Second); !renewed(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the restarted replica did not renew its leases within 30s")
		}
	}
	if after := leaseExpiry(t, dsn, id); after != before {
		t.Fatalf("the restarted replica renewed the lease of a conversation it does not run (expiry %d, was %d)", after, before)
	}

	runOut(t, dsn, "a")
	onB := watch(t, b, sessions.AttachOptions{SessionID: id, Author: alice, AfterSeq: 0})
	llm.Push(openaitest.Reply{Text: []string{"After."}})
	submit(t, b, id, text("after", "c2"))
	onB.until("the answer to what was written on b", answer("After."))
}

// leaseExpiry is when session id's lease runs out, in the database's
// milliseconds.
func leaseExpiry(t *testing.T, dsn, id string) int64 {
	t.Helper()
	var ms int64
	if err := connect(t, dsn).QueryRow(context.Background(), `SELECT expires_at FROM leases WHERE name = $1`, postgres.SessionLease(id)).Scan(&ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// gatedStore is a Store whose AcquireLease and RenewLeases each wait, when
// given a gate, until it is opened: a test orders a claim and a renewal
// as it wants. The leases are held by this replica alone.
type gatedStore struct {
	acquire, renew chan struct{} // nil: no wait
	acquiring      chan string   // the names each acquisition asks for
	renewing       chan []string // the names each renewal asks for
}

func (g *gatedStore) AcquireLease(ctx context.Context, name string, ttl time.Duration) (postgres.Lease, error) {
	g.acquiring <- name
	if g.acquire != nil {
		<-g.acquire
	}
	return postgres.Lease{Name: name, Holder: "a", Epoch: 1, Expires: time.Now().Add(ttl)}, nil
}

func (g *gatedStore) RenewLeases(ctx context.Context, ttl time.Duration, names []string) ([]postgres.Lease, error) {
	g.renewing <- names
	if g.renew != nil {
		<-g.renew
	}
	var ls []postgres.Lease
	for _, n := range names {
		ls = append(ls, postgres.Lease{Name: n, Holder: "a", Epoch: 1, Expires: time.Now().Add(ttl)})
	}
	return ls, nil
}

func (g *gatedStore) ReleaseLease(context.Context, string) error { return nil }
func (g *gatedStore) Fence(string, int64)                        {}
func (g *gatedStore) Unfence(string)                             {}
func (g *gatedStore) Listen(ctx context.Context, _ func(postgres.Note)) error {
	<-ctx.Done()
	return nil
}
func (g *gatedStore) Orphans(context.Context) ([]string, error) { return nil, nil }
func (g *gatedStore) Heartbeat(context.Context) error           { return nil }

// lostSessions records what a Cluster tells the sessions they lost.
type lostSessions struct {
	mu   sync.Mutex
	lost []string
}

func (l *lostSessions) StoredElsewhere(string)  {}
func (l *lostSessions) InputElsewhere(string)   {}
func (l *lostSessions) BoundElsewhere(string)   {}
func (l *lostSessions) MembersElsewhere(string) {}
func (l *lostSessions) Lost(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lost = append(l.lost, id)
}
func (l *lostSessions) TakeOver(context.Context, string) (bool, error) { return false, nil }
func (l *lostSessions) Resync()                                        {}

// A conversation claimed while a renewal is under way is not among the
// leases that renewal renews: it is not lost for that (it was, when the
// claim began before the renewal and ended during it, and the turn the
// replica had just taken over was cut and taken over again).
func TestClaimDuringRenewalIsNotLost(t *testing.T) {
	g := &gatedStore{acquire: make(chan struct{}), renew: make(chan struct{}), acquiring: make(chan string, 1), renewing: make(chan []string, 1)}
	c := New(Config{Store: g, Lease: time.Hour, Logger: logger(t)})
	s := &lostSessions{}
	claimed := make(chan error, 1)
	go func() { claimed <- c.Claim(context.Background(), "s1") }()
	<-g.acquiring // the claim has begun, and waits in the database
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		c.renew(context.Background(), s)
	}()
	if names := <-g.renewing; len(names) != 0 {
		t.Fatalf("the renewal asked for %v before any claim ended", names)
	}
	close(g.acquire) // the claim ends while the renewal is in the database
	if err := <-claimed; err != nil {
		t.Fatal(err)
	}
	close(g.renew)
	<-renewed
	if len(s.lost) != 0 || c.Held() != 1 {
		t.Fatalf("the sessions were told they lost %v (holding %d): a claim made during a renewal is not lost", s.lost, c.Held())
	}
	// The next renewal renews it.
	go c.renew(context.Background(), s)
	if names := <-g.renewing; len(names) != 1 || names[0] != "session:s1" {
		t.Fatalf("the next renewal asked for %v, want session:s1", names)
	}
}
