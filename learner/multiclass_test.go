package learner_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// multiclassAlgorithms is every algorithm with a multiclass form.
var multiclassAlgorithms = []learner.Algorithm{
	learner.Perceptron, learner.Averaged, learner.Margin, learner.PA, learner.PA1, learner.PA2, learner.Pegasos, learner.AROW,
}

// multiclassConfigs is a four-class model of every multiclass algorithm at
// its defaults over 2^8 weights per class, and AROW and Pegasos without a
// bias.
func multiclassConfigs() map[string]learner.Config {
	out := map[string]learner.Config{}
	for _, a := range multiclassAlgorithms {
		c := perceptronConfig()
		c.HashBits = 8
		c.Algorithm = a
		c.Classes = []string{"red", "green", "blue", "gray"}
		out[string(a)] = c
	}
	for _, a := range []learner.Algorithm{learner.AROW, learner.Pegasos} {
		c := out[string(a)]
		c.Classes = slices.Clone(c.Classes)
		c.Bias = learner.BiasNone
		out[string(a)+"/none"] = c
	}
	return out
}

// prototypes is a separable multiclass stream over 2^bits weights: each
// class owns 8 features, and an example holds 3 of its class's features
// of value 1 and 4 shared noise features of value ±0.2 (whose total is at
// most 0.8 against the class's 3), every one labeled.
func prototypes(seed uint64, n, bits, classes int) []learner.Example {
	r := rand.New(rand.NewPCG(seed, 2))
	d := 1 << bits
	own := make([][]uint32, classes)
	for c := range own {
		for range 8 {
			own[c] = append(own[c], uint32(r.IntN(d/2)))
		}
	}
	xs := make([]learner.Example, n)
	for e := range xs {
		x := &xs[e]
		c := r.IntN(classes)
		for range 3 {
			x.Add(own[c][r.IntN(8)], 1)
		}
		for range 4 {
			v := 0.2
			if r.IntN(2) == 0 {
				v = -v
			}
			x.Add(uint32(d/2+r.IntN(d/2)), v)
		}
		x.Labeled, x.Label = true, c
	}
	return xs
}

// TestMulticlassLearnsSeparable: every multiclass algorithm at its
// defaults learns a separable stream of five classes, making few mistakes
// once it has seen a few hundred examples.
func TestMulticlassLearnsSeparable(t *testing.T) {
	for _, a := range multiclassAlgorithms {
		t.Run(string(a), func(t *testing.T) {
			cfg := perceptronConfig()
			cfg.Algorithm, cfg.HashBits = a, 10
			cfg.Classes = []string{"a", "b", "c", "d", "e"}
			xs := prototypes(7, 4000, cfg.HashBits, len(cfg.Classes))
			m := mustNew(t, cfg)
			var late int
			for i := range xs {
				if o := m.Learn(&xs[i]); !o.Correct && i >= 1000 {
					late++
				}
			}
			st := m.State()
			t.Logf("%d mistakes in all, %d after the first 1000 examples", st.Mistakes, late)
			if late > 30 {
				t.Fatalf("%d mistakes over the last 3000 examples of a separable stream", late)
			}
			if st.Mistakes < 5 {
				t.Fatalf("%d mistakes in all: the stream is too easy to say anything", st.Mistakes)
			}
		})
	}
}

// TestMulticlassRestoreContinuesExactly exports the state mid-stream,
// restores it and continues: bit-identical to an uninterrupted run.
func TestMulticlassRestoreContinuesExactly(t *testing.T) {
	for name, cfg := range multiclassConfigs() {
		t.Run(name, func(t *testing.T) {
			xs := streamFor(cfg, 11, 1500)
			whole := mustNew(t, cfg)
			var wholeOut []learner.Outcome
			for i := range xs {
				wholeOut = append(wholeOut, strip(whole.Learn(&xs[i])))
			}
			for _, cut := range []int{1, 333, 1499} {
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
				if second.State().Digest() != whole.State().Digest() || !reflect.DeepEqual(second.State(), whole.State()) {
					t.Fatalf("cut at %d: final state differs from the uninterrupted run", cut)
				}
			}
			if whole.Version() == 0 {
				t.Fatal("the stream caused no update: the test says nothing")
			}
		})
	}
}

