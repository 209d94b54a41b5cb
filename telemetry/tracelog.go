package telemetry

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gw/switchboard/sessions"
)

// TraceLogConfig is telemetry.trace_log.
type TraceLogConfig struct {
	Path     string
	MaxBytes int64 // rotate before the file passes this size (100 MiB)
	MaxFiles int   // rotated files kept: path.1 (the newest) to path.N (5)
	// Buffer is how many lines wait for the writer (4096); a line that
	// finds it full is dropped and counted, never waited for.
	Buffer int
}

// Line is one line of the trace log: one step of a turn. Type is one of
// turn_start, turn_end, model_request, model_response, tool_call,
// tool_result, approval_requested, approval_decided, compaction, handoff
// guardrail and error; the fields each type carries are listed in
// docs/telemetry.md. Contents (System, Input, Output, Args, Result) are
// written only with telemetry.capture_content.
type Line struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Session string    `json:"session"`
	Turn    string    `json:"turn,omitempty"`
	TraceID string    `json:"trace_id,omitempty"`
	SpanID  string    `json:"span_id,omitempty"`

	Guide   string             `json:"guide,omitempty"`
	Resumed string             `json:"resumed,omitempty"` // approval | restart
	Link    *sessions.TraceRef `json:"link,omitempty"`    // the interrupted turn's span
	Outcome string             `json:"outcome,omitempty"`

	Provider     string   `json:"provider,omitempty"`
	ProviderKind string   `json:"provider_kind,omitempty"`
	Model        string   `json:"model,omitempty"`
	Temperature  *float64 `json:"temperature,omitempty"`
	MaxTokens    int      `json:"max_tokens,omitempty"`
	Messages     int      `json:"messages,omitempty"`
	FinishReason string   `json:"finish_reason,omitempty"`
	ToolCalls    int      `json:"tool_calls,omitempty"`
	Usage        *Usage   `json:"usage,omitempty"`

	Tool         string    `json:"tool,omitempty"`
	CallID       string    `json:"call_id,omitempty"`
	IsError      bool      `json:"is_error,omitempty"`
	Confirmation string    `json:"confirmation,omitempty"`
	ExpiresAt    time.Time `json:"expires_at,omitzero"`
	Decision     string    `json:"decision,omitempty"`
	By           string    `json:"by,omitempty"`
	Channel      string    `json:"channel,omitempty"`

	Summarised int `json:"summarised,omitempty"`
	Kept       int `json:"kept,omitempty"`

	From    string `json:"from,omitempty"`    // handoff: the guide passed from
	To      string `json:"to,omitempty"`      // handoff: the guide passed (or refused) to
	Refused string `json:"refused,omitempty"` // handoff: why it was refused
	Reason  string `json:"reason,omitempty"`  // handoff: the model's reason (content)

	// guardrail: which side, which rule, what it did and how often;
	// never what it matched.
	Side   string `json:"side,omitempty"`
	Rule   string `json:"rule,omitempty"`
	Action string `json:"action,omitempty"`
	Count  int    `json:"count,omitempty"`

	DurationMS float64 `json:"duration_ms,omitempty"`
	Step       string  `json:"step,omitempty"` // error: the step that failed
	ErrorType  string  `json:"error_type,omitempty"`
	Error      string  `json:"error,omitempty"`

	System string          `json:"system,omitempty"`
	Input  string          `json:"input,omitempty"`  // gen_ai.input.messages' JSON
	Output string          `json:"output,omitempty"` // gen_ai.output.messages' JSON
	Args   json.RawMessage `json:"args,omitempty"`
	Result *string         `json:"result,omitempty"`
}

// Usage is a model call's or a turn's tokens.
type Usage struct {
	// InputTokens counts all the input, CachedTokens the part of it read
	// from the provider's cache (where the provider says).
	InputTokens  int `json:"input_tokens"`
	CachedTokens int `json:"cached_tokens,omitempty"`
	OutputTokens int `json:"output_tokens"`
}

