package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/telemetry"
	"github.com/switchboard-gw/switchboard/telemetry/otlptest"
)

func noEnv(string) string { return "" }

func setup(t *testing.T, cfg telemetry.Config, getenv func(string) string) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.Setup(context.Background(), cfg, getenv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tel == nil {
		t.Fatal("Setup returned no telemetry")
	}
	return tel
}

func shutdown(t *testing.T, tel *telemetry.Telemetry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// oneTurn reports a turn with one model call through the Tracer
// interface, as the session core does.
func oneTurn(tel sessions.Tracer) {
	ctx := context.Background()
	turn := tel.Begin(ctx, sessions.Step{Kind: sessions.StepTurn, Session: "s_1", Turn: "t_1", Guide: "support"})
	chat := tel.Begin(turn.Context(ctx), sessions.Step{Kind: sessions.StepModel, Session: "s_1", Turn: "t_1", Model: "gpt-x", ProviderKind: "gemini"})
	chat.End(sessions.Step{ErrType: "rate_limited", Err: "The model's service is busy (ref abc123)"})
	turn.End(sessions.Step{Outcome: "error", ErrType: "rate_limited", Err: "The model's service is busy (ref abc123)"})
}

func TestNothingConfiguredTracesNothing(t *testing.T) {
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Protocol: "http/protobuf", Sampler: 1}, noEnv, nil)
	if tel != nil || err != nil {
		t.Fatalf("Setup with nothing set = %v, %v; want nil, nil", tel, err)
	}
	// A nil Telemetry is safe to use where the gateway passes it on.
	var none *telemetry.Telemetry
	if rt := none.Transport("slack", http.DefaultTransport); rt != http.DefaultTransport {
		t.Fatal("a nil Telemetry wrapped the transport")
	}
	if err := none.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// OTEL_SDK_DISABLED turns the exporter off whatever the config says.
	env := map[string]string{"OTEL_SDK_DISABLED": "true"}
	tel, err = telemetry.Setup(context.Background(), telemetry.Config{Endpoint: "http://127.0.0.1:1", Protocol: "http/protobuf", Sampler: 1},
		func(k string) string { return env[k] }, nil)
	if tel != nil || err != nil {
		t.Fatalf("Setup with OTEL_SDK_DISABLED = %v, %v; want nil", tel, err)
	}
}

func TestErrorsAreRecordedOnTheSpans(t *testing.T) {
	tr := otlptest.StartTraced(t, telemetry.Config{Sampler: 1})
	oneTurn(tr.Telemetry)
	spans := tr.Flush(t)
	chat := otlptest.Named(spans, "chat gpt-x")
	if len(chat) != 1 {
		t.Fatalf("spans: %s", otlptest.Names(spans))
	}
	c := chat[0]
	if c.StatusCode != 2 || c.StatusMessage != "The model's service is busy (ref abc123)" || c.Attrs["error.type"] != "rate_limited" {
		t.Errorf("chat span status %v %q, error.type %v", c.StatusCode, c.StatusMessage, c.Attrs["error.type"])
	}
	if len(c.Events) != 1 || c.Events[0].Name != "exception" || c.Events[0].Attrs["exception.type"] != "rate_limited" {
		t.Errorf("chat span events = %+v, want one exception", c.Events)
	}
	if c.Attrs["gen_ai.provider.name"] != "gcp.gemini" {
		t.Errorf("gen_ai.provider.name = %v, want gcp.gemini", c.Attrs["gen_ai.provider.name"])
	}
}

func TestGRPCExportWorks(t *testing.T) {
	recv := otlptest.StartGRPC(t)
	tel := setup(t, telemetry.Config{Endpoint: recv.Endpoint, Protocol: "grpc", Sampler: 1, ServiceName: "gw-test"}, noEnv)
	oneTurn(tel)
	shutdown(t, tel)
	spans := recv.Spans()
	if len(otlptest.Named(spans, "invoke_agent support")) != 1 || len(otlptest.Named(spans, "chat gpt-x")) != 1 {
		t.Fatalf("spans over gRPC: %s", otlptest.Names(spans))
	}
	if spans[0].Resource["service.name"] != "gw-test" {
		t.Errorf("service.name = %v", spans[0].Resource["service.name"])
	}
}

