// Package otlptest is an OTLP trace receiver for tests: it listens on
// 127.0.0.1 over HTTP (protobuf, POST /v1/traces, as a collector does) or
// gRPC, decodes each ExportTraceServiceRequest with the OTLP protobuf
// definitions, and keeps the spans for the test to read. It refuses what
// a collector refuses: another path or method, a body that is not an
// ExportTraceServiceRequest, a content type other than protobuf.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, flattened for assertions.
type Span struct {
	Name     string
	TraceID  string
	SpanID   string
	ParentID string // "" for a root
	Kind     tracepb.Span_SpanKind
	Start    time.Time
	End      time.Time
	Attrs    map[string]any // string, int64, float64, bool or []any
	Events   []Event
	Links    []Link
	// StatusCode is STATUS_CODE_UNSET, _OK or _ERROR; StatusMessage its
	// description.
	StatusCode    tracepb.Status_StatusCode
	StatusMessage string
	// Resource is the resource's attributes (service.name, …).
	Resource map[string]any
}

// Event is a span event.
type Event struct {
	Name  string
	Attrs map[string]any
}

// Link is a span link.
type Link struct {
	TraceID, SpanID string
	Attrs           map[string]any
}

// Receiver keeps what it was sent.
type Receiver struct {
	// Endpoint is the base URL to give an exporter: http://127.0.0.1:port.
	Endpoint string
	// Close stops it.
	Close     func()
	countOnly bool
	mu        sync.Mutex
	spans     []Span
	count     int
	requests  int
	arrived   chan struct{} // closed and replaced at each export
}

// Start starts an OTLP/HTTP receiver, stopped at the test's end.
func Start(t testing.TB) *Receiver {
	r := New(false)
	t.Cleanup(r.Close)
	return r
}

// New starts an OTLP/HTTP receiver outside a test (the bench's); with
// countOnly it decodes each request but keeps only the number of spans
// (Count), so a long run holds no memory for them.
func New(countOnly bool) *Receiver {
	r := &Receiver{arrived: make(chan struct{}), countOnly: countOnly}
	srv := httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	r.Endpoint, r.Close = srv.URL, srv.Close
	return r
}

// StartGRPC starts an OTLP/gRPC receiver, stopped at the test's end.
func StartGRPC(t testing.TB) *Receiver {
	r := &Receiver{arrived: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	collector.RegisterTraceServiceServer(s, grpcService{r: r})
	go func() { _ = s.Serve(ln) }()
	r.Close = s.Stop
	t.Cleanup(s.Stop)
	r.Endpoint = "http://" + ln.Addr().String()
	return r
}

type grpcService struct {
	collector.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(_ context.Context, req *collector.ExportTraceServiceRequest) (*collector.ExportTraceServiceResponse, error) {
	g.r.add(req)
	return &collector.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	if req.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "unsupported content type "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg)
	out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) add(req *collector.ExportTraceServiceRequest) {
	if r.countOnly {
		n := 0
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				n += len(ss.GetSpans())
			}
		}
		r.mu.Lock()
		r.count += n
		r.requests++
		r.mu.Unlock()
		return
	}
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Kind: s.GetKind(),
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
					Attrs: attrs(s.GetAttributes()), StatusCode: s.GetStatus().GetCode(), StatusMessage: s.GetStatus().GetMessage(),
					Resource: res,
				}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, Event{Name: e.GetName(), Attrs: attrs(e.GetAttributes())})
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId()), Attrs: attrs(l.GetAttributes())})
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.count += len(got)
	r.requests++
	close(r.arrived)
	r.arrived = make(chan struct{})
	r.mu.Unlock()
}

// Spans returns every span received so far, in the order received.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Count is the number of spans received.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Requests counts the export requests received.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// WaitFor returns the spans once ok holds for them, waiting for exports
// (a gateway in another process exports on its own schedule); it fails
// the test when ctx ends first.
func (r *Receiver) WaitFor(ctx context.Context, t testing.TB, ok func([]Span) bool) []Span {
	t.Helper()
	for {
		r.mu.Lock()
		spans, arrived := slices.Clone(r.spans), r.arrived
		r.mu.Unlock()
		if ok(spans) {
			return spans
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			t.Fatalf("otlptest: the spans waited for did not arrive (%d spans so far: %s)", len(spans), Names(spans))
			return nil
		}
	}
}

// Named returns the spans called name.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Names lists the spans' names, for failure messages.
func Names(spans []Span) string {
	var b []byte
	for i, s := range spans {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "%q", s.Name)
	}
	return string(b)
}

func attrs(kvs []*common.KeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		out[kv.GetKey()] = value(kv.GetValue())
	}
	return out
}

func value(v *common.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *common.AnyValue_StringValue:
		return x.StringValue
	case *common.AnyValue_IntValue:
		return x.IntValue
	case *common.AnyValue_DoubleValue:
		return x.DoubleValue
	case *common.AnyValue_BoolValue:
		return x.BoolValue
	case *common.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	case *common.AnyValue_BytesValue:
		return x.BytesValue
	}
	return nil
}
