package main

// A WebSocket client of the crash test that behaves as docs/websocket.md
// asks: it resumes, resends what it has not seen stored and answers approvals.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	gws "github.com/gorilla/websocket"
	_ "modernc.org/sqlite"

	"github.com/switchboard-gw/switchboard"
)

// crashClient is a WebSocket client that behaves as docs/websocket.md
// asks: it resumes after its last seq, resends inputs it has not seen
// accepted (same id), and answers approval requests.
type crashClient struct {
	h      *crashRun
	n      int
	user   string
	rng    *rand.Rand // the client's goroutine only
	offset int        // where its questions start in the plain, calc, time cycle

	mu         sync.Mutex
	session    string
	seen       map[int64]seenEvent
	lastSeq    int64
	inputs     []*crashInput
	open       map[string]*openConfirm
	resolved   map[string]bool
	cursor     int   // where the next connection goes (crashRun.next)
	conns      int   // connections made
	connNode   int   // the gateway the current connection is to…
	connGen    int   // …and its start
	readyLast  int64 // ready.last_seq of the current connection; -1 before ready
	caughtUp   bool  // the current connection has replayed up to readyLast
	dropConn   bool  // hello failed: reconnect
	lastState  string
	reconnects int
	connErrs   map[string]int
	problems   []string
	recent     []string
}

type crashInput struct {
	id, text string
	sent     bool // on the current connection, or before it was known
	accepted bool // a user message with its text was seen
	answered bool // an assistant message (or an error) followed
	endedBy  string
	sends    int
	resendAt time.Time
}

type openConfirm struct {
	due      time.Time
	sentConn int // the connection it was last sent on
}

func newCrashClient(h *crashRun, n int, seed int64) *crashClient {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(n)))
	return &crashClient{
		h: h, n: n, user: fmt.Sprintf("u%d", n), rng: rng, offset: rng.IntN(3), cursor: n - 1,
		seen: map[int64]seenEvent{}, open: map[string]*openConfirm{}, resolved: map[string]bool{},
		connErrs: map[string]int{}, readyLast: -1,
	}
}

func (c *crashClient) problem(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func (c *crashClient) current() *crashInput {
	if len(c.inputs) == 0 {
		return nil
	}
	return c.inputs[len(c.inputs)-1]
}

func (c *crashClient) wantsMore() bool {
	return !c.h.final.Load() || len(c.inputs) < minCrashInputs
}

// settled: the client has its session, is connected to a gateway that
// is still running, and has caught up on it.
func (c *crashClient) settled() bool {
	c.mu.Lock()
	ok, node, gen := c.session != "" && c.caughtUp, c.connNode, c.connGen
	c.mu.Unlock()
	return ok && c.h.alive(node, gen)
}

// idle: nothing of this client's is in flight.
func (c *crashClient) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.current()
	return c.caughtUp && len(c.open) == 0 && (cur == nil || cur.answered && c.lastState == "idle")
}

// inFlight is the number of the input whose turn is under way, -1 if none.
func (c *crashClient) inFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.current(); cur != nil && !cur.answered {
		return len(c.inputs)
	}
	return -1
}

func (c *crashClient) finished() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.current()
	return c.caughtUp && len(c.open) == 0 && cur != nil && cur.answered && !c.wantsMore()
}

func (c *crashClient) report() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "client %d (session %s): last seq %d, connected to start #%d of %s (ready.last_seq %d, caught up %v), %d inputs, open approvals %v\n",
		c.n, c.session, c.lastSeq, c.connGen, c.h.nodes[c.connNode].name, c.readyLast, c.caughtUp, len(c.inputs), slices.Sorted(maps.Keys(c.open)))
	for _, in := range c.inputs {
		if !in.answered {
			fmt.Fprintf(&b, "  input %s %q: sent %v (%d times), accepted %v, answered %v\n", in.id, in.text, in.sent, in.sends, in.accepted, in.answered)
		}
	}
	for _, p := range c.problems {
		fmt.Fprintf(&b, "  problem: %s\n", p)
	}
	fmt.Fprintf(&b, "  last events:\n    %s\n", strings.Join(c.recent, "\n    "))
	return b.String()
}

func (c *crashClient) note(f wsFrame) {
	if f.Type == "ready" && len(c.recent) > 0 && strings.HasPrefix(c.recent[len(c.recent)-1], "0 ready") {
		c.recent = c.recent[:len(c.recent)-1] // the last one says enough
	}
	c.recent = append(c.recent, fmt.Sprintf("%d %s %s", f.Seq, f.Type, short(f.Data, 120)))
	if len(c.recent) > 16 {
		c.recent = c.recent[1:]
	}
}

// approvalDelay is how long the client takes to approve: now and then long
// enough for a kill to land while the request is open.
func (c *crashClient) approvalDelay() time.Duration {
	if c.rng.IntN(4) == 0 {
		return time.Duration(200+c.rng.IntN(300)) * time.Millisecond
	}
	return time.Duration(c.rng.IntN(30)) * time.Millisecond
}

