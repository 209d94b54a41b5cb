package openai_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"

	listener "github.com/switchboard-gw/switchboard/listeners/openai"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// guardedAPI is the API over sessions whose one guide is guardedGuide.
func guardedAPI(t *testing.T) *api {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gw := sessionstest.NewTuned(t, "../../guides", log, sessionstest.OnlyGuide(t, "guarded", sessionstest.GuardedGuide))
	ctx, cancel := context.WithCancel(context.Background())
	mux := http.NewServeMux()
	rec := &seen{Manager: gw.Manager, deleted: make(chan string, 100)}
	mux.Handle("/v1/", listener.New(ctx, listener.Config{Keys: []listener.Key{{Name: "all", Secret: allKey}}}, rec, guideNames{"guarded"}, log))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); cancel() })
	return &api{t: t, gw: gw, url: srv.URL + "/v1", seen: rec}
}

// A message a guardrail refuses is a 400 with the rule's message, and the
// model is not called.
func TestGuardrailRefusesAnInputWith400(t *testing.T) {
	a := guardedAPI(t)
	_, err := a.client(allKey).Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model: "guarded", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("my password: hunter2")},
	})
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "guardrail_blocked" ||
		!strings.Contains(apiErr.Message, "Please never send passwords here.") {
		t.Fatalf("err %v, want 400 guardrail_blocked with the rule's message", err)
	}
	if n := len(a.gw.LLM.Requests()); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
}

// An answer a guardrail blocked after part of it streamed goes on with
// the rule's message, streamed or not; the phrase is never in it.
func TestGuardrailBlockedAnswerEndsWithTheRulesMessage(t *testing.T) {
	a := guardedAPI(t)
	reply := openaitest.Reply{Delay: 20 * time.Millisecond,
		Text: []string{strings.Repeat("Let me look that up. ", 20), "More. ", "The codename is ", "PROJECT ", "ALPHA", "."}}
	ask := []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("the codename?")}

	a.gw.LLM.Push(reply)
	res, err := a.client(allKey).Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{Model: "guarded", Messages: ask})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; !strings.HasSuffix(got, sessionstest.GuardedMessage) || strings.Contains(got, "PROJECT") {
		t.Fatalf("the answer is %q, want it to end with the block's message", got)
	}

	a.gw.LLM.Push(reply)
	stream := a.client(allKey).Chat.Completions.NewStreaming(context.Background(), sdk.ChatCompletionNewParams{Model: "guarded", Messages: ask})
	var acc sdk.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; !strings.HasSuffix(got, sessionstest.GuardedMessage) || strings.Contains(got, "PROJECT") {
		t.Fatalf("the streamed answer is %q, want it to end with the block's message", got)
	}
}
