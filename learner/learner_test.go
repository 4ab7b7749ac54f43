package learner_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

func mustNew(t testing.TB, cfg learner.Config) *learner.Model {
	t.Helper()
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// TestWorkedExample replays the worked example of seed 004 step by step:
// η = 0.1, the plain bias rule, from (w1, w2, w0) = (0.2, 0.0, -0.1).
func TestWorkedExample(t *testing.T) {
	cfg := perceptronConfig()
	cfg.Eta = 0.1
	cfg.HashBits = 2
	st := mustNew(t, cfg).State()
	st.Weights = []float64{0.2, 0.0, 0, 0}
	st.Bias = []float64{-0.1}
	m, err := learner.Restore(st)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		x        []float64
		y        int
		score    float64
		predict  int
		w1, w2   float64
		w0       float64
		mistaken bool
	}{
		// 0.2·1 + 0.0·1 - 0.1 = 0.1 >= 0: predicts +1, the label is -1.
		{x: []float64{1, 1}, y: -1, score: 0.1, predict: 1, w1: 0.1, w2: -0.1, w0: -0.2, mistaken: true},
		// 0.1·2 - 0.1·1 - 0.2 = -0.1 < 0: predicts -1, the label is +1.
		{x: []float64{2, 1}, y: 1, score: -0.1, predict: -1, w1: 0.3, w2: 0.0, w0: -0.1, mistaken: true},
		// 0.3·2 + 0.0·1 - 0.1 = 0.5: right, no update.
		{x: []float64{2, 1}, y: 1, score: 0.5, predict: 1, w1: 0.3, w2: 0.0, w0: -0.1},
	}
	const tol = 1e-12
	for i, s := range steps {
		o := m.Learn(&learner.Example{Dense: s.x, Labeled: true, Label: s.y})
		if math.Abs(o.Score-s.score) > tol || o.Label != s.predict || o.Correct == s.mistaken || o.Updated != s.mistaken {
			t.Errorf("step %d: got score %v, prediction %d, correct %v, updated %v; want %v, %d, %v, %v",
				i+1, o.Score, o.Label, o.Correct, o.Updated, s.score, s.predict, !s.mistaken, s.mistaken)
		}
		got := m.State()
		if math.Abs(got.Weights[0]-s.w1) > tol || math.Abs(got.Weights[1]-s.w2) > tol || math.Abs(got.Bias[0]-s.w0) > tol {
			t.Errorf("step %d: (w1, w2, w0) = (%v, %v, %v), want (%v, %v, %v)",
				i+1, got.Weights[0], got.Weights[1], got.Bias[0], s.w1, s.w2, s.w0)
		}
	}
	if mt := m.Metrics(); mt.Labeled != 3 || mt.Mistakes != 2 || mt.Updates != 2 {
		t.Errorf("metrics = %+v, want 3 labeled, 2 mistakes, 2 updates", mt)
	}
}

// TestNovikoffBound checks the Rosenblatt–Novikoff theorem of seed 000: on
// data separable with margin γ by a unit-norm hyperplane, the perceptron
// with the r2 bias rule makes at most (2R/γ)² updates, however many passes
// it takes to converge.
func TestNovikoffBound(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 2))
		d := 2 + int(seed%8)
		pts, w, b := separable(r, 300, d, 0.05+0.1*r.Float64())
		var radius, gamma float64 = 0, math.Inf(1)
		for _, p := range pts {
			radius = math.Max(radius, math.Sqrt(dotf(p.x, p.x)))
			gamma = math.Min(gamma, float64(p.y)*(dotf(w, p.x)+b))
		}
		cfg := perceptronConfig()
		cfg.Bias = learner.BiasR2
		cfg.HashBits = 4
		cfg.Eta = 0.5 + r.Float64()
		m := mustNew(t, cfg)
		converged := false
		for pass := 0; pass < 10000 && !converged; pass++ {
			before := m.Version()
			for _, p := range pts {
				m.Learn(p.example())
			}
			converged = m.Version() == before
		}
		bound := math.Pow(2*radius/gamma, 2)
		if !converged {
			t.Errorf("seed %d: no convergence on separable data after %d updates", seed, m.Version())
		}
		if u := float64(m.Version()); u > bound {
			t.Errorf("seed %d: %v updates exceed the Novikoff bound (2R/γ)² = %.1f (R=%.3f γ=%.4f)", seed, u, bound, radius, gamma)
		}
	}
}

