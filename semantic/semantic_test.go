package semantic_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/providers/openai"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/semantic"
	"github.com/switchboard-gw/switchboard/storage"
)

// concepts are what the fake model understands: words of one meaning land
// on one place of the vector, so a paraphrase sharing no word with what
// it paraphrases lands near it, as with a real model.
var concepts = map[string]int{
	"combination": 0, "digits": 0, "code": 0, "pin": 0,
	"gym": 1, "fitness": 1, "centre": 1, "center": 1,
	"locker": 2, "padlock": 2,
	"sister": 3, "sibling": 3,
}

// meaning is the fake model: a text's concepts, and a little of each other
// word (openaitest.BagOfWords), which keeps unrelated texts apart.
func meaning(text string, dims int) []float32 {
	v := make([]float32, dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }) {
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

// The private fact and its paraphrase share no word, not even "the".
const (
	fact       = "Combination for gym locker: 4711."
	paraphrase = "what digits open my padlock at the fitness centre?"
)

// logBuffer is a log to read back, safe for the indexer's goroutine.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type env struct {
	t    *testing.T
	path string
	db   *storage.DB
	fake *openaitest.Server
	emb  providers.Embedder
	r    *semantic.Recall
	log  *logBuffer
	cfg  semantic.Config
}

// newEnv is a store in a file, the fake OpenAI with the fake model, and
// recall over them through the real SDK (256 dimensions, which the fake
// cuts its 1536 to).
func newEnv(t *testing.T, change func(*semantic.Config)) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "switchboard.db"), fake: openaitest.New(), log: &logBuffer{}}
	t.Cleanup(e.fake.Close)
	e.fake.SetEmbedding(meaning)
	emb, err := openai.NewEmbedder(providers.Config{Name: "main", Kind: "openai", BaseURL: e.fake.BaseURL(), APIKey: "sk-test", Model: "text-embedding-3-small"}, 256)
	if err != nil {
		t.Fatal(err)
	}
	e.emb = emb
	e.cfg = semantic.Config{Embedder: emb, Provider: "main", CacheBytes: 1 << 20, MinSimilarity: 0.3,
		Logger: slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if change != nil {
		change(&e.cfg)
	}
	e.open()
	return e
}

// open opens the store and a new Recall on it (a start of the gateway).
func (e *env) open() {
	e.t.Helper()
	db, err := storage.Open(context.Background(), e.path)
	if err != nil {
		e.t.Fatal(err)
	}
	e.db = db
	e.t.Cleanup(func() { db.Close() })
	cfg := e.cfg
	cfg.Store = db
	e.r = semantic.New(cfg)
}

// conversation stores a conversation of member's (those are its members)
// with a person's message for each text.
func (e *env) conversation(id string, members []string, texts ...string) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.db.Session(ctx, id); err != nil {
		if err := e.db.CreateSession(ctx, switchboard.Session{ID: id, Guide: "assistant", Owner: members[0]}); err != nil {
			e.t.Fatal(err)
		}
	}
	for _, m := range members {
		if err := e.db.SetMember(ctx, id, switchboard.Member{Key: m, Role: "member"}); err != nil {
			e.t.Fatal(err)
		}
	}
	var msgs []switchboard.Message
	for _, text := range texts {
		msgs = append(msgs, switchboard.Message{Role: switchboard.RoleUser, Content: text})
	}
	if err := e.db.AppendMessages(ctx, id, msgs, false); err != nil {
		e.t.Fatal(err)
	}
}

// indexAll runs the indexer's steps until every message is embedded.
func (e *env) indexAll() {
	e.t.Helper()
	for {
		n, err := e.r.Step(context.Background())
		if err != nil {
			e.t.Fatalf("indexer: %v", err)
		}
		if n == 0 {
			return
		}
	}
}

func (e *env) search(reader, query string) []string {
	e.t.Helper()
	found, err := e.r.Search(context.Background(), reader, query, 5)
	if err != nil {
		e.t.Fatalf("Search(%s, %q): %v", reader, query, err)
	}
	var out []string
	for _, f := range found {
		out = append(out, f.SessionID+": "+f.Message.Content)
	}
	return out
}

