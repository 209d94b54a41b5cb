package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gw/switchboard/listeners/discord/discordtest"
)

// The Discord rows: the gateway with its Discord listener against
// discordtest, the fake Discord, run in this process on loopback (REST and
// the Gateway WebSocket, which the listener's own discordgo client talks
// to). Each of N threads is a channel, a user and a session of its own: a
// message mentioning the bot opens it (the listener starts a thread from
// the message, whose id the thread takes), unmeasured; then messages in
// the thread follow back to back, each posted once the bot's answer to
// the last one is whole.
//
// Every discordApprovalEvery-th turn of a thread asks the time: the model
// (bench llm-tools, the scripted model plus one tool call) answers with
// current_time, which the guide has ask for approval, so the listener
// posts a card with buttons; the thread clicks Approve as soon as the card
// is there (fake.ClickButton), and the fake times the listener's ack. The
// turn ends with the model's answer after the tool ran. The other turns
// are plain: turn latency, first text and REST calls per turn are theirs.
//
// A turn ends when the fake answers the REST call that leaves the bot's
// reply in the thread holding the model's whole text (the reply's POST, or
// the last PATCH of a reply edited as it streams), judged on the message
// the fake answers with, which it renders from what it stored. To see
// those answers as they happen the gateway's REST calls go through
// discordTap, a relay in this process, as for Slack; the hop it adds is
// measured and reported. The Gateway WebSocket does not pass the relay.
// REST calls are counted from the fake's own records (Requests), each
// given to the turn of its thread that was under way when it arrived.

// discordTurnTimeout is how long a thread waits for an answer (or an
// approval card) before it counts as failed.
const discordTurnTimeout = 30 * time.Second

// discordApprovalEvery: one turn in this many of each thread asks for a
// tool call that needs approval. The smoke test lowers it.
var discordApprovalEvery = 10

// discordTimeQuestion is an approval turn's message; the model answers it
// with a current_time call.
const discordTimeQuestion = "what time is it?"

// discordGuide is benchGuide with current_time, whose every call asks.
const discordGuide = `---
name: bench-tools
description: The benchmark's guide, with a tool that asks for approval
temperature: 0
memory: { policy: sliding-window, window: 20 }
tools: [current_time]
approval: { default: ask }
---
You are a benchmark.
`

// Kinds of turns.
const (
	discordOpen = iota
	discordPlain
	discordApproval
)

// discordRow is the Discord listener at one number of concurrent threads.
type discordRow struct {
	threads   int
	turns     int // plain and approval turns ending in the window
	approvals int // of which approval turns
	elapsed   time.Duration
	latencies []time.Duration  // sorted, plain turns: MESSAGE_CREATE → reply whole
	firstText []time.Duration  // sorted, plain turns: MESSAGE_CREATE → first text shown
	calls     map[string]int   // REST calls of the window's plain turns, by route
	apprCalls int              // REST calls of the window's approval turns
	outside   int              // REST calls in the threads, in the window, during no turn
	stray     int              // REST calls in the window belonging to no thread
	relayed   int              // REST calls the relay answered in the window
	conns     int              // TCP connections the gateway opened to the REST API in the window
	acks      []time.Duration  // sorted: ack latencies of the window's clicks
	unacked   int              // clicks of the window never acknowledged
	refused   map[string]int   // REST answers ≥ 400 in the window, by route and status
	failed    int              // threads that stopped on an error
	reconns   int              // Gateway connections after the first
	cpuPer1k  float64          // the gateway's CPU seconds per 1,000 turns
	hop       [2]time.Duration // median GET /users/@me round trip: direct to the fake, through the tap
}

func (r discordRow) turnsPerSec() float64 { return float64(r.turns) / r.elapsed.Seconds() }

func (r discordRow) plainTurns() int { return r.turns - r.approvals }

func (r discordRow) callsPerTurn() float64 {
	n := 0
	for _, c := range r.calls {
		n += c
	}
	return float64(n) / float64(max(r.plainTurns(), 1))
}

