package learner_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// flipStream is n examples of the synthetic stream (40 of 300 features,
// 5% noise) whose labels turn over at example at: a change of concept
// as abrupt as there is, which a model needs hundreds of examples to
// unlearn.
func flipStream(seed uint64, n, at int, cfg learner.Config) []learner.Example {
	o := synth.DefaultOptions()
	o.Vocab, o.Seed = 300, seed
	xs := genStream(o, n, cfg).xs
	for i := at; i < n; i++ {
		xs[i].Label = -xs[i].Label
	}
	return xs
}

// TestModelDetectsDrift: a model reports one drift soon after its
// concept turns over, none before, counts it, and starts afresh: after
// the drift it predicts like a new model that learns the examples from
// there on.
func TestModelDetectsDrift(t *testing.T) {
	const n, at = 8000, 4000
	for _, a := range []learner.Algorithm{learner.Perceptron, learner.Averaged, learner.PA1, learner.AROW} {
		t.Run(string(a), func(t *testing.T) {
			cfg := perceptronConfig()
			cfg.Algorithm, cfg.HashBits = a, 12
			m := mustNew(t, cfg)
			xs := flipStream(1, n, at, cfg)
			var fresh *learner.Model
			drifts, driftAt := 0, 0
			for i := range xs {
				o := m.Learn(&xs[i])
				if since, ok := m.SinceRestart(); ok != (drifts > 0 || o.Drift != nil) || (ok && o.Drift == nil && since != uint64(i-driftAt)) {
					t.Fatalf("example %d: SinceRestart %d, %v after a drift at %d", i, since, ok, driftAt)
				}
				if fresh != nil {
					// The averaged perceptron's average since the drift is
					// that of a new model scaled: the same labels.
					if f := fresh.Learn(&xs[i]); f.Label != o.Label || (a != learner.Averaged && f.Score != o.Score) {
						t.Fatalf("example %d: score %v, a new model from the drift on scores %v", i, o.Score, f.Score)
					}
				}
				if o.Drift == nil {
					continue
				}
				drifts++
				driftAt = i
				if since, _ := m.SinceRestart(); since != 0 {
					t.Fatalf("SinceRestart %d at the drift, want 0", since)
				}
				if i < at || i > at+1500 {
					t.Fatalf("a drift at example %d; the concept changed at %d", i, at)
				}
				if o.Drift.Count != 1 || m.Drifts() != 1 {
					t.Fatalf("drift count %d, model's %d, want 1", o.Drift.Count, m.Drifts())
				}
				if !(o.Drift.ErrorBefore < 0.4 && o.Drift.ErrorAfter > 0.6) {
					t.Errorf("error rates before %v and after %v: want a rise from under 0.4 to over 0.6", o.Drift.ErrorBefore, o.Drift.ErrorAfter)
				}
				fresh = mustNew(t, cfg)
			}
			if drifts != 1 {
				t.Fatalf("%d drifts, want 1", drifts)
			}
			if m.Metrics().Labeled != n {
				t.Fatalf("the counters restarted: labeled %d", m.Metrics().Labeled)
			}
		})
	}
}

// TestDriftDisabled: a model whose detector is off reports no drift
// and keeps a fresh detector state.
func TestDriftDisabled(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits = 12
	cfg.Drift.Enabled = false
	m := mustNew(t, cfg)
	xs := flipStream(1, 8000, 4000, cfg)
	for i := range xs {
		if o := m.Learn(&xs[i]); o.Drift != nil {
			t.Fatalf("a drift at %d with the detector off", i)
		}
	}
	if st := m.State(); st.Detector != (learner.Detector{}) {
		t.Fatalf("detector state %+v with the detector off", st.Detector)
	}
}

