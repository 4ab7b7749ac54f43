package learner_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// driftThreshold is a detector's threshold low enough to find drifts in
// the streams of TestMixChangedIsMixWithRule.
const driftThreshold = 2

// changedConfigs are configs() with AROW's multiclass model and models
// whose detector finds drifts in these streams.
func changedConfigs() map[string]learner.Config {
	out := configs()
	c := out["arow"]
	c.Classes = []string{"a", "b", "c"}
	out["multiclass/arow"] = c
	// A Pegasos mix rewrites every weight: over more weights than its
	// ranges touch, it changes coordinates no result did.
	wide := out["pegasos"]
	wide.HashBits = 12
	out["pegasos/wide"] = wide
	for _, a := range []string{"arow", "averaged", "perceptron"} {
		c := out[a]
		c.Drift = learner.DriftConfig{Enabled: true, Delta: 0, Threshold: driftThreshold, MinExamples: 20}
		out[a+"/drift"] = c
	}
	return out
}

// checkCovers fails unless st's per-weight vectors have base's bits
// outside c.
func checkCovers(t *testing.T, what string, base, st *learner.State, c learner.Coords) {
	t.Helper()
	if c.All {
		return
	}
	for _, v := range []struct {
		name     string
		got, was []float64
	}{{"weights", st.Weights, base.Weights}, {"sum_weights", st.SumWeights, base.SumWeights}, {"variance", st.Variance, base.Variance}} {
		for i := range v.got {
			if math.Float64bits(v.got[i]) != math.Float64bits(v.was[i]) {
				if _, ok := slices.BinarySearch(c.Index, uint32(i)); !ok {
					t.Fatalf("%s: %s[%d] changed, and Changed does not hold it", what, v.name, i)
				}
			}
		}
	}
}

// TestMixChangedIsMixWithRule: epochs learned as the epochs learn them,
// each range's model restored into the vectors of the previous epoch's
// range with RestoreInto and tracking what it changes, and mixed with
// MixChanged over the union of the changes, give the same states, to the
// bit, as ranges restored whole and MixWithRule, for every algorithm and
// rule; Changed holds every coordinate a range changed.
func TestMixChangedIsMixWithRule(t *testing.T) {
	rules := []learner.MixRule{learner.MixMean, learner.MixDamped, learner.MixTouched, learner.MixAROW, learner.MixPegasos, learner.MixAuto}
	for name, cfg := range changedConfigs() {
		for _, rule := range rules {
			t.Run(name+"/"+string(rule), func(t *testing.T) {
				want := fresh(t, cfg)
				if _, err := learner.MixWithRule(rule, want, nil, nil); err != nil {
					t.Skipf("rule %s does not mix %s: %v", rule, cfg.Algorithm, err)
				}
				got := fresh(t, cfg)
				var spares []*learner.State
				diff := learner.AllCoords
				shards := 3
				if cfg.Algorithm == learner.Kernel {
					shards = 1
				}
				drifts := false
				for e := range 4 {
					var wantStates, gotStates []*learner.State
					var changed []learner.Coords
					for s := range shards {
						xs := streamFor(cfg, uint64(100*e+s), 40+60*s+25*e)
						ref, _ := learnRange(t, want, xs)
						wantStates = append(wantStates, ref)

						var spare *learner.State
						if len(spares) > 0 {
							spare, spares = spares[0], spares[1:]
						}
						m, err := learner.RestoreInto(got, spare, diff)
						if err != nil {
							t.Fatalf("RestoreInto: %v", err)
						}
						m.TrackChanges()
						for i := range xs {
							m.Learn(&xs[i])
						}
						m.Flush()
						c := m.Changed()
						st := m.Release()
						checkCovers(t, "range", got, st, c)
						gotStates = append(gotStates, st)
						changed = append(changed, c)
					}
					weights := learner.MixWeightsOf(learner.MixExamples, want, wantStates)
					next, err := learner.MixWithRule(rule, want, wantStates, weights)
					if err != nil {
						t.Fatalf("epoch %d: MixWithRule: %v", e, err)
					}
					diff = learner.UnionCoords(changed...)
					drifts = drifts || !mixedWithoutDrift(got, gotStates)
					inPlace := !diff.All && len(got.Weights) > 0 && mixedWithoutDrift(got, gotStates)
					baseWeights, prev := got.Weights, mustRestore(t, got).State()
					// The step digest from one base is the same whatever
					// superset of the changes it was taken over, and
					// whether the mix wrote over the base or not.
					from := [32]byte{byte(e), 1}
					sinceChanged := learner.SinceOf(from, got, diff, nil)
					// A worker that read the results from the log knows
					// only the coordinates whose bits they changed: the mix
					// may change more (MixChangesAt).
					stored := make([]learner.Coords, len(gotStates))
					for s, st := range gotStates {
						stored[s] = bitsChanged(got, st)
					}
					readAt := learner.MixChangesAt(got, gotStates, learner.UnionCoords(stored...))
					sinceAll := learner.SinceOf(from, want, learner.AllCoords, nil)
					mixed, err := learner.MixChanged(rule, got, gotStates, learner.MixWeightsOf(learner.MixExamples, got, gotStates), diff)
					if err != nil {
						t.Fatalf("epoch %d: MixChanged: %v", e, err)
					}
					if err := mixed.Validate(); err != nil {
						t.Fatalf("epoch %d: the mix does not validate: %v", e, err)
					}
					if next.Digest() != mixed.Digest() {
						t.Fatalf("epoch %d: MixChanged's state differs from MixWithRule's", e)
					}
					if a, b := mixed.DigestSince(sinceChanged), next.DigestSince(sinceAll); a != b {
						t.Fatalf("epoch %d: the step digest over the changes is %x, over every coordinate %x", e, a, b)
					}
					checkCovers(t, "mix", prev, mixed, diff)
					checkCovers(t, "mix, from the results' changes", prev, mixed, readAt)
					if inPlace && &mixed.Weights[0] != &baseWeights[0] {
						t.Fatalf("epoch %d: MixChanged did not mix over the changes alone, in the base's vectors", e)
					}
					want, got, spares = next, mixed, gotStates
				}
				if cfg.Drift.Enabled && cfg.Drift.Threshold == driftThreshold && !drifts {
					t.Fatal("no range found a drift: the epochs after one are not tested")
				}
			})
		}
	}
}