func (r discordRow) callsPerApproval() float64 {
	return float64(r.apprCalls) / float64(max(r.approvals, 1))
}

func (r discordRow) connsPerCall() float64 {
	return float64(r.conns) / float64(max(r.relayed, 1))
}

func (r discordRow) refusedCalls() int {
	n := 0
	for _, c := range r.refused {
		n += c
	}
	return n
}

func (r discordRow) errors() int { return r.failed + r.unacked + r.refusedCalls() + r.reconns }

// routes lists the REST calls per plain turn by route, most frequent
// first.
func (r discordRow) routes() string {
	names := make([]string, 0, len(r.calls))
	for m := range r.calls {
		names = append(names, m)
	}
	sort.Slice(names, func(i, j int) bool {
		if r.calls[names[i]] != r.calls[names[j]] {
			return r.calls[names[i]] > r.calls[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, m := range names {
		parts[i] = fmt.Sprintf("`%s` %.2f", m, float64(r.calls[m])/float64(max(r.plainTurns(), 1)))
	}
	return strings.Join(parts, ", ")
}

// toolLLMHandler is the Discord rows' model: llmHandler's scripted answer
// to every request but one whose last message is a user's
// discordTimeQuestion, answered with a call of current_time. After the
// tool ran, the last message is the tool's, and the answer is the script.
func toolLLMHandler() http.Handler {
	text := llmHandler()
	var calls atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(body, &req) == nil && len(req.Messages) > 0 {
			if last := req.Messages[len(req.Messages)-1]; last.Role == "user" && bytes.Contains(last.Content, []byte(discordTimeQuestion)) {
				w.Header().Set("Content-Type", "text/event-stream")
				f := w.(http.Flusher)
				for _, c := range toolCallStream("call_bench_" + strconv.FormatInt(calls.Add(1), 10)) {
					if _, err := w.Write(c); err != nil {
						return
					}
					f.Flush()
				}
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		text.ServeHTTP(w, r)
	})
}

// toolCallStream is a streamed answer that calls current_time.
func toolCallStream(id string) [][]byte {
	chunk, choice := sseChunk, streamChoice
	return [][]byte{
		chunk(choice(map[string]any{"role": "assistant", "content": ""}, nil)),
		chunk(choice(map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": id, "type": "function",
			"function": map[string]any{"name": "current_time", "arguments": `{"timezone":"UTC"}`},
		}}}, nil)),
		chunk(choice(map[string]any{}, "tool_calls")),
		chunk(map[string]any{"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "bench-model",
			"choices": []any{}, "usage": map[string]any{"prompt_tokens": 30, "completion_tokens": 10, "total_tokens": 40}}),
		[]byte("data: [DONE]\n\n"),
	}
}

// discordDone is one turn of a thread, as it went.
type discordDone struct {
	kind             int
	sent, first, end time.Time
}

// discordClick is one click of Approve.
type discordClick struct {
	interaction string
	sent        time.Time
}

// measureDiscord runs n threads against a fresh fake Discord, model and
// gateway.
func measureDiscord(ctx context.Context, bin, dir string, n int, warmup, d time.Duration) (discordRow, error) {
	row := discordRow{threads: n}
	model, err := startChild(ctx, "llm-tools")
	if err != nil {
		return row, fmt.Errorf("model: %w", err)
	}
	defer model.stop()
	// The buckets lifted: at the fake's default (50 a second per route and
	// channel) they, not the listener, would set a thread's pace.
	fake := discordtest.New(nil, discordtest.WithBucketLimit(1<<30, time.Second))
	defer fake.Close()

	slots := make([]*discordSlot, n)
	tap := &discordTap{fake: fake, want: slackReplyText(), slots: map[string]*discordSlot{}}
	for i := range slots {
		s := &discordSlot{index: i, channel: fake.NewID(), user: fake.NewID()}
		fake.AddChannel(discordtest.Channel{ID: s.channel, Type: discordtest.ChannelTypeGuildText, GuildID: discordtest.DefaultGuildID, Name: fmt.Sprintf("bench-%04d", i+1)})
		fake.AddUser(discordtest.User{ID: s.user, Username: fmt.Sprintf("bench%04d", i+1)})
		slots[i] = s
		tap.slots[s.channel] = s
	}
	if err := tap.start(); err != nil {
		return row, err
	}
	defer tap.relayServer.close()
	if row.hop, err = tap.hop(ctx); err != nil {
		return row, err
	}

	guides := filepath.Join(dir, "discord-guides-"+strconv.Itoa(n))
	if err := os.MkdirAll(guides, 0o755); err != nil {
		return row, err
	}
	if err := os.WriteFile(filepath.Join(guides, "bench-tools.md"), []byte(discordGuide), 0o644); err != nil {
		return row, err
	}
	gw, err := startGatewayEnv(ctx, bin, dir, "http://"+model.addr,
		[]string{"BENCH_DISCORD_TOKEN=" + fake.Token()},
		"--set", "listeners.discord.enabled=true", "--set", "listeners.discord.token_env=BENCH_DISCORD_TOKEN",
		"--set", "listeners.discord.api_url="+tap.url+"/api/v10/",
		"--set", "guides.dir="+guides, "--set", "guides.default=bench-tools")
	if err != nil {
		return row, err
	}
	defer gw.stop()
	// Ready once connected and /switchboard is registered: the listener
	// then takes messages.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = fake.WaitFor(wctx, func() bool { return fake.Calls(discordtest.RouteBulkOverwriteGlobalCommands) > 0 })
	cancel()
	if err != nil {
		return row, fmt.Errorf("the gateway's Discord listener did not connect to the fake: %w", err)
	}

	var (
		wg      sync.WaitGroup
		opened  sync.WaitGroup
		stop    = make(chan struct{})
		turns   = make([][]discordDone, n)
		clicks  = make([][]discordClick, n)
		errored = make([]error, n)
	)
	opened.Add(n)
	for i, s := range slots {
		wg.Go(func() {
			rec := make([]discordDone, 0, 1024)
			defer func() { turns[i] = rec }()
			t, _, err := s.turn(ctx, fake, tap, discordOpen)
			opened.Done()
			if err != nil {
				errored[i] = err
				return
			}
			rec = append(rec, t)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				kind := discordPlain
				if (k+i)%discordApprovalEvery == discordApprovalEvery-1 {
					kind = discordApproval
				}
				t, c, err := s.turn(ctx, fake, tap, kind)
				if c != nil {
					clicks[i] = append(clicks[i], *c)
				}
				if err != nil {
					errored[i] = err
					return
				}
				rec = append(rec, t)
			}
		})
	}
	t0, t1, cpu := measureWindow(ctx, gw, &opened, &wg, stop, warmup, d)

	row.elapsed = t1.Sub(t0)
	in := func(t time.Time) bool { return !t.Before(t0) && !t.After(t1) }
	for i := range turns {
		for _, t := range turns[i] {
			if t.kind == discordOpen || !in(t.end) {
				continue
			}
			row.turns++
			if t.kind == discordApproval {
				row.approvals++
				continue
			}
			row.latencies = append(row.latencies, t.end.Sub(t.sent))
			row.firstText = append(row.firstText, t.first.Sub(t.sent))
		}
		if errored[i] != nil {
			row.failed++
			log("discord thread %d: %v", i+1, errored[i])
		}
	}
	slices.Sort(row.latencies)
	slices.Sort(row.firstText)
	if row.turns > 0 {
		row.cpuPer1k = cpu.Seconds() / float64(row.turns) * 1000
	}
	row.relayed, row.conns = tap.counts(t0, t1)
	row.reconns = max(fake.Connections()-1, 0)

	// Each REST call to the turn of its thread under way when it arrived:
	// a thread's turns follow one another, and the listener calls for a
	// turn only after its MESSAGE_CREATE and, at the latest, in the call
	// that ends it.
	byInteraction := map[string]int{}
	for i := range clicks {
		for _, c := range clicks[i] {
			byInteraction[c.interaction] = i
		}
	}
	row.calls, row.refused = map[string]int{}, map[string]int{}
	for _, q := range fake.Requests("") {
		if q.Status >= 400 && in(q.Received) {
			row.refused[fmt.Sprintf("%s → %d", q.Route, q.Status)]++
		}
		i, ok := -1, false
		if ch := q.Params["channel.id"]; ch != "" {
			if s := tap.slotOf(ch); s != nil {
				i, ok = s.index, true
			}
		} else if id := q.Params["interaction.id"]; id != "" {
			i, ok = byInteraction[id]
		}
		if !ok {
			if in(q.Received) {
				row.stray++
			}
			continue
		}
		recs := turns[i]
		k := sort.Search(len(recs), func(k int) bool { return !recs[k].end.Before(q.Received) })
		if k == len(recs) || q.Received.Before(recs[k].sent) {
			if in(q.Received) {
				row.outside++
			}
			continue
		}
		switch t := recs[k]; {
		case !in(t.end):
		case t.kind == discordPlain:
			row.calls[q.Route]++
		case t.kind == discordApproval:
			row.apprCalls++
		}
	}

	acked := map[string]time.Duration{}
	for _, a := range fake.Acks() {
		acked[a.InteractionID] = a.Latency
	}
	for i := range clicks {
		for _, c := range clicks[i] {
			if !in(c.sent) {
				continue
			}
			if lat, ok := acked[c.interaction]; ok {
				row.acks = append(row.acks, lat)
			} else {
				row.unacked++
			}
		}
	}
	slices.Sort(row.acks)
	return row, nil
}