// A paraphrase sharing no word with what it paraphrases is found by
// semantic recall, which full-text search alone does not find; a
// full-text match is still found, merged with the nearest.
func TestParaphraseFound(t *testing.T) {
	e := newEnv(t, nil)
	e.conversation("alices", []string{"web:alice"}, fact, "I had pasta for lunch.", "Ann's sister lives in Lyon.")
	e.indexAll()

	if got, err := e.db.Search(context.Background(), "web:alice", paraphrase, 5); err != nil || len(got) != 0 {
		t.Fatalf("full-text search found %v (%v): the test's paraphrase shares a word", got, err)
	}
	got := e.search("web:alice", paraphrase)
	if len(got) != 1 || got[0] != "alices: "+fact {
		t.Fatalf("semantic recall found %q, want the fact alone", got)
	}
	got = e.search("web:alice", "where does my sibling live? lunch")
	if len(got) != 2 || got[0] != "alices: Ann's sister lives in Lyon." && got[0] != "alices: I had pasta for lunch." {
		t.Fatalf("a question matching one message by meaning and one by a word found %q", got)
	}
	if st := e.r.Stats(); st.Hybrid != 2 || st.TextOnly != 0 || st.Indexed != 3 || !st.Up || st.Cached != 1 || st.CacheBytes == 0 {
		t.Errorf("stats: %+v", st)
	}
}

// The attacker: Bob searches with a paraphrase of Alice's private fact,
// before and after Alice's own search has her conversation in memory,
// and finds nothing of hers; in a conversation they share, he does.
func TestMembersOnly(t *testing.T) {
	e := newEnv(t, nil)
	e.conversation("alices", []string{"web:alice"}, fact)
	e.conversation("bobs", []string{"slack:U2"}, "I had pasta for lunch.")
	e.indexAll()

	for round := range 2 {
		if got := e.search("slack:U2", paraphrase); len(got) != 0 {
			t.Fatalf("round %d: Bob found %q", round, got)
		}
		if got := e.search("slack:U2", "locker 4711 combination gym"); len(got) != 0 {
			t.Fatalf("round %d: Bob's search of the fact's own words found %q", round, got)
		}
		if got := e.search("web:alice", paraphrase); len(got) != 1 {
			t.Fatalf("round %d: Alice found %q", round, got)
		}
	}
	e.conversation("shared", []string{"web:alice", "slack:U2"}, "The gym code changed to 9911.")
	e.indexAll()
	got := e.search("slack:U2", paraphrase)
	if len(got) != 1 || got[0] != "shared: The gym code changed to 9911." {
		t.Fatalf("Bob's search of the shared conversation found %q", got)
	}
	// Bob leaves it: his next search must not find it, though it is in
	// memory from his last.
	if err := e.db.RemoveMember(context.Background(), "shared", "slack:U2"); err != nil {
		t.Fatal(err)
	}
	if got := e.search("slack:U2", paraphrase); len(got) != 0 {
		t.Fatalf("Bob found %q after leaving", got)
	}
	if got := e.search("web:mallory", paraphrase); len(got) != 0 {
		t.Fatalf("a stranger found %q", got)
	}
}

// The indexer takes up where it stopped after a restart: no message is
// embedded twice, none is missed.
func TestIndexerResumesAfterRestart(t *testing.T) {
	e := newEnv(t, func(c *semantic.Config) { c.Batch = 2 })
	e.conversation("alices", []string{"web:alice"}, fact, "one", "two", "three", "four")
	if n, err := e.r.Step(context.Background()); n != 2 || err != nil {
		t.Fatalf("first step: %d, %v", n, err)
	}
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	e.open()
	if n, err := e.db.CountUnembedded(context.Background(), e.emb.Space(), 0); err != nil || n != 3 {
		t.Fatalf("after the restart %d messages wait (%v), want 3", n, err)
	}
	e.indexAll()
	sent := map[string]int{}
	for _, req := range e.fake.EmbeddingRequests() {
		for _, in := range req.Input {
			sent[in]++
		}
	}
	if len(sent) != 5 {
		t.Fatalf("embedded %v, want each of the 5 messages", sent)
	}
	for text, n := range sent {
		if n != 1 {
			t.Errorf("%q embedded %d times", text, n)
		}
	}
	if got := e.search("web:alice", paraphrase); len(got) != 1 {
		t.Fatalf("after the restart Alice found %q", got)
	}
}