// TestMulticlassAROWStep checks one step of multiclass AROW by hand: from
// a new model of three classes, x = (1, 2) labeled 2 scores 0 for every
// class, so the best other class is 0 (the lowest index). The confidence
// is (1+4)·(1+1) + 2 biases = 12, β = 1/(12+r) = 1/13, α = (1−0)·β; class
// 2 gains α·σ·x, class 0 loses it, and their variances shrink by β·σ²·x²;
// class 1 is untouched.
func TestMulticlassAROWStep(t *testing.T) {
	cfg := perceptronConfig()
	cfg.Algorithm, cfg.HashBits, cfg.Classes, cfg.AROWR = learner.AROW, 2, []string{"a", "b", "c"}, 1
	m := mustNew(t, cfg)
	x := learner.Example{Index: []uint32{0, 1}, Value: []float64{1, 2}, Labeled: true, Label: 2}
	if o := m.Learn(&x); !o.Updated || o.Correct {
		t.Fatalf("outcome %+v: want a mistake and an update", o)
	}
	st := m.State()
	a := 1.0 / 13
	// Weights[i*3+c]: features 0 and 1, classes 0, 1, 2; features 2 and 3 untouched.
	wantW := []float64{-a, 0, a, -2 * a, 0, 2 * a, 0, 0, 0, 0, 0, 0}
	wantV := []float64{12.0 / 13, 1, 12.0 / 13, 9.0 / 13, 1, 9.0 / 13, 1, 1, 1, 1, 1, 1}
	for i := range wantW {
		if !near(st.Weights[i], wantW[i]) || !near(st.Variance[i], wantV[i]) {
			t.Fatalf("weight %d: %v with variance %v, want %v and %v", i, st.Weights[i], st.Variance[i], wantW[i], wantV[i])
		}
	}
	if !near(st.Bias[0], -a) || st.Bias[1] != 0 || !near(st.Bias[2], a) {
		t.Fatalf("biases %v, want [%v 0 %v]", st.Bias, -a, a)
	}
	if !near(st.VarianceBiases[0], 12.0/13) || st.VarianceBiases[1] != 1 || !near(st.VarianceBiases[2], 12.0/13) {
		t.Fatalf("bias variances %v, want [12/13 1 12/13]", st.VarianceBiases)
	}
	if st.VarianceBias != 0 {
		t.Fatalf("a multiclass model's VarianceBias is %v, want 0 (unused)", st.VarianceBias)
	}
	// Learning x again moves its margin towards 1, which AROW
	// approaches from below.
	last := 0.0
	for range 20 {
		o := m.Learn(&x)
		if !(o.Margin > last && o.Margin < 1) {
			t.Fatalf("outcome %+v: the margin went from %v to %v, want it rising towards 1", o, last, o.Margin)
		}
		last = o.Margin
	}
	if last < 0.99 {
		t.Fatalf("margin %v after 21 steps, want near 1", last)
	}
}

// TestMulticlassPegasosStep checks the first step of multiclass Pegasos by
// hand: with λ = 0.5, x = (1) labeled 1 moves class 1 by x/λ = 2 and
// class 0 (the best other, on a tie) by −2, biases too; ‖v‖² = 16 exceeds
// 1/λ, so the scale projects onto the ball: √(1/(λ·16)).
func TestMulticlassPegasosStep(t *testing.T) {
	cfg := perceptronConfig()
	cfg.Algorithm, cfg.HashBits, cfg.Lambda, cfg.Classes = learner.Pegasos, 2, 0.5, []string{"a", "b", "c"}
	m := mustNew(t, cfg)
	x := learner.Example{Index: []uint32{0}, Value: []float64{1}, Labeled: true, Label: 1}
	m.Learn(&x)
	st := m.State()
	if !sameBits(st.Weights[:3], []float64{-2, 2, 0}) || !sameBits(st.Bias, []float64{-2, 2, 0}) || st.VNorm2 != 16 {
		t.Fatalf("v %v, bias %v, ‖v‖² %v: want [-2 2 0] twice and 16", st.Weights[:3], st.Bias, st.VNorm2)
	}
	if want := math.Sqrt(1 / (0.5 * 16)); !near(st.Scale, want) {
		t.Fatalf("scale %v, want %v", st.Scale, want)
	}
	p := m.Predict(&x)
	if p.Label != 1 || !near(p.Scores[1], 4*st.Scale) || !near(p.Scores[0], -4*st.Scale) || p.Scores[2] != 0 {
		t.Fatalf("prediction %+v: want class 1 with the scaled scores ±%v", p, 4*st.Scale)
	}
}