// discordSection is the Discord part of the report.
func (r report) discordSection(p func(format string, args ...any)) {
	hop := r.discord[0].hop
	p("## Discord\n\n")
	p("The gateway with its Discord listener, against the fake Discord of `listeners/discord/discordtest` (REST API v10 and the Gateway WebSocket, "+
		"which the listener's own discordgo client talks to) and the same scripted model, run as a process of its own that also answers a question "+
		"about the time with a call of `current_time`; the guide offers that tool and asks for approval of every call. The fake runs inside the bench process "+
		"on loopback and shares the machine with the gateway and the model. Its rate-limit buckets are lifted: at its default of 50 requests a second "+
		"per route and channel, or at Discord's message limits, the buckets and not the listener would set a thread's pace. "+
		"Each of N threads is a channel, a user and a session of its own: a message mentioning the bot opens it (the listener starts a thread from the message), "+
		"unmeasured; then messages in the thread follow back to back, each posted once the answer to the last is whole, for %v after a warm-up. "+
		"One turn in %d of each thread asks the time: the model calls the tool, the listener posts a card with buttons, the thread clicks **Approve** "+
		"as soon as the card is there, and the turn ends with the answer after the tool ran. The other turns are plain.\n\n",
		r.duration, discordApprovalEvery)
	p("A turn is timed from the fake storing the user's message and dispatching its MESSAGE_CREATE to the fake answering the REST call that "+
		"leaves the bot's reply in the thread holding the model's whole text (the reply's `POST`, or the last `PATCH` of a reply edited as it streams), "+
		"judged on the message the fake answers with. *First text* runs to the answer of the first `POST` of a message with text in the thread. "+
		"Latencies and first text are of plain turns; turns/s counts both kinds. "+
		"To see those answers as they happen, without polling the fake, the gateway's REST calls pass through a relay in the bench process: "+
		"it adds about %v to each call (median `GET /users/@me` round trip %v to the fake, %v through the relay), and the times include it; "+
		"the Gateway WebSocket does not pass it. REST calls are the fake's records, each given to the turn of its thread under way when it arrived "+
		"(a click's callback by its interaction), for the turns that ended in the window: per plain turn and per approval turn. "+
		"*New conns / call* is how many TCP connections the gateway opened to the REST API per call. Ack times are the fake's, from dispatching "+
		"a click's INTERACTION_CREATE to receiving the listener's first callback, for the clicks of the window; the callback passes the relay. "+
		"CPU is the gateway's. Errors are threads that stopped (an answer or a card not there within %v), clicks never acknowledged, "+
		"REST calls the fake refused and Gateway reconnections.\n\n",
		(hop[1] - hop[0]).Round(time.Microsecond), hop[0].Round(time.Microsecond), hop[1].Round(time.Microsecond), discordTurnTimeout)
	p("| threads | turns/s | p50 | p99 | first text p50 | first text p99 | REST calls / plain turn | REST calls / approval turn | new conns / call | clicks | ack p99 | ack max | CPU s / 1k turns | errors |\n")
	p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, row := range r.discord {
		p("| %d | %.0f | %v | %v | %v | %v | %.2f | %.2f | %.2f | %d | %v | %v | %.2f | %d |\n", row.threads, row.turnsPerSec(),
			round(percentile(row.latencies, 50)), round(percentile(row.latencies, 99)),
			round(percentile(row.firstText, 50)), round(percentile(row.firstText, 99)),
			row.callsPerTurn(), row.callsPerApproval(), row.connsPerCall(), len(row.acks)+row.unacked,
			round(percentile(row.acks, 99)), round(percentile(row.acks, 100)), row.cpuPer1k, row.errors())
	}
	p("\nREST calls per plain turn by route")
	var missed, notes []string
	for i, row := range r.discord {
		sep := ", at"
		if i > 0 {
			sep = "; at"
		}
		th := plural(row.threads, "thread", "threads")
		p("%s %d %s: %s", sep, row.threads, th, row.routes())
		if row.callsPerTurn() > 5 {
			missed = append(missed, fmt.Sprintf("%.2f calls per plain turn at %d %s", row.callsPerTurn(), row.threads, th))
		}
		if ack := percentile(row.acks, 99); ack >= 50*time.Millisecond {
			missed = append(missed, fmt.Sprintf("a p99 ack of %v at %d %s", round(ack), row.threads, th))
		}
		if len(row.acks) == 0 {
			missed = append(missed, fmt.Sprintf("no ack measured at %d %s", row.threads, th))
		}
		if row.outside+row.stray > 0 {
			notes = append(notes, fmt.Sprintf("at %d %s, %d REST calls of the window fell in no turn of their thread and %d belonged to no thread", row.threads, th, row.outside, row.stray))
		}
		if len(row.refused) > 0 {
			var rs []string
			for k, v := range row.refused {
				rs = append(rs, fmt.Sprintf("`%s` %d", k, v))
			}
			slices.Sort(rs)
			notes = append(notes, fmt.Sprintf("at %d %s the fake refused %s", row.threads, th, strings.Join(rs, ", ")))
		}
		if row.reconns > 0 {
			notes = append(notes, fmt.Sprintf("at %d %s the listener connected to the Gateway %d more %s", row.threads, th, row.reconns, plural(row.reconns, "time", "times")))
		}
	}
	p(". The goals are at most 5 REST calls per plain turn and a p99 ack under 50 ms: ")
	if len(missed) == 0 {
		p("met at every level measured.")
	} else {
		p("missed with %s.", strings.Join(missed, ", "))
	}
	if len(notes) > 0 {
		p(" Also: %s.", strings.Join(notes, "; "))
	}
	p("\n\n")
}