// line writes one log line, if there is a log.
func (t *Telemetry) line(typ string, st sessions.Step, ref sessions.TraceRef, at time.Time, fill func(*Line)) {
	if t.log == nil {
		return
	}
	l := Line{Time: at.UTC(), Type: typ, Session: st.Session, Turn: st.Turn, TraceID: ref.TraceID, SpanID: ref.SpanID,
		Tool: st.Tool, CallID: st.CallID}
	fill(&l)
	if !json.Valid(l.Args) {
		l.Args = nil
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.log.errs.Add(1)
		return
	}
	t.log.put(append(b, '\n'))
}

// traceLog writes lines on a goroutine of its own, through a bounded
// queue: a turn never waits for the disk. When the queue is full the line
// is dropped and counted (switchboard_trace_log_dropped_total), and the
// first drop of a burst is logged.
type traceLog struct {
	w       *rotating
	lines   chan []byte
	done    chan struct{}
	log     *slog.Logger
	dropped atomic.Uint64
	errs    atomic.Uint64
	mu      sync.RWMutex // held for reading by put, for writing by close
	closed  bool
	warned  atomic.Bool
}

func openTraceLog(cfg TraceLogConfig, log *slog.Logger) (*traceLog, error) {
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o755); err != nil {
		return nil, fmt.Errorf("telemetry.trace_log.path: %w", err)
	}
	// Opened here, so a path that cannot be written fails start-up with
	// the reason rather than at the first line.
	w, err := openRotating(cfg.Path, cmp.Or(cfg.MaxBytes, 100<<20), max(cfg.MaxFiles, 1))
	if err != nil {
		return nil, fmt.Errorf("telemetry.trace_log.path: %w", err)
	}
	l := &traceLog{w: w, lines: make(chan []byte, cmp.Or(cfg.Buffer, 4096)), done: make(chan struct{}), log: log}
	go l.run()
	return l, nil
}

func (l *traceLog) put(b []byte) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return
	}
	select {
	case l.lines <- b:
		l.warned.Store(false)
	default:
		l.dropped.Add(1)
		if !l.warned.Swap(true) {
			l.log.Error("telemetry: the trace log cannot keep up; lines are dropped (switchboard_trace_log_dropped_total counts them). Put telemetry.trace_log.path on a faster disk, or set it empty")
		}
	}
}

// run writes the queued lines, as many as are waiting in one write.
func (l *traceLog) run() {
	defer close(l.done)
	var buf []byte
	for b := range l.lines {
		buf = append(buf[:0], b...)
	more:
		for len(buf) < 64<<10 {
			select {
			case b, ok := <-l.lines:
				if !ok {
					break more
				}
				buf = append(buf, b...)
			default:
				break more
			}
		}
		if _, err := l.w.Write(buf); err != nil {
			if l.errs.Add(1) == 1 {
				l.log.Error("telemetry: the trace log cannot be written; its lines are lost until it can", "err", err)
			}
		}
	}
}

// close writes what is queued, for as long as ctx allows, and closes the
// file.
func (l *traceLog) close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.lines)
	l.mu.Unlock()
	select {
	case <-l.done:
	case <-ctx.Done():
		return errors.New("telemetry: the trace log was not flushed in time")
	}
	return l.w.Close()
}

// ReadLog decodes a trace log, one Line a line, refusing a line that is
// not one (a field the schema does not have included), with its number.
func ReadLog(r io.Reader) ([]Line, error) {
	var lines []Line
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var l Line
		if err := dec.Decode(&l); err != nil {
			return lines, fmt.Errorf("trace log line %d: %w", n, err)
		}
		if dec.More() {
			return lines, fmt.Errorf("trace log line %d: more than one JSON value", n)
		}
		lines = append(lines, l)
	}
	return lines, sc.Err()
}

// ReadLogFile is ReadLog of the file at path.
func ReadLogFile(path string) ([]Line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadLog(f)
}
