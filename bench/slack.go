package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
)

// The Slack rows: the gateway with its Slack listener in Socket Mode
// against slacktest, the fake Slack, run in this process on loopback.
// Each of N threads is a channel, a user and a session of its own: a
// top-level mention opens it (unmeasured), then replies in the thread
// follow back to back, each sent once the bot's answer to the last one is
// complete.
//
// A turn ends when the fake answers the call that leaves the bot's reply
// whole (chat.stopStream; chat.update or chat.postMessage when replies
// are edited instead), judged on the fake's stored message: no longer
// streaming and holding the model's whole text. To see those answers as
// they happen the gateway's Web API calls go through slackTap, a relay in
// this process; the hop it adds is measured and reported. Polling the
// fake instead would copy a whole thread (Thread) or every request so far
// (Requests) at each look, a cost that grows as the run goes on. Socket
// Mode does not pass the relay: acks are timed by the fake.

// slackTurnTimeout is how long a thread waits for an answer before it
// counts as failed.
const slackTurnTimeout = 30 * time.Second

// slackRow is the Slack listener at one number of concurrent threads.
type slackRow struct {
	threads   int
	turns     int
	elapsed   time.Duration
	latencies []time.Duration  // sorted: envelope sent → reply complete
	firstText []time.Duration  // sorted: envelope sent → first text shown
	calls     map[string]int   // Web API calls answered in the window, by method
	acks      []time.Duration  // sorted: ack latencies of the window's envelopes
	unacked   int              // envelopes of the window never acknowledged
	failed    int              // threads that stopped on an error
	conns     int              // TCP connections the gateway opened to the Web API in the window
	cpuPer1k  float64          // the gateway's CPU seconds per 1,000 turns
	hop       [2]time.Duration // median api.test round trip: direct to the fake, through the tap
}

func (r slackRow) turnsPerSec() float64 { return float64(r.turns) / r.elapsed.Seconds() }

func (r slackRow) totalCalls() int {
	n := 0
	for _, c := range r.calls {
		n += c
	}
	return n
}

func (r slackRow) callsPerTurn() float64 {
	if r.turns == 0 {
		return 0
	}
	return float64(r.totalCalls()) / float64(r.turns)
}

func (r slackRow) connsPerCall() float64 {
	if r.totalCalls() == 0 {
		return 0
	}
	return float64(r.conns) / float64(r.totalCalls())
}

func (r slackRow) errors() int { return r.failed + r.unacked }

// methods lists the calls per turn by method, most frequent first.
func (r slackRow) methods() string {
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
		parts[i] = fmt.Sprintf("`%s` %.2f", m, float64(r.calls[m])/float64(max(r.turns, 1)))
	}
	return strings.Join(parts, ", ")
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }

// slackReplyText is the scripted model's whole answer, as a finished
// reply in the fake must hold it.
func slackReplyText() string {
	var b strings.Builder
	for i := range tokensPerReply {
		fmt.Fprintf(&b, "tok%02d ", i)
	}
	return strings.TrimSpace(b.String())
}