// discordSlot is one thread: its channel, its asker and the turn under way.
type discordSlot struct {
	index         int
	channel, user string
	thread        string // the id of the mention that opened it, and of the thread

	mu  sync.Mutex
	cur *discordTurn
}

type discordTurn struct {
	kind int
	turnClock
	card chan discordCard // approval turns: the card, once posted
}

// discordCard is an approval card: its message and its Approve button.
type discordCard struct{ message, approve string }

// turn posts one message, the mention that opens the thread or a message
// in it, clicks Approve on the card an approval turn brings, and waits
// until the bot's answer is whole in the fake. For an approval turn it
// returns the click, when there was one.
func (s *discordSlot) turn(ctx context.Context, fake *discordtest.Server, tap *discordTap, kind int) (discordDone, *discordClick, error) {
	t := &discordTurn{kind: kind, turnClock: turnClock{done: make(chan struct{})}, card: make(chan discordCard, 1)}
	s.mu.Lock()
	s.cur = t
	s.mu.Unlock()
	um := discordtest.UserMessage{ChannelID: s.thread, AuthorID: s.user, Content: "hello there"}
	switch kind {
	case discordOpen:
		um.ChannelID, um.MentionBot = s.channel, true
	case discordApproval:
		um.Content = discordTimeQuestion
	}
	m, err := fake.PostUserMessage(um)
	if err != nil {
		return discordDone{}, nil, fmt.Errorf("posting the message: %w", err)
	}
	if kind == discordOpen {
		s.thread = m.ID
		tap.register(m.ID, s)
	}
	timeout := time.NewTimer(discordTurnTimeout)
	defer timeout.Stop()
	var click *discordClick
	if kind == discordApproval {
		select {
		case c := <-t.card:
			in, err := fake.ClickButton(s.thread, c.message, s.user, c.approve)
			if err != nil {
				return discordDone{}, nil, fmt.Errorf("clicking Approve: %w", err)
			}
			click = &discordClick{interaction: in.ID, sent: in.SentAt}
		case <-timeout.C:
			return discordDone{}, nil, fmt.Errorf("no approval card in thread %s within %v", s.thread, discordTurnTimeout)
		case <-ctx.Done():
			return discordDone{}, nil, ctx.Err()
		}
	}
	select {
	case <-t.done:
		return discordDone{kind: kind, sent: m.Timestamp, first: t.firstAt, end: t.doneAt}, click, nil
	case <-timeout.C:
		return discordDone{}, click, fmt.Errorf("no whole answer in thread %s within %v", cmp.Or(s.thread, s.channel), discordTurnTimeout)
	case <-ctx.Done():
		return discordDone{}, click, ctx.Err()
	}
}

