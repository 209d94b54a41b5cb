package websocket_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/guides"
	"github.com/switchboard-gw/switchboard/listeners/websocket"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/storage"
	"github.com/switchboard-gw/switchboard/tools"
)

// The gateway of newGateway runs on loopback TCP, and its model is an HTTP
// server: a goroutine waiting on a socket is not durably blocked, so in a
// synctest bubble the clock would never move. newBubbleGateway runs the
// same handler, session manager and storage inside the bubble, over
// in-memory connections (net.Pipe) served by a real http.Server, with the
// model in process. Read deadlines, the idle timeout and every other timer
// then run on the bubble's clock.

// newBubbleGateway is newGateway for a test inside synctest.Test; tune, if
// set, changes the session manager's configuration. Everything it starts
// ends in the test's cleanup, inside the bubble.
func newBubbleGateway(t *testing.T, cfg websocket.Config, tune func(*sessions.Config)) *gateway {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := storage.Open(context.Background(), filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	catalog, err := guides.LoadDir("../../guides")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tools.Builtins(time.Now)...)
	if err != nil {
		t.Fatal(err)
	}
	model := &scripted{}
	mets := metrics.New()
	scfg := sessions.Config{
		Store: db, Guides: catalog, DefaultGuide: "assistant", Tools: reg, Metrics: mets,
		Providers:       map[string]*providers.Resilient{"main": {Name: "main", Provider: model, Policy: providers.Policy{MaxRetries: 0}}},
		DefaultProvider: "main", Logger: log,
	}
	if tune != nil {
		tune(&scfg)
	}
	mctx, stopManager := context.WithCancel(context.Background())
	mgr := sessions.NewManager(mctx, scfg)

	cfg.Metrics = mets
	ctx, cancel := context.WithCancel(context.Background())
	mux := http.NewServeMux()
	h := websocket.New(ctx, cfg, mgr, log)
	mux.Handle("GET /ws", h)
	l := newPipeListener()
	srv := &http.Server{Handler: mux, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		cancel() // connections close with 1001
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		stopManager()
		mgr.Wait()
		if err := db.Close(); err != nil {
			t.Errorf("close db: %v", err)
		}
	})
	dialer := &gws.Dialer{
		NetDialContext:   func(ctx context.Context, _, _ string) (net.Conn, error) { return l.dial(ctx) },
		HandshakeTimeout: 10 * time.Second,
	}
	return &gateway{t: t, model: model, db: db, mgr: mgr, h: h, mets: mets, wsURL: "ws://127.0.0.1/ws", dialer: dialer}
}

// pipeListener accepts the server's ends of in-memory connections; dial
// makes one and returns the client's end.
type pipeListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	port      int
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{}), port: 40000}
}

var (
	serverAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}
	errClosed  = errors.New("pipe listener closed")
)

func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	l.mu.Lock()
	l.port++
	clientAddr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: l.port}
	l.mu.Unlock()
	server, client := net.Pipe()
	select {
	case l.conns <- addressed{server, serverAddr, clientAddr}:
		return addressed{client, clientAddr, serverAddr}, nil
	case <-l.done:
		return nil, errClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return serverAddr }

// addressed gives one end of a pipe the addresses of a loopback TCP
// connection, as the handler reads them (the per-address limits, origins
// on loopback).
type addressed struct {
	net.Conn
	local, remote net.Addr
}

func (a addressed) LocalAddr() net.Addr  { return a.local }
func (a addressed) RemoteAddr() net.Addr { return a.remote }

// scripted is the model in process: it answers from the same script as
// openaitest (Text, then ToolCalls).
type scripted struct {
	mu     sync.Mutex
	script []openaitest.Reply
}

// Push appends replies to the script; once it is used up, "ok" answers.
func (s *scripted) Push(r ...openaitest.Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, r...)
}

// Stream implements providers.Provider.
func (s *scripted) Stream(ctx context.Context, req providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		s.mu.Lock()
		r := openaitest.Reply{Text: []string{"ok"}}
		if len(s.script) > 0 {
			r, s.script = s.script[0], s.script[1:]
		}
		s.mu.Unlock()
		if r.Status != 0 || r.Cut || r.Hang || r.Gate != nil || r.Delay != 0 {
			yield(providers.Event{}, fmt.Errorf("scripted model: only Text and ToolCalls are scripted in process, not %+v", r))
			return
		}
		for _, t := range r.Text {
			if !yield(providers.Event{Kind: providers.EventTextDelta, Text: t}, nil) {
				return
			}
		}
		for _, c := range r.ToolCalls {
			if !yield(providers.Event{Kind: providers.EventToolCall, ToolCall: switchboard.ToolCall{ID: c.ID, Name: c.Name, Args: json.RawMessage(c.Args)}}, nil) {
				return
			}
		}
		if !yield(providers.Event{Kind: providers.EventUsage, Usage: switchboard.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}, nil) {
			return
		}
		yield(providers.Event{Kind: providers.EventDone, StopReason: "stop", Model: "gpt-test"}, nil)
	}
}