// TestDetectorStateResumes: a model restored from its state anywhere,
// before, at and after the drift, continues bit for bit as the
// uninterrupted one, drift included.
func TestDetectorStateResumes(t *testing.T) {
	const n, at = 8000, 4000
	for _, a := range []learner.Algorithm{learner.Perceptron, learner.AROW, learner.Averaged} {
		cfg := perceptronConfig()
		cfg.Algorithm, cfg.HashBits = a, 12
		xs := flipStream(2, n, at, cfg)
		whole := mustNew(t, cfg)
		var drift int
		for i := range xs {
			if whole.Learn(&xs[i]).Drift != nil {
				drift = i
			}
		}
		if drift == 0 {
			t.Fatalf("%s: no drift", a)
		}
		for _, cut := range []int{at / 2, drift, drift + 1, n - 1} {
			m := mustNew(t, cfg)
			for i := range xs[:cut] {
				m.Learn(&xs[i])
			}
			st := m.State()
			if st.Detector.N == 0 && st.Detector.Drifts == 0 {
				t.Fatalf("%s: cut %d: a fresh detector state", a, cut)
			}
			r, err := learner.Restore(st)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.State(), st) {
				t.Fatalf("%s: cut %d: Restore(State) is another state", a, cut)
			}
			for i := cut; i < n; i++ {
				if o := r.Learn(&xs[i]); (o.Drift != nil) != (i == drift) {
					t.Fatalf("%s: cut %d: drift at %d is %v, the uninterrupted model's at %d", a, cut, i, o.Drift, drift)
				}
			}
			if r.State().Digest() != whole.State().Digest() {
				t.Fatalf("%s: cut %d: the resumed model differs from the uninterrupted one", a, cut)
			}
		}
	}
}

// TestDetectorStateValidate: a detector state out of range is refused,
// naming its field.
func TestDetectorStateValidate(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits = 12
	m := mustNew(t, cfg)
	xs := flipStream(1, 100, 100, cfg)
	for i := range xs {
		m.Learn(&xs[i])
	}
	for field, change := range map[string]func(*learner.Detector){
		"detector.mean":     func(d *learner.Detector) { d.Mean = 1.5 },
		"detector.low_mean": func(d *learner.Detector) { d.LowMean = -0.1 },
		"detector.low":      func(d *learner.Detector) { d.Low = 1 },
		"detector.n":        func(d *learner.Detector) { d.N = 101 },
		"detector.drifts":   func(d *learner.Detector) { d.Drifts = 1000 },
	} {
		st := m.State()
		change(&st.Detector)
		var se *learner.StateError
		if err := st.Validate(); !errors.As(err, &se) || se.Field != field {
			t.Errorf("%s: got %v, want a StateError on it", field, err)
		}
	}
}

// TestDriftConfigValidate: bad detector settings are refused, naming
// drift.<field>, whether the detector is on or off.
func TestDriftConfigValidate(t *testing.T) {
	for field, change := range map[string]func(*learner.DriftConfig){
		"drift.delta":        func(d *learner.DriftConfig) { d.Delta = -1 },
		"drift.threshold":    func(d *learner.DriftConfig) { d.Threshold = 0 },
		"drift.min_examples": func(d *learner.DriftConfig) { d.MinExamples = 0 },
	} {
		for _, on := range []bool{true, false} {
			cfg := perceptronConfig()
			cfg.Drift.Enabled = on
			change(&cfg.Drift)
			var fe *learner.FieldError
			if err := cfg.Validate(); !errors.As(err, &fe) || fe.Field != field {
				t.Errorf("%s (enabled %v): got %v, want a FieldError on it", field, on, err)
			}
		}
	}
}

// TestDigestDrift: the digest of a state covers the detector's settings
// and state, and a state with the default settings and a fresh detector
// has the digest it had before detectors existed (TestDigestGolden).
func TestDigestDrift(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits = 12
	m := mustNew(t, cfg)
	xs := flipStream(1, 8000, 4000, cfg)
	for i := range xs {
		m.Learn(&xs[i])
	}
	base := m.State()
	if base.Detector.Drifts != 1 {
		t.Fatalf("%d drifts, want 1", base.Detector.Drifts)
	}
	for name, change := range map[string]func(*learner.State){
		"enabled":      func(st *learner.State) { st.Config.Drift.Enabled = false },
		"delta":        func(st *learner.State) { st.Config.Drift.Delta = 0.01 },
		"threshold":    func(st *learner.State) { st.Config.Drift.Threshold = 50 },
		"min_examples": func(st *learner.State) { st.Config.Drift.MinExamples = 30 },
		"n":            func(st *learner.State) { st.Detector.N++ },
		"low_n":        func(st *learner.State) { st.Detector.LowN++ },
		"mean":         func(st *learner.State) { st.Detector.Mean /= 2 },
		"low_mean":     func(st *learner.State) { st.Detector.LowMean /= 2 },
		"sum":          func(st *learner.State) { st.Detector.Sum-- },
		"low":          func(st *learner.State) { st.Detector.Low-- },
		"drifts":       func(st *learner.State) { st.Detector.Drifts++ },
	} {
		st := m.State()
		change(st)
		if st.Digest() == base.Digest() {
			t.Errorf("%s: the digest did not change", name)
		}
	}
	// A disabled detector with a fresh state is not the default: its
	// digest differs from the default's.
	fresh := mustNew(t, perceptronConfig()).State()
	off := mustNew(t, perceptronConfig()).State()
	off.Config.Drift.Enabled = false
	if fresh.Digest() == off.Digest() {
		t.Error("a disabled detector has the digest of the default one")
	}
}