// shown notes the first text of the turn under way.
func (s *discordSlot) shown(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.cur; t != nil && t.firstAt.IsZero() {
		t.firstAt = at
	}
}

// carded hands the turn under way its approval card.
func (s *discordSlot) carded(c discordCard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.cur; t != nil && t.kind == discordApproval {
		select {
		case t.card <- c:
		default: // one card a turn
		}
	}
}

// finished ends the turn under way.
func (s *discordSlot) finished(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.finish(at) {
		s.cur = nil
	}
}

// discordTap relays the gateway's REST calls to the fake and watches the
// answers: it tells each thread when text shows up in it, when an
// approval card does, and when its answer is whole.
type discordTap struct {
	fake *discordtest.Server
	want string // the text of a whole answer
	*relayServer

	slotMu sync.RWMutex
	slots  map[string]*discordSlot // by channel and by thread id

	mu    sync.Mutex
	calls []time.Time // when each call was answered
	conns []time.Time // when each connection from the gateway was accepted
}

func (t *discordTap) start() error {
	rs, err := startRelay(t, func() {
		t.mu.Lock()
		t.conns = append(t.conns, time.Now())
		t.mu.Unlock()
	})
	if err != nil {
		return err
	}
	t.relayServer = rs
	return nil
}

func (t *discordTap) register(id string, s *discordSlot) {
	t.slotMu.Lock()
	t.slots[id] = s
	t.slotMu.Unlock()
}