// TestFreundSchapireBound checks the bound for data that is not
// separable: with margin slacks ξ_i = max(0, γ - y_i(w·x_i+b)) relative to
// a unit-norm reference hyperplane and D = ‖ξ‖, the first pass makes at
// most (2(R+D)/γ)² updates.
func TestFreundSchapireBound(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 3))
		d := 2 + int(seed%8)
		pts, w, b := separable(r, 500, d, 0)
		for i := range pts {
			if r.Float64() < 0.1 {
				pts[i].y = -pts[i].y
			}
		}
		gamma := 0.05 + 0.2*r.Float64()
		var radius, d2 float64
		for _, p := range pts {
			radius = math.Max(radius, math.Sqrt(dotf(p.x, p.x)))
			xi := math.Max(0, gamma-float64(p.y)*(dotf(w, p.x)+b))
			d2 += xi * xi
		}
		cfg := perceptronConfig()
		cfg.Bias = learner.BiasR2
		cfg.HashBits = 4
		m := mustNew(t, cfg)
		for _, p := range pts {
			m.Learn(p.example())
		}
		bound := math.Pow(2*(radius+math.Sqrt(d2))/gamma, 2)
		if u := float64(m.Version()); u > bound {
			t.Errorf("seed %d: %v first-pass updates exceed (2(R+D)/γ)² = %.1f", seed, u, bound)
		}
		if m.Version() == 0 {
			t.Errorf("seed %d: no updates at all on noisy data", seed)
		}
	}
}

// TestDualEqualsPrimal checks that the kernel perceptron with the linear
// kernel makes the primal perceptron's decisions, example by example. The
// features are small integers so that both orders of summation are exact.
func TestDualEqualsPrimal(t *testing.T) {
	for _, bias := range []learner.BiasRule{learner.BiasStandard, learner.BiasR2, learner.BiasNone} {
		t.Run(string(bias), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 7))
			cfg := perceptronConfig()
			cfg.Bias = bias
			cfg.HashBits = 6
			primal := mustNew(t, cfg)
			cfg.Algorithm = learner.Kernel
			cfg.Kernel = learner.LinearKernel
			cfg.Budget = 5000
			dual := mustNew(t, cfg)
			hidden := make([]float64, 64)
			for i := range hidden {
				hidden[i] = float64(r.IntN(7) - 3)
			}
			for e := range 2000 {
				x := learner.Example{Labeled: true}
				var f float64
				for _, i := range r.Perm(64)[:1+r.IntN(6)] {
					v := float64(r.IntN(9) - 4)
					x.Add(uint32(i), v)
					f += hidden[i] * v
				}
				x.Label = 1
				if f+1 < 0 {
					x.Label = -1
				}
				p, d := primal.Learn(&x), dual.Learn(&x)
				if p.Score != d.Score || p.Label != d.Label || p.Updated != d.Updated {
					t.Fatalf("example %d: primal (score %v, label %d, updated %v) != dual (%v, %d, %v)",
						e, p.Score, p.Label, p.Updated, d.Score, d.Label, d.Updated)
				}
			}
			if primal.Version() < 10 {
				t.Fatalf("only %d updates: the comparison says little", primal.Version())
			}
		})
	}
}

// TestLazyAveraging checks that the averaged perceptron's O(nnz) averaging
// equals the plain mean of the weight vectors w_0..w_T held after each
// labeled example, and that it predicts with that mean.
func TestLazyAveraging(t *testing.T) {
	for _, batch := range []int{1, 4} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			cfg := perceptronConfig()
			cfg.HashBits = 5
			cfg.Bias = learner.BiasR2
			cfg.Batch = batch
			cfg.Eta = 0.3
			plain := mustNew(t, cfg)
			cfg.Algorithm = learner.Averaged
			avg := mustNew(t, cfg)

			d := cfg.Dimension()
			sumW := make([]float64, d)
			var sumB float64
			vectors := 1 // w_0 = 0 is one of them
			const tol = 1e-9
			for e, x := range sparseStream(5, 800, cfg.HashBits, 6, 0) {
				if x.Labeled {
					meanW := make([]float64, d)
					for i := range meanW {
						meanW[i] = sumW[i] / float64(vectors)
					}
					want := sumB / float64(vectors)
					for j, i := range x.Index {
						want += meanW[i] * x.Value[j]
					}
					for i, v := range x.Dense {
						want += meanW[i] * v
					}
					if got := avg.Predict(&x).Score; math.Abs(got-want) > tol*(1+math.Abs(want)) {
						t.Fatalf("example %d: averaged score %v, mean of weight vectors gives %v", e, got, want)
					}
				}
				plain.Learn(&x)
				avg.Learn(&x)
				if !x.Labeled {
					continue
				}
				st := plain.State()
				for i, w := range st.Weights {
					sumW[i] += w
				}
				sumB += st.Bias[0]
				vectors++
			}
			st := avg.State()
			n := float64(st.Labeled + 1)
			for i := range sumW {
				lazy := st.Weights[i] - st.SumWeights[i]/n
				if naive := sumW[i] / float64(vectors); math.Abs(lazy-naive) > tol*(1+math.Abs(naive)) {
					t.Fatalf("weight %d: lazy average %v, naive %v", i, lazy, naive)
				}
			}
			if !reflect.DeepEqual(st.Weights, plain.State().Weights) {
				t.Fatal("averaged perceptron trained different weights from the perceptron")
			}
		})
	}
}

