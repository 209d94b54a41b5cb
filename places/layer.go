package places

// The layer: one per chat app. It owns the places' work (one ordered
// queue per place, places in parallel), following the sessions bound to
// them (one goroutine per followed place, which the chat app's Room
// renders into), and what every inbound path does the same way (inbound.go,
// join.go).

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/collaboration"
	"github.com/switchboard-gw/switchboard/sessions"
)

// Sessions is what a chat app needs of the session manager.
type Sessions interface {
	Attach(ctx context.Context, opts sessions.AttachOptions) (*sessions.Subscription, error)
	Submit(ctx context.Context, sessionID string, in switchboard.Input) (*sessions.Receipt, error)
	Upload(ctx context.Context, sessionID string, in switchboard.Input, files []sessions.Incoming) ([]switchboard.File, error)
	Discard(ctx context.Context, sessionID string, files []switchboard.File)
	Bind(ctx context.Context, channel, address, sessionID string) (switchboard.Binding, error)
	Binding(ctx context.Context, channel, address string) (switchboard.Binding, error)
	Rendered(ctx context.Context, b switchboard.Binding, seq int64) error
	SetState(ctx context.Context, b switchboard.Binding, state string) error
	SetFollower(channel string, f sessions.Follower)
	CatchUp(ctx context.Context, channel string) error
	FindUI(ctx context.Context, sessionID, uiID string) (switchboard.UI, error)
	JoinPlace(ctx context.Context, code string, author switchboard.Author, p sessions.Place, recap int, prove func(context.Context) error) (string, collaboration.Role, error)
}

// A Room renders one place's session: the chat app's side of following.
// The layer calls it from the place's follower goroutine only, one call
// at a time, so a Room needs no lock of its own. When the place is bound
// to another session (/reset), the layer asks for a new Room.
type Room interface {
	// Attached is called each time the place attaches to its session:
	// b is its binding as stored now (State), shown the last event the
	// place was shown, last the session's last event. Events after shown
	// up to last may have been posted before a restart recorded them: the
	// Room finds them (message metadata, Binding.State) rather than post
	// them twice.
	Attached(ctx context.Context, b switchboard.Binding, shown, last int64)
	// Show renders one event the place was not shown. p is its payload.
	// It reports whether a restart may resume after the event: not in
	// the middle of a reply, nor past a tool call whose line is not shown.
	Show(ctx context.Context, ev switchboard.Event, p any) (settled bool)
	// Tick is called every Config.Interval: show the reply under way as
	// it is now, renew a typing indicator.
	Tick(ctx context.Context)
	// Finish shows the reply under way for the last time: the session
	// unloaded, or the place left it.
	Finish(ctx context.Context)
	// Tell shows a notice meant for one person of the chat app alone (a
	// command's answer, their mistake) to them, privately where the
	// platform can; the layer decides whom (Audience).
	Tell(ctx context.Context, user string, d *switchboard.ErrorData)
}

// Config is a chat app's layer.
type Config struct {
	// Channel is the chat app's name in bindings and author keys.
	Channel string
	// Sessions is the session manager.
	Sessions Sessions
	Log      *slog.Logger
	// NewRoom makes the Room that renders b's place (an error: the
	// address is not the chat app's, logged, the place not followed).
	NewRoom func(b switchboard.Binding) (Room, error)
	// Interval is how often a followed place is ticked (a streamed
	// reply's least time between edits).
	Interval time.Duration
	// Gate is the chat app's say on every input before the session's
	// (Submit): its allow lists (an error refuses the input; make it a
	// *sessions.Refusal to say why) and the role it vouches for, which
	// it may set in in.Grant. Nil admits everything.
	Gate func(ctx context.Context, b switchboard.Binding, in *switchboard.Input) error
	// Workers and Depth size the inbound queues (16 workers of 64).
	Workers, Depth int
	// Words are the chat app's markup for the layer's own sentences.
	Words Words
	// FileStall gives up a person's file whose download brings nothing
	// for this long (30 s); FileTime is the longest a download may take
	// (10 minutes). See Download.
	FileStall, FileTime time.Duration
	// Telemetry, when set, traces each input handed in (Submit).
	Telemetry Telemetry
}

// Telemetry traces a chat app's work (the telemetry package implements
// it; nil traces nothing): a span for each input a chat app hands in, and
// a transport that makes each call its API client makes a span.
type Telemetry interface {
	// Inbound starts an input's span; end ends it with the input's fate.
	// traceparent identifies the span, for the turn the input starts to
	// link to.
	Inbound(ctx context.Context, channel, kind, session string) (_ context.Context, traceparent string, end func(error))
	// Transport wraps the transport of the chat app's API client.
	Transport(channel string, next http.RoundTripper) http.RoundTripper
}

