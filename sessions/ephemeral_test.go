package sessions_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
)

// An ephemeral session gives the model the guide's prompt, then the
// history it was opened with, then the message; Delete leaves nothing of
// it in the store, and many of them are not refused as too many new
// sessions a minute.
func TestEphemeralSessionRunsItsHistoryAndIsDeleted(t *testing.T) {
	g := sessionstest.NewTuned(t, "../guides", slog.New(slog.NewTextHandler(io.Discard, nil)), func(c *sessions.Config) { c.NewPerMinute = 1 })
	ctx := context.Background()
	author := switchboard.Author{Channel: "openai", ID: "ci", Name: "ci"}
	for i := range 3 { // past NewPerMinute
		g.LLM.Push(openaitest.Reply{Text: []string{"Paris."}})
		p := g.Open(author, sessions.AttachOptions{Ephemeral: true, Guide: "support", History: []switchboard.Message{
			{Role: switchboard.RoleUser, Content: "I am planning a trip."},
			{Role: switchboard.RoleAssistant, Content: "Where to?"},
		}})
		p.Say("The capital of France?")
		p.Await("the answer", func(ev switchboard.Event) bool { return ev.Type == switchboard.EventState })
		reqs := g.LLM.Requests()
		msgs := reqs[len(reqs)-1].Messages
		var roles []string
		for _, m := range msgs {
			roles = append(roles, m.Role)
		}
		if len(msgs) != 4 || msgs[0].Role != "system" || openaitest.Text(msgs[1].Content) != "I am planning a trip." ||
			openaitest.Text(msgs[2].Content) != "Where to?" || openaitest.Text(msgs[3].Content) != "The capital of France?" {
			t.Fatalf("request %d: the model was given roles %v", i, roles)
		}
		if err := g.Manager.Delete(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := g.DB.Session(ctx, p.ID); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("session %s after Delete: %v, want not found", p.ID, err)
		}
		if evs, err := g.DB.EventsAfter(ctx, p.ID, 0, 10); err != nil || len(evs) != 0 {
			t.Fatalf("events of %s after Delete: %d, %v", p.ID, len(evs), err)
		}
	}
}

// An ephemeral session is new: naming one is a mistake.
func TestEphemeralSessionRefusesAKey(t *testing.T) {
	g := sessionstest.New(t, "../guides", slog.New(slog.NewTextHandler(io.Discard, nil)))
	_, err := g.Manager.Attach(context.Background(), sessions.AttachOptions{Ephemeral: true, Key: "stdin", Author: switchboard.Author{Channel: "openai", ID: "ci"}})
	if !errors.Is(err, sessions.ErrBadInput) {
		t.Fatalf("err = %v, want ErrBadInput", err)
	}
}