// slotOf is the thread a channel id belongs to: its channel, or its
// thread (which the listener may write in before turn has noted its id).
func (t *discordTap) slotOf(id string) *discordSlot {
	t.slotMu.RLock()
	s := t.slots[id]
	t.slotMu.RUnlock()
	if s != nil {
		return s
	}
	ch, ok := t.fake.Channel(id)
	if !ok || ch.ParentID == "" {
		return nil
	}
	t.slotMu.RLock()
	s = t.slots[ch.ParentID]
	t.slotMu.RUnlock()
	if s != nil {
		t.register(id, s)
	}
	return s
}

// counts returns how many calls were answered between t0 and t1 and how
// many connections were accepted then.
func (t *discordTap) counts(t0, t1 time.Time) (calls, conns int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := func(at time.Time) bool { return !at.Before(t0) && !at.After(t1) }
	for _, at := range t.calls {
		if in(at) {
			calls++
		}
	}
	for _, at := range t.conns {
		if in(at) {
			conns++
		}
	}
	return calls, conns
}

func (t *discordTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	u := t.fake.URL() + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	answer, status, at, ok := forward(w, r, t.client, u, body, "Content-Type", "Authorization", "User-Agent", "X-Audit-Log-Reason")
	if !ok {
		return
	}

	t.mu.Lock()
	t.calls = append(t.calls, at)
	t.mu.Unlock()
	if status == http.StatusOK && (r.Method == http.MethodPost || r.Method == http.MethodPatch) {
		t.observe(r.Method, r.URL.Path, answer, at)
	}
}