// TestDigestDriftGolden pins part 6 of the encoding Digest documents
// on a new model's state with settings and a detector state of its own.
// The detector state is that of TestDigestGolden's model, which erred on
// its three labeled examples, after two drifts.
func TestDigestDriftGolden(t *testing.T) {
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
	var sum float64
	loss, mean := 1.0, 1.0
	for range 3 {
		sum += loss - mean - 0.05
	}
	d := learner.Detector{N: 3, LowN: 3, Mean: 1, LowMean: 1, Sum: sum, Low: sum}
	if got := m.State().Detector; got != d {
		t.Fatalf("detector %+v, want %+v", got, d)
	}
	st := mustNew(t, cfg).State()
	st.Config.Drift.Threshold = 50
	d.Drifts = 2
	st.Detector = d
	const want = "4b3c7d57755cd2c33f367c1fe1ebdef0dfb668cd6e5b05987f718fce211b90dc" // reproduced in Python from the documented encoding
	if got := st.StateSHA256(); got != want {
		t.Fatalf("state_sha256 = %s, want %s", got, want)
	}
}

// TestMixDetector: the mixed detector is the examples-weighted mean of
// the shards' statistics and the sum of their new drifts; it depends on
// the states in shard order only, and one shard mixes into itself.
func TestMixDetector(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits = 12
	xs := flipStream(3, 8000, 4000, cfg)
	base := mustNew(t, cfg)
	for i := range xs[:3000] {
		base.Learn(&xs[i])
	}
	b := base.State()
	// Three shards learn 3000, 2000 and 0 labeled examples from the base;
	// the first crosses the change, the second learns after it, and each
	// finds a drift.
	shard := func(from, to int) *learner.State {
		s, _ := learnRange(t, b, xs[from:to])
		return s
	}
	s0, s1, s2 := shard(3000, 6000), shard(6000, 8000), shard(0, 0)
	if s0.Detector.Drifts != 1 || s1.Detector.Drifts != 1 {
		t.Fatalf("drifts %d and %d, want 1 and 1", s0.Detector.Drifts, s1.Detector.Drifts)
	}
	states := []*learner.State{s0, s1, s2}
	out, err := learner.Mix(b, states, learner.MixWeightsOf(learner.MixExamples, b, states))
	if err != nil {
		t.Fatal(err)
	}
	d0, d1 := s0.Detector, s1.Detector
	want := learner.Detector{
		Mean:   0.6*d0.Mean + 0.4*d1.Mean,
		Sum:    0.6*d0.Sum + 0.4*d1.Sum,
		Drifts: 2,
	}
	if out.Detector.Mean != want.Mean || out.Detector.Sum != want.Sum || out.Detector.Drifts != want.Drifts {
		t.Fatalf("mixed detector %+v, want mean %v, sum %v, drifts %v", out.Detector, want.Mean, want.Sum, want.Drifts)
	}
	if n := 0.6*float64(d0.N) + 0.4*float64(d1.N); float64(out.Detector.N) < n-0.5 || float64(out.Detector.N) > n+0.5 {
		t.Fatalf("mixed n %d, want %v rounded", out.Detector.N, n)
	}
	again, err := learner.Mix(b, states, learner.MixWeightsOf(learner.MixExamples, b, states))
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest() != out.Digest() {
		t.Fatal("mixing the same states twice gave two models")
	}
	if one, err := learner.Mix(b, []*learner.State{s0}, []float64{1}); err != nil || one.Digest() != s0.Digest() {
		t.Fatalf("one shard does not mix into itself (err %v)", err)
	}
	if _, err := learner.Restore(out); err != nil {
		t.Fatalf("the mixed state does not restore: %v", err)
	}
}
