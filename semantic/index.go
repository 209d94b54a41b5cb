package semantic

import (
	"container/list"
	"slices"
	"sync"
	"sync/atomic"
)

// index holds conversations' vectors in memory between searches, within
// a bound in bytes, dropping the conversation searched least recently to
// make room.
//
// It is kept by conversation because a search reads only the reader's own
// conversations (members only): a person's searches bring their
// conversations in, and what nobody searches does not take memory. A
// conversation is read from the database on a miss (storage's
// SessionVectors, one indexed query) and kept if it fits; one that alone
// is over the bound is used for that search and not kept. Nothing is
// per reader, so nothing kept for one person's search can answer
// another's: which conversations a search reads is decided by the
// database, at each search.
//
// The indexer adds each vector it stores to its conversation if that is
// held (add). A conversation read from the database while the indexer
// stored vectors might miss some of them, so put keeps it only if nothing
// was added or forgotten since the read began (gen): the next search
// reads it again.
type index struct {
	mu      sync.Mutex
	limit   int64
	bytes   int64
	gen     uint64
	lru     list.List // of *entry, the most recently searched first
	entries map[string]*list.Element
}

// entry is one conversation's vectors of one length: the messages' ids,
// ascending, and the vectors one after another.
type entry struct {
	session string
	dims    int
	ids     []int64
	flat    []float32
	size    int64
}

// entryOverhead is an entry's bookkeeping beyond its slices: the struct,
// its list element and map slot.
const entryOverhead = 160

func (e *entry) measure() {
	e.size = int64(8*cap(e.ids)+4*cap(e.flat)+len(e.session)) + entryOverhead
}

func newIndex(limit int64) *index {
	return &index{limit: max(limit, 0), entries: map[string]*list.Element{}}
}

// get returns a held conversation's vectors of dims numbers, marking it
// recently searched. The slices are the caller's to read (never to
// change) after the lock is released: add only appends beyond their
// length.
func (x *index) get(session string, dims int) (ids []int64, flat []float32, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	el := x.entries[session]
	if el == nil {
		return nil, nil, false
	}
	e := el.Value.(*entry)
	if e.dims != dims {
		return nil, nil, false
	}
	x.lru.MoveToFront(el)
	return e.ids, e.flat, true
}

// generation is what put is given back: the state a read starts from.
func (x *index) generation() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.gen
}

// put keeps a conversation's vectors read from the database, if nothing
// changed since gen and they fit, making room by dropping what was
// searched least recently.
func (x *index) put(session string, dims int, ids []int64, flat []float32, gen uint64) {
	e := &entry{session: session, dims: dims, ids: ids, flat: flat}
	e.measure()
	x.mu.Lock()
	defer x.mu.Unlock()
	if gen != x.gen || e.size > x.limit {
		return
	}
	if el := x.entries[session]; el != nil {
		x.remove(el)
	}
	x.entries[session] = x.lru.PushFront(e)
	x.bytes += e.size
	x.fit(e)
}

// add appends a vector the indexer stored to its conversation, if held.
func (x *index) add(session string, id int64, v []float32) {
	x.mu.Lock()
	defer x.mu.Unlock()
	el := x.entries[session]
	if el == nil {
		x.gen++ // a read under way may have missed it
		return
	}
	e := el.Value.(*entry)
	if e.dims != len(v) || len(e.ids) > 0 && id <= e.ids[len(e.ids)-1] {
		// Another length, or a vector the read already had (it began
		// after the vector was stored): read it afresh next time.
		x.remove(el)
		x.gen++
		return
	}
	x.bytes -= e.size
	e.ids = append(e.ids, id)
	e.flat = append(e.flat, v...)
	e.measure()
	x.bytes += e.size
	x.fit(e)
}

// forget drops conversations (deleted by retention).
func (x *index) forget(sessions []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, s := range sessions {
		if el := x.entries[s]; el != nil {
			x.remove(el)
		}
	}
	x.gen++
}

