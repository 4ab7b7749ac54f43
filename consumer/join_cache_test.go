package consumer

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestJoinCacheKeepsItsExamples keeps examples of every size in the
// join's cache, some near a slab's size and a few larger, with the tail
// taking them in order now and then and the bound dropping the rest, over
// enough slabs that the free ones are taken again many times: every
// example the cache still holds keeps the features it was given, while
// the decoder's example they were copied from is written over, and its
// id too. Now and
// then the tail stops just at the last example of a slab, and the next
// example fills a slab of its own: the slab must not be taken for it.
func TestJoinCacheKeepsItsExamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	j := &joined{cfg: LabelsConfig{CacheBytes: 1 << 20}}
	type kept struct {
		resume int64
		x      learner.Example
		id     string
		ok     bool
	}
	var want []kept // want[i] is the cache's example cacheFirst+i
	check := func(step int) {
		t.Helper()
		if len(j.cache)-j.cacheFirst != len(want) {
			t.Fatalf("step %d: the cache holds %d examples, want %d", step, len(j.cache)-j.cacheFirst, len(want))
		}
		for i := range want {
			c, w := &j.cache[j.cacheFirst+i], &want[i]
			if c.m.Resume != w.resume || c.ok != w.ok || !slices.Equal(c.x.Index, w.x.Index) ||
				!slices.Equal(c.x.Value, w.x.Value) || !slices.Equal(c.x.Dense, w.x.Dense) || string(c.id) != w.id {
				t.Fatalf("step %d: the cached example at %d (%d of %d) changed", step, w.resume, i, len(want))
			}
		}
	}
	var x learner.Example
	// The index slabs the cache cut from, and how often it took one again.
	slabs, taken := map[*uint32]bool{}, 0
	var last *uint32
	edges, big := 0, false
	for step := range 4000 {
		if step%400 == 0 {
			// A bound of a few slabs, or of less than one.
			j.cfg.CacheBytes = 1<<16 + rng.IntN(1<<20)
		}
		n, d := rng.IntN(400), rng.IntN(4)*rng.IntN(100)
		switch r := rng.IntN(100); {
		case big:
			n, big = slabLen-rng.IntN(100), false
			j.cfg.CacheBytes = max(j.cfg.CacheBytes, j.cacheBytes+12*n+1<<10)
		case r == 0:
			n = slabLen + rng.IntN(1000)
		case r < 10:
			n = rng.IntN(slabLen / 2)
		}
		x.Reset()
		for k := range n {
			x.Index = append(x.Index, uint32(step*1000+k))
			x.Value = append(x.Value, float64(step)+float64(k)/1e4)
		}
		for k := range d {
			x.Dense = append(x.Dense, -float64(step)-float64(k)/1e4)
		}
		ok := rng.IntN(20) != 0
		m := Message{Resume: int64(step + 1)}
		id := []byte(strconv.Itoa(step * rng.IntN(1000)))
		j.keep(&m, &x, wire.Meta{ID: id, HasID: true}, ok)
		if cur := j.slab.index.cur; cap(cur) > 0 && &cur[:1][0] != last {
			last = &cur[:1][0]
			if slabs[last] {
				taken++
			}
			slabs[last] = true
		}
		w := kept{resume: m.Resume, ok: ok}
		if ok {
			w.x = learner.Example{Index: slices.Clone(x.Index), Value: slices.Clone(x.Value), Dense: slices.Clone(x.Dense)}
			w.id = string(id)
		}
		clear(id) // the decoder's scratch, written over
		want = append(want, w)
		want = want[len(want)-(len(j.cache)-j.cacheFirst):]
		check(step)
		switch r := rng.IntN(6); {
		case r < 2:
			// The tail takes a few.
			for range rng.IntN(8) * rng.IntN(8) {
				if j.cacheFirst == len(j.cache) {
					break
				}
				j.dropCached()
				want = want[1:]
			}
			check(step)
		case r == 2 && len(j.slab.index.full) > 0:
			// The tail takes every example before the last of the
			// oldest full slab.
			for edge := j.slab.index.full[0].last; j.dropped < edge; {
				j.dropCached()
				want = want[1:]
			}
			edges++
			big = true
			check(step)
		}
	}
	if taken < 10 || edges < 10 {
		t.Fatalf("a slab was taken again %d times (of %d slabs), the tail stopped at a slab's edge %d times: the test tests less than it says", taken, len(slabs), edges)
	}
}
