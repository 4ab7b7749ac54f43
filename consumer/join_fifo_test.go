package consumer

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestFIFO pushes and pops values with ids, some shared, across many
// chunks and index growths, and checks every value and every id's chain
// against a plain reference.
func TestFIFO(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	f := newFIFO[int64]()
	type ref struct {
		seq int64
		id  string
	}
	var held []ref
	for step := range 200_000 {
		if len(held) == 0 || rng.IntN(100) < 55 {
			id := fmt.Sprintf("id-%d", rng.IntN(50_000))
			seq, _ := f.push([]byte(id), int64(step))
			if len(held) > 0 && seq != held[len(held)-1].seq+1 {
				t.Fatalf("push gave sequence %d after %d", seq, held[len(held)-1].seq)
			}
			held = append(held, ref{seq, id})
		} else {
			if f.first() != held[0].seq {
				t.Fatalf("first %d, want %d", f.first(), held[0].seq)
			}
			f.pop()
			held = held[1:]
		}
		if f.len() != len(held) {
			t.Fatalf("len %d, want %d", f.len(), len(held))
		}
		if step%997 != 0 || len(held) == 0 {
			continue
		}
		probe := held[rng.IntN(len(held))]
		var want []int64
		for _, h := range held {
			if h.id == probe.id {
				want = append(want, h.seq)
			}
		}
		if got := f.chain([]byte(probe.id)); !slices.Equal(got, want) {
			t.Fatalf("step %d: chain(%s) = %v, want %v", step, probe.id, got, want)
		}
		if got := f.key(probe.seq); got != probe.id {
			t.Fatalf("key(%d) = %s, want %s", probe.seq, got, probe.id)
		}
		if got := f.chain([]byte("absent")); len(got) != 0 {
			t.Fatalf("chain of an absent id: %v", got)
		}
	}
	for len(held) > 0 {
		f.pop()
		held = held[1:]
	}
	if f.index.n != 0 {
		t.Fatalf("the index holds %d values after every pop", f.index.n)
	}
}

