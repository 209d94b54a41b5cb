package queue

import (
	"context"
	"sync"
	"testing"
)

func TestQueue(t *testing.T) {
	q := New[int]()
	if _, ok := q.Pop(); ok {
		t.Fatal("an empty queue popped")
	}
	for i := range 3 {
		if !q.Push(i, 3) {
			t.Fatalf("push %d refused under the bound", i)
		}
	}
	if q.Push(3, 3) {
		t.Fatal("a push past the bound was taken")
	}
	select {
	case <-q.Ready():
	default:
		t.Fatal("no signal after a push")
	}
	for want := range 3 {
		if v, ok := q.Pop(); !ok || v != want {
			t.Fatalf("pop = %d, %v; want %d", v, ok, want)
		}
	}
	if q.Len() != 0 || q.items != nil {
		t.Fatalf("an emptied queue holds %v", q.items)
	}
}

// Many pushers, one consumer: every item taken arrives, in each pusher's
// order.
func TestQueueConcurrent(t *testing.T) {
	q := New[[2]int]()
	const pushers, each = 8, 1000
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for i := range each {
				for !q.Push([2]int{p, i}, 64) {
				}
			}
		})
	}
	next := make([]int, pushers)
	got := 0
	for got < pushers*each {
		<-q.Ready()
		for v, ok := q.Pop(); ok; v, ok = q.Pop() {
			if v[1] != next[v[0]] {
				t.Fatalf("pusher %d: got %d, want %d", v[0], v[1], next[v[0]])
			}
			next[v[0]]++
			got++
		}
	}
	wg.Wait()
}

// Send takes room over an ended context, and waits for room otherwise.
func TestSend(t *testing.T) {
	ch := make(chan int, 1)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Send(ended, ch, 1); err != nil {
		t.Fatalf("a value that fits was refused for an ended context: %v", err)
	}
	if err := Send(ended, ch, 2); err != context.Canceled {
		t.Fatalf("a full channel and an ended context: %v, want context.Canceled", err)
	}
	go func() { <-ch }()
	if err := Send(context.Background(), ch, 3); err != nil || <-ch != 3 {
		t.Fatalf("a send that waited for room: %v", err)
	}
}
