package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// A memory is its owner's: listed newest first, deleted for good by its
// owner only.
func testMemories(t *testing.T, db Store) {
	ctx := context.Background()
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	for i, m := range []switchboard.Memory{
		{ID: "mem_a", Owner: "web:alice", Text: "prefers metric units", SessionID: "s1", Channel: "web", CreatedAt: at},
		{ID: "mem_b", Owner: "web:alice", Text: "locker code 4711", SessionID: "s2", Channel: "slack", CreatedAt: at.Add(time.Hour)},
		{ID: "mem_c", Owner: "slack:U2", Text: "Bob's", SessionID: "s3", Channel: "slack", CreatedAt: at},
	} {
		if err := db.AddMemory(ctx, m); err != nil {
			t.Fatalf("memory %d: %v", i, err)
		}
	}
	if newest, err := db.Memories(ctx, "web:alice", 1); err != nil || len(newest) != 1 || newest[0].ID != "mem_b" {
		t.Fatalf("alice's newest memory: %+v, %v", newest, err)
	}
	mems, err := db.Memories(ctx, "web:alice", 10)
	if err != nil || len(mems) != 2 || mems[0].ID != "mem_b" || mems[1].Text != "prefers metric units" || mems[0].Channel != "slack" || !mems[1].CreatedAt.Equal(at) {
		t.Fatalf("alice's memories: %+v, %v", mems, err)
	}
	if err := db.ForgetMemory(ctx, "slack:U2", "mem_a"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("Bob forgetting Alice's memory: %v", err)
	}
	if err := db.ForgetMemory(ctx, "web:alice", "mem_a"); err != nil {
		t.Fatal(err)
	}
	if err := db.ForgetMemory(ctx, "web:alice", "mem_a"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("forgetting twice: %v", err)
	}
	// Gone for good: from her list, and from what the store holds.
	if mems, err := db.Memories(ctx, "web:alice", 10); err != nil || len(mems) != 1 || mems[0].ID != "mem_b" {
		t.Fatalf("alice's memories after a forget: %+v, %v", mems, err)
	}
	if f, err := db.Footprint(ctx); err != nil || f.Memories != 2 {
		t.Fatalf("after a forget: %+v, %v; want 2 memories left", f, err)
	}
	if mems, _ := db.Memories(ctx, "slack:U2", 10); len(mems) != 1 {
		t.Fatalf("Bob's memories: %+v", mems)
	}
}

// A person keeps at most MaxMemories; the next is refused and nothing of
// it is stored, and someone else's are not counted.
func testMemoriesAreBounded(t *testing.T, db Store) {
	ctx := context.Background()
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	add := func(owner string, i int) error {
		return db.AddMemory(ctx, switchboard.Memory{ID: fmt.Sprintf("mem_%s_%d", owner, i), Owner: owner, Text: "fact", SessionID: "s1", Channel: "web", CreatedAt: at})
	}
	for i := range switchboard.MaxMemories {
		if err := add("web:alice", i); err != nil {
			t.Fatalf("memory %d: %v", i, err)
		}
	}
	if err := add("web:alice", switchboard.MaxMemories); !errors.Is(err, switchboard.ErrMemoriesFull) {
		t.Fatalf("memory %d: %v, want ErrMemoriesFull", switchboard.MaxMemories+1, err)
	}
	if err := add("slack:U2", 0); err != nil {
		t.Fatalf("Bob's first memory: %v", err)
	}
	if mems, err := db.Memories(ctx, "web:alice", 1000); err != nil || len(mems) != switchboard.MaxMemories {
		t.Fatalf("alice keeps %d memories (%v)", len(mems), err)
	}
	// One forgotten makes room for one.
	if err := db.ForgetMemory(ctx, "web:alice", "mem_web:alice_7"); err != nil {
		t.Fatal(err)
	}
	if err := add("web:alice", switchboard.MaxMemories); err != nil {
		t.Fatalf("after a forget: %v", err)
	}
}

// Each write to a person's memories shows at once, also when reads and
// writes race (run with -race), and a caller's change to the list it was
// given is its own (the SQLite store keeps the lists it reads).
func testMemoriesShowEveryWrite(t *testing.T, db Store) {
	ctx := context.Background()
	if mems, err := db.Memories(ctx, "web:alice", 5); err != nil || len(mems) != 0 {
		t.Fatalf("before any memory: %v, %v", mems, err)
	}
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	if err := db.AddMemory(ctx, switchboard.Memory{ID: "mem_1", Owner: "web:alice", Text: "one", SessionID: "s1", Channel: "web", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	mems, err := db.Memories(ctx, "web:alice", 5)
	if err != nil || len(mems) != 1 || mems[0].ID != "mem_1" {
		t.Fatalf("after one was added: %+v, %v", mems, err)
	}
	// Each read's list is the caller's own, the first one's and those
	// after it.
	for i := range 2 {
		mems[0].Text = "changed by the caller"
		if mems, err = db.Memories(ctx, "web:alice", 5); err != nil || len(mems) != 1 || mems[0].Text != "one" {
			t.Fatalf("read %d after a caller changed the one before: %+v, %v", i+2, mems, err)
		}
	}

	// Writers and readers at once: when every writer is done, a read
	// shows exactly what the database holds.
	const writers = 8
	done, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := db.Memories(ctx, "web:alice", switchboard.MaxMemories); err != nil {
				t.Error(err)
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	errs := make(chan error, writers)
	for i := range writers {
		go func() {
			id := fmt.Sprintf("mem_w%d", i)
			err := db.AddMemory(ctx, switchboard.Memory{ID: id, Owner: "web:alice", Text: id, SessionID: "s1", Channel: "web", CreatedAt: at.Add(time.Duration(i+1) * time.Minute)})
			if err == nil && i%2 == 0 {
				err = db.ForgetMemory(ctx, "web:alice", id)
			}
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	mems, err = db.Memories(ctx, "web:alice", switchboard.MaxMemories)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range mems {
		got = append(got, m.ID)
	}
	want := []string{"mem_w7", "mem_w5", "mem_w3", "mem_w1", "mem_1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("memories after the writers: %v, want %v", got, want)
	}
}