// A Plain input is a message even when it reads as a command.
func TestPlainInputIsNeverACommand(t *testing.T) {
	g := sessionstest.New(t, "../guides", slog.New(slog.NewTextHandler(io.Discard, nil)))
	author := switchboard.Author{Channel: "openai", ID: "ci", Name: "ci"}
	p := g.Open(author, sessions.AttachOptions{Ephemeral: true})
	rec, err := g.Manager.Submit(context.Background(), p.ID, switchboard.Input{Kind: switchboard.InputText, Author: author, Text: "/reset the router?", Plain: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !g.LLM.Asked("/reset the router?") {
		t.Fatal("the model was not asked: the text ran as a command")
	}
}

// A gateway that drains starts no session goroutine: Delete still
// deletes, and a session deleted while its turn runs goes once the turn
// has ended.
func TestDeleteWhileDrainingAndRunning(t *testing.T) {
	g := sessionstest.New(t, "../guides", slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	author := switchboard.Author{Channel: "openai", ID: "ci", Name: "ci"}

	gate := make(chan struct{})
	g.LLM.Push(openaitest.Reply{Text: []string{"one ", "two"}, Gate: gate})
	running := g.Open(author, sessions.AttachOptions{Ephemeral: true})
	if _, err := g.Manager.Submit(ctx, running.ID, switchboard.Input{Kind: switchboard.InputText, Author: author, Text: "Count"}); err != nil {
		t.Fatal(err)
	}
	running.Await("the first text", func(ev switchboard.Event) bool { return ev.Type == switchboard.EventDelta })
	deleted := make(chan error, 1)
	go func() { deleted <- g.Manager.Delete(ctx, running.ID) }()
	close(gate) // Delete waits for the turn, then deletes
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if evs, err := g.DB.EventsAfter(ctx, running.ID, 0, 10); err != nil || len(evs) != 0 {
		t.Fatalf("events after Delete: %d, %v", len(evs), err)
	}
	if reqs := g.LLM.Requests(); len(reqs) != 1 {
		t.Fatalf("model calls: %d", len(reqs))
	}

	g.LLM.Push(openaitest.Reply{Text: []string{"ok"}})
	parked := g.Open(author, sessions.AttachOptions{Ephemeral: true})
	parked.Say("Hi")
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g.Manager.Drain(dctx)
	if err := g.Manager.Delete(dctx, parked.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := g.DB.Session(ctx, parked.ID); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("session after Delete while draining: %v", err)
	}
}

// A crash while a stateless request's turn runs: its client got an error
// and nothing of it is to be kept, so the next start deletes the session
// rather than run its turn again, and tells Forget; loading it by id
// finds nothing. Attach refuses the key such sessions are marked with.
func TestEphemeralSessionLeftByACrashIsDeleted(t *testing.T) {
	var forgotten []string
	h := newHarness(t, func(c *sessions.Config) { c.Forget = func(ids []string) { forgotten = append(forgotten, ids...) } })
	gate := make(chan struct{})
	// A tool step is stored (with the turn's tokens so far), then the
	// second model call is cut.
	h.llm.Push(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "g1", Name: "calculator", Args: `{"expression":"6*7"}`}}},
		openaitest.Reply{Text: []string{"Half an ", "answer"}, Gate: gate})
	c := h.attach(sessions.AttachOptions{Ephemeral: true, Author: alice, History: []switchboard.Message{{Role: switchboard.RoleUser, Content: "earlier"}}})
	c.submit(switchboard.Input{Text: "question", Plain: true})
	c.until(switchboard.EventDelta, nil)
	ctx := context.Background()
	if rec, err := h.db.Session(ctx, c.id); err != nil || rec.Key == "" {
		t.Fatalf("the running session is stored as %+v, %v: want it stored, with its mark", rec, err)
	}
	if _, err := h.m.Attach(ctx, sessions.AttachOptions{Key: "ephemeral:" + c.id, Author: alice}); !errors.Is(err, sessions.ErrBadInput) {
		t.Fatalf("attach by the mark's key: %v, want ErrBadInput", err)
	}

	h.restart() // the turn is cut, as by a crash

	if _, err := h.db.Session(ctx, c.id); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("the session after the restart: %v, want not found", err)
	}
	if evs, err := h.db.EventsAfter(ctx, c.id, 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("its events after the restart: %d, %v", len(evs), err)
	}
	if unfinished, err := h.db.Unfinished(ctx); err != nil || len(unfinished) != 0 {
		t.Fatalf("unfinished after the restart: %v, %v", unfinished, err)
	}
	if len(forgotten) != 1 || forgotten[0] != c.id {
		t.Fatalf("Forget was told %v, want %s", forgotten, c.id)
	}
	if n := len(h.llm.Requests()); n != 2 {
		t.Fatalf("the model was called %d times, want twice: the turn was run again", n)
	}
	// What its stored step had spent is charged; the charge outlives it.
	if rows, err := h.db.Spending(ctx, switchboard.SpendQuery{Session: c.id}); err != nil || len(rows) != 1 || rows[0].Usage.TotalTokens == 0 {
		t.Fatalf("charged %+v, %v: want the first model call's tokens", rows, err)
	}
	if _, err := h.m.Submit(ctx, c.id, switchboard.Input{Kind: switchboard.InputText, Author: alice, Text: "hello?"}); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("a message to it: %v, want not found", err)
	}
	// An ordinary session cut the same way is taken up as ever.
	d, _ := h.midStream("other question", []string{"cut"}, openaitest.Reply{Text: []string{"The whole answer."}})
	h.restart()
	d2 := h.attach(sessions.AttachOptions{SessionID: d.id, Author: alice, AfterSeq: 0})
	if got := d2.reply().Content; got != "The whole answer." {
		t.Fatalf("answer after restart = %q", got)
	}
}