// configs covers every algorithm and the options that add state.
func configs() map[string]learner.Config {
	base := perceptronConfig()
	base.HashBits = 8
	out := map[string]learner.Config{}
	for _, a := range []learner.Algorithm{learner.Perceptron, learner.Averaged, learner.Margin, learner.PA, learner.PA1, learner.PA2, learner.Pegasos, learner.AROW, learner.Kernel} {
		c := base
		c.Algorithm = a
		out[string(a)] = c
	}
	c := base
	c.Bias, c.Schedule, c.Normalize = learner.BiasR2, learner.Inverse, true
	out["perceptron/r2/inverse/normalize"] = c
	c = base
	c.Algorithm, c.Batch, c.Schedule = learner.Averaged, 5, learner.InverseSqrt
	out["averaged/batch=5/inverse_sqrt"] = c
	c = base
	c.Algorithm, c.Batch = learner.Margin, 3
	out["margin/batch=3"] = c
	c = base
	c.Algorithm, c.Kernel, c.Degree, c.Budget, c.Bias = learner.Kernel, learner.PolynomialKernel, 3, 40, learner.BiasR2
	out["kernel/poly/budget=40"] = c
	c = base
	c.Algorithm, c.Kernel, c.Gamma, c.Budget = learner.Kernel, learner.RBFKernel, 0.5, 25
	out["kernel/rbf/budget=25"] = c
	c = base
	c.Algorithm, c.Bias = learner.Pegasos, learner.BiasNone
	c.Lambda = 0.01
	out["pegasos/none"] = c
	for _, a := range []learner.Algorithm{learner.Perceptron, learner.Averaged, learner.PA1} {
		c := base
		c.Algorithm = a
		c.Classes = []string{"red", "green", "blue", "gray"}
		out["multiclass/"+string(a)] = c
	}
	c = base
	c.Classes = []string{"ham", "spam"}
	c.Window = 17
	out["perceptron/named-classes/window=17"] = c
	return out
}

func streamFor(cfg learner.Config, seed uint64, n int) []learner.Example {
	classes := 0
	if cfg.Multiclass() {
		classes = len(cfg.Classes)
	}
	return sparseStream(seed, n, cfg.HashBits, 12, classes)
}

// TestRestoreContinuesExactly exports the state mid-stream, restores it
// and continues: the result must be bit-identical to an uninterrupted run,
// for every algorithm.
func TestRestoreContinuesExactly(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			xs := streamFor(cfg, 11, 1500)
			whole := mustNew(t, cfg)
			var wholeOut []learner.Outcome
			for i := range xs {
				wholeOut = append(wholeOut, strip(whole.Learn(&xs[i])))
			}
			for _, cut := range []int{1, 333, 734, 1499} {
				first := mustNew(t, cfg)
				for i := range xs[:cut] {
					first.Learn(&xs[i])
				}
				second, err := learner.Restore(first.State())
				if err != nil {
					t.Fatalf("Restore at %d: %v", cut, err)
				}
				for i := cut; i < len(xs); i++ {
					if o := strip(second.Learn(&xs[i])); !reflect.DeepEqual(o, wholeOut[i]) {
						t.Fatalf("cut at %d: example %d gave %+v, uninterrupted %+v", cut, i, o, wholeOut[i])
					}
				}
				if got, want := second.State(), whole.State(); !reflect.DeepEqual(got, want) {
					t.Fatalf("cut at %d: final state differs from the uninterrupted run", cut)
				}
				if got, want := second.Metrics(), whole.Metrics(); got != want {
					t.Fatalf("cut at %d: metrics %+v, uninterrupted %+v", cut, got, want)
				}
			}
			if whole.Version() == 0 {
				t.Fatal("the stream caused no update: the test says nothing")
			}
		})
	}
}