// measureSlack runs n threads against a fresh fake Slack and gateway.
func measureSlack(ctx context.Context, bin, dir, llmURL string, n int, warmup, d time.Duration) (slackRow, error) {
	fake := slacktest.New(nil)
	defer fake.Close()
	slots := make([]*slackSlot, n)
	tap := &slackTap{fake: fake, upstream: fake.APIURL(), want: slackReplyText(), slots: map[string]*slackSlot{}}
	for i := range slots {
		slots[i] = &slackSlot{channel: fmt.Sprintf("CBENCH%04d", i+1), user: fmt.Sprintf("UBENCH%04d", i+1)}
		tap.slots[slots[i].channel] = slots[i]
	}
	if err := tap.start(); err != nil {
		return slackRow{}, err
	}
	defer tap.relayServer.close()
	row := slackRow{threads: n}
	var err error
	if row.hop, err = tap.hop(ctx, fake); err != nil {
		return row, err
	}

	gw, err := startGatewayEnv(ctx, bin, dir, llmURL,
		[]string{"BENCH_SLACK_BOT_TOKEN=" + fake.BotToken(), "BENCH_SLACK_APP_TOKEN=" + fake.AppToken()},
		"--set", "listeners.slack.enabled=true", "--set", "listeners.slack.mode=socket",
		"--set", "listeners.slack.bot_token_env=BENCH_SLACK_BOT_TOKEN", "--set", "listeners.slack.app_token_env=BENCH_SLACK_APP_TOKEN",
		"--set", "listeners.slack.api_url="+tap.url+"/api/")
	if err != nil {
		return row, err
	}
	defer gw.stop()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = fake.WaitForConnections(wctx, 1)
	cancel()
	if err != nil {
		return row, fmt.Errorf("the gateway's Slack listener did not connect to the fake: %w", err)
	}

	type done struct {
		end        time.Time
		lat, first time.Duration
	}
	var (
		wg      sync.WaitGroup
		opened  sync.WaitGroup
		stop    = make(chan struct{})
		turns   = make([][]done, n)
		errored = make([]error, n)
	)
	opened.Add(n)
	for i, s := range slots {
		wg.Go(func() {
			_, _, _, err := s.turn(ctx, fake, true)
			opened.Done()
			if err != nil {
				errored[i] = err
				return
			}
			rec := make([]done, 0, 1024)
			defer func() { turns[i] = rec }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent, first, end, err := s.turn(ctx, fake, false)
				if err != nil {
					errored[i] = err
					return
				}
				rec = append(rec, done{end, end.Sub(sent), first.Sub(sent)})
			}
		})
	}
	t0, t1, cpu := measureWindow(ctx, gw, &opened, &wg, stop, warmup, d)

	row.elapsed = t1.Sub(t0)
	in := func(t time.Time) bool { return !t.Before(t0) && !t.After(t1) }
	for i := range turns {
		for _, t := range turns[i] {
			if in(t.end) {
				row.latencies = append(row.latencies, t.lat)
				row.firstText = append(row.firstText, t.first)
			}
		}
		if errored[i] != nil {
			row.failed++
			log("slack thread %d: %v", i+1, errored[i])
		}
	}
	row.turns = len(row.latencies)
	slices.Sort(row.latencies)
	slices.Sort(row.firstText)
	if row.turns > 0 {
		row.cpuPer1k = cpu.Seconds() / float64(row.turns) * 1000
	}
	row.calls, row.conns = tap.counts(t0, t1)

	acked := map[string]bool{}
	for _, a := range fake.Acks() {
		if a.Known && in(a.Envelope.SentAt) && !acked[a.EnvelopeID] {
			acked[a.EnvelopeID] = true
			row.acks = append(row.acks, a.Latency)
		}
	}
	for _, e := range fake.Envelopes() {
		if in(e.SentAt) && !acked[e.EnvelopeID] {
			row.unacked++
		}
	}
	slices.Sort(row.acks)
	return row, nil
}

