package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	gws "github.com/gorilla/websocket"
)

// The load generator: N connections, each a session sending turns back to
// back. A turn is timed from the input's send to the assistant's final
// message. Frames are matched by bytes, not decoded: the client shares the
// machine with the servers and should cost as little as it can.

var (
	assistantMessage = []byte(`"role":"assistant"`)
	messageType      = []byte(`"type":"message"`)
	readyType        = []byte(`"type":"ready"`)
)

// isFinal reports whether a frame is the assistant's whole message.
func isFinal(frame []byte) bool {
	return bytes.Contains(frame, messageType) && bytes.Contains(frame, assistantMessage)
}

// dialSession connects and says hello, returning once ready arrives.
func dialSession(ctx context.Context, url string) (*gws.Conn, error) {
	c, _, err := dialHello(ctx, url, []byte(`{"type":"hello"}`))
	return c, err
}

// dialHello connects, sends hello and returns once ready arrives, with
// the ready frame.
func dialHello(ctx context.Context, url string, hello []byte) (*gws.Conn, []byte, error) {
	d := gws.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 4096, WriteBufferSize: 1024}
	c, _, err := d.DialContext(ctx, url, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", url, err)
	}
	if err := c.WriteMessage(gws.TextMessage, hello); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("hello: %w", err)
	}
	for {
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		_, msg, err := c.ReadMessage()
		if err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("waiting for ready: %w", err)
		}
		if bytes.Contains(msg, readyType) {
			return c, msg, nil
		}
	}
}

// turn sends one input and reads until the assistant's message. It returns
// how many frames came on the way, and appends their sizes to sizes if set
// (for calibrating the echo floor).
func turn(c *gws.Conn, id int, sizes *[]int) (frames int, err error) {
	in := []byte(`{"type":"input","id":"` + strconv.Itoa(id) + `","text":"hello there"}`)
	if err := c.WriteMessage(gws.TextMessage, in); err != nil {
		return 0, fmt.Errorf("send input: %w", err)
	}
	for {
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		_, msg, err := c.ReadMessage()
		if err != nil {
			return frames, fmt.Errorf("read: %w", err)
		}
		frames++
		if sizes != nil {
			*sizes = append(*sizes, len(msg))
		}
		if isFinal(msg) {
			return frames, nil
		}
	}
}

// loadResult is one run of the load generator against one target.
type loadResult struct {
	sessions  int
	turns     int
	elapsed   time.Duration
	latencies []time.Duration // sorted
	frames    int             // received in the measured turns
	errors    int
}

func (r loadResult) turnsPerSec() float64 { return float64(r.turns) / r.elapsed.Seconds() }

func (r loadResult) framesPerTurn() float64 {
	if r.turns == 0 {
		return 0
	}
	return float64(r.frames) / float64(r.turns)
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// dialSessions opens n sessions, parallel at a time, the i'th on
// urls[i mod len(urls)]. It returns those that opened and the errors of
// those that did not.
func dialSessions(ctx context.Context, urls []string, n, parallel int) ([]*gws.Conn, []error) {
	var (
		mu    sync.Mutex
		conns []*gws.Conn
		errs  []error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, parallel)
	)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := dialSession(ctx, urls[i%len(urls)])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			conns = append(conns, c)
		})
	}
	wg.Wait()
	return conns, errs
}