// Words is how a chat app writes the layer's sentences: Escape makes a
// name literal text, Strong stresses it; JoinHint tells where a join may
// go instead of a thread that shows another conversation.
type Words struct {
	Escape, Strong func(string) string
	JoinHint       string
}

// Layer is one chat app's place layer. Create it with New (it registers
// as the follower of the chat app's bindings at once, so turns the
// manager resumes at start-up reach their places), start its workers with
// Start and its followers with Resume; Wait once Start's context ended.
type Layer struct {
	cfg Config
	log *slog.Logger

	// following are the places being rendered now, by address; early are
	// those the manager named before Resume (live). Guarded by mu, with
	// work and ctx, Start's: workers and followers live as long.
	mu        sync.Mutex
	work      []chan task
	ctx       context.Context
	live      bool
	following map[string]*follower
	early     []switchboard.Binding
	wg        sync.WaitGroup

	// asked is where each person last gave each session input
	// ("session/user" → address); see AskedIn.
	askedMu sync.Mutex
	asked   map[string]string

	// held are the places whose work waits for work set aside (Aside),
	// by the address Run was given; guarded by heldMu.
	heldMu sync.Mutex
	held   map[string]*hold

	// uploaded are the messages with files taken (session/client id),
	// so a message a platform delivers again is downloaded once
	// (files.go); guarded by uploadedMu.
	uploadedMu sync.Mutex
	uploaded   map[string]time.Time
}

// task is a place's work on its worker: f, or, with resume, the end of
// the work set aside there (Aside).
type task struct {
	place  string
	f      func()
	resume bool
}

// hold is a place whose work waits: what was queued for it meanwhile, in
// order, and released, closed when it goes on.
type hold struct {
	queued   []func()
	released chan struct{}
}

// New returns a chat app's layer, registered with cfg.Sessions as the
// follower of cfg.Channel's places.
func New(cfg Config) *Layer {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 16
	}
	if cfg.Depth <= 0 {
		cfg.Depth = 64
	}
	if cfg.Words.Escape == nil {
		cfg.Words.Escape = func(s string) string { return s }
	}
	if cfg.Words.Strong == nil {
		cfg.Words.Strong = cfg.Words.Escape
	}
	if cfg.FileStall <= 0 {
		cfg.FileStall = 30 * time.Second
	}
	if cfg.FileTime <= 0 {
		cfg.FileTime = 10 * time.Minute
	}
	l := &Layer{cfg: cfg, log: cfg.Log, following: map[string]*follower{}, asked: map[string]string{},
		held: map[string]*hold{}, uploaded: map[string]time.Time{}}
	cfg.Sessions.SetFollower(cfg.Channel, l)
	return l
}

// Start starts the places' workers, which run until ctx ends (Wait waits
// for them): from now on Run queues work.
func (l *Layer) Start(ctx context.Context) {
	work := make([]chan task, l.cfg.Workers)
	for i := range work {
		ch := make(chan task, l.cfg.Depth)
		work[i] = ch
		l.wg.Go(func() {
			for {
				select {
				case t := <-ch:
					l.do(t)
				case <-ctx.Done():
					return
				}
			}
		})
	}
	l.mu.Lock()
	l.work, l.ctx = work, ctx
	l.mu.Unlock()
}

// Resume starts following, once the chat app can post: the places the
// manager named before (turns resumed at start-up), then what happened
// while the gateway was away (replies cut by a restart, events caused in
// other channels). Call it after Start.
func (l *Layer) Resume() {
	l.mu.Lock()
	l.live = true
	early := l.early
	l.early = nil
	ctx := l.ctx
	l.mu.Unlock()
	for _, b := range early {
		l.Follow(b)
	}
	if err := l.cfg.Sessions.CatchUp(ctx, l.cfg.Channel); err != nil {
		l.log.Error(l.cfg.Channel+": catching up", "err", err)
	}
}

// Live reports whether the places are followed (Resume ran): what comes
// in can be answered.
func (l *Layer) Live() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.live
}

// Context is Start's context, nil before Start: what the chat app's work
// runs under once a request that brought it is answered.
func (l *Layer) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ctx
}

// Wait waits, once Start's context ended, for every worker and follower
// to return, and unregisters the layer as the chat app's follower.
func (l *Layer) Wait() {
	l.wg.Wait()
	l.cfg.Sessions.SetFollower(l.cfg.Channel, nil)
}

// Run queues f on the worker of a place: what happens in one place is
// handled in order, places in parallel, with no lock shared between them.
// A full queue makes the caller wait (backpressure on the platform's
// events), until the layer stops; so does a place whose work waits for a
// download (Aside) with as much queued behind it. Before Start, f is
// dropped.
func (l *Layer) Run(place string, f func()) {
	l.queue(task{place: place, f: f})
}