// strip copies the scores out of an outcome, whose Scores the model reuses.
func strip(o learner.Outcome) learner.Outcome {
	o.Scores = append([]float64(nil), o.Scores...)
	o.Probabilities = append([]float64(nil), o.Probabilities...)
	return o
}

// TestDeterminism runs every configuration twice from scratch.
func TestDeterminism(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			xs := streamFor(cfg, 3, 600)
			a, b := mustNew(t, cfg), mustNew(t, cfg)
			for i := range xs {
				a.Learn(&xs[i])
			}
			for i := range xs {
				b.Learn(&xs[i])
			}
			if !reflect.DeepEqual(a.State(), b.State()) {
				t.Fatal("two runs over the same stream differ")
			}
		})
	}
}

// TestLearns checks that every configuration beats chance clearly on a
// learnable stream: prequential accuracy over the second half.
func TestLearns(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			cfg.HashBits = 6
			if cfg.Algorithm == learner.Kernel {
				// A support set too small for the stream forgets faster
				// than it learns; the bounded set is tested elsewhere.
				cfg.Budget, cfg.Gamma = 3000, 0.02
			}
			xs := streamFor(cfg, 21, 6000)
			m := mustNew(t, cfg)
			var right, labeled int
			for i := range xs {
				o := m.Learn(&xs[i])
				if i >= len(xs)/2 && o.Labeled {
					labeled++
					if o.Correct {
						right++
					}
				}
			}
			chance := 0.5
			if cfg.Multiclass() {
				chance = 1 / float64(len(cfg.Classes))
			}
			margin := 0.2
			if cfg.Schedule == learner.Inverse {
				// η/t shrinks the steps so fast that learning is slow.
				margin = 0.1
			}
			acc := float64(right) / float64(labeled)
			if acc < chance+margin {
				t.Fatalf("accuracy %.3f over the second half, chance is %.2f", acc, chance)
			}
			t.Logf("accuracy %.3f", acc)
		})
	}
}

