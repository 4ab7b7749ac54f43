package learner_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestLearnRefusesWhatItCannotLearn gives every model, directly (as a Go
// program would, past the decoders), the examples beyond the bounds: the
// 1e200 that once made R² infinite, infinities, NaN, importances out of
// range. Each is scored and counted as unlabeled, and the state stays one
// that a snapshot can hold.
func TestLearnRefusesWhatItCannotLearn(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	pills := map[string]learner.Example{
		"value 1e200":          {Index: []uint32{1}, Value: []float64{1e200}},
		"value 1e160":          {Index: []uint32{1, 2, 3}, Value: []float64{1e160, 1, -1e160}}, // ‖x‖² = 2e320
		"dense value -1e200":   {Dense: []float64{0, -1e200}},
		"value +Inf":           {Index: []uint32{1}, Value: []float64{inf}},
		"value NaN":            {Index: []uint32{1, 2}, Value: []float64{1, nan}},
		"dense NaN":            {Dense: []float64{nan}},
		"weight over MaxValue": {Index: []uint32{1}, Value: []float64{1}, Weight: 2 * learner.MaxValue},
		"weight +Inf":          {Index: []uint32{1}, Value: []float64{1}, Weight: inf},
		"weight NaN":           {Index: []uint32{1}, Value: []float64{1}, Weight: nan},
		"weight negative":      {Index: []uint32{1}, Value: []float64{1}, Weight: -1},
	}
	for name, cfg := range boundConfigs() {
		for pill, x := range pills {
			t.Run(name+"/"+pill, func(t *testing.T) {
				m := mustNew(t, cfg)
				xs := streamFor(cfg, 5, 50)
				for i := range xs {
					m.Learn(&xs[i])
				}
				before := m.State()
				x.Labeled, x.Label = true, 1
				if cfg.Multiclass() {
					x.Label = 0
				}
				if o := m.Learn(&x); o.Labeled || o.Updated {
					t.Fatalf("outcome %+v: the example was learned", o)
				}
				after := m.State()
				if after.Examples != before.Examples+1 {
					t.Fatalf("examples %d, want %d", after.Examples, before.Examples+1)
				}
				after.Examples = before.Examples
				if !reflect.DeepEqual(before, after) {
					t.Fatal("the example changed the model")
				}
				if err := after.Validate(); err != nil {
					t.Fatalf("the state is not valid: %v", err)
				}
			})
		}
	}
}

// boundConfigs are configs() and the settings that stress the arithmetic
// most: hyperparameters at the ends of what Validate accepts, no bias,
// high-degree kernels.
func boundConfigs() map[string]learner.Config {
	out := configs()
	base := perceptronConfig()
	base.HashBits = 8
	add := func(name string, modify func(*learner.Config)) {
		c := base
		modify(&c)
		out[name] = c
	}
	add("perceptron/r2/eta=MaxValue", func(c *learner.Config) { c.Bias, c.Eta = learner.BiasR2, learner.MaxValue })
	add("averaged/r2/eta=MaxValue", func(c *learner.Config) {
		c.Algorithm, c.Bias, c.Eta = learner.Averaged, learner.BiasR2, learner.MaxValue
	})
	add("averaged/batch=7/eta=MaxValue", func(c *learner.Config) {
		c.Algorithm, c.Batch, c.Eta = learner.Averaged, 7, learner.MaxValue
	})
	add("multiclass/averaged/r2/eta=MaxValue", func(c *learner.Config) {
		c.Algorithm, c.Bias, c.Eta, c.Classes = learner.Averaged, learner.BiasR2, learner.MaxValue, []string{"a", "b", "c"}
	})
	add("pa/none", func(c *learner.Config) { c.Algorithm, c.Bias = learner.PA, learner.BiasNone })
	add("pa1/none/C=1e300", func(c *learner.Config) { c.Algorithm, c.Bias, c.C = learner.PA1, learner.BiasNone, 1e300 })
	add("pa2/none/C=1e300", func(c *learner.Config) { c.Algorithm, c.Bias, c.C = learner.PA2, learner.BiasNone, 1e300 })
	add("pa2/C=1e-300", func(c *learner.Config) { c.Algorithm, c.C = learner.PA2, 1e-300 })
	add("multiclass/pa1/C=1e300", func(c *learner.Config) {
		c.Algorithm, c.C, c.Classes = learner.PA1, 1e300, []string{"a", "b", "c"}
	})
	add("arow/none/r=5e-324", func(c *learner.Config) { c.Algorithm, c.Bias, c.AROWR = learner.AROW, learner.BiasNone, 5e-324 })
	add("arow/r=1e300", func(c *learner.Config) { c.Algorithm, c.AROWR = learner.AROW, 1e300 })
	add("pegasos/lambda=1/MaxValue", func(c *learner.Config) { c.Algorithm, c.Lambda = learner.Pegasos, 1/learner.MaxValue })
	add("pegasos/none/lambda=1e300", func(c *learner.Config) {
		c.Algorithm, c.Bias, c.Lambda = learner.Pegasos, learner.BiasNone, 1e300
	})
	abc := func() []string { return []string{"a", "b", "c"} }
	add("multiclass/margin/r2/eta=MaxValue/tau=1e300", func(c *learner.Config) {
		c.Algorithm, c.Bias, c.Eta, c.Tau, c.Classes = learner.Margin, learner.BiasR2, learner.MaxValue, 1e300, abc()
	})
	add("multiclass/pa/none", func(c *learner.Config) { c.Algorithm, c.Bias, c.Classes = learner.PA, learner.BiasNone, abc() })
	add("multiclass/pa2/none/C=1e300", func(c *learner.Config) {
		c.Algorithm, c.Bias, c.C, c.Classes = learner.PA2, learner.BiasNone, 1e300, abc()
	})
	add("multiclass/pa2/C=1e-300", func(c *learner.Config) { c.Algorithm, c.C, c.Classes = learner.PA2, 1e-300, abc() })
	add("multiclass/arow/none/r=5e-324", func(c *learner.Config) {
		c.Algorithm, c.Bias, c.AROWR, c.Classes = learner.AROW, learner.BiasNone, 5e-324, abc()
	})
	add("multiclass/arow/r=5e-324", func(c *learner.Config) { c.Algorithm, c.AROWR, c.Classes = learner.AROW, 5e-324, abc() })
	add("multiclass/arow/r=1e300", func(c *learner.Config) { c.Algorithm, c.AROWR, c.Classes = learner.AROW, 1e300, abc() })
	add("multiclass/pegasos/lambda=1/MaxValue", func(c *learner.Config) {
		c.Algorithm, c.Lambda, c.Classes = learner.Pegasos, 1/learner.MaxValue, abc()
	})
	add("multiclass/pegasos/none/lambda=1e300", func(c *learner.Config) {
		c.Algorithm, c.Bias, c.Lambda, c.Classes = learner.Pegasos, learner.BiasNone, 1e300, abc()
	})
	add("kernel/poly/degree=16", func(c *learner.Config) {
		c.Algorithm, c.Kernel, c.Degree, c.Gamma, c.Coef0, c.Bias, c.Eta, c.Budget =
			learner.Kernel, learner.PolynomialKernel, 16, 1e10, 1e10, learner.BiasR2, learner.MaxValue, 30
	})
	add("kernel/rbf/gamma=1e300", func(c *learner.Config) {
		c.Algorithm, c.Kernel, c.Gamma, c.Bias, c.Budget = learner.Kernel, learner.RBFKernel, 1e300, learner.BiasR2, 30
	})
	add("kernel/linear/r2", func(c *learner.Config) {
		c.Algorithm, c.Bias, c.Eta, c.Budget = learner.Kernel, learner.BiasR2, learner.MaxValue, 30
	})
	return out
}

// adversary feeds a model examples at the bounds: values of magnitude
// MaxValue and of the smallest magnitudes, indices that repeat (as hash
// collisions make them), importances from the smallest to MaxValue, and
// labels against the model's current prediction, so that every example
// is a mistake with as large a loss as the model allows.
type adversary struct {
	r   *rand.Rand
	cfg learner.Config
	x   learner.Example
}

var magnitudes = []float64{learner.MaxValue, 1e15, 1, 1e-15, 1e-150, 1e-300, 5e-324}

func (a *adversary) next(m *learner.Model) *learner.Example {
	x := &a.x
	x.Reset()
	d := a.cfg.Dimension()
	n := 1 + a.r.IntN(12)
	base := uint32(a.r.IntN(d))
	for range n {
		i := base
		if a.r.IntN(3) == 0 {
			i = uint32(a.r.IntN(d))
		}
		v := magnitudes[a.r.IntN(len(magnitudes))]
		if a.r.IntN(2) == 0 {
			v = -v
		}
		x.Add(i, v)
	}
	if a.r.IntN(4) == 0 {
		for range 1 + a.r.IntN(3) {
			x.Dense = append(x.Dense, magnitudes[a.r.IntN(len(magnitudes))])
		}
	}
	x.Weight = []float64{0, learner.MaxValue, 3, 1e-300}[a.r.IntN(4)]
	p := m.Predict(x)
	x.Labeled = true
	switch {
	case a.cfg.Multiclass():
		x.Label = (p.Label + 1 + a.r.IntN(len(a.cfg.Classes)-1)) % len(a.cfg.Classes)
	case p.Score >= 0:
		x.Label = -1
	default:
		x.Label = 1
	}
	return x
}

// TestStateStaysFiniteAtTheBounds is the property MaxValue's argument
// proves: for every algorithm, at the ends of the hyperparameter ranges
// Validate accepts, a long stream of examples at the bounds, each labeled
// against the model, leaves every number of the state finite and every
// score of a learned example finite.
func TestStateStaysFiniteAtTheBounds(t *testing.T) {
	const n = 4000
	for name, cfg := range boundConfigs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := mustNew(t, cfg)
			a := &adversary{r: rand.New(rand.NewPCG(9, uint64(len(name)))), cfg: cfg}
			for e := range n {
				x := a.next(m)
				o := m.Learn(x)
				finiteScores := !math.IsNaN(o.Score) && !math.IsInf(o.Score, 0)
				for _, s := range o.Scores {
					finiteScores = finiteScores && !math.IsNaN(s) && !math.IsInf(s, 0)
				}
				// Every score is finite, a poly kernel's on an example
				// whose K(x,x) is beyond its bound (not learned) too.
				if !finiteScores {
					t.Fatalf("example %d: score %v, scores %v", e, o.Score, o.Scores)
				}
				// Whatever the scores, even infinite or NaN, the
				// probabilities are numbers in [0, 1].
				for _, p := range append([]float64{o.Probability}, o.Probabilities...) {
					if !(p >= 0 && p <= 1) {
						t.Fatalf("example %d: probability %v of scores %v, %v", e, p, o.Score, o.Scores)
					}
				}
				if e%500 == 499 {
					if err := m.State().Validate(); err != nil {
						t.Fatalf("after %d examples: %v", e+1, err)
					}
				}
			}
			st := m.State()
			if err := st.Validate(); err != nil {
				t.Fatal(err)
			}
			if st.Updates == 0 {
				t.Fatal("no update: the test says nothing")
			}
			if _, err := learner.Restore(st); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPolyKernelScoresBeyondItsBoundAreFinite: an example within MaxValue
// whose poly kernel with the support vectors overflows (degree 16, a value
// of 1e20) scored +Inf or -Inf against each of them, and NaN where support
// vectors of both labels met, which a prediction event published as
// "score": null. Its kernel values are clamped, so its score is a number,
// and the model does not learn it.
func TestPolyKernelScoresBeyondItsBoundAreFinite(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits = 8
	cfg.Algorithm, cfg.Kernel, cfg.Degree = learner.Kernel, learner.PolynomialKernel, 16
	m := mustNew(t, cfg)
	var x learner.Example
	for i := range 40 {
		x.Reset()
		y := 1 - 2*(i%2)
		x.Add(1, float64(y)*0.5)
		x.Add(2, 0.25)
		x.Label, x.Labeled = y, true
		m.Learn(&x)
	}
	if m.State().Updates < 2 {
		t.Fatal("fewer than two support vectors: the test says nothing")
	}
	for _, v := range []float64{1e20, -1e20, learner.MaxValue} {
		x.Reset()
		x.Add(1, v)
		if p := m.Predict(&x); math.IsNaN(p.Score) || math.IsInf(p.Score, 0) || !(p.Probability >= 0 && p.Probability <= 1) {
			t.Fatalf("value %g: score %v, probability %v", v, p.Score, p.Probability)
		}
		before := m.State().Updates
		x.Label, x.Labeled = 1, true
		if o := m.Learn(&x); math.IsNaN(o.Score) || math.IsInf(o.Score, 0) || o.Updated || m.State().Updates != before {
			t.Fatalf("value %g learned: score %v, updated %v", v, o.Score, o.Updated)
		}
	}
}

// TestPassiveAggressiveOvershootIsBounded replays the attack on the
// passive-aggressive step: an index repeated three times (two names that
// hash alike and a dense position, say) makes ‖x‖² count a third of the
// step's effect, so every update overshoots and, labeled against the
// model, doubles the weight: after about a thousand examples it was
// infinite. The step's length is now bounded, so the state stays finite.
func TestPassiveAggressiveOvershootIsBounded(t *testing.T) {
	for _, a := range []learner.Algorithm{learner.PA, learner.PA1, learner.PA2} {
		t.Run(string(a), func(t *testing.T) {
			cfg := perceptronConfig()
			cfg.Algorithm, cfg.Bias, cfg.HashBits, cfg.C = a, learner.BiasNone, 4, 1e300
			m := mustNew(t, cfg)
			x := learner.Example{Index: []uint32{3, 3}, Value: []float64{1, 1}, Dense: []float64{0, 0, 0, 1}, Labeled: true}
			for range 3000 {
				x.Label = 1
				if m.Predict(&x).Score >= 0 {
					x.Label = -1
				}
				m.Learn(&x)
			}
			st := m.State()
			if err := st.Validate(); err != nil {
				t.Fatal(err)
			}
			if w := st.Weights[3]; math.Abs(w) < 1e90 {
				t.Fatalf("weight %v: the attack did not work, the test says nothing", w)
			}
		})
	}
}

// TestAROWVarianceStaysNonNegative replays a case where AROW's variance
// update, σ - βσ²x² with β = 1/(σx² + r), rounds below zero: a negative
// variance makes the confidence negative and the next step unbounded.
func TestAROWVarianceStaysNonNegative(t *testing.T) {
	cfg := perceptronConfig()
	cfg.Algorithm, cfg.Bias, cfg.HashBits, cfg.AROWR = learner.AROW, learner.BiasNone, 2, 4.916460861021303
	st := mustNew(t, cfg).State()
	st.Variance[0] = 0.7450245991497949
	m, err := learner.Restore(st)
	if err != nil {
		t.Fatal(err)
	}
	m.Learn(&learner.Example{Dense: []float64{4.323669317460149e16}, Labeled: true, Label: 1})
	if v := m.State().Variance[0]; !(v >= 0) {
		t.Fatalf("variance %v", v)
	}
}

// TestValidateIsRestoresCheck: Validate refuses what Restore refuses,
// with the same error, and accepts every state a model exports.
func TestValidateIsRestoresCheck(t *testing.T) {
	for name, cfg := range configs() {
		m := mustNew(t, cfg)
		xs := streamFor(cfg, 2, 300)
		for i := range xs {
			m.Learn(&xs[i])
		}
		if err := m.State().Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	cfg := perceptronConfig()
	cfg.HashBits = 4
	for i, spoil := range []func(*learner.State){
		func(s *learner.State) { s.R2 = math.Inf(1) },
		func(s *learner.State) { s.Weights[2] = math.NaN() },
		func(s *learner.State) { s.Bias = nil },
		func(s *learner.State) { s.Config.Eta = 2 * learner.MaxValue },
	} {
		st := mustNew(t, cfg).State()
		spoil(st)
		_, restoreErr := learner.Restore(st)
		err := st.Validate()
		if err == nil || fmt.Sprint(err) != fmt.Sprint(restoreErr) {
			t.Errorf("case %d: Validate %v, Restore %v", i, err, restoreErr)
		}
	}
}

// TestRestoreRefusesStatesBeyondTheBounds: a state whose numbers are finite
// but beyond what learning within the bounds can reach (an r2 over
// MaxNorm2, an AROW variance outside [0, 1]) would let the next example
// overflow; Restore refuses it with the field named.
func TestRestoreRefusesStatesBeyondTheBounds(t *testing.T) {
	perceptron := perceptronConfig()
	perceptron.HashBits, perceptron.Bias = 4, learner.BiasR2
	arow := perceptronConfig()
	arow.HashBits, arow.Algorithm = 4, learner.AROW
	multiArow := arow
	multiArow.Classes = []string{"a", "b", "c"}
	for _, c := range []struct {
		cfg   learner.Config
		field string
		spoil func(*learner.State)
	}{
		{perceptron, "r2", func(s *learner.State) { s.R2 = 1e300 }},
		{arow, "variance", func(s *learner.State) { s.Variance[1] = -1 }},
		{arow, "variance", func(s *learner.State) { s.Variance[1] = 2 }},
		{multiArow, "variance_biases", func(s *learner.State) { s.VarianceBiases[1] = 2 }},
		{multiArow, "variance_biases", func(s *learner.State) { s.VarianceBiases[2] = -1 }},
	} {
		st := mustNew(t, c.cfg).State()
		c.spoil(st)
		_, err := learner.Restore(st)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: Restore gave %v, want an error naming %s", c.cfg.Algorithm, err, c.field)
		}
	}
}