// TestMulticlassMix: the shards' models of every multiclass algorithm mix
// under every rule into a valid state of the right shape that restores
// and goes on learning, and a mix of shards that learned disjoint halves
// of a separable stream predicts it as well as a model learned from all
// of it nearly does.
func TestMulticlassMix(t *testing.T) {
	rules := []learner.MixRule{learner.MixMean, learner.MixDamped, learner.MixTouched, learner.MixAROW}
	for _, rule := range rules {
		for name, cfg := range multiclassConfigs() {
			if rule == learner.MixAROW && cfg.Algorithm != learner.AROW {
				continue
			}
			t.Run(string(rule)+"/"+name, func(t *testing.T) {
				k, d := len(cfg.Classes), cfg.Dimension()
				base := trained(t, cfg, 1, 200)
				states := shardsOf(t, base, []uint64{2, 3, 4}, []int{40, 70, 55})
				w := learner.MixWeightsOf(learner.MixExamples, base, states)
				out := mustMixRule(t, rule, base, states, w)
				if len(out.Weights) != d*k || len(out.Bias) != k {
					t.Fatalf("%d weights and %d biases, want %d and %d", len(out.Weights), len(out.Bias), d*k, k)
				}
				if cfg.Algorithm == learner.AROW {
					if len(out.Variance) != d*k || len(out.VarianceBiases) != k {
						t.Fatalf("%d variances and %d bias variances, want %d and %d", len(out.Variance), len(out.VarianceBiases), d*k, k)
					}
					// Every rule gives a bias variance at most the
					// largest of the participants'.
					for c := range k {
						top := 0.0
						for _, st := range states {
							top = math.Max(top, st.VarianceBiases[c])
						}
						if out.VarianceBiases[c] > top {
							t.Fatalf("class %d: bias variance %v above every shard's (at most %v)", c, out.VarianceBiases[c], top)
						}
					}
				}
				want := base.Labeled
				for _, st := range states {
					want += st.Labeled - base.Labeled
				}
				if out.Labeled != want {
					t.Fatalf("labeled %d, want %d", out.Labeled, want)
				}
				if rule == learner.MixMean {
					// Two identical shards mix into their parameters.
					twin := mustMixRule(t, rule, base, []*learner.State{states[0], states[0]}, []float64{1, 1})
					// (The averaged perceptron's sums count both shards'
					// vectors: its raw weights are compared.)
					tw, tb := twin.Weights, twin.Bias
					sw, sb := states[0].Weights, states[0].Bias
					if cfg.Algorithm == learner.Pegasos {
						tw, tb = twin.Effective()
						sw, sb = states[0].Effective()
					}
					if !sameBits(tw, sw) || !sameBits(tb, sb) {
						t.Fatal("two identical shards: the weights are not theirs")
					}
					if cfg.Algorithm == learner.AROW && (!sameBits(twin.Variance, states[0].Variance) || !sameBits(twin.VarianceBiases, states[0].VarianceBiases)) {
						t.Fatal("two identical shards: the variances are not theirs")
					}
				}
				m, err := learner.Restore(out)
				if err != nil {
					t.Fatalf("Restore of the mix: %v", err)
				}
				xs := streamFor(cfg, 5, 100)
				for i := range xs {
					m.Learn(&xs[i])
				}
				if err := m.State().Validate(); err != nil {
					t.Fatalf("after learning on from the mix: %v", err)
				}
			})
		}
	}
	for _, rule := range rules {
		for _, a := range multiclassAlgorithms {
			if rule == learner.MixAROW && a != learner.AROW {
				continue
			}
			t.Run("separable/"+string(rule)+"/"+string(a), func(t *testing.T) {
				cfg := perceptronConfig()
				cfg.Algorithm, cfg.HashBits = a, 10
				cfg.Classes = []string{"a", "b", "c", "d", "e"}
				xs := prototypes(8, 3000, cfg.HashBits, len(cfg.Classes))
				base := mustNew(t, cfg).State()
				left, _ := learnRange(t, base, xs[:1000])
				right, _ := learnRange(t, base, xs[1000:2000])
				out := mustMixRule(t, rule, base, []*learner.State{left, right}, []float64{1, 1})
				m, err := learner.Restore(out)
				if err != nil {
					t.Fatal(err)
				}
				seq, _ := learnRange(t, base, xs[:2000])
				one, err := learner.Restore(seq)
				if err != nil {
					t.Fatal(err)
				}
				var wrong, seqWrong int
				for i := 2000; i < len(xs); i++ {
					if m.Predict(&xs[i]).Label != xs[i].Label {
						wrong++
					}
					if one.Predict(&xs[i]).Label != xs[i].Label {
						seqWrong++
					}
				}
				t.Logf("%d of 1000 held-out examples wrong, %d learned sequentially", wrong, seqWrong)
				if wrong > 20 && wrong > 2*seqWrong {
					t.Fatalf("the mix of two shards gets %d of 1000 held-out examples wrong", wrong)
				}
			})
		}
	}
}