func TestUnlabeledNeverChangesTheModel(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			m := mustNew(t, cfg)
			xs := streamFor(cfg, 4, 300)
			for i := range xs {
				m.Learn(&xs[i])
			}
			before := m.State()
			x := xs[1]
			x.Labeled = false
			m.Learn(&x)
			after := m.State()
			if after.Examples != before.Examples+1 {
				t.Fatalf("examples %d, want %d", after.Examples, before.Examples+1)
			}
			after.Examples = before.Examples
			if !reflect.DeepEqual(before, after) {
				t.Fatal("an unlabeled example changed the model")
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits = 2
	cfg.Window = 2
	m := mustNew(t, cfg)
	learn := func(v float64, y int) { m.Learn(&learner.Example{Dense: []float64{v}, Labeled: true, Label: y}) }
	learn(1, -1) // f = 0 predicts +1: false positive; w = -1, b = -1
	learn(1, -1) // f = -2: true negative
	learn(-1, 1) // f = 0: true positive, yet y·f <= 0 updates: w = -2, b = 0
	learn(1, 1)  // f = -2: false negative
	m.Learn(&learner.Example{Dense: []float64{3}})
	got := m.Metrics()
	want := learner.Metrics{
		Examples: 5, Labeled: 4, Mistakes: 2, Updates: 3, R: 1,
		Accuracy: 0.5, RollingAccuracy: 0.5,
		TruePositives: 1, FalsePositives: 1, TrueNegatives: 1, FalseNegatives: 1,
	}
	// The probabilities' measures: TestProbabilityMetrics.
	if got.LogLoss <= 0 || got.Brier <= 0 || got.RollingLogLoss <= 0 {
		t.Errorf("log-loss %v, Brier %v, rolling log-loss %v: want positive", got.LogLoss, got.Brier, got.RollingLogLoss)
	}
	got.LogLoss, got.Brier, got.CalibrationError, got.AUC = 0, 0, 0, 0
	got.RollingLogLoss, got.RollingBrier, got.RollingCalibrationError, got.RollingAUC = 0, 0, 0, 0
	if got != want {
		t.Fatalf("metrics\n got %+v\nwant %+v", got, want)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		field  string
		modify func(*learner.Config)
	}{
		{"algorithm", func(c *learner.Config) { c.Algorithm = "svm" }},
		{"bias", func(c *learner.Config) { c.Bias = "big" }},
		{"bias", func(c *learner.Config) { c.Algorithm, c.Bias = learner.PA, learner.BiasR2 }},
		{"eta", func(c *learner.Config) { c.Eta = 0 }},
		{"eta", func(c *learner.Config) { c.Eta = math.NaN() }},
		{"eta", func(c *learner.Config) { c.Eta = 2 * learner.MaxValue }},
		{"schedule", func(c *learner.Config) { c.Schedule = "cosine" }},
		{"hash_bits", func(c *learner.Config) { c.HashBits = 0 }},
		{"hash_bits", func(c *learner.Config) { c.HashBits = 31 }},
		{"classes", func(c *learner.Config) { c.Classes = []string{"only"} }},
		{"classes", func(c *learner.Config) { c.Classes = []string{"a", "b", "a"} }},
		{"classes", func(c *learner.Config) { c.Classes = []string{"a", ""} }},
		{"classes", func(c *learner.Config) { c.Algorithm, c.Classes = learner.Kernel, []string{"a", "b", "c"} }},
		{"classes", func(c *learner.Config) { c.HashBits, c.Classes = 30, []string{"a", "b", "c"} }},
		{"batch", func(c *learner.Config) { c.Batch = 0 }},
		{"batch", func(c *learner.Config) { c.Algorithm, c.Batch = learner.AROW, 2 }},
		{"tau", func(c *learner.Config) { c.Tau = -1 }},
		{"c", func(c *learner.Config) { c.C = 0 }},
		{"lambda", func(c *learner.Config) { c.Lambda = math.Inf(1) }},
		{"lambda", func(c *learner.Config) { c.Lambda = 0.5 / learner.MaxValue }},
		{"arow_r", func(c *learner.Config) { c.AROWR = -2 }},
		{"kernel", func(c *learner.Config) { c.Kernel = "sigmoid" }},
		{"degree", func(c *learner.Config) { c.Degree = 0 }},
		{"gamma", func(c *learner.Config) { c.Gamma = 0 }},
		{"coef0", func(c *learner.Config) { c.Coef0 = -1 }},
		{"budget", func(c *learner.Config) { c.Budget = 0 }},
		{"window", func(c *learner.Config) { c.Window = 0 }},
	}
	for _, tc := range cases {
		cfg := perceptronConfig()
		tc.modify(&cfg)
		err := cfg.Validate()
		var fe *learner.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || fe.Problem == "" {
			t.Errorf("%+v: got %v, want an error on %s", cfg, err, tc.field)
		}
	}
	for name, cfg := range configs() {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestRestoreRejectsMismatchedState(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits = 4
	cases := map[string]func(*learner.State){
		"weights": func(s *learner.State) { s.Weights = s.Weights[:3] },
		"bias":    func(s *learner.State) { s.Bias = nil },
		"window":  func(s *learner.State) { s.Window = s.Window[:1] },
		"counters": func(s *learner.State) {
			s.Mistakes = 5
		},
	}
	for field, modify := range cases {
		st := mustNew(t, cfg).State()
		modify(st)
		_, err := learner.Restore(st)
		var se *learner.StateError
		if !errors.As(err, &se) || se.Field != field {
			t.Errorf("%s: got %v, want a state error on %s", field, err, field)
		}
	}
}

// TestHasherGolden pins the documented hash: docs/snapshot-format.md gives
// these values for implementations in other languages to check against.
func TestHasherGolden(t *testing.T) {
	h := learner.NewHasher(18, 0)
	cases := []struct {
		got, want uint32
	}{
		{learner.Index(h, "f1"), 247144},
		{learner.Index(h, "age"), 221202},
		{learner.CategoricalIndex(h, "color", "red"), 150802},
		{learner.Index(learner.NewHasher(18, 42), "age"), 38780},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d: index %d, want %d", i, c.got, c.want)
		}
	}
	if learner.CategoricalIndex(h, "color", "red") != learner.Index(h, "color=red") {
		t.Error("the categorical feature color/red must hash as the name color=red")
	}
	if learner.Index(h, []byte("age")) != learner.Index(h, "age") {
		t.Error("string and []byte names hash differently")
	}
}

// perceptronConfig is the configuration the tests of this package start
// from: learner.DefaultConfig with the perceptron, the algorithm their
// worked examples, golden digests and figures were made under. A test of
// another algorithm sets it, and TestDefaultConfig checks the default
// itself.
func perceptronConfig() learner.Config {
	cfg := learner.DefaultConfig()
	cfg.Algorithm = learner.Perceptron
	return cfg
}

// TestDefaultConfig checks the default learner: AROW at r = 10, binary,
// 2^18 weights, valid with or without classes, and a model of it learns.
func TestDefaultConfig(t *testing.T) {
	cfg := learner.DefaultConfig()
	if cfg.Algorithm != learner.AROW || cfg.AROWR != 10 || cfg.HashBits != 18 || cfg.Multiclass() {
		t.Fatalf("DefaultConfig() = %+v, want binary arow with arow_r 10 and hash_bits 18", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	multi := cfg
	multi.Classes = []string{"a", "b", "c"}
	if err := multi.Validate(); err != nil {
		t.Fatalf("the default with three classes: %v", err)
	}
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	x := learner.Example{Index: []uint32{3}, Value: []float64{1}, Labeled: true, Label: -1}
	m.Learn(&x)
	if out := m.Learn(&x); !out.Correct {
		t.Fatalf("the default learner did not learn a repeated example: %+v", out)
	}
}

// TestCanonical: a setting the algorithm does not read leaves the
// canonical form, and the state digest, as they were when its default was
// the perceptron's; a setting it reads stays.
func TestCanonical(t *testing.T) {
	old := perceptronConfig()
	old.AROWR = 1
	now := perceptronConfig()
	now.AROWR, now.Lambda, now.Tau = 10, 0.5, 3
	if !reflect.DeepEqual(old.Canonical(), now.Canonical()) {
		t.Fatalf("canonical %+v and %+v differ: the perceptron reads neither arow_r, lambda nor tau", old.Canonical(), now.Canonical())
	}
	if a, b := mustNew(t, old).State().Digest(), mustNew(t, now).State().Digest(); a != b {
		t.Fatal("the digests differ by settings the perceptron does not read")
	}
	for _, c := range []struct {
		name           string
		mutate, change func(*learner.Config)
	}{
		{"arow_r", func(c *learner.Config) { c.Algorithm, c.AROWR = learner.AROW, 3 }, func(c *learner.Config) { c.AROWR = 4 }},
		{"lambda", func(c *learner.Config) { c.Algorithm, c.Lambda = learner.Pegasos, 0.5 }, func(c *learner.Config) { c.Lambda = 0.25 }},
		{"tau", func(c *learner.Config) { c.Algorithm, c.Tau = learner.Margin, 3 }, func(c *learner.Config) { c.Tau = 4 }},
		{"c", func(c *learner.Config) { c.Algorithm, c.C = learner.PA2, 3 }, func(c *learner.Config) { c.C = 4 }},
		{"eta", func(c *learner.Config) { c.Eta = 0.5 }, func(c *learner.Config) { c.Eta = 0.25 }},
		{"degree", func(c *learner.Config) { c.Algorithm, c.Degree = learner.Kernel, 3 }, func(c *learner.Config) { c.Degree = 4 }},
	} {
		base := perceptronConfig()
		c.mutate(&base)
		changed := base
		c.change(&changed)
		if reflect.DeepEqual(base.Canonical(), changed.Canonical()) {
			t.Errorf("%s: %s reads it, but the canonical form hides it", c.name, base.Algorithm)
		}
	}
}

// TestValidateNewBoundsTheWindow: a configuration a user writes has a
// window of at most MaxWindow, allocated at once; a stored model's, which
// Validate checks, is never refused for its window.
func TestValidateNewBoundsTheWindow(t *testing.T) {
	cfg := perceptronConfig()
	cfg.Window = learner.MaxWindow
	if err := cfg.ValidateNew(); err != nil {
		t.Errorf("window %d: %v", cfg.Window, err)
	}
	cfg.Window = learner.MaxWindow + 1
	var fe *learner.FieldError
	if err := cfg.ValidateNew(); !errors.As(err, &fe) || fe.Field != "window" {
		t.Errorf("window %d: ValidateNew gave %v, want an error on window", cfg.Window, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("window %d: Validate, the check of a stored model, refuses it: %v", cfg.Window, err)
	}
}