// The OTEL_ variables win over the configuration: the endpoint, the
// service name and the sampler (read by the SDK itself).
func TestTheEnvironmentWinsOverTheConfig(t *testing.T) {
	fromConfig, fromEnv := otlptest.Start(t), otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fromEnv.Endpoint)
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	tel := setup(t, telemetry.Config{Endpoint: fromConfig.Endpoint, Protocol: "http/protobuf", Sampler: 0, ServiceName: "from-config"}, os.Getenv)
	oneTurn(tel)
	shutdown(t, tel)
	if n := fromConfig.Requests(); n != 0 {
		t.Errorf("the configured endpoint got %d exports; the environment's should have", n)
	}
	spans := fromEnv.Spans()
	if len(spans) != 2 {
		t.Fatalf("the environment's endpoint got %s; sampler 0 in the config should give way to OTEL_TRACES_SAMPLER", otlptest.Names(spans))
	}
	if spans[0].Resource["service.name"] != "from-env" {
		t.Errorf("service.name = %v, want OTEL_SERVICE_NAME's", spans[0].Resource["service.name"])
	}
}

func TestTheSamplerOfTheConfigApplies(t *testing.T) {
	tr := otlptest.StartTraced(t, telemetry.Config{Sampler: 0})
	oneTurn(tr.Telemetry)
	if spans := tr.Flush(t); len(spans) != 0 {
		t.Fatalf("sampler 0 exported %s", otlptest.Names(spans))
	}
}

func TestTheTransportTracesEachAPICall(t *testing.T) {
	tr := otlptest.StartTraced(t, telemetry.Config{Sampler: 1})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v10/channels/123456789/messages" {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer api.Close()
	client := &http.Client{Transport: tr.Telemetry.Transport("discord", http.DefaultTransport)}
	for _, path := range []string{"/api/chat.postMessage?token=secret", "/api/v10/channels/123456789/messages"} {
		resp, err := client.Post(api.URL+path, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	spans := tr.Flush(t)
	post := otlptest.Named(spans, "POST chat.postMessage")
	limited := otlptest.Named(spans, "POST channels/{id}/messages")
	if len(post) != 1 || len(limited) != 1 {
		t.Fatalf("spans: %s", otlptest.Names(spans))
	}
	if post[0].Attrs["http.response.status_code"] != int64(200) || post[0].StatusCode == 2 || post[0].Attrs["switchboard.channel"] != "discord" {
		t.Errorf("chat.postMessage span = %+v", post[0])
	}
	for _, v := range post[0].Attrs {
		if s, ok := v.(string); ok && (s == "secret" || len(s) > 0 && filepath.Base(s) == "chat.postMessage?token=secret") {
			t.Errorf("the URL's query was recorded: %v", post[0].Attrs)
		}
	}
	if limited[0].StatusCode != 2 || limited[0].Attrs["error.type"] != "429" {
		t.Errorf("a 429 is not an error on the span: %+v", limited[0])
	}
}

// The trace log's reader takes what the writer writes, and refuses the
// rest with the line's number, never panicking.
func FuzzReadLog(f *testing.F) {
	f.Add([]byte(`{"time":"2026-11-27T10:00:00Z","type":"turn_start","session":"s_1","turn":"t_1","trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331","guide":"support"}` + "\n"))
	f.Add([]byte(`{"type":"tool_result","session":"s","result":"ok","args":{"a":1},"usage":{"input_tokens":1,"output_tokens":2}}` + "\n{}\n"))
	f.Add([]byte(`{"type":"x","unknown":1}`))
	f.Add([]byte(`{} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := telemetry.ReadLog(bytes.NewReader(data))
		if err != nil {
			return
		}
		var again bytes.Buffer
		for _, l := range lines {
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatalf("a line read back does not encode: %v", err)
			}
			again.Write(append(b, '\n'))
		}
		back, err := telemetry.ReadLog(&again)
		if err != nil || len(back) != len(lines) {
			t.Fatalf("the lines read, written again, read back as %d lines, %v; want %d", len(back), err, len(lines))
		}
		for i := range back {
			if back[i].Type != lines[i].Type || back[i].Session != lines[i].Session || !back[i].Time.Equal(lines[i].Time) {
				t.Fatalf("line %d changed: %+v, then %+v", i+1, lines[i], back[i])
			}
		}
	})
}
