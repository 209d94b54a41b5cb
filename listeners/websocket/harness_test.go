package websocket_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
	"github.com/switchboard-gw/switchboard/storage"
)

// gateway is a whole gateway on loopback: real storage, sessions, the
// OpenAI adapter against a scripted server, and the /ws handler; or the
// same inside a synctest bubble (newBubbleGateway, bubble_test.go).
type gateway struct {
	t      *testing.T
	llm    *openaitest.Server // the model (newGateway)
	model  *scripted          // the model (newBubbleGateway)
	srv    *httptest.Server   // newGateway's
	db     *storage.DB
	mgr    *sessions.Manager
	h      *websocket.Handler
	mets   *metrics.Metrics // set by newGatewayWith and newBubbleGateway
	wsURL  string
	dialer *gws.Dialer // nil: gws.DefaultDialer
}

func newGateway(t *testing.T, cfg websocket.Config) *gateway {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sg := sessionstest.New(t, "../../guides", log)
	return serveGateway(t, cfg, sg.Manager, sg.LLM, sg.DB, log)
}

func serveGateway(t *testing.T, cfg websocket.Config, mgr *sessions.Manager, llm *openaitest.Server, db *storage.DB, log *slog.Logger) *gateway {
	ctx, cancel := context.WithCancel(context.Background())
	mux := http.NewServeMux()
	h := websocket.New(ctx, cfg, mgr, log)
	mux.Handle("GET /ws", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		cancel()
		srv.Close()
	})
	return &gateway{t: t, llm: llm, srv: srv, db: db, mgr: mgr, h: h, wsURL: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"}
}

// newGatewayWith is newGateway with a session manager tuned by tune and
// metrics (g.mets), for tests of what a connection leaves behind.
func newGatewayWith(t *testing.T, cfg websocket.Config, tune func(*sessions.Config)) *gateway {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sg := sessionstest.NewTuned(t, "../../guides", log, tune)
	cfg.Metrics = sg.Metrics
	g := serveGateway(t, cfg, sg.Manager, sg.LLM, sg.DB, log)
	g.mets = sg.Metrics
	return g
}

// metric reads one unlabelled sample from g.mets, -1 if absent.
func (g *gateway) metric(name string) float64 {
	g.t.Helper()
	rec := httptest.NewRecorder()
	g.mets.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}

// eventually polls cond until it holds, failing after a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// client is one WebSocket connection speaking protocol v1.
type client struct {
	t  *testing.T
	ws *gws.Conn
}

func (g *gateway) dial(header http.Header) *client {
	g.t.Helper()
	c, err := g.tryDial(header)
	if err != nil {
		g.t.Fatalf("dial: %v", err)
	}
	return c
}

func (g *gateway) tryDial(header http.Header) (*client, error) {
	dialer := g.dialer
	if dialer == nil {
		dialer = gws.DefaultDialer
	}
	ws, resp, err := dialer.Dial(g.wsURL, header)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("%w (HTTP %d)", err, resp.StatusCode)
		}
		return nil, err
	}
	c := &client{t: g.t, ws: ws}
	g.t.Cleanup(func() { ws.Close() })
	return c, nil
}

// hello dials, says hello and returns the client with its ready data.
func (g *gateway) hello(frame map[string]any) (*client, switchboard.ReadyData) {
	g.t.Helper()
	c := g.dial(nil)
	frame["type"] = "hello"
	c.send(frame)
	ev := c.next()
	if ev.Type != switchboard.EventReady {
		g.t.Fatalf("after hello got %s %s, want ready", ev.Type, ev.Data)
	}
	var r switchboard.ReadyData
	if err := json.Unmarshal(ev.Data, &r); err != nil {
		g.t.Fatal(err)
	}
	return c, r
}

func (c *client) send(frame any) {
	c.t.Helper()
	if err := c.ws.WriteJSON(frame); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *client) sendRaw(s string) {
	c.t.Helper()
	if err := c.ws.WriteMessage(gws.TextMessage, []byte(s)); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// wireEvent is an event as the client sees it.
type wireEvent struct {
	switchboard.Event
}

// next reads one event, failing the test after 10s of silence.
func (c *client) next() wireEvent {
	c.t.Helper()
	ev, err := c.read(10 * time.Second)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return ev
}

func (c *client) read(timeout time.Duration) (wireEvent, error) {
	_ = c.ws.SetReadDeadline(time.Now().Add(timeout))
	var ev wireEvent
	_, data, err := c.ws.ReadMessage()
	if err != nil {
		return ev, err
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		c.t.Fatalf("server sent a frame that is not an event: %s", data)
	}
	return ev, nil
}

// silent, in a synctest bubble, reports the frame the server has for the
// client once every goroutine of the test waits, or ok if there is none.
// Reading stops at the deadline, 1 ns later on the bubble's clock, which
// only passes once the server has nothing more to write; gorilla keeps
// that timeout, so the connection reads nothing after silent.
func (c *client) silent() (ev wireEvent, ok bool) {
	c.t.Helper()
	synctest.Wait()
	ev, err := c.read(time.Nanosecond)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ev, true
	}
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return ev, false
}

// until reads events until one matches, returning all read.
func (c *client) until(match func(wireEvent) bool) []wireEvent {
	c.t.Helper()
	var got []wireEvent
	for {
		ev := c.next()
		got = append(got, ev)
		if match(ev) {
			return got
		}
	}
}

// untilAssistant reads until the final assistant message.
func (c *client) untilAssistant() []wireEvent {
	c.t.Helper()
	return c.until(func(ev wireEvent) bool {
		return ev.Type == switchboard.EventMessage && data[switchboard.MessageData](c.t, ev).Role == switchboard.RoleAssistant
	})
}

// untilIdle reads until the session reports idle.
func (c *client) untilIdle() []wireEvent {
	c.t.Helper()
	evs := c.until(func(ev wireEvent) bool {
		return ev.Type == switchboard.EventState && data[switchboard.StateData](c.t, ev).State == switchboard.StateIdle
	})
	// Who is here changes when it will (another client's drop): the
	// present, not the stream the tests compare.
	return slices.DeleteFunc(evs, func(ev wireEvent) bool { return ev.Type == switchboard.EventMembers })
}

// closeCode reads until the server closes, returning its close frame.
func (c *client) closeCode() *gws.CloseError {
	c.t.Helper()
	for {
		_, err := c.read(10 * time.Second)
		if err == nil {
			continue
		}
		ce, ok := err.(*gws.CloseError)
		if !ok {
			c.t.Fatalf("connection ended without a close frame: %v", err)
		}
		return ce
	}
}

func data[T any](t *testing.T, ev wireEvent) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		t.Fatalf("%s event data %s: %v", ev.Type, ev.Data, err)
	}
	return v
}

// seqs lists the seq of every stored event.
func seqs(evs []wireEvent) []int64 {
	var out []int64
	for _, ev := range evs {
		if ev.Seq > 0 {
			out = append(out, ev.Seq)
		}
	}
	return out
}

// contiguous fails unless the seqs run from..to by one.
func contiguous(t *testing.T, got []int64, from int64) {
	t.Helper()
	for i, s := range got {
		if s != from+int64(i) {
			t.Fatalf("seqs %v: want a run from %d with no gap or duplicate", got, from)
		}
	}
}