func (l *Layer) queue(t task) {
	l.mu.Lock()
	ctx, work := l.ctx, l.work
	l.mu.Unlock()
	if ctx == nil {
		return
	}
	for !t.resume {
		l.heldMu.Lock()
		h := l.held[t.place]
		full := h != nil && len(h.queued) >= l.cfg.Depth
		l.heldMu.Unlock()
		if !full {
			break
		}
		select {
		case <-h.released:
		case <-ctx.Done():
			return
		}
	}
	h := fnv.New32a()
	h.Write([]byte(t.place))
	select {
	case work[h.Sum32()%uint32(len(work))] <- t:
	case <-ctx.Done():
	}
}

// do runs a place's work on its worker; work for a place whose work
// waits (Aside) is kept for when it goes on.
func (l *Layer) do(t task) {
	l.heldMu.Lock()
	h, waits := l.held[t.place]
	switch {
	case t.resume && !waits:
		l.heldMu.Unlock()
		return
	case t.resume:
		delete(l.held, t.place)
		close(h.released)
	case waits:
		h.queued = append(h.queued, t.f)
		l.heldMu.Unlock()
		return
	}
	l.heldMu.Unlock()
	if !t.resume {
		t.f()
		return
	}
	for i, f := range h.queued {
		f()
		l.heldMu.Lock()
		if again, ok := l.held[t.place]; ok { // f set work aside in turn: the rest waits for it
			again.queued = append(slices.Clone(h.queued[i+1:]), again.queued...)
			l.heldMu.Unlock()
			return
		}
		l.heldMu.Unlock()
	}
}

// Aside runs f on a goroutine of its own, for work of a place that may
// take long (downloading a person's files): the work queued for the place
// after it waits until f has returned, so the place's order is kept,
// while the other places, on the same worker too, go on. Call it from
// work Run runs for the place, with the address Run was given. f's
// context ends when the layer stops.
func (l *Layer) Aside(place string, f func(ctx context.Context)) {
	l.mu.Lock()
	ctx := l.ctx
	l.mu.Unlock()
	if ctx == nil {
		return
	}
	l.heldMu.Lock()
	_, waits := l.held[place]
	if !waits {
		l.held[place] = &hold{released: make(chan struct{})}
	}
	l.heldMu.Unlock()
	if waits { // not called from the place's work: its order cannot be kept
		l.log.Error(l.cfg.Channel+": work set aside for a place whose work waits already", "place", place)
		l.wg.Go(func() { f(ctx) })
		return
	}
	l.wg.Go(func() {
		defer l.queue(task{place: place, resume: true})
		f(ctx)
	})
}

// Follow is told by the session manager that a bound session is loaded
// (or has events its place was not shown): it starts rendering that
// place, unless it already does (sessions.Follower).
func (l *Layer) Follow(b switchboard.Binding) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.live {
		l.early = append(l.early, b) // Resume starts it
		return
	}
	if l.ctx.Err() != nil {
		return // stopping: the next start catches up
	}
	if f, ok := l.following[b.Address]; ok {
		f.again, f.next = true, b // once this run ends, attach again
		f.endAt = 0               // bound again after a /leave
		if b.SessionID != f.b.SessionID && f.cancel != nil {
			f.cancel() // the place shows another session now (/reset)
		}
		return
	}
	room, err := l.cfg.NewRoom(b)
	if err != nil {
		l.log.Error(l.cfg.Channel+": binding", "place", b.Address, "err", err)
		return
	}
	f := &follower{l: l, b: b, room: room}
	l.following[b.Address] = f
	l.wg.Go(f.run)
}

// UnfollowAfter stops showing a place's session once its events through
// seq are shown: the place left the conversation (/leave) and the
// session, which stays loaded for its other places, goes on without it.
func (l *Layer) UnfollowAfter(address string, seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f, ok := l.following[address]; ok {
		f.again, f.endAt = false, max(seq, 1)
	}
}

// follower renders one place: one goroutine, attached to the place's
// session while it is loaded, again when it loads again.
type follower struct {
	l    *Layer
	room Room

	// b is the binding followed (read by Follow: guarded by l.mu while
	// run may change it). again and next are set by Follow while this
	// runs, cancel ends the run, endAt (UnfollowAfter) is the last event
	// to show before the place stops showing the session; guarded by l.mu.
	b      switchboard.Binding
	again  bool
	next   switchboard.Binding
	cancel context.CancelFunc
	endAt  int64

	rendered int64 // the last event handled
	// settled is the last event after which a restart may resume,
	// recorded the seq last stored.
	settled, recorded int64
}

