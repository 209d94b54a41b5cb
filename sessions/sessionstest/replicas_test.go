package sessionstest_test

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/sessions/sessionstest"
	"github.com/switchboard-gw/switchboard/storage/postgres"
)

func TestMain(m *testing.M) { os.Exit(sessionstest.WithPostgreSQL(m).Run()) }

// Two replicas on one database: what is said on the one that does not
// run the conversation is answered by the one that does, once, and both
// show it; once that one crashes and its leases run out, the other runs
// the conversation.
func TestReplicasShareAConversation(t *testing.T) {
	rs := sessionstest.NewReplicas(t, "../../guides", slog.New(slog.DiscardHandler), nil)
	a, b := rs.Start("a"), rs.Start("b")
	alice := switchboard.Author{Channel: "web", ID: "alice", Name: "Alice"}
	onA := a.Open(alice, sessions.AttachOptions{Key: "web:k1"})
	rs.LLM.Push(openaitest.Reply{Text: []string{"From a."}})
	onA.Say("hi")
	onA.Await("a's answer", answer("From a."))
	if h := rs.Holder(postgres.SessionLease(onA.ID)); h != "a" {
		t.Fatalf("the conversation is %q's, want a's", h)
	}
	onB := b.Open(alice, sessions.AttachOptions{SessionID: onA.ID, AfterSeq: -1})
	rs.LLM.Push(openaitest.Reply{Text: []string{"Still a."}})
	onB.Say("from b")
	onB.Await("the answer on b", answer("Still a."))
	onA.Await("the answer on a", answer("Still a."))

	a.Crash()
	rs.RunOut("a")
	rs.LLM.Push(openaitest.Reply{Text: []string{"Now b."}})
	onB.Say("again")
	onB.Await("b's own answer", answer("Now b."))
	if h := rs.Holder(postgres.SessionLease(onA.ID)); h != "b" {
		t.Fatalf("the conversation is %q's, want b's", h)
	}
	if n := len(rs.LLM.Requests()); n != 3 {
		t.Fatalf("the model was asked %d times, want 3", n)
	}
	if a.Context().Err() == nil || b.Context().Err() != nil {
		t.Fatal("a crashed replica's context goes on, or a live one's ended")
	}
}

func answer(text string) func(switchboard.Event) bool {
	return func(ev switchboard.Event) bool {
		return ev.Type == switchboard.EventMessage && strings.Contains(string(ev.Data), `"content":"`+text+`"`)
	}
}
