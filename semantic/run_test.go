package semantic_test

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers"
	"github.com/switchboard-gw/switchboard/semantic"
	"github.com/switchboard-gw/switchboard/storage"
)

// flaky fails its first calls as a provider that is down, then embeds.
type flaky struct {
	mu    sync.Mutex
	fails int
	calls int
}

func (f *flaky) Space() string { return "test:flaky" }

func (f *flaky) Embed(_ context.Context, _ providers.EmbedUse, texts []string) ([][]float32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fails > 0 {
		f.fails--
		return nil, &providers.Error{Provider: "test", Status: http.StatusServiceUnavailable, Err: errStatus503}
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = meaning(t, 8)
	}
	return out, nil
}

func (f *flaky) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

var errStatus503 = &http.ProtocolError{ErrorString: "503 Service Unavailable"}

// Run, on a fake clock: it embeds what is stored and then what comes;
// when the provider fails it waits 2s, then 4s, then 8s before trying
// again, searches meanwhile are full-text alone and leave the provider
// alone, and once it answers everything is embedded.
func TestRunBacksOffAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db, err := storage.Open(ctx, filepath.Join(t.TempDir(), "switchboard.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.CreateSession(ctx, switchboard.Session{ID: "alices", Guide: "assistant"}); err != nil {
			t.Fatal(err)
		}
		if err := db.SetMember(ctx, "alices", switchboard.Member{Key: "web:alice", Role: "owner"}); err != nil {
			t.Fatal(err)
		}
		say := func(text string) {
			t.Helper()
			if err := db.AppendMessages(ctx, "alices", []switchboard.Message{{Role: switchboard.RoleUser, Content: text}}, false); err != nil {
				t.Fatal(err)
			}
		}
		say(fact)
		emb := &flaky{fails: 3}
		log := &logBuffer{}
		r := semantic.New(semantic.Config{Store: db, Embedder: emb, Provider: "test", CacheBytes: 1 << 20, MinSimilarity: 0.3,
			Logger: slog.New(slog.NewTextHandler(log, nil))})
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			r.Run(runCtx)
			close(done)
		}()

		synctest.Wait()
		if n := emb.count(); n != 1 || r.Stats().Up {
			t.Fatalf("after the first failure: %d calls, up %v", n, r.Stats().Up)
		}
		found, err := r.Search(ctx, "web:alice", "locker", 5)
		if err != nil || len(found) != 1 || emb.count() != 1 {
			t.Fatalf("a search while down: %v, %v, %d calls", found, err, emb.count())
		}
		for _, wait := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
			calls := emb.count()
			time.Sleep(wait - time.Millisecond)
			synctest.Wait()
			if emb.count() != calls {
				t.Fatalf("tried again before its %v backoff", wait)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if emb.count() != calls+1 {
				t.Fatalf("did not try again after its %v backoff: %d calls", wait, emb.count())
			}
		}
		if !r.Stats().Up || r.Stats().Indexed != 1 {
			t.Fatalf("after the provider answered: %+v", r.Stats())
		}
		if got := strings.Count(log.String(), "level=ERROR"); got != 3 {
			t.Errorf("%d ERROR lines for 3 failures:\n%s", got, log.String())
		}
		if !strings.Contains(log.String(), "answers again") {
			t.Errorf("the recovery is not logged:\n%s", log.String())
		}

		// A message stored now is embedded at the next poll.
		say("Ann's sister lives in Lyon.")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if st := r.Stats(); st.Indexed != 2 || st.Pending != 0 {
			t.Fatalf("a new message: %+v", st)
		}
		found, err = r.Search(ctx, "web:alice", paraphrase, 5)
		if err != nil || len(found) != 1 || found[0].Message.Content != fact {
			t.Fatalf("semantic search after recovery: %v, %v", found, err)
		}
		stop()
		<-done
	})
}