// loop connects, and reconnects with backoff, until ctx ends; each
// connection goes to the next gateway (crashRun.next).
func (c *crashClient) loop(ctx context.Context) {
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		if addr, node, gen := c.h.next(&c.cursor); addr != "" && c.connect(ctx, addr, node, gen) {
			backoff = 10 * time.Millisecond
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// connect runs one connection; it reports whether one was made.
func (c *crashClient) connect(ctx context.Context, addr string, node, gen int) bool {
	d := gws.Dialer{HandshakeTimeout: 3 * time.Second}
	conn, _, err := d.DialContext(ctx, "ws://"+addr+"/ws", http.Header{"Origin": {"http://" + addr}})
	if err != nil {
		return false
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	c.mu.Lock()
	c.conns++
	c.connNode, c.connGen, c.readyLast, c.caughtUp, c.dropConn = node, gen, -1, false, false
	hello := map[string]any{"type": "hello", "user": map[string]string{"id": c.user}}
	if c.session == "" {
		hello["guide"] = "crash"
	} else {
		hello["session"], hello["resume_after"] = c.session, c.lastSeq
		c.reconnects++
	}
	err = c.write(conn, hello)
	c.mu.Unlock()
	if err != nil {
		return true
	}

	frames := make(chan wsFrame, 64)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			_, b, err := conn.ReadMessage()
			if err != nil {
				readErr <- err
				return
			}
			var f wsFrame
			if err := json.Unmarshal(b, &f); err != nil {
				f = wsFrame{Type: "unparseable", Data: b}
			}
			select {
			case frames <- f:
			case <-done:
				return
			}
		}
	}()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case f := <-frames:
			c.handle(f)
		case <-readErr:
			// Everything read before the error is queued: take it.
			for {
				select {
				case f := <-frames:
					c.handle(f)
				default:
					return true
				}
			}
		case <-tick.C:
		case <-ctx.Done():
			return true
		}
		if err := c.act(conn); err != nil {
			return true
		}
	}
}

// write sends a frame; c.mu is held.
func (c *crashClient) write(conn *gws.Conn, v any) error {
	_ = conn.SetWriteDeadline(time.Now().Add(3 * time.Second))
	return conn.WriteJSON(v)
}

// act sends what is due: approvals, a resent or the next input.
func (c *crashClient) act(conn *gws.Conn) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropConn {
		return errors.New("reconnect")
	}
	if !c.caughtUp {
		return nil
	}
	now := time.Now()
	if !c.h.hold.Load() {
		for _, id := range slices.Sorted(maps.Keys(c.open)) {
			oc := c.open[id]
			if oc.sentConn == c.conns || now.Before(oc.due) {
				continue
			}
			if err := c.write(conn, map[string]any{"type": "confirm", "confirmation_id": id, "approved": true}); err != nil {
				return err
			}
			oc.sentConn = c.conns
		}
	}
	cur := c.current()
	switch {
	case cur != nil && !cur.sent:
		if now.Before(cur.resendAt) {
			return nil
		}
	case (cur == nil || cur.answered) && !c.h.paused.Load() && c.wantsMore():
		k := len(c.inputs) + 1
		qid := fmt.Sprintf("q%d-%d", c.n, k)
		text := qid + " what is new?"
		switch (k + c.offset) % 3 {
		case 1:
			text = qid + " please calc 2+3"
		case 2:
			text = qid + " what time is it?"
		}
		cur = &crashInput{id: fmt.Sprintf("c%d-%d", c.n, k), text: text}
		c.inputs = append(c.inputs, cur)
	default:
		return nil
	}
	if err := c.write(conn, map[string]any{"type": "input", "id": cur.id, "text": cur.text}); err != nil {
		return err
	}
	cur.sent = true
	cur.sends++
	c.h.inputsSent.add(c.session)
	return nil
}