// Deleting a conversation (retention) deletes its vectors, on disk with
// its messages and in memory by Forget; it is found no more.
func TestDeleteRemovesVectors(t *testing.T) {
	e := newEnv(t, nil)
	e.conversation("alices", []string{"web:alice"}, fact)
	e.conversation("other", []string{"web:alice"}, "Ann's sister lives in Lyon.")
	e.indexAll()
	if got := e.search("web:alice", paraphrase); len(got) != 1 {
		t.Fatalf("before: %q", got)
	}
	if st := e.r.Stats(); st.Cached != 2 {
		t.Fatalf("%d conversations in memory, want 2", st.Cached)
	}
	ctx := context.Background()
	if err := e.db.DeleteSessions(ctx, []string{"alices"}); err != nil {
		t.Fatal(err)
	}
	e.r.Forget([]string{"alices"})
	if st := e.r.Stats(); st.Cached != 1 {
		t.Errorf("%d conversations in memory after Forget, want 1", st.Cached)
	}
	if ids, _, err := e.db.SessionVectors(ctx, e.emb.Space(), "alices", 256); err != nil || len(ids) != 0 {
		t.Fatalf("vectors of the deleted conversation: %v %v", ids, err)
	}
	if got := e.search("web:alice", paraphrase); len(got) != 0 {
		t.Fatalf("after deleting: %q", got)
	}
}

// The provider down: a search is full-text alone and does not fail; while
// its backoff lasts, searches do not call the provider; the failure is
// logged at ERROR with what to fix.
func TestEmbedderDownFullTextAnswers(t *testing.T) {
	e := newEnv(t, nil)
	e.conversation("alices", []string{"web:alice"}, fact)
	e.indexAll()
	e.fake.SetEmbeddingsDown(http.StatusServiceUnavailable)
	before := len(e.fake.EmbeddingRequests())

	if got := e.search("web:alice", "locker"); len(got) != 1 || got[0] != "alices: "+fact {
		t.Fatalf("full-text answer while down: %q", got)
	}
	if got := e.search("web:alice", paraphrase); len(got) != 0 {
		t.Fatalf("a paraphrase while down: %q", got)
	}
	if n := len(e.fake.EmbeddingRequests()) - before; n != 1 {
		t.Errorf("%d calls to a provider that is down, want 1 (then its backoff)", n)
	}
	st := e.r.Stats()
	if st.Up || st.Failures != 1 || st.TextOnly != 2 {
		t.Errorf("stats while down: %+v", st)
	}
	log := e.log.String()
	if !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "fix=") || !strings.Contains(log, "503") {
		t.Errorf("the log does not say what failed and what to do:\n%s", log)
	}
	// The indexer's step waits too: it does not call while down.
	e.conversation("alices", []string{"web:alice"}, "one more")
	if _, err := e.r.Step(context.Background()); err == nil {
		t.Error("a step while the provider is down succeeded")
	}
	if n := len(e.fake.EmbeddingRequests()) - before; n != 1 {
		t.Errorf("the indexer called the provider in its backoff: %d calls", n)
	}
}

// A change of model (a new space) embeds every message again; searches
// use the new vectors.
func TestModelChangeEmbedsAgain(t *testing.T) {
	e := newEnv(t, nil)
	e.conversation("alices", []string{"web:alice"}, fact, "I had pasta for lunch.")
	e.indexAll()
	emb, err := openai.NewEmbedder(providers.Config{Kind: "openai", BaseURL: e.fake.BaseURL(), Model: "text-embedding-3-small"}, 128)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Embedder = emb
	e.open2()
	if n, _ := e.db.CountUnembedded(context.Background(), emb.Space(), 0); n != 2 {
		t.Fatalf("%d messages wait for the new model, want 2", n)
	}
	e.indexAll()
	if got := e.search("web:alice", paraphrase); len(got) != 1 {
		t.Fatalf("with the new model: %q", got)
	}
}

// open2 is a new Recall on the open store (the configuration changed).
func (e *env) open2() {
	cfg := e.cfg
	cfg.Store = e.db
	e.r = semantic.New(cfg)
}

// poisoned refuses any request holding "POISON", as a provider refuses
// one text it cannot embed; the rest it embeds with the fake model.
type poisoned struct {
	mu    sync.Mutex
	calls int
}

func (p *poisoned) Space() string { return "test:poisoned" }

func (p *poisoned) Embed(_ context.Context, _ providers.EmbedUse, texts []string) ([][]float32, error) {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if strings.Contains(t, "POISON") {
			return nil, &providers.Error{Provider: "test", Status: http.StatusBadRequest, Err: errors.New("this text cannot be embedded")}
		}
		out[i] = meaning(t, 8)
	}
	return out, nil
}