// TestFIFOAgainstAMap drives a fifo with ids that share a long prefix and
// repeat, filling it well past an index growth and draining it to empty
// again and again, so that chunks are emptied and taken again, against a
// slice of what it holds and a map of each id's sequences. After every
// operation it checks what it changed, and now and then every held id,
// every chain, and the index: one slot an id held, naming its newest
// value, each reachable from its home without an empty slot in between,
// tagged as its id's hash says.
func TestFIFOAgainstAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	q := newFIFO[int64]()
	f := &q
	type ref struct {
		seq int64
		id  string
	}
	var held []ref
	byID := map[string][]int64{}
	// 3,000 ids of 24 to 27 bytes that differ only in their last bytes,
	// each pushed many times over.
	const prefix = "gen-3f2a9c1b-4d5e-000000"
	ids := make([]string, 3000)
	for i := range ids {
		ids[i] = prefix + strconv.Itoa(i)
	}
	seen := map[*fifoChunkOf[int64]]bool{}
	reused := 0
	checkChain := func(step int, id string) {
		t.Helper()
		want := byID[id]
		if got := f.chain([]byte(id)); !slices.Equal(got, want) {
			t.Fatalf("step %d: chain(%q) = %v, want %v", step, id, got, want)
		}
	}
	checkIndex := func(step int) {
		t.Helper()
		x := &f.index
		m := x.mask()
		used := 0
		for i, tag := range x.tags {
			if tag == 0 {
				continue
			}
			used++
			seq := seqAt(x.slots[i], f)
			if seq < f.first() || seq >= f.end() {
				t.Fatalf("step %d: slot %d names sequence %d, not held [%d, %d)", step, i, seq, f.first(), f.end())
			}
			if s := byID[string(f.idBytes(seq))]; seq != s[len(s)-1] {
				t.Fatalf("step %d: slot %d names sequence %d, not the newest of its id, %d", step, i, seq, s[len(s)-1])
			}
			h := maphash.Bytes(x.seed, f.idBytes(seq))
			if tag != tagOf(h) {
				t.Fatalf("step %d: slot %d tagged %d, its id's tag is %d", step, i, tag, tagOf(h))
			}
			for k := h & m; k != uint64(i); k = (k + 1) & m {
				if x.tags[k] == 0 {
					t.Fatalf("step %d: slot %d (sequence %d) is past an empty slot %d from its home %d", step, i, seq, k, h&m)
				}
			}
		}
		if used != len(byID) || x.n != len(byID) {
			t.Fatalf("step %d: the index has %d slots used and counts %d, with %d ids held", step, used, x.n, len(byID))
		}
	}
	// Fill to a high mark and drain to a low one, over and over: now
	// chunks past an index growth, now a few hundred values that pass
	// through chunk after chunk. The marks vary so that the queue empties
	// at every place in a chunk.
	filling, high, low := true, 0, 0
	for step := range 300_000 {
		if filling && len(held) >= high || !filling && len(held) <= low {
			filling = !filling
			high = 2*fifoChunk + rng.IntN(3*fifoChunk)
			if rng.IntN(2) == 0 {
				high = 100 + rng.IntN(500)
			}
			low = rng.IntN(min(high, fifoChunk/2))
			if rng.IntN(3) == 0 {
				low = 0
			}
		}
		if len(held) == 0 || filling && rng.IntN(10) < 9 || !filling && rng.IntN(10) < 1 {
			id := ids[rng.IntN(len(ids))]
			if rng.IntN(50) == 0 {
				id = prefix // a prefix of every other id
			}
			seq, shared := f.push([]byte(id), seq2val(int64(step)))
			if want := f.end() - 1; seq != want || len(held) > 0 && seq != held[len(held)-1].seq+1 {
				t.Fatalf("step %d: push gave sequence %d", step, seq)
			}
			if want := len(byID[id]) > 0; shared != want {
				t.Fatalf("step %d: push of %q says shared %v, with %d held", step, id, shared, len(byID[id]))
			}
			if c := f.chunks[len(f.chunks)-1]; !seen[c] {
				seen[c] = true
			} else if (seq-f.base)%fifoChunk == 0 {
				reused++
			}
			held = append(held, ref{seq, id})
			byID[id] = append(byID[id], seq)
			if *f.at(seq) != seq2val(int64(step)) || string(f.idBytes(seq)) != id {
				t.Fatalf("step %d: pushed %q, holds %.64q", step, id, f.idBytes(seq))
			}
			checkChain(step, id)
		} else {
			h := held[0]
			if f.first() != h.seq || string(f.idBytes(h.seq)) != h.id {
				t.Fatalf("step %d: first is %d %.64q, want %d %q", step, f.first(), f.idBytes(f.first()), h.seq, h.id)
			}
			f.pop()
			held = held[1:]
			if s := byID[h.id]; len(s) == 1 {
				delete(byID, h.id)
			} else {
				byID[h.id] = s[1:]
			}
			checkChain(step, h.id)
		}
		if f.len() != len(held) {
			t.Fatalf("step %d: len %d, want %d", step, f.len(), len(held))
		}
		if len(held) > 0 {
			r := held[rng.IntN(len(held))]
			if got := string(f.idBytes(r.seq)); got != r.id {
				t.Fatalf("step %d: id of %d is %.64q, want %q", step, r.seq, got, r.id)
			}
			checkChain(step, r.id)
		}
		checkChain(step, ids[rng.IntN(len(ids))]+"0") // never pushed
		if step%1999 == 0 {
			for _, r := range held {
				if got := string(f.idBytes(r.seq)); got != r.id {
					t.Fatalf("step %d: id of %d is %.64q, want %q", step, r.seq, got, r.id)
				}
			}
			for id := range byID {
				checkChain(step, id)
			}
			checkIndex(step)
		}
	}
	if reused < 10 || len(f.index.slots) < len(ids) {
		t.Fatalf("no chunk was taken again (%d) or the index did not grow (%d slots): the test tests less than it says", reused, len(f.index.slots))
	}
}

// seq2val is the value pushed at a step: not the sequence, so that a value
// read at the wrong place shows.
func seq2val(step int64) int64 { return step*7 + 3 }

// TestFIFOOneIDManyValues: values that share one id, the same id sent
// for every record, take one slot of the index, so that a push and a pop
// cost the same however many share it, and their chain is every one of
// them, oldest first, as others come and go.
func TestFIFOOneIDManyValues(t *testing.T) {
	const n = 50_000
	f := newFIFO[int64]()
	for i := range n {
		f.push([]byte("same"), int64(i))
		if i%3 == 0 {
			f.push([]byte("other-"+strconv.Itoa(i)), int64(i))
		}
	}
	if got, want := f.index.n, 1+(n+2)/3; got != want {
		t.Fatalf("the index holds %d slots, want %d: one for the shared id and one for each other", got, want)
	}
	check := func() {
		t.Helper()
		var want []int64
		for s := f.first(); s < f.end(); s++ {
			if f.key(s) == "same" {
				want = append(want, s)
			}
		}
		if got := f.chain([]byte("same")); !slices.Equal(got, want) {
			t.Fatalf("chain of the shared id: %d values from %v, want %d from %v", len(got), got[:min(3, len(got))], len(want), want[:min(3, len(want))])
		}
	}
	check()
	for f.len() > n/2 {
		f.pop()
	}
	check()
	for f.len() > 0 {
		f.pop()
	}
	if f.index.n != 0 || len(f.chain([]byte("same"))) != 0 {
		t.Fatalf("emptied, the index holds %d slots and the chain %v", f.index.n, f.chain([]byte("same")))
	}
	f.push([]byte("same"), 1)
	check()
}