func (c *crashClient) handle(f wsFrame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.note(f)
	if f.Seq == 0 {
		c.connectionEvent(f)
		return
	}
	if prev, ok := c.seen[f.Seq]; ok {
		if prev.Type != f.Type || !sameData(prev.Data, f.Data) {
			c.problem("seq %d was %s %s, and came again as %s %s", f.Seq, prev.Type, short(prev.Data, 200), f.Type, short(f.Data, 200))
		}
		return
	}
	if f.Seq != c.lastSeq+1 {
		c.problem("seq %d came after seq %d (a gap or a step back)", f.Seq, c.lastSeq)
	}
	c.seen[f.Seq] = seenEvent{f.Type, f.Data}
	c.lastSeq = max(c.lastSeq, f.Seq)
	live := c.readyLast >= 0 && f.Seq > c.readyLast
	now := time.Now()
	switch f.Type {
	case "message":
		var md switchboard.MessageData
		_ = json.Unmarshal(f.Data, &md)
		switch md.Role {
		case switchboard.RoleUser:
			i := slices.IndexFunc(c.inputs, func(in *crashInput) bool { return in.text == md.Content })
			switch {
			case i < 0:
				c.problem("seq %d: a user message the client never sent: %q", f.Seq, md.Content)
			case c.inputs[i].accepted:
				c.problem("seq %d: input %s accepted a second time", f.Seq, c.inputs[i].id)
			default:
				c.inputs[i].accepted = true
			}
		case switchboard.RoleAssistant:
			if cur := c.current(); cur != nil && cur.accepted && !cur.answered {
				cur.answered = true
			} else {
				c.problem("seq %d: an assistant message with no question waiting for it: %q", f.Seq, md.Content)
			}
		}
	case "error":
		switch code := errorCode(f); code {
		case "interrupted", switchboard.ErrCodeAlreadyResolved:
		default:
			cur := c.current()
			switch {
			case cur != nil && cur.accepted && !cur.answered:
				cur.answered, cur.endedBy = true, code
			case cur != nil && cur.sent && !cur.accepted:
				cur.sent, cur.resendAt = false, now.Add(100*time.Millisecond)
			}
		}
	case "confirmation_request":
		var cr switchboard.ConfirmationRequestData
		_ = json.Unmarshal(f.Data, &cr)
		if !c.resolved[cr.ConfirmationID] && c.open[cr.ConfirmationID] == nil {
			c.open[cr.ConfirmationID] = &openConfirm{due: now.Add(c.approvalDelay())}
		}
		if live {
			c.h.confirmRequests.add(c.session)
		}
	case "confirmation_resolved":
		var cr switchboard.ConfirmationResolvedData
		_ = json.Unmarshal(f.Data, &cr)
		delete(c.open, cr.ConfirmationID)
		c.resolved[cr.ConfirmationID] = true
	case "delta":
		if live {
			c.h.deltas.add(c.session)
		}
	case "tool_call":
		if live {
			c.h.toolCalls.add(c.session)
		}
	case "state":
		var sd switchboard.StateData
		_ = json.Unmarshal(f.Data, &sd)
		c.lastState = sd.State
	}
	if !c.caughtUp && c.readyLast >= 0 && c.lastSeq >= c.readyLast {
		c.catchUp()
	}
}

// anyAccepted reports whether the gateway took any of the client's inputs.
func (c *crashClient) anyAccepted() bool {
	return slices.ContainsFunc(c.inputs, func(in *crashInput) bool { return in.accepted })
}

// connectionEvent handles ready and the errors answering our frames.
func (c *crashClient) connectionEvent(f wsFrame) {
	switch f.Type {
	case "ready":
		var rd switchboard.ReadyData
		_ = json.Unmarshal(f.Data, &rd)
		if c.session == "" {
			c.session = rd.Session
		} else if rd.Session != c.session {
			c.problem("resumed session %s but got ready for %s", c.session, rd.Session)
		}
		if rd.LastSeq < c.lastSeq {
			c.problem("ready.last_seq %d is below seq %d, which the client was already sent: events it saw are gone", rd.LastSeq, c.lastSeq)
		}
		c.readyLast = rd.LastSeq
		if c.lastSeq >= c.readyLast {
			c.catchUp()
		}
	case "error":
		code := errorCode(f)
		c.connErrs[code]++
		if c.readyLast < 0 {
			c.dropConn = true // hello failed: try again
			if code == switchboard.ErrCodeNotFound && c.lastSeq == 0 && !c.anyAccepted() {
				// Opened, and killed before anything was sent to it: a
				// session nothing was stored for is not kept (a page
				// view stores nothing), so the next hello opens a new
				// one, and what was sent unanswered goes to it.
				c.session = ""
				if cur := c.current(); cur != nil {
					cur.sent = false
				}
			}
			return
		}
		switch code {
		case switchboard.ErrCodeBusy, switchboard.ErrCodeInternal:
			if cur := c.current(); cur != nil && cur.sent && !cur.accepted {
				cur.sent, cur.resendAt = false, time.Now().Add(100*time.Millisecond)
			}
		case switchboard.ErrCodeRestarting:
			// The gateway is going away: an input not taken is sent
			// again once reconnected, to the next gateway.
			if cur := c.current(); cur != nil && cur.sent && !cur.accepted {
				cur.sent = false
			}
			c.dropConn = true
		case switchboard.ErrCodeDuplicate:
			// A resent input the gateway had received: it is answered
			// once, as its events will show.
		case switchboard.ErrCodeAlreadyResolved:
			// An approval sent again on a new connection while the first,
			// forwarded through another replica's inbox, was still on its
			// way: the first was taken, this one is told so (counted in
			// connErrs, which the run reports).
		default:
			c.problem("the gateway refused a frame: %s", short(f.Data, 200))
		}
	default:
		c.problem("unexpected seq-0 event %s %s", f.Type, short(f.Data, 200))
	}
}

// catchUp: the connection has replayed what was stored when it attached.
// What is still not acknowledged is sent again.
func (c *crashClient) catchUp() {
	c.caughtUp = true
	if cur := c.current(); cur != nil && cur.sent && !cur.accepted {
		cur.sent = false
	}
}