// slackSection is the Slack part of the report.
func (r report) slackSection(p func(format string, args ...any)) {
	hop := r.slack[0].hop
	p("## Slack\n\n")
	p("The gateway with its Slack listener in Socket Mode, against the fake Slack of `listeners/slack/slacktest` (Web API and Socket Mode, "+
		"native streaming on) and the same scripted model. The fake runs inside the bench process on loopback and shares the machine with the gateway and the model. "+
		"Each of N threads is a channel, a user and a session of its own: a top-level mention opens it, unmeasured; then replies in the thread "+
		"(`message` events) follow back to back, each sent once the answer to the last is whole, for %v after a warm-up. "+
		"A turn is timed from the fake sending the event's envelope to the fake answering the call that leaves the bot's reply whole "+
		"(`chat.stopStream`, or the last `chat.update` where replies are edited), checked on the fake's stored message: no longer streaming, "+
		"holding the model's whole text. *First text* runs to the answer of the reply's first `chat.startStream` or `chat.postMessage`. "+
		"To see those answers as they happen, without polling the fake, the gateway's Web API calls pass through a relay in the bench process: "+
		"it adds about %v to each call (median `api.test` round trip %v to the fake, %v through the relay), and the times include it. "+
		"Web API calls per turn are the calls answered in the window over the turns completed in it; *new conns / call* is how many TCP connections "+
		"the gateway opened to the Web API per call. Ack times are the fake's, from sending an envelope to reading its ack, for the envelopes of the window. "+
		"CPU is the gateway's. Errors are threads that stopped (an answer not whole within %v) and envelopes never acknowledged.\n\n",
		r.duration, (hop[1] - hop[0]).Round(time.Microsecond), hop[0].Round(time.Microsecond), hop[1].Round(time.Microsecond), slackTurnTimeout)
	p("| threads | turns/s | p50 | p99 | first text p50 | first text p99 | Web API calls / turn | new conns / call | ack p99 | ack max | CPU s / 1k turns | errors |\n")
	p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, row := range r.slack {
		p("| %d | %.0f | %v | %v | %v | %v | %.2f | %.2f | %v | %v | %.2f | %d |\n", row.threads, row.turnsPerSec(),
			round(percentile(row.latencies, 50)), round(percentile(row.latencies, 99)),
			round(percentile(row.firstText, 50)), round(percentile(row.firstText, 99)), row.callsPerTurn(), row.connsPerCall(),
			round(percentile(row.acks, 99)), round(percentile(row.acks, 100)), row.cpuPer1k, row.errors())
	}
	p("\nWeb API calls per turn by method")
	var missed []string
	for i, row := range r.slack {
		sep := ", at"
		if i > 0 {
			sep = "; at"
		}
		p("%s %d %s: %s", sep, row.threads, plural(row.threads, "thread", "threads"), row.methods())
		if row.callsPerTurn() > 5 {
			missed = append(missed, fmt.Sprintf("%.2f calls per turn at %d %s", row.callsPerTurn(), row.threads, plural(row.threads, "thread", "threads")))
		}
		if ack := percentile(row.acks, 99); ack >= 50*time.Millisecond {
			missed = append(missed, fmt.Sprintf("a p99 ack of %v at %d %s", round(ack), row.threads, plural(row.threads, "thread", "threads")))
		}
	}
	p(". The goals are at most 5 Web API calls per plain turn and a p99 ack under 50 ms: ")
	if len(missed) == 0 {
		p("met at every level measured.\n\n")
	} else {
		p("missed with %s.\n\n", strings.Join(missed, ", "))
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// slackSlot is one thread: its channel, its asker and the turn under way.
type slackSlot struct {
	channel, user string
	thread        string // the ts of the mention that opened it

	mu  sync.Mutex
	cur *slackTurn
}

type slackTurn struct {
	turnClock
}

// turn sends one message, the mention that opens the thread or a reply in
// it, and waits until the bot's answer is whole in the fake. It returns
// when the envelope was sent, the first text shown and the answer whole.
func (s *slackSlot) turn(ctx context.Context, fake *slacktest.Server, open bool) (sent, first, end time.Time, err error) {
	t := &slackTurn{turnClock{done: make(chan struct{})}}
	s.mu.Lock()
	s.cur = t
	s.mu.Unlock()
	msg := slacktest.UserMessage{Channel: s.channel, User: s.user, Text: "hello there"}
	var ev map[string]any
	if open {
		ev = fake.AppMentionEvent(msg)
		s.thread, _ = ev["ts"].(string)
	} else {
		msg.ThreadTS = s.thread
		ev = fake.MessageEvent(msg)
	}
	env, err := fake.SendEvent(ev)
	if err != nil {
		return sent, first, end, fmt.Errorf("sending the event: %w", err)
	}
	timeout := time.NewTimer(slackTurnTimeout)
	defer timeout.Stop()
	select {
	case <-t.done:
		return env.SentAt, t.firstAt, t.doneAt, nil
	case <-timeout.C:
		return sent, first, end, fmt.Errorf("no whole answer in %s within %v", s.channel, slackTurnTimeout)
	case <-ctx.Done():
		return sent, first, end, ctx.Err()
	}
}

// shown notes the first text of the turn under way.
func (s *slackSlot) shown(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.cur; t != nil && t.firstAt.IsZero() {
		t.firstAt = at
	}
}

// finished ends the turn under way.
func (s *slackSlot) finished(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.finish(at) {
		s.cur = nil
	}
}

// slackTap relays the gateway's Web API calls to the fake and watches the
// answers: it counts the calls and tells each thread when its answer
// shows up and when it is whole.
type slackTap struct {
	fake     *slacktest.Server
	upstream string // the fake's APIURL
	want     string // the text of a whole answer
	slots    map[string]*slackSlot
	*relayServer

	mu    sync.Mutex
	calls []tapCall
	conns []time.Time // when each connection from the gateway was accepted
}

type tapCall struct {
	method string
	at     time.Time
}

func (t *slackTap) start() error {
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

// counts returns the calls answered between t0 and t1 by method, and the
// connections accepted then.
func (t *slackTap) counts(t0, t1 time.Time) (map[string]int, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := func(at time.Time) bool { return !at.Before(t0) && !at.After(t1) }
	calls := map[string]int{}
	for _, c := range t.calls {
		if in(c.at) {
			calls[c.method]++
		}
	}
	conns := 0
	for _, at := range t.conns {
		if in(at) {
			conns++
		}
	}
	return calls, conns
}

func (t *slackTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	u := t.upstream + method
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	answer, status, at, ok := forward(w, r, t.client, u, body, "Content-Type", "Authorization")
	if !ok {
		return
	}

	t.mu.Lock()
	t.calls = append(t.calls, tapCall{method, at})
	t.mu.Unlock()
	if status == http.StatusOK && strings.HasPrefix(method, "chat.") {
		t.observe(method, r, body, answer, at)
	}
}

// observe tells a thread what a chat.* call answered at time at did to
// its reply.
func (t *slackTap) observe(method string, r *http.Request, body, answer []byte, at time.Time) {
	var res struct {
		OK bool   `json:"ok"`
		TS string `json:"ts"`
	}
	if json.Unmarshal(answer, &res) != nil || !res.OK {
		return
	}
	p := apiParams(r, body)
	s := t.slots[p.Get("channel")]
	if s == nil {
		return
	}
	ts := p.Get("ts")
	switch method {
	case "chat.startStream":
		s.shown(at)
		return
	case "chat.postMessage":
		s.shown(at)
		ts = res.TS
	case "chat.stopStream", "chat.update":
	default:
		return
	}
	// Whole: the message is no longer streaming and holds the whole answer.
	if m, ok := t.fake.Message(s.channel, ts); ok && !m.Streaming && strings.Contains(m.Text, t.want) {
		s.finished(at)
	}
}

// apiParams reads a Web API call's arguments: the query and a form or
// JSON body.
func apiParams(r *http.Request, body []byte) url.Values {
	p := r.URL.Query()
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/x-www-form-urlencoded":
		if f, err := url.ParseQuery(string(body)); err == nil {
			for k, v := range f {
				p[k] = append(p[k], v...)
			}
		}
	case "application/json":
		var obj map[string]any
		if json.Unmarshal(body, &obj) == nil {
			for k, v := range obj {
				if s, ok := v.(string); ok {
					p.Set(k, s)
				}
			}
		}
	}
	return p
}

// hop measures what the tap adds to a call: the median round trip of
// api.test, straight to the fake and through the tap.
func (t *slackTap) hop(ctx context.Context, fake *slacktest.Server) ([2]time.Duration, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	median := func(base string) (time.Duration, error) {
		const warm, runs = 20, 200
		var rtt []time.Duration
		for i := range warm + runs {
			req, err := http.NewRequestWithContext(ctx, "POST", base+"api.test", nil)
			if err != nil {
				return 0, err
			}
			req.Header.Set("Authorization", "Bearer "+fake.BotToken())
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				return 0, err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return 0, errors.New("api.test: " + resp.Status)
			}
			if i >= warm {
				rtt = append(rtt, time.Since(start))
			}
		}
		slices.Sort(rtt)
		return rtt[len(rtt)/2], nil
	}
	direct, err := median(fake.APIURL())
	if err != nil {
		return [2]time.Duration{}, fmt.Errorf("timing the fake: %w", err)
	}
	tapped, err := median(t.url + "/api/")
	if err != nil {
		return [2]time.Duration{}, fmt.Errorf("timing the tap: %w", err)
	}
	// The tap's own connections from this measurement are not the gateway's.
	t.mu.Lock()
	t.calls, t.conns = nil, nil
	t.mu.Unlock()
	return [2]time.Duration{direct, tapped}, nil
}
