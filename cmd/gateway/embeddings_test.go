package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/storage"
)

// The private fact and a paraphrase of it sharing no word; the fake
// embedding model (meaning) puts them near each other.
const (
	lockerFact       = "Combination for gym locker: 4711."
	lockerParaphrase = "what digits open my padlock at the fitness centre?"
)

// meaning is a fake embedding model that knows three concepts, so a
// paraphrase lands near what it paraphrases; other words stay apart.
func meaning(text string, dims int) []float32 {
	concepts := map[string]int{"combination": 0, "digits": 0, "gym": 1, "fitness": 1, "centre": 1, "locker": 2, "padlock": 2}
	v := make([]float32, dims)
	for _, w := range strings.Fields(strings.ToLower(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return ' '
	}, text))) {
		if c, ok := concepts[w]; ok {
			v[c]++
			continue
		}
		for i, x := range openaitest.BagOfWords(w, dims) {
			v[i] += 0.3 * x
		}
	}
	return v
}

// embeddingsProviders are a chat provider and an embedding provider, each
// its own fake.
func embeddingsProviders(chat, emb *openaitest.Server) string {
	return openAIProvider(chat) + fmt.Sprintf(`
  - name: emb
    kind: openai
    base_url: %s
    api_key_env: TEST_OPENAI_KEY
    model: unused`, emb.BaseURL())
}

// The gateway with embeddings on: its indexer embeds what is said, and
// memory_search finds a paraphrase that shares no word with the fact,
// which full-text search alone does not.
func TestSemanticRecallInTheGateway(t *testing.T) {
	chat, emb := openaitest.New(), openaitest.New()
	defer chat.Close()
	defer emb.Close()
	emb.SetEmbedding(meaning)
	chat.Respond(func(r openaitest.Request) openaitest.Reply {
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == "tool":
			return openaitest.Reply{Text: []string{"Found: ", openaitest.Text(last.Content)}}
		case strings.Contains(openaitest.Text(last.Content), "padlock"):
			args, _ := json.Marshal(map[string]string{"query": lockerParaphrase})
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "memory_search", Args: string(args)}}}
		}
		return openaitest.Reply{Text: []string{"Noted."}}
	})
	g := newGateway(t, embeddingsProviders(chat, emb), "embeddings:\n  provider: emb\n  dimensions: 256\n")
	dsn := filepath.Join(g.dir, "data", "switchboard.db")

	ctx, cancel := context.WithTimeout(context.Background(), terminalDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "--config", g.config)
	cmd.Env = append(hermeticEnv(), "GATEWAY_TEST_RUN_MAIN=1", "USER=tester", "TEST_OPENAI_KEY=sk-test")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	var seen strings.Builder
	// readUntil reads the gateway's output up to a line holding want.
	readUntil := func(want string) {
		t.Helper()
		for {
			line, err := out.ReadString('\n')
			seen.WriteString(line)
			if strings.Contains(line, want) {
				return
			}
			if err != nil {
				t.Fatalf("the output ended without %q: %v\n%s\nlogs:\n%s", want, err, seen.String(), logs.String())
			}
		}
	}

	io.WriteString(stdin, lockerFact+"\n")
	readUntil("Noted.")
	waitEmbedded(t, dsn, 2)
	// The fact is not found by its words: the proof that what follows
	// is semantic recall's.
	io.WriteString(stdin, lockerParaphrase+"\n")
	readUntil("Found:")
	stdin.Close()
	rest, _ := io.ReadAll(out)
	seen.Write(rest)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gateway: %v\n%s\nlogs:\n%s", err, seen.String(), logs.String())
	}
	results := chat.ToolResults()
	if len(results) != 1 || !strings.Contains(results[0], lockerFact) {
		t.Fatalf("memory_search gave the model %q, want the fact", results)
	}
	if !strings.Contains(logs.String(), "semantic recall on") || !strings.Contains(logs.String(), "openai:text-embedding-3-small/256") {
		t.Errorf("the start-up log does not say semantic recall is on:\n%s", logs.String())
	}
	for _, req := range emb.EmbeddingRequests() {
		if req.Model != "text-embedding-3-small" || req.Dimensions != 256 {
			t.Errorf("an embedding request for %s/%d", req.Model, req.Dimensions)
		}
	}

	db, err := storage.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sessions, _ := db.MemberSessions(context.Background(), "stdin:tester")
	if len(sessions) != 1 {
		t.Fatalf("the terminal's sessions: %v", sessions)
	}
	if found, err := db.Search(context.Background(), "stdin:tester", lockerParaphrase, 5); err != nil || containsFact(found) {
		t.Fatalf("full-text search alone found the fact (%v): the test proves nothing", err)
	}
}

func containsFact(found []switchboard.Found) bool {
	for _, f := range found {
		if f.Message.Content == lockerFact {
			return true
		}
	}
	return false
}

// waitEmbedded waits until the running gateway's database holds at least
// n vectors (its indexer's work, read from beside it, read-only).
func waitEmbedded(t *testing.T, dsn string, n int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dsn+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(20 * time.Second)
	var got int
	for time.Now().Before(deadline) {
		if err := db.QueryRow(`SELECT count(*) FROM message_vectors WHERE length(vector) > 0`).Scan(&got); err == nil && got >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the indexer embedded %d messages in 20s, want %d", got, n)
}

// gateway doctor asks the embedding model for a vector and says how many
// stored messages wait; an unknown model is a PROBLEM pointing at
// embeddings.model; off, the row says so.
func TestDoctorEmbeddings(t *testing.T) {
	chat, emb := openaitest.New(), openaitest.New()
	defer chat.Close()
	defer emb.Close()
	s := newDoctorSetup(t, embeddingsProviders(chat, emb), "embeddings:\n  provider: emb\n")
	env := []string{"TEST_OPENAI_KEY=sk-doctor-4242"}
	db, err := storage.Open(context.Background(), s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateSession(context.Background(), switchboard.Session{ID: "s_1", Guide: "assistant"}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendMessages(context.Background(), "s_1", []switchboard.Message{
		{Role: switchboard.RoleUser, Content: "hello"}, {Role: switchboard.RoleAssistant, Content: "hi"}}, false); err != nil {
		t.Fatal(err)
	}
	db.Close()

	out, err := s.doctor(t, env)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	wantRow(t, out, "embeddings", "OK", "text-embedding-3-small of provider emb answered", "vectors of 1536 numbers",
		"2 of 2 stored messages wait to be embedded")
	if strings.Contains(out, "sk-doctor-4242") {
		t.Errorf("the key was printed:\n%s", out)
	}

	s = newDoctorSetup(t, embeddingsProviders(chat, emb), "embeddings:\n  provider: emb\n  model: text-embedding-9\n")
	out, err = s.doctor(t, env)
	if err == nil {
		t.Fatalf("doctor passed with an unknown embedding model:\n%s", out)
	}
	wantRow(t, out, "embeddings", "PROBLEM", "HTTP 404", "check embeddings.model (text-embedding-9)")

	emb.SetEmbeddingsDown(http.StatusServiceUnavailable)
	s = newDoctorSetup(t, embeddingsProviders(chat, emb), "embeddings:\n  provider: emb\n")
	out, _ = s.doctor(t, env)
	wantRow(t, out, "embeddings", "PROBLEM", "unavailable", "full-text alone until it answers")
	emb.SetEmbeddingsDown(0)

	s = newDoctorSetup(t, embeddingsProviders(chat, emb), "")
	out, _ = s.doctor(t, env)
	wantRow(t, out, "embeddings", "INFO", "off (embeddings.provider is empty)")
}
