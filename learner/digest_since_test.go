package learner_test

import (
	"math"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestDigestSince: a step digest names the digest it began from and every
// bit that changed, and no coordinate that did not.
func TestDigestSince(t *testing.T) {
	cfg := configs()["arow"]
	base := fresh(t, cfg)
	m := mustRestore(t, base)
	m.TrackChanges()
	xs := streamFor(cfg, 7, 200)
	for i := range xs {
		m.Learn(&xs[i])
	}
	m.Flush()
	changed := m.Changed()
	st := m.Release()
	if changed.All || len(changed.Index) == 0 {
		t.Fatalf("the range changed %d coordinates (all: %v): nothing to digest", len(changed.Index), changed.All)
	}
	prev := base.Digest()
	got := st.DigestSince(learner.SinceOf(prev, base, changed, nil))
	if got == st.Digest() {
		t.Fatal("the step digest is the state's Digest")
	}
	if other := st.DigestSince(learner.SinceOf([32]byte{1}, base, changed, nil)); other == got {
		t.Fatal("the step digest does not depend on the digest it began from")
	}
	// A coordinate the step did not change, given as changed, adds
	// nothing; one whose bits it changed, even from +0 to -0, does.
	var unchanged uint32
	for i := range uint32(len(st.Weights)) {
		if st.Weights[i] == base.Weights[i] && st.Variance[i] == base.Variance[i] {
			unchanged = i
			break
		}
	}
	wider := learner.UnionCoords(changed, learner.Coords{Index: []uint32{unchanged}})
	if again := st.DigestSince(learner.SinceOf(prev, base, wider, nil)); again != got {
		t.Fatalf("an unchanged coordinate changed the step digest: %x, not %x", again, got)
	}
	i := changed.Index[0]
	for _, v := range []float64{st.Weights[i] + 1, math.Copysign(0, -1)} {
		flipped := *st
		flipped.Weights = append([]float64(nil), st.Weights...)
		flipped.Weights[i] = v
		if base.Weights[i] == 0 && v == 0 && math.Signbit(base.Weights[i]) == math.Signbit(v) {
			continue
		}
		if d := flipped.DigestSince(learner.SinceOf(prev, base, changed, nil)); d == got {
			t.Fatalf("weight %d set to %v: the step digest did not change", i, v)
		}
	}
}
