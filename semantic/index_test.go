package semantic

import (
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
)

// The index keeps what fits in its bound, dropping what was searched
// least recently; a conversation alone over the bound is not kept.
func TestIndexBound(t *testing.T) {
	vecs := func(n int) ([]int64, []float32) {
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = int64(i + 1)
		}
		return ids, make([]float32, 4*n)
	}
	ids, flat := vecs(10) // 10×8 + 40×4 + 1 + overhead = 401 bytes
	size := int64(8*10+4*40+1) + entryOverhead
	x := newIndex(3 * size)
	for _, s := range []string{"a", "b", "c"} {
		x.put(s, 4, ids, flat, x.generation())
	}
	if bytes, n := x.held(); n != 3 || bytes != 3*size {
		t.Fatalf("held %d conversations, %d bytes; want 3, %d", n, bytes, 3*size)
	}
	if _, _, ok := x.get("a", 4); !ok { // a is now the most recent
		t.Fatal("a is not held")
	}
	x.put("d", 4, ids, flat, x.generation())
	if _, _, ok := x.get("b", 4); ok {
		t.Error("b, searched least recently, was kept")
	}
	for _, s := range []string{"a", "c", "d"} {
		if _, _, ok := x.get(s, 4); !ok {
			t.Errorf("%s was dropped", s)
		}
	}
	if _, _, ok := x.get("a", 8); ok {
		t.Error("vectors of another length were given")
	}
	big, bigFlat := vecs(60)
	x.put("e", 4, big, bigFlat, x.generation())
	if _, _, ok := x.get("e", 4); ok {
		t.Error("a conversation over the bound on its own was kept")
	}
	if bytes, _ := x.held(); bytes > x.limit {
		t.Errorf("%d bytes held, bound %d", bytes, x.limit)
	}

	none := newIndex(0)
	none.put("a", 4, ids, flat, none.generation())
	if _, n := none.held(); n != 0 {
		t.Error("a bound of 0 kept something")
	}
}

// A conversation read while the indexer stored vectors is not kept (it
// may lack them); one held gets them appended; a vector the read already
// had drops it, to be read afresh; forget drops it.
func TestIndexAddAndGenerations(t *testing.T) {
	x := newIndex(1 << 20)
	gen := x.generation()
	x.add("a", 5, []float32{1, 0})
	x.put("a", 2, []int64{1, 5}, []float32{1, 0, 0, 1}, gen)
	if _, _, ok := x.get("a", 2); ok {
		t.Fatal("a read begun before a vector was added was kept")
	}
	x.put("a", 2, []int64{1, 5}, []float32{1, 0, 0, 1}, x.generation())
	ids, _, ok := x.get("a", 2)
	if !ok || len(ids) != 2 {
		t.Fatal("a is not held")
	}
	x.add("a", 7, []float32{0.6, 0.8})
	ids2, flat2, _ := x.get("a", 2)
	if !reflect.DeepEqual(ids2, []int64{1, 5, 7}) || !reflect.DeepEqual(flat2[4:], []float32{0.6, 0.8}) {
		t.Fatalf("after add: %v %v", ids2, flat2)
	}
	if len(ids) != 2 {
		t.Fatal("a reader's slice changed under it")
	}
	x.add("a", 7, []float32{0.6, 0.8})
	if _, _, ok := x.get("a", 2); ok {
		t.Fatal("a vector added twice was kept")
	}
	x.put("a", 2, []int64{1}, []float32{1, 0}, x.generation())
	x.forget([]string{"a"})
	if _, n := x.held(); n != 0 {
		t.Fatal("forget kept a")
	}
}

// nearest keeps the k best at or above the floor, best first; dot is the
// plain sum at every length.
func TestNearestAndDot(t *testing.T) {
	for n := range 20 {
		a, b := make([]float32, n), make([]float32, n)
		var want float64
		for i := range a {
			a[i], b[i] = rand.Float32(), rand.Float32()
			want += float64(a[i]) * float64(b[i])
		}
		if got := dot(a, b); float64(got)-want > 1e-4 || want-float64(got) > 1e-4 {
			t.Errorf("dot of %d: %v, want %v", n, got, want)
		}
	}
	q := []float32{1, 0}
	ids := []int64{1, 2, 3, 4, 5}
	flat := []float32{0.1, 0, 0.9, 0, -1, 0, 0.5, 0, 0.9, 0}
	n := nearest{k: 3, floor: 0.2}
	n.scan(q, ids, flat)
	var got []int64
	for _, s := range n.best {
		got = append(got, s.id)
	}
	if !reflect.DeepEqual(got, []int64{2, 5, 4}) && !reflect.DeepEqual(got, []int64{5, 2, 4}) {
		t.Errorf("nearest = %v", got)
	}
}

// Reciprocal rank fusion: a message in both lists beats one at the top
// of one list only; ties go to the better rank, then the newer message.
func TestFuse(t *testing.T) {
	got := fuse([]int64{10, 20, 30}, []int64{40, 30, 50})
	// 30: 1/63 + 1/62; 10 and 40: 1/61 each (40 is newer); 20, 50: 1/62, 1/63.
	if want := []int64{30, 40, 10, 20, 50}; !reflect.DeepEqual(got, want) {
		t.Errorf("fuse = %v, want %v", got, want)
	}
	if got := fuse(nil, []int64{3, 1}); !reflect.DeepEqual(got, []int64{3, 1}) {
		t.Errorf("one list: %v", got)
	}
}

func TestUnit(t *testing.T) {
	if got := unit([]float32{3, 4}); got[0] != 0.6 || got[1] != 0.8 {
		t.Errorf("unit = %v", got)
	}
	if got := unit([]float32{0, 0}); len(got) != 0 {
		t.Errorf("a zero vector: %v", got)
	}
}

// A search shared between goroutines finds what one goroutine finds.
func TestScanAllInParallel(t *testing.T) {
	const dims = 1024
	r := rand.New(rand.NewPCG(1, 2))
	var segs []segment
	id := int64(0)
	for _, n := range []int{5000, 1, 0, 3000} { // 8001×1024 numbers: over parallelWork
		s := segment{}
		for range n {
			id++
			s.ids = append(s.ids, id)
			for range dims {
				s.flat = append(s.flat, r.Float32()-0.5)
			}
		}
		segs = append(segs, s)
	}
	q := segs[0].flat[:dims]
	one := scanAll(q, segs, 20, -10, 1)
	many := scanAll(q, segs, 20, -10, 4)
	if len(one) != 20 || !reflect.DeepEqual(one, many) {
		t.Fatalf("one goroutine: %v\nfour: %v", one, many)
	}
	if one[0].id != 1 {
		t.Errorf("the query's own vector is not first: %v", one[0])
	}
}

// BenchmarkScan is the brute force of a search: 100,000 vectors of 1,536.
func BenchmarkScan(b *testing.B) {
	const n, dims = 100_000, 1536
	r := rand.New(rand.NewPCG(1, 2))
	flat := make([]float32, n*dims)
	for i := range flat {
		flat[i] = r.Float32() - 0.5
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	segs := []segment{{ids, flat}}
	for b.Loop() {
		scanAll(flat[:dims], segs, 20, -1, runtime.GOMAXPROCS(0))
	}
}