// bitsChanged is the coordinates at which st's per-weight vectors have
// other bits than base's, as a stored result names them.
func bitsChanged(base, st *learner.State) learner.Coords {
	var idx []uint32
	for i := range base.Weights {
		for _, v := range [][2][]float64{{base.Weights, st.Weights}, {base.SumWeights, st.SumWeights}, {base.Variance, st.Variance}} {
			if len(v[0]) > i && len(v[1]) > i && math.Float64bits(v[0][i]) != math.Float64bits(v[1][i]) {
				idx = append(idx, uint32(i))
				break
			}
		}
	}
	return learner.Coords{Index: idx}
}

// mixedWithoutDrift reports whether no state found a drift beyond base.
func mixedWithoutDrift(base *learner.State, states []*learner.State) bool {
	for _, st := range states {
		if st.Detector.Drifts > base.Detector.Drifts {
			return false
		}
	}
	return true
}

// TestUnionCoords: the union is sorted without repeats, and every
// coordinate when one of its sets is.
func TestUnionCoords(t *testing.T) {
	u := learner.UnionCoords(learner.Coords{Index: []uint32{1, 5, 9}}, learner.Coords{Index: []uint32{0, 5, 10}}, learner.Coords{})
	if u.All || !slices.Equal(u.Index, []uint32{0, 1, 5, 9, 10}) {
		t.Fatalf("union %+v, want 0 1 5 9 10", u)
	}
	// Sets far apart, for which a bit per coordinate would be more words
	// than the coordinates given.
	sparse := learner.UnionCoords(learner.Coords{Index: []uint32{1, 1 << 20}}, learner.Coords{Index: []uint32{3, 1 << 20}})
	if !slices.Equal(sparse.Index, []uint32{1, 3, 1 << 20}) {
		t.Fatalf("union %+v, want 1 3 %d", sparse, 1<<20)
	}
	if !learner.UnionCoords(learner.Coords{Index: []uint32{1}}, learner.AllCoords).All {
		t.Fatal("a union with every coordinate is not every coordinate")
	}
	// Random sets, dense and sparse, against their union sorted.
	r := rand.New(rand.NewPCG(1, 2))
	for _, span := range []uint32{100, 1 << 12, 1 << 24} {
		for range 50 {
			var sets []learner.Coords
			var want []uint32
			for range r.IntN(5) {
				var c []uint32
				for range r.IntN(200) {
					c = append(c, r.Uint32N(span))
				}
				slices.Sort(c)
				c = slices.Compact(c)
				sets = append(sets, learner.Coords{Index: c})
				want = append(want, c...)
			}
			slices.Sort(want)
			want = slices.Compact(want)
			if got := learner.UnionCoords(sets...); got.All || !slices.Equal(got.Index, want) {
				t.Fatalf("span %d: union of %v is %v, want %v", span, sets, got.Index, want)
			}
		}
	}
}

// TestChangedInOrder: the coordinates Changed returns are in order, once
// each, whatever order the features were learned in, with a multiclass
// model's coordinates of each feature together.
func TestChangedInOrder(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 10
	cfg.Classes = []string{"a", "b", "c"}
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.TrackChanges()
	features := []uint32{1000, 64, 3, 127, 63, 3, 1023, 0}
	for i, f := range features {
		x := learner.Example{Labeled: true, Label: i % 3}
		x.Add(f, 1)
		m.Learn(&x)
	}
	var want []uint32
	for _, f := range []uint32{0, 3, 63, 64, 127, 1000, 1023} {
		want = append(want, 3*f, 3*f+1, 3*f+2)
	}
	if c := m.Changed(); c.All || !slices.Equal(c.Index, want) {
		t.Fatalf("Changed %+v, want %v", c, want)
	}
}

func mustRestore(t *testing.T, st *learner.State) *learner.Model {
	t.Helper()
	m, err := learner.Restore(st)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return m
}