func closeAll(conns []*gws.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// runLoad connects n sessions, spread round-robin over urls, lets them
// run turns back to back for warmup, then measures for d. onStart and
// onEnd bracket the measured window (the caller reads the servers' CPU
// there).
func runLoad(ctx context.Context, urls []string, n int, warmup, d time.Duration, onStart, onEnd func()) (loadResult, error) {
	conns, errs := dialSessions(ctx, urls, n, 64)
	defer closeAll(conns)
	dialErr := errors.Join(errs...)
	if dialErr != nil {
		return loadResult{}, fmt.Errorf("connecting %d sessions: %w", n, dialErr)
	}

	// Every turn is recorded with its end; the ones that ended inside the
	// measured window count.
	type done struct {
		end    time.Time
		lat    time.Duration
		frames int
	}
	var (
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		turns   = make([][]done, n)
		errored = make([]bool, n)
	)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := make([]done, 0, 1024)
			defer func() { turns[i] = rec }()
			for id := 0; ; id++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				frames, err := turn(c, id, nil)
				if err != nil {
					errored[i] = true
					return
				}
				end := time.Now()
				rec = append(rec, done{end, end.Sub(start), frames})
			}
		}()
	}
	select {
	case <-time.After(warmup):
	case <-ctx.Done():
	}
	onStart()
	t0 := time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	t1 := time.Now()
	onEnd()
	close(stop)
	// A turn in flight finishes; closing the connections ends any that cannot.
	closer := time.AfterFunc(30*time.Second, func() {
		for _, c := range conns {
			c.Close()
		}
	})
	wg.Wait()
	closer.Stop()
	elapsed := t1.Sub(t0)

	r := loadResult{sessions: n, elapsed: elapsed}
	for i := range turns {
		for _, t := range turns[i] {
			if !t.end.Before(t0) && !t.end.After(t1) {
				r.latencies = append(r.latencies, t.lat)
				r.frames += t.frames
			}
		}
		if errored[i] {
			r.errors++
		}
	}
	r.turns = len(r.latencies)
	slices.Sort(r.latencies)
	return r, nil
}

// measureWindow is the measured part of a chat app's run: once every
// thread is open (opened) and the warm-up has passed, it measures for d,
// then stops the threads and waits for their turns to end (running). It
// returns the window's bounds and the gateway's CPU time in it.
func measureWindow(ctx context.Context, gw *child, opened, running *sync.WaitGroup, stop chan struct{}, warmup, d time.Duration) (t0, t1 time.Time, cpu time.Duration) {
	allOpen := make(chan struct{})
	go func() { opened.Wait(); close(allOpen) }()
	select {
	case <-allOpen:
	case <-ctx.Done():
	}
	select {
	case <-time.After(warmup):
	case <-ctx.Done():
	}
	cpu0, _ := cpuTime(gw.pid())
	t0 = time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	t1 = time.Now()
	cpu1, _ := cpuTime(gw.pid())
	close(stop)
	running.Wait() // every turn ends, answered or timed out
	return t0, t1, cpu1 - cpu0
}

// forward relays one request to url with the named headers, writes the
// upstream's answer back, and returns it with the time it was read; ok is
// false when there was none (the client got an error answer).
func forward(w http.ResponseWriter, r *http.Request, client *http.Client, url string, body []byte, headers ...string) (answer []byte, status int, at time.Time, ok bool) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, url, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, 0, at, false
	}
	for _, h := range headers {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return nil, 0, at, false
	}
	answer, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	at = time.Now()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return nil, 0, at, false
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
	return answer, resp.StatusCode, at, true
}

// relayServer is the loopback server a tap relays a chat app's API
// through, and its client to the fake behind it.
type relayServer struct {
	url    string
	client *http.Client
	srv    *http.Server
}

// startRelay serves h on a free loopback port; onConn is called for each
// connection the gateway opens to it.
func startRelay(h http.Handler, onConn func()) (*relayServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rs := &relayServer{
		url:    "http://" + ln.Addr().String(),
		client: &http.Client{Transport: &http.Transport{MaxIdleConns: 2048, MaxIdleConnsPerHost: 2048, IdleConnTimeout: time.Minute}},
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
			ConnState: func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					onConn()
				}
			}},
	}
	go func() { _ = rs.srv.Serve(ln) }()
	return rs, nil
}

func (rs *relayServer) close() {
	_ = rs.srv.Close()
	rs.client.CloseIdleConnections()
}

// turnClock is when a chat app's turn showed its first text and became
// whole; done closes at the end.
type turnClock struct {
	done            chan struct{}
	firstAt, doneAt time.Time // set once, before done closes
}

// finish ends the turn at at, once; it reports whether this call did.
func (c *turnClock) finish(at time.Time) bool {
	if !c.doneAt.IsZero() {
		return false
	}
	if c.firstAt.IsZero() {
		c.firstAt = at
	}
	c.doneAt = at
	close(c.done)
	return true
}