// A message the provider refuses on its own is left out of semantic
// recall with a warning; it does not stop the others.
func TestRefusedMessageLeftOut(t *testing.T) {
	p := &poisoned{}
	e := newEnv(t, func(c *semantic.Config) { c.Embedder = p })
	e.conversation("alices", []string{"web:alice"}, fact, "POISON pill", "Ann's sister lives in Lyon.")
	e.indexAll()
	if n, _ := e.db.CountUnembedded(context.Background(), p.Space(), 0); n != 0 {
		t.Fatalf("%d messages left to embed", n)
	}
	if ids, _, _ := e.db.SessionVectors(context.Background(), p.Space(), "alices", 8); len(ids) != 2 {
		t.Fatalf("%d vectors, want 2 (the refused message has none)", len(ids))
	}
	if !strings.Contains(e.log.String(), "refused to embed a message") {
		t.Errorf("not logged:\n%s", e.log.String())
	}
	if !e.r.Stats().Up {
		t.Error("one refused message took the provider for down")
	}
	if got := e.search("web:alice", paraphrase); len(got) != 1 {
		t.Fatalf("search: %q", got)
	}
}

// A request refused whatever it holds (a wrong model, key or dimensions)
// is the provider's failure, not the messages': nothing is stored empty.
func TestRefusedRequestIsAFailure(t *testing.T) {
	e := newEnv(t, nil)
	emb, err := openai.NewEmbedder(providers.Config{Kind: "openai", BaseURL: e.fake.BaseURL(), Model: "text-embedding-ada-002"}, 256)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Embedder = emb
	e.open2()
	e.conversation("alices", []string{"web:alice"}, fact)
	if _, err := e.r.Step(context.Background()); err == nil {
		t.Fatal("a step with dimensions the model refuses succeeded")
	}
	if n, _ := e.db.CountUnembedded(context.Background(), emb.Space(), 0); n != 1 {
		t.Fatalf("the message was marked done: %d wait", n)
	}
	if log := e.log.String(); !strings.Contains(log, "embeddings.dimensions") {
		t.Errorf("the log does not point at the setting:\n%s", log)
	}
}

// blocking is an embedder whose questions wait until released.
type blocking struct {
	entered, release chan struct{}
}

func (b *blocking) Space() string { return "test:blocking" }

func (b *blocking) Embed(ctx context.Context, use providers.EmbedUse, texts []string) ([][]float32, error) {
	if use == providers.EmbedQuery {
		b.entered <- struct{}{}
		<-b.release
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = meaning(t, 8)
	}
	return out, nil
}

// Questions being embedded at once are bounded: one more search goes on
// full-text alone at once instead of queueing.
func TestQuestionsBounded(t *testing.T) {
	b := &blocking{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, func(c *semantic.Config) { c.Embedder, c.MaxQueries = b, 1 })
	e.conversation("alices", []string{"web:alice"}, fact)
	e.indexAll()
	done := make(chan []switchboard.Found)
	go func() {
		found, _ := e.r.Search(context.Background(), "web:alice", paraphrase, 5)
		done <- found
	}()
	<-b.entered
	if got := e.search("web:alice", "locker"); len(got) != 1 {
		t.Fatalf("the second search: %q", got)
	}
	close(b.release)
	if found := <-done; len(found) != 1 {
		t.Fatalf("the first search: %v", found)
	}
	if st := e.r.Stats(); st.TextOnly != 1 || st.Hybrid != 1 {
		t.Errorf("stats: %+v", st)
	}
}

// Register's metrics reach a Prometheus scrape.
func TestMetrics(t *testing.T) {
	e := newEnv(t, nil)
	e.conversation("alices", []string{"web:alice"}, fact)
	e.indexAll()
	e.search("web:alice", paraphrase)
	m := metrics.New()
	e.r.Register(m)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		"switchboard_recall_embedder_up 1", "switchboard_recall_vectors_pending 0", "switchboard_recall_vectors_indexed_total 1",
		"switchboard_recall_embed_failures_total 0", "switchboard_recall_vector_cache_limit_bytes 1.048576e+06",
		"switchboard_recall_vector_cache_conversations 1", "switchboard_recall_searches_total 1", "switchboard_recall_searches_text_only_total 0",
	} {
		if !strings.Contains(rec.Body.String(), want+"\n") {
			t.Errorf("the scrape lacks %q", want)
		}
	}
}
