package learner_test

import (
	"encoding/hex"
	"math"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// trained is the state of a model of cfg after n examples of the stream
// of seed, learned on until no mini-batch is pending.
func trained(t testing.TB, cfg learner.Config, seed uint64, n int) *learner.State {
	t.Helper()
	m := mustNew(t, cfg)
	xs := streamFor(cfg, seed, n+4*cfg.Batch)
	for i := range xs {
		m.Learn(&xs[i])
		if i+1 >= n && m.Metrics().Labeled%uint64(cfg.Batch) == 0 {
			break
		}
	}
	return m.State()
}

// TestDigest: two models fed the same examples have the same digest, a
// restored state keeps it, and one bit of one number changes it.
func TestDigest(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			a, b := trained(t, cfg, 5, 300), trained(t, cfg, 5, 300)
			if a.Digest() != b.Digest() {
				t.Fatal("two models fed the same examples have different digests")
			}
			m, err := learner.Restore(a)
			if err != nil {
				t.Fatal(err)
			}
			if m.State().Digest() != a.Digest() {
				t.Fatal("Restore(State()) changed the digest")
			}
			if c := trained(t, cfg, 6, 300); c.Digest() == a.Digest() {
				t.Fatal("models fed other examples have the same digest")
			}
			if len(b.Weights) > 0 {
				b.Weights[len(b.Weights)/2] = math.Float64frombits(math.Float64bits(b.Weights[len(b.Weights)/2]) ^ 1)
			} else {
				b.Bias[0] = math.Float64frombits(math.Float64bits(b.Bias[0]) ^ 1)
			}
			if a.Digest() == b.Digest() {
				t.Fatal("a weight one bit apart leaves the digest unchanged")
			}
			if a.StateSHA256() != hex.EncodeToString(func() []byte { d := a.Digest(); return d[:] }()) {
				t.Fatal("StateSHA256 is not Digest in hex")
			}
		})
	}
}

// TestDigestCoversEveryPart: changing any part of a state changes its
// digest.
func TestDigestCoversEveryPart(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits = 2
	base := mustNew(t, cfg).State()
	for name, change := range map[string]func(*learner.State){
		"config":  func(st *learner.State) { st.Config.HashSeed = 1 },
		"classes": func(st *learner.State) { st.Config.Classes = []string{"a", "b"} },
		"counter": func(st *learner.State) { st.Examples = 1 },
		"r2":      func(st *learner.State) { st.R2 = 1 },
		"window":  func(st *learner.State) { st.Window[3] = true },
		"next":    func(st *learner.State) { st.WindowNext = 1 },
		"-0":      func(st *learner.State) { st.Bias[0] = math.Copysign(0, -1) },
		"scale":   func(st *learner.State) { st.Scale = 1 },
		"sums":    func(st *learner.State) { st.SumWeights = []float64{0} },
		"pending": func(st *learner.State) { st.PendingIndex = []uint32{0} },
		"support": func(st *learner.State) { st.Support = []learner.SupportVector{{}} },
	} {
		st := mustNew(t, cfg).State()
		change(st)
		if st.Digest() == base.Digest() {
			t.Errorf("%s: the digest did not change", name)
		}
	}
}

// TestDigestGolden pins the encoding that Digest documents: if this
// digest changes, so does every state_sha256 ever recorded, and the
// encoding's version string must change with it. The value was computed
// once, and reproduced by an independent implementation of the documented
// encoding (in Python, from the state as JSON).
func TestDigestGolden(t *testing.T) {
	cfg := perceptronConfig()
	cfg.Eta = 0.1
	cfg.HashBits = 2
	cfg.Window = 4
	m := mustNew(t, cfg)
	for _, x := range []learner.Example{
		{Dense: []float64{1, 1}, Labeled: true, Label: -1},
		{Dense: []float64{2, 1}, Labeled: true, Label: 1},
		{Index: []uint32{3}, Value: []float64{0.5}},
		{Index: []uint32{2, 3}, Value: []float64{-1, 0.25}, Labeled: true, Label: -1},
	} {
		m.Learn(&x)
	}
	const want = "d681655c00727ec0f0e33bf9767ad3778c67c080495024efd5b15556ae1b9d58"
	// Parts 1 to 5: a state whose detector is fresh has no part 6
	// (TestDigestDriftGolden pins it).
	st := m.State()
	st.Detector = learner.Detector{}
	// Nor part 7, an empty calibration (TestDigestCalibration covers it).
	st.Calibration = learner.Calibration{}
	if got := st.StateSHA256(); got != want {
		t.Fatalf("state_sha256 = %s, want %s", got, want)
	}
}

// BenchmarkDigest is the digest of a state at the defaults
// (learner.DefaultConfig: 2^18 weights with their variances), which the
// epochs take of every new base.
//
//	go test -run XXX -bench BenchmarkDigest -benchmem ./learner/
func BenchmarkDigest(b *testing.B) {
	st := trained(b, learner.DefaultConfig(), 5, 2000)
	b.SetBytes(int64(8 * (len(st.Weights) + len(st.SumWeights) + len(st.Variance))))
	b.ReportAllocs()
	for b.Loop() {
		st.Digest()
	}
}