// observe tells a thread what a message's POST or PATCH answered at time
// at did to it.
func (t *discordTap) observe(method, path string, answer []byte, at time.Time) {
	rest, ok := strings.CutPrefix(path, "/api/v10/channels/")
	if !ok {
		return
	}
	parts := strings.Split(rest, "/")
	switch {
	case method == http.MethodPost && len(parts) == 2 && parts[1] == "messages":
	case method == http.MethodPatch && len(parts) == 3 && parts[1] == "messages":
	default:
		return
	}
	s := t.slotOf(parts[0])
	if s == nil {
		return
	}
	var m struct {
		ID      string `json:"id"`
		Content string `json:"content"`
		Author  struct {
			ID string `json:"id"`
		} `json:"author"`
		Components []struct {
			Components []struct {
				CustomID string `json:"custom_id"`
			} `json:"components"`
		} `json:"components"`
	}
	if json.Unmarshal(answer, &m) != nil || m.Author.ID != t.fake.BotUserID() {
		return
	}
	if method == http.MethodPost {
		if m.Content != "" {
			s.shown(at)
		}
		for _, row := range m.Components {
			for _, c := range row.Components {
				if strings.HasPrefix(c.CustomID, "sb:approve:") {
					s.carded(discordCard{message: m.ID, approve: c.CustomID})
				}
			}
		}
	}
	// Whole: the message as the fake stored it holds the whole answer.
	if strings.Contains(m.Content, t.want) {
		s.finished(at)
	}
}

// hop measures what the tap adds to a call: the median round trip of
// GET /users/@me, straight to the fake and through the tap, taken in
// turns so that a warming fake or CPU favours neither.
func (t *discordTap) hop(ctx context.Context) ([2]time.Duration, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	get := func(base string) (time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", base+"users/@me", nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bot "+t.fake.Token())
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, errors.New("GET /users/@me: " + resp.Status)
		}
		return time.Since(start), nil
	}
	const warm, runs = 20, 200
	var direct, tapped []time.Duration
	for i := range warm + runs {
		d, err := get(t.fake.APIURL())
		if err != nil {
			return [2]time.Duration{}, fmt.Errorf("timing the fake: %w", err)
		}
		r, err := get(t.url + "/api/v10/")
		if err != nil {
			return [2]time.Duration{}, fmt.Errorf("timing the tap: %w", err)
		}
		if i >= warm {
			direct, tapped = append(direct, d), append(tapped, r)
		}
	}
	slices.Sort(direct)
	slices.Sort(tapped)
	// The tap's calls and connections from this measurement are not the
	// gateway's.
	t.mu.Lock()
	t.calls, t.conns = nil, nil
	t.mu.Unlock()
	return [2]time.Duration{direct[runs/2], tapped[runs/2]}, nil
}
