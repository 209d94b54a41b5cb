package providers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/demo"
	"github.com/switchboard-gw/switchboard/providers/openai"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

func resilient(t *testing.T, llm *openaitest.Server, name string, slept *[]time.Duration) *providers.Resilient {
	t.Helper()
	p, err := openai.New(providers.Config{Name: name, Kind: "openai", BaseURL: llm.BaseURL(), APIKey: "k", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	return &providers.Resilient{
		Name: name, Provider: p,
		Policy: providers.Policy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond},
		Sleep: func(ctx context.Context, d time.Duration) error {
			*slept = append(*slept, d)
			return nil
		},
	}
}

func collect(t *testing.T, p providers.Provider) (string, error) {
	t.Helper()
	var b strings.Builder
	for ev, err := range p.Stream(context.Background(), providers.Request{Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "hi"}}}) {
		if err != nil {
			return b.String(), err
		}
		b.WriteString(ev.Text)
	}
	return b.String(), nil
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	llm.Push(openaitest.Reply{Status: 429, RetryAfter: "3"}, openaitest.Reply{Text: []string{"ok"}})
	var slept []time.Duration
	got, err := collect(t, resilient(t, llm, "main", &slept))
	if err != nil || got != "ok" {
		t.Fatalf("got %q, %v", got, err)
	}
	if len(slept) != 1 || slept[0] != 3*time.Second {
		t.Fatalf("waited %v, want the server's 3s", slept)
	}
}

func TestBackoffGrowsAndGivesUp(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	llm.Push(openaitest.Reply{Status: 503}, openaitest.Reply{Status: 503}, openaitest.Reply{Status: 503})
	var slept []time.Duration
	_, err := collect(t, resilient(t, llm, "main", &slept))
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Status != 503 || !strings.Contains(err.Error(), "giving up after 3 attempts") {
		t.Fatalf("err = %v", err)
	}
	if len(slept) != 2 || slept[0] > time.Millisecond || slept[1] > 2*time.Millisecond || slept[1] < time.Millisecond {
		t.Fatalf("delays %v: want jittered exponential backoff within 1ms then 2ms", slept)
	}
}

func TestNoRetryOnClientErrors(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	llm.Push(openaitest.Reply{Status: 401})
	var slept []time.Duration
	if _, err := collect(t, resilient(t, llm, "main", &slept)); err == nil {
		t.Fatal("401 succeeded")
	}
	if len(llm.Requests()) != 1 || len(slept) != 0 {
		t.Fatalf("a 401 was retried: %d requests", len(llm.Requests()))
	}
}

func TestFallbackAfterRetriesRunOut(t *testing.T) {
	bad, good := openaitest.New(), openaitest.New()
	defer bad.Close()
	defer good.Close()
	bad.Respond(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Status: 500} })
	good.Push(openaitest.Reply{Text: []string{"from backup"}})
	var slept []time.Duration
	main := resilient(t, bad, "main", &slept)
	main.Fallback = resilient(t, good, "backup", &slept)
	got, err := collect(t, main)
	if err != nil || got != "from backup" {
		t.Fatalf("got %q, %v", got, err)
	}
	if len(bad.Requests()) != 3 {
		t.Fatalf("main tried %d times, want 3", len(bad.Requests()))
	}
}

func TestNoRetryOnceTextWasStreamed(t *testing.T) {
	llm := openaitest.New()
	defer llm.Close()
	llm.Push(openaitest.Reply{Text: []string{"half"}, Cut: true})
	var slept []time.Duration
	got, err := collect(t, resilient(t, llm, "main", &slept))
	if err == nil || got != "half" || len(llm.Requests()) != 1 {
		t.Fatalf("got %q, %v after %d requests: a stream that already showed text must not be retried", got, err, len(llm.Requests()))
	}
}

func TestDemoModelCallsToolsAndLabelsItself(t *testing.T) {
	p := &demo.Provider{Hint: "Set OPENAI_API_KEY."}
	req := providers.Request{
		Messages: []switchboard.Message{{Role: switchboard.RoleUser, Content: "What is 2 * (3 + 4)?"}},
		Tools:    []providers.ToolSpec{{Name: "calculator"}, {Name: "current_time"}},
	}
	var calls []switchboard.ToolCall
	var model string
	for ev, err := range p.Stream(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == providers.EventToolCall {
			calls = append(calls, ev.ToolCall)
		}
		if ev.Kind == providers.EventDone {
			model = ev.Model
		}
	}
	if len(calls) != 1 || calls[0].Name != "calculator" || string(calls[0].Args) != `{"expression":"2 * (3 + 4)"}` {
		t.Fatalf("calls = %+v", calls)
	}
	if !strings.Contains(model, "demo") {
		t.Fatalf("model label = %q", model)
	}
	req.Messages = []switchboard.Message{{Role: switchboard.RoleUser, Content: "hello"}}
	got, err := collect(t, p)
	if err != nil || !strings.Contains(got, "offline demo model") || !strings.Contains(got, "OPENAI_API_KEY") {
		t.Fatalf("plain answer = %q, %v", got, err)
	}
}
