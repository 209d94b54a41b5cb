package sessions_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/storage"
	"github.com/switchboard-gw/switchboard/tools"
)

// The harness runs the real thing: a Manager on real SQLite, the real
// OpenAI adapter talking to a scripted chat-completions server on loopback
// (newHarness); or, for tests that wait on timers in a synctest bubble, the
// same Manager with a scripted model in process (newBubbleHarness).

// serversGuide offers an MCP server's tools as a whole ("echo.*").
const serversGuide = `---
name: servers
tools: [calculator, echo.*]
approval: { default: auto, ask: [echo.*], auto: [echo.ping] }
---
You use the echo server.
`

const testGuide = `---
name: tester
description: A guide for tests
temperature: 0.2
memory: { policy: sliding-window, window: 6 }
initial_memories: ["The shop opens at 9."]
tools: [current_time, calculator, present, boom, draw]
approval: { default: ask, auto: [calculator, present, boom, draw] }
max_iterations: 3
greeting: Hello from the tester.
suggestions: ["what time is it?", "2+2"]
---
You are the test assistant.
`

const compactingGuide = `---
name: compacting
description: Summarises what leaves its window
memory: { policy: compact, window: 6 }
tools: [calculator]
approval: { default: auto }
---
You remember everything.
`

const rememberingGuide = `---
name: remembering
description: Remembers what people ask it to
tools: [remember, forget]
approval: { default: auto }
---
You remember what people ask you to.
`

const recallingGuide = `---
name: recalling
description: Recalls earlier conversations
memory: { recall: true }
tools: [memory_search]
approval: { default: auto }
---
You recall what was said before.
`

// manyToolsGuide offers a code host's server, whose tools are far more
// than its tools_max.
const manyToolsGuide = `---
name: many
description: Works with the code host
tools: [calculator, gh.*]
tools_max: 6
tools_pinned: [calculator]
approval: { default: auto, ask: [calculator, gh.delete_repository] }
---
You use the code host.
`

// textOnlyGuide's model takes no pictures, though its provider's may.
const textOnlyGuide = `---
name: textonly
vision: false
---
You read text.
`

const otherGuide = `---
name: other
description: Another persona
tools: [calculator]
approval: { default: deny }
members_may_stop: false
---
You are the other assistant.
`

type harness struct {
	t      *testing.T
	llm    *openaitest.Server // the model, on loopback (newHarness)
	model  *scripted          // the model, in process (newBubbleHarness)
	dbPath string
	db     *storage.DB
	m      *sessions.Manager
	stop   context.CancelFunc
	cfg    sessions.Config
	// wrap, when set, stands between the manager and the store from the
	// next start on (a test that watches the writes).
	wrap func(sessions.Store) sessions.Store
}

type option func(*sessions.Config)

