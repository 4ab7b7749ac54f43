package consumer

import (
	"fmt"
	"math/rand/v2"
	"slices"
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
			seq := f.push([]byte(id), int64(step))
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