func (f *follower) run() {
	ctx := f.l.ctx
	for {
		runCtx, cancel := context.WithCancel(ctx)
		f.l.mu.Lock()
		f.cancel = cancel
		f.l.mu.Unlock()
		f.once(runCtx)
		cancel()
		f.l.mu.Lock()
		if !f.again || ctx.Err() != nil {
			delete(f.l.following, f.b.Address)
			f.l.mu.Unlock()
			return
		}
		f.again = false
		if f.next.SessionID != f.b.SessionID {
			room, err := f.l.cfg.NewRoom(f.next)
			if err != nil { // the same address: it parsed before
				delete(f.l.following, f.b.Address)
				f.l.mu.Unlock()
				return
			}
			f.b, f.room, f.rendered = f.next, room, f.next.RenderedSeq
			f.settled, f.recorded = 0, 0
		}
		f.l.mu.Unlock()
	}
}

// once attaches and renders until the session unloads, the place leaves
// it, or the layer stops.
func (f *follower) once(ctx context.Context) {
	s := f.l.cfg.Sessions
	if b, err := s.Binding(ctx, f.l.cfg.Channel, f.b.Address); err == nil && b.SessionID == f.b.SessionID {
		f.l.mu.Lock()
		f.b = b // its state and progress as stored now
		f.l.mu.Unlock()
	}
	f.rendered = max(f.rendered, f.b.RenderedSeq)
	f.recorded = max(f.recorded, f.b.RenderedSeq)
	sub, err := s.Attach(ctx, sessions.AttachOptions{SessionID: f.b.SessionID, Follow: f.l.cfg.Channel, AfterSeq: f.rendered})
	switch {
	case errors.Is(err, sessions.ErrElsewhere):
		// Another replica runs it, and renders it there.
		f.l.log.Debug(f.l.cfg.Channel+": session shown by another replica", "session", f.b.SessionID, "place", f.b.Address)
		return
	case err != nil:
		if ctx.Err() == nil {
			f.l.log.Error(f.l.cfg.Channel+": follow a session", "session", f.b.SessionID, "place", f.b.Address, "err", err)
		}
		return
	}
	defer sub.Close()
	f.room.Attached(ctx, f.b, f.rendered, sub.Ready.LastSeq)
	tick := time.NewTicker(f.l.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				// The session unloaded: show the reply under way for the
				// last time. Not when the layer is stopping (the
				// subscription ends with it): a reply cut off there is
				// left for the next start to find and finish, not
				// half-finished now with calls that fail.
				if ctx.Err() == nil {
					f.room.Finish(ctx)
				}
				f.record(ctx)
				return
			}
			f.render(ctx, ev)
		case <-tick.C:
			f.room.Tick(ctx)
			f.record(ctx)
		case <-ctx.Done():
			f.record(ctx) // stopping: keep how far the place was shown
			return
		}
		if f.ended() {
			f.room.Finish(ctx)
			return
		}
	}
}

// render shows one event, once.
func (f *follower) render(ctx context.Context, ev switchboard.Event) {
	if ev.Seq > 0 && ev.Seq <= f.rendered {
		return
	}
	p, err := ev.Payload()
	if err != nil {
		f.l.log.Error(f.l.cfg.Channel+": event", "session", ev.Session, "err", err)
		return
	}
	if d, ok := p.(*switchboard.ErrorData); ok {
		switch user, show := f.l.Audience(f.b, ev, d); {
		case !show:
			return // someone else's, or an answer shown where they asked
		case user != "":
			f.room.Tell(ctx, user, d)
			return
		}
	}
	settled := f.room.Show(ctx, ev, p)
	if ev.Seq <= 0 {
		return
	}
	f.rendered = ev.Seq
	if settled {
		f.settled = ev.Seq
	}
	// A turn's end, or a wait for a person: a point to record now.
	switch d := p.(type) {
	case *switchboard.StateData:
		if d.State != switchboard.StateThinking && d.State != switchboard.StateExecutingTool {
			f.record(ctx)
		}
	case *switchboard.ConfirmationRequestData:
		f.record(ctx)
	}
}

// ended reports whether the place has been shown all it is to show.
func (f *follower) ended() bool {
	f.l.mu.Lock()
	defer f.l.mu.Unlock()
	return f.endAt > 0 && f.rendered >= f.endAt
}

// record keeps how far the place was rendered: at a turn's end, on the
// ticker and when the session unloads, not after every event (each is a
// write; a restart that replays a few events finds them shown).
func (f *follower) record(ctx context.Context) {
	if f.settled <= f.recorded {
		return
	}
	// Also while stopping: the store outlives the listeners.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := f.l.cfg.Sessions.Rendered(ctx, f.b, f.settled); err != nil {
		f.l.log.Warn(f.l.cfg.Channel+": recording progress", "place", f.b.Address, "err", err)
		return
	}
	f.recorded = f.settled
}