func newHarness(t *testing.T, opts ...option) *harness {
	t.Helper()
	llm := openaitest.New()
	t.Cleanup(llm.Close)
	adapter, err := openai.New(providers.Config{Name: "main", Kind: "openai", BaseURL: llm.BaseURL(), APIKey: "sk-test", Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	h := buildHarness(t, adapter, opts)
	h.llm = llm
	return h
}

// newBubbleHarness is newHarness for a test inside synctest.Test: the
// model is in process (h.model), so that every goroutine the test starts
// waits on the bubble alone and its clock moves as soon as they all wait.
// Timeouts can then be the real ones: ten minutes pass at once. What the
// harness starts ends in the test's cleanup, inside the bubble.
func newBubbleHarness(t *testing.T, opts ...option) *harness {
	t.Helper()
	model := &scripted{}
	h := buildHarness(t, model, opts)
	h.model = model
	return h
}

func buildHarness(t *testing.T, model providers.Provider, opts []option) *harness {
	t.Helper()
	dir := t.TempDir()
	gdir := filepath.Join(dir, "guides")
	if err := os.MkdirAll(gdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"tester.md": testGuide, "other.md": otherGuide, "servers.md": serversGuide, "compacting.md": compactingGuide, "remembering.md": rememberingGuide, "recalling.md": recallingGuide, "many.md": manyToolsGuide, "textonly.md": textOnlyGuide} {
		if err := os.WriteFile(filepath.Join(gdir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	catalog, err := guides.LoadDir(gdir)
	if err != nil {
		t.Fatal(err)
	}
	boom := tools.Tool{
		Name: "boom", Description: "panics", Parameters: json.RawMessage(`{"type":"object"}`),
		Execute: func(ctx context.Context, args json.RawMessage) (tools.Result, error) { panic("kaboom") },
	}
	draw := tools.Tool{
		Name: "draw", Description: "draws two images", Parameters: json.RawMessage(`{"type":"object"}`),
		Execute: func(ctx context.Context, args json.RawMessage) (tools.Result, error) {
			return tools.Result{Content: "drew 2 images for " + tools.SessionOf(ctx), Images: []switchboard.UIImage{
				{Data: "iVBORw0KGgo=", MIMEType: "image/png", Alt: "chart.png"},
				{Data: "PHN2Zy8+", MIMEType: "image/svg+xml", Alt: "plot.svg"},
			}}, nil
		},
	}
	var hp *harness // the memory tools keep memories in the harness's store of the moment
	registry, err := tools.NewRegistry(append(append(tools.Builtins(time.Now), boom, draw), append(tools.MemoryTools(harnessMemories{&hp}, time.Now), tools.RecallTool(harnessMemories{&hp}))...)...)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dbPath: filepath.Join(dir, "test.db")}
	hp = h
	h.cfg = sessions.Config{
		Guides: catalog, DefaultGuide: "tester", Tools: registry, DefaultProvider: "main",
		Providers: map[string]*providers.Resilient{"main": {
			Name: "main", Provider: model,
			Policy: providers.Policy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond, IdleTimeout: 5 * time.Second},
			Sleep:  func(ctx context.Context, d time.Duration) error { return nil },
		}},
	}
	for _, o := range opts {
		o(&h.cfg)
	}
	h.start()
	t.Cleanup(h.shutdown)
	return h
}

// idleOut, in a bubble, lets IdleTimeout pass from now, once what is under
// way has settled (a listener that just left has detached), and checks
// that the loaded sessions stay loaded until its very end and are all
// unloaded once it is over.
func (h *harness) idleOut(t *testing.T) {
	t.Helper()
	synctest.Wait()
	loaded := h.m.Live()
	if loaded == 0 {
		t.Fatal("no session is loaded: nothing to unload")
	}
	time.Sleep(h.cfg.IdleTimeout - time.Nanosecond)
	synctest.Wait()
	if n := h.m.Live(); n != loaded {
		t.Fatalf("%d of %d sessions loaded a moment before the idle timeout (%s) was over, want all", n, loaded, h.cfg.IdleTimeout)
	}
	time.Sleep(time.Nanosecond)
	synctest.Wait()
	if n := h.m.Live(); n != 0 {
		t.Fatalf("%d sessions still loaded once the idle timeout (%s) was over after their listeners left", n, h.cfg.IdleTimeout)
	}
}

func (h *harness) start() {
	h.t.Helper()
	db, err := storage.Open(context.Background(), h.dbPath)
	if err != nil {
		h.t.Fatal(err)
	}
	h.db = db
	cfg := h.cfg
	cfg.Store = db
	if h.wrap != nil {
		cfg.Store = h.wrap(db)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	h.m = sessions.NewManager(ctx, cfg)
	// As the gateway does: what a restart left under way goes on.
	if err := h.m.Recover(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) shutdown() {
	if h.m == nil {
		return
	}
	h.stop()
	h.m.Wait()
	if err := h.db.Close(); err != nil {
		h.t.Errorf("close db: %v", err)
	}
	h.m = nil
}

// restart stops everything and starts again on the same database file.
func (h *harness) restart() {
	h.shutdown()
	h.start()
}

var (
	alice = switchboard.Author{Channel: "web", ID: "alice", Name: "Alice"}
	bob   = switchboard.Author{Channel: "slack", ID: "U2", Name: "Bob"}
)

// client is one attached listener collecting events.
type client struct {
	t   *testing.T
	h   *harness
	sub *sessions.Subscription
	id  string
	who switchboard.Author
	got []switchboard.Event
}

func (h *harness) attach(opts sessions.AttachOptions) *client {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sub, err := h.m.Attach(ctx, opts)
	if err != nil {
		h.t.Fatalf("attach: %v", err)
	}
	h.t.Cleanup(sub.Close)
	return &client{t: h.t, h: h, sub: sub, id: sub.Ready.Session, who: opts.Author}
}

func (h *harness) newSession(who switchboard.Author) *client {
	return h.attach(sessions.AttachOptions{Author: who})
}

// say submits a message and waits until the session has finished with it.
func (c *client) say(text string) {
	c.t.Helper()
	c.send(switchboard.Input{Kind: switchboard.InputText, Text: text, Author: c.who})
}

func (c *client) send(in switchboard.Input) *sessions.Receipt {
	c.t.Helper()
	if in.Author == (switchboard.Author{}) {
		in.Author = c.who
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.h.m.Submit(ctx, c.id, in)
	if err != nil {
		c.t.Fatalf("submit %+v: %v", in, err)
	}
	if _, err := r.Wait(ctx); err != nil {
		c.t.Fatalf("waiting for %+v: %v", in, err)
	}
	return r
}

// until reads events until one of type typ satisfying match arrives, and
// returns it. It fails the test after a generous deadline.
func (c *client) until(typ switchboard.EventType, match func(any) bool) any {
	c.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-c.sub.Events():
			if !ok {
				c.t.Fatalf("subscription closed while waiting for %s; got %s", typ, c.types())
			}
			c.got = append(c.got, ev)
			if ev.Type != typ {
				continue
			}
			p, err := ev.Payload()
			if err != nil {
				c.t.Fatal(err)
			}
			if match == nil || match(p) {
				return p
			}
		case <-deadline:
			c.t.Fatalf("no %s event; got %s", typ, c.types())
		}
	}
}

// pending, in a bubble, reads the events the subscription has for now,
// once every goroutine of the test waits, and reports whether its stream
// is still open. What it reads is added to c.got.
func (c *client) pending() (evs []switchboard.Event, open bool) {
	c.t.Helper()
	for {
		synctest.Wait()
		select {
		case ev, ok := <-c.sub.Events():
			if !ok {
				return evs, false
			}
			c.got = append(c.got, ev)
			evs = append(evs, ev)
		default:
			return evs, true
		}
	}
}

// already, in a bubble, is until without waiting for time to pass: the
// event of type typ must be among those the subscription has once every
// goroutine of the test waits. Those after it stay unread.
func (c *client) already(typ switchboard.EventType) any {
	c.t.Helper()
	for {
		synctest.Wait()
		select {
		case ev, ok := <-c.sub.Events():
			if !ok {
				c.t.Fatalf("subscription closed while looking for %s; got %s", typ, c.types())
			}
			c.got = append(c.got, ev)
			if ev.Type != typ {
				continue
			}
			p, err := ev.Payload()
			if err != nil {
				c.t.Fatal(err)
			}
			return p
		default:
			c.t.Fatalf("no %s event yet; got %s", typ, c.types())
		}
	}
}

// idle waits for the session to go idle.
func (c *client) idle() {
	c.t.Helper()
	c.until(switchboard.EventState, func(p any) bool { return p.(*switchboard.StateData).State == switchboard.StateIdle })
}

func (c *client) types() []string {
	var out []string
	for _, ev := range c.got {
		out = append(out, string(ev.Type))
	}
	return out
}

// reply waits for the next assistant message.
func (c *client) reply() *switchboard.MessageData {
	c.t.Helper()
	return c.until(switchboard.EventMessage, func(p any) bool {
		return p.(*switchboard.MessageData).Role == switchboard.RoleAssistant
	}).(*switchboard.MessageData)
}

func (c *client) errorEvent() *switchboard.ErrorData {
	c.t.Helper()
	return c.until(switchboard.EventError, nil).(*switchboard.ErrorData)
}

func (c *client) window() []switchboard.Message {
	c.t.Helper()
	w, err := c.h.db.Window(context.Background(), c.id, 100)
	if err != nil {
		c.t.Fatal(err)
	}
	return w
}

func lastRequest(t *testing.T, llm *openaitest.Server) openaitest.Request {
	t.Helper()
	reqs := llm.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model was never called")
	}
	return reqs[len(reqs)-1]
}