// fit drops the least recently searched conversations until what is held
// is within the bound; keep goes last.
func (x *index) fit(keep *entry) {
	for x.bytes > x.limit {
		el := x.lru.Back()
		if el.Value.(*entry) == keep && x.lru.Len() > 1 {
			el = el.Prev()
		}
		x.remove(el)
	}
}

func (x *index) remove(el *list.Element) {
	e := x.lru.Remove(el).(*entry)
	delete(x.entries, e.session)
	x.bytes -= e.size
}

// held reports what is held: bytes and conversations.
func (x *index) held() (bytes int64, sessions int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.bytes, len(x.entries)
}

// scored is a message and its cosine similarity with a query.
type scored struct {
	id    int64
	score float32
}

// nearest keeps the k best-scoring messages at or above a floor, best
// first.
type nearest struct {
	k     int
	floor float32
	best  []scored
}

// scan scores every vector of flat (dims numbers each, unit length)
// against q (unit length): their dot product is their cosine similarity.
func (n *nearest) scan(q []float32, ids []int64, flat []float32) {
	dims := len(q)
	for i, id := range ids {
		n.offer(id, dot(q, flat[i*dims:(i+1)*dims]))
	}
}

// offer keeps a message if it is among the k best so far.
func (n *nearest) offer(id int64, s float32) {
	if s < n.floor || len(n.best) == n.k && s <= n.best[len(n.best)-1].score {
		return
	}
	at, _ := slices.BinarySearchFunc(n.best, s, func(e scored, s float32) int {
		switch {
		case e.score > s:
			return -1
		case e.score < s:
			return 1
		}
		return 0
	})
	if len(n.best) == n.k {
		n.best = n.best[:len(n.best)-1]
	}
	n.best = slices.Insert(n.best, at, scored{id, s})
}

// segment is a run of vectors to score: ids and their vectors one after
// another.
type segment struct {
	ids  []int64
	flat []float32
}

// Sharing a search between goroutines: past parallelWork numbers to
// multiply (16 MiB of vectors, about a millisecond on one core) the
// vectors are cut into pieces of pieceVectors, which up to workers
// goroutines take in turn. Scanning is bound by memory bandwidth, which
// more cores share out: on the bench's machine two cores halve a search
// of 100,000 vectors of 1,536.
const (
	parallelWork = 1 << 22
	pieceVectors = 2048
)

// scanAll returns the k best of segs against q, at or above floor.
func scanAll(q []float32, segs []segment, k int, floor float32, workers int) []scored {
	dims, total := len(q), 0
	for _, s := range segs {
		total += len(s.ids)
	}
	if workers <= 1 || total*dims < parallelWork {
		n := nearest{k: k, floor: floor}
		for _, s := range segs {
			n.scan(q, s.ids, s.flat)
		}
		return n.best
	}
	var pieces []segment
	for _, s := range segs {
		for i := 0; i < len(s.ids); i += pieceVectors {
			j := min(i+pieceVectors, len(s.ids))
			pieces = append(pieces, segment{s.ids[i:j], s.flat[i*dims : j*dims]})
		}
	}
	workers = min(workers, len(pieces))
	results := make([][]scored, workers)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			n := nearest{k: k, floor: floor}
			for p := next.Add(1) - 1; p < int64(len(pieces)); p = next.Add(1) - 1 {
				n.scan(q, pieces[p].ids, pieces[p].flat)
			}
			results[w] = n.best
		})
	}
	wg.Wait()
	merged := nearest{k: k, floor: floor}
	for _, r := range results {
		for _, s := range r {
			merged.offer(s.id, s.score)
		}
	}
	return merged.best
}

// dot is the dot product of two vectors of one length. Four sums side by
// side let the processor overlap the multiplications; the slices of four
// let the compiler drop the bounds checks.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		x, y := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