// TestMulticlassValidation: every algorithm but the kernel takes three or
// more classes; the kernel's error names the field and lists the
// algorithms that do.
func TestMulticlassValidation(t *testing.T) {
	for _, a := range multiclassAlgorithms {
		cfg := perceptronConfig()
		cfg.Algorithm, cfg.Classes = a, []string{"a", "b", "c"}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	cfg := perceptronConfig()
	cfg.Algorithm, cfg.Classes = learner.Kernel, []string{"a", "b", "c"}
	err := cfg.Validate()
	var fe *learner.FieldError
	if !errors.As(err, &fe) || fe.Field != "classes" {
		t.Fatalf("kernel with three classes: %v, want a FieldError of classes", err)
	}
	for _, want := range []string{"kernel", "binary", "perceptron, averaged, margin, pa, pa1, pa2, pegasos or arow"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	cfg.Classes = []string{"a", "b"}
	if err := cfg.Validate(); err != nil {
		t.Errorf("kernel with two classes: %v", err)
	}
}

// TestMulticlassAROWStateValidate: a multiclass AROW state has a variance
// per weight and one per class's bias, each in [0, 1]; Validate names the
// part that is wrong.
func TestMulticlassAROWStateValidate(t *testing.T) {
	cfg := multiclassConfigs()["arow"]
	good := trained(t, cfg, 3, 100)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, field string
		spoil       func(*learner.State)
	}{
		{"one variance per feature", "variance", func(s *learner.State) { s.Variance = s.Variance[:cfg.Dimension()] }},
		{"no bias variances", "variance_biases", func(s *learner.State) { s.VarianceBiases = nil }},
		{"a bias variance short", "variance_biases", func(s *learner.State) { s.VarianceBiases = s.VarianceBiases[1:] }},
		{"bias variance above 1", "variance_biases", func(s *learner.State) { s.VarianceBiases[2] = 1.5 }},
		{"bias variance negative", "variance_biases", func(s *learner.State) { s.VarianceBiases[0] = -0.1 }},
		{"bias variance NaN", "variance_biases", func(s *learner.State) { s.VarianceBiases[1] = math.NaN() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := trained(t, cfg, 3, 100)
			tt.spoil(st)
			err := st.Validate()
			var se *learner.StateError
			if !errors.As(err, &se) || se.Field != tt.field {
				t.Fatalf("Validate: %v, want a StateError of %s", err, tt.field)
			}
			if _, err := learner.Restore(st); err == nil {
				t.Fatal("Restore took the state")
			}
		})
	}
}

// TestBinaryAROWStateHasNoBiasVariances: a binary model keeps its bias
// variance in VarianceBias, as before multiclass AROW existed, so that its
// snapshot and digest are unchanged.
func TestBinaryAROWStateHasNoBiasVariances(t *testing.T) {
	cfg := perceptronConfig()
	cfg.Algorithm, cfg.HashBits = learner.AROW, 8
	st := trained(t, cfg, 3, 200)
	if st.VarianceBiases != nil || len(st.Variance) != cfg.Dimension() || !(st.VarianceBias < 1) {
		t.Fatalf("bias variances %v, %d variances, bias variance %v", st.VarianceBiases, len(st.Variance), st.VarianceBias)
	}
}

// TestMulticlassDigestCoversBiasVariances: the digest of a multiclass AROW
// state changes with each bias variance.
func TestMulticlassDigestCoversBiasVariances(t *testing.T) {
	st := trained(t, multiclassConfigs()["arow"], 3, 100)
	d := st.Digest()
	for c := range st.VarianceBiases {
		v := st.VarianceBiases[c]
		st.VarianceBiases[c] = math.Nextafter(v, 0)
		if st.Digest() == d {
			t.Fatalf("bias variance %d changed and the digest did not", c)
		}
		st.VarianceBiases[c] = v
	}
}

// BenchmarkLearnMulticlass is BenchmarkLearn for four classes of every
// multiclass algorithm: one op is one example, predict then learn.
func BenchmarkLearnMulticlass(b *testing.B) {
	for _, a := range multiclassAlgorithms {
		b.Run(string(a)+"-4", func(b *testing.B) {
			cfg := perceptronConfig()
			cfg.Algorithm, cfg.Classes = a, []string{"a", "b", "c", "d"}
			benchmarkLearn(b, cfg, 4)
		})
	}
}
