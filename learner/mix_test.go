package learner_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// tiny is a valid, empty state of cfg with 4 weights per class.
func tiny(t *testing.T, cfg learner.Config) *learner.State {
	t.Helper()
	cfg.HashBits = 2
	return mustNew(t, cfg).State()
}

func mustMix(t *testing.T, states []*learner.State, weights []float64) *learner.State {
	t.Helper()
	out, err := learner.Mix(states, weights)
	if err != nil {
		t.Fatalf("Mix: %v", err)
	}
	if err := out.Validate(); err != nil {
		t.Fatalf("the mixed state does not validate: %v", err)
	}
	return out
}

func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// TestMixOneStateIsIdentity: one state mixes into a copy of itself, bit
// for bit, for every algorithm and whatever its weight.
func TestMixOneStateIsIdentity(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			st := trained(t, cfg, 1, 300)
			want := st.Digest()
			out := mustMix(t, []*learner.State{st}, []float64{0.3})
			if out.Digest() != want {
				t.Fatal("Mix of one state changed it")
			}
			if len(out.Bias) > 0 {
				out.Bias[0]++
			}
			if st.Digest() != want {
				t.Fatal("the mixed state shares memory with its input")
			}
		})
	}
}

// TestMixIdenticalStates: states with the same bits mix into the same
// weights, whatever the weighting, and into a valid state; kernel models
// refuse.
func TestMixIdenticalStates(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			a, b := trained(t, cfg, 1, 300), trained(t, cfg, 1, 300)
			out, err := learner.Mix([]*learner.State{a, b}, []float64{1, 3})
			if cfg.Algorithm == learner.Kernel {
				if err == nil || !strings.Contains(err.Error(), "partition scope") {
					t.Fatalf("kernel: got %v, want an error naming the partition scope", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := out.Validate(); err != nil {
				t.Fatal(err)
			}
			w, bias := a.Effective()
			ow, obias := out.Effective()
			switch cfg.Algorithm {
			case learner.Averaged:
				// Weights keep their bits; the averaged model is the same
				// up to rounding.
				if !sameBits(out.Weights, a.Weights) || !sameBits(out.Bias, a.Bias) {
					t.Fatal("identical states mixed into other weights")
				}
				for i := range w {
					if math.Abs(ow[i]-w[i]) > 1e-9*(1+math.Abs(w[i])) {
						t.Fatalf("averaged weight %d: %v, want %v", i, ow[i], w[i])
					}
				}
			default:
				if !sameBits(ow, w) || !sameBits(obias, bias) {
					t.Fatal("identical states mixed into other weights")
				}
				if cfg.Algorithm == learner.AROW && !sameBits(out.Variance, a.Variance) {
					t.Fatal("identical states mixed into other variances")
				}
			}
			if out.Examples != 2*a.Examples || out.Labeled != 2*a.Labeled || out.Mistakes != 2*a.Mistakes || out.R2 != a.R2 {
				t.Fatalf("counters %d %d %d %v, want twice %d %d %d and %v", out.Examples, out.Labeled, out.Mistakes, out.R2, a.Examples, a.Labeled, a.Mistakes, a.R2)
			}
		})
	}
}

// TestMixIsDeterministic: the same states in the same order give the same
// bits. Another order need not (float64 sums are not associative), which
// is why Mix sums in shard order.
func TestMixIsDeterministic(t *testing.T) {
	for name, cfg := range configs() {
		if cfg.Algorithm == learner.Kernel {
			continue
		}
		t.Run(name, func(t *testing.T) {
			states := []*learner.State{trained(t, cfg, 1, 300), trained(t, cfg, 2, 200), trained(t, cfg, 3, 250)}
			weights := []float64{0.1, 0.7, 0.2}
			first := mustMix(t, states, weights).Digest()
			for range 3 {
				if mustMix(t, states, weights).Digest() != first {
					t.Fatal("the same mix gave other bits")
				}
			}
			// Restoring and learning on from a mix works.
			m, err := learner.Restore(mustMix(t, states, weights))
			if err != nil {
				t.Fatal(err)
			}
			xs := streamFor(cfg, 9, 50)
			for i := range xs {
				m.Learn(&xs[i])
			}
			if err := m.State().Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMixPerceptronMean: a uniform and a weighted mix of two perceptrons,
// computed by hand.
func TestMixPerceptronMean(t *testing.T) {
	a, b := tiny(t, learner.DefaultConfig()), tiny(t, learner.DefaultConfig())
	a.Weights, a.Bias = []float64{1, 2, 0, 0}, []float64{0.5}
	b.Weights, b.Bias = []float64{3, -1, 0, 0.5}, []float64{1.5}
	a.Examples, a.Labeled, a.Mistakes, a.R2 = 10, 8, 3, 2
	b.Examples, b.Labeled, b.Mistakes, b.R2 = 5, 5, 1, 7
	out := mustMix(t, []*learner.State{a, b}, []float64{1, 1})
	if !sameBits(out.Weights, []float64{2, 0.5, 0, 0.25}) || !sameBits(out.Bias, []float64{1}) {
		t.Fatalf("uniform mix: weights %v bias %v, want [2 0.5 0 0.25] [1]", out.Weights, out.Bias)
	}
	if out.Examples != 15 || out.Labeled != 13 || out.Mistakes != 4 || out.R2 != 7 {
		t.Fatalf("counters %d %d %d %v, want 15 13 4 7", out.Examples, out.Labeled, out.Mistakes, out.R2)
	}
	out = mustMix(t, []*learner.State{a, b}, []float64{1, 3})
	if !sameBits(out.Weights, []float64{2.5, 0.25*2 + 0.75*-1, 0, 0.375}) || !sameBits(out.Bias, []float64{1.25}) {
		t.Fatalf("1:3 mix: weights %v bias %v", out.Weights, out.Bias)
	}
	// A weight of 0 leaves the model to the others.
	out = mustMix(t, []*learner.State{a, b}, []float64{0, 2})
	if !sameBits(out.Weights, b.Weights) || !sameBits(out.Bias, b.Bias) || out.Examples != 15 {
		t.Fatalf("0:2 mix: weights %v bias %v examples %d", out.Weights, out.Bias, out.Examples)
	}
}

// TestMixAROWPrecision: AROW mixes each coordinate by precision μ/σ.
// Coordinate 0: σ = (1, 0.25), w = (1, 2), μ = (½, ½): precisions 0.5 and
// 2, so w = (0.5·1 + 2·2)/2.5 = 1.8 and σ = 1/2.5 = 0.4. Coordinate 1:
// σ = (0.5, 0.5), w = (4, -2): the plain mean 1, σ = 0.5. Coordinate 2: a
// variance of 0 is certain: w = 3, σ = 0. The bias: σ = (1, 1), b = (1, 3):
// b = 2, σ = 1.
func TestMixAROWPrecision(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.Algorithm = learner.AROW
	a, b := tiny(t, cfg), tiny(t, cfg)
	a.Weights, a.Variance, a.Bias, a.VarianceBias = []float64{1, 4, 7, 0}, []float64{1, 0.5, 0.5, 1}, []float64{1}, 1
	b.Weights, b.Variance, b.Bias, b.VarianceBias = []float64{2, -2, 3, 0}, []float64{0.25, 0.5, 0, 1}, []float64{3}, 1
	out := mustMix(t, []*learner.State{a, b}, []float64{1, 1})
	if !sameBits(out.Weights, []float64{1.8, 1, 3, 0}) || !sameBits(out.Variance, []float64{0.4, 0.5, 0, 1}) {
		t.Fatalf("weights %v variances %v, want [1.8 1 3 0] [0.4 0.5 0 1]", out.Weights, out.Variance)
	}
	if !sameBits(out.Bias, []float64{2}) || out.VarianceBias != 1 {
		t.Fatalf("bias %v variance %v, want 2 and 1", out.Bias, out.VarianceBias)
	}
}

// TestMixPegasosEffective: Pegasos mixes the weights it predicts with,
// scale·v, and returns scale 1 with ‖v‖² recomputed.
func TestMixPegasosEffective(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.Algorithm = learner.Pegasos
	a, b := tiny(t, cfg), tiny(t, cfg)
	a.Weights, a.Bias, a.Scale, a.VNorm2 = []float64{2, 0, 4, 0}, []float64{2}, 0.5, 24
	b.Weights, b.Bias, b.Scale, b.VNorm2 = []float64{3, 1, 0, 0}, []float64{0}, 1, 10
	out := mustMix(t, []*learner.State{a, b}, []float64{1, 1})
	if !sameBits(out.Weights, []float64{2, 0.5, 1, 0}) || !sameBits(out.Bias, []float64{0.5}) || out.Scale != 1 || out.VNorm2 != 4+0.25+1+0.25 {
		t.Fatalf("weights %v bias %v scale %v vnorm2 %v", out.Weights, out.Bias, out.Scale, out.VNorm2)
	}
}

// TestMixAveraged: the mixed averaged perceptron predicts with the
// weighted mean of the averaged models.
func TestMixAveraged(t *testing.T) {
	cfg := configs()["averaged"]
	a, b := trained(t, cfg, 1, 300), trained(t, cfg, 2, 100)
	out := mustMix(t, []*learner.State{a, b}, []float64{1, 3})
	wa, ba := a.Effective()
	wb, bb := b.Effective()
	w, bias := out.Effective()
	for i := range w {
		if want := 0.25*wa[i] + 0.75*wb[i]; math.Abs(w[i]-want) > 1e-9*(1+math.Abs(want)) {
			t.Fatalf("averaged weight %d = %v, want %v", i, w[i], want)
		}
	}
	if want := 0.25*ba[0] + 0.75*bb[0]; math.Abs(bias[0]-want) > 1e-9*(1+math.Abs(want)) {
		t.Fatalf("averaged bias = %v, want %v", bias[0], want)
	}
	if out.Labeled != a.Labeled+b.Labeled {
		t.Fatalf("labeled %d, want %d", out.Labeled, a.Labeled+b.Labeled)
	}
}

// TestMixMulticlass: a multiclass model mixes each class's vector.
func TestMixMulticlass(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.Classes = []string{"a", "b", "c"}
	a, b := tiny(t, cfg), tiny(t, cfg)
	for i := range a.Weights {
		a.Weights[i], b.Weights[i] = float64(i), float64(3*i)
	}
	a.Bias, b.Bias = []float64{1, 2, 3}, []float64{3, 2, 1}
	out := mustMix(t, []*learner.State{a, b}, []float64{1, 1})
	for i, w := range out.Weights {
		if w != float64(2*i) {
			t.Fatalf("weight %d = %v, want %v", i, w, float64(2*i))
		}
	}
	if !sameBits(out.Bias, []float64{2, 2, 2}) {
		t.Fatalf("bias %v, want [2 2 2]", out.Bias)
	}
}

// TestMixWindow: the mixed window is that of the state with the most
// labeled examples.
func TestMixWindow(t *testing.T) {
	cfg := learner.DefaultConfig()
	a, b := tiny(t, cfg), tiny(t, cfg)
	a.Examples, a.Labeled = 3, 3
	b.Examples, b.Labeled = 5, 5
	b.Window[4], b.WindowNext = true, 5
	out := mustMix(t, []*learner.State{a, b}, []float64{1, 1})
	if !out.Window[4] || out.WindowNext != 5 {
		t.Fatalf("window next %d, want b's", out.WindowNext)
	}
}

func TestMixErrors(t *testing.T) {
	cfg := learner.DefaultConfig()
	kernel := cfg
	kernel.Algorithm = learner.Kernel
	batch := cfg
	batch.Batch = 4
	other := func(change func(*learner.Config)) *learner.State {
		c := cfg
		change(&c)
		return tiny(t, c)
	}
	pending := tiny(t, batch)
	pending.PendingIndex, pending.PendingValue = []uint32{1}, []float64{0.5}
	invalid := tiny(t, cfg)
	invalid.Bias = nil
	for _, c := range []struct {
		name    string
		states  []*learner.State
		weights []float64
		want    string
	}{
		{"empty", nil, nil, "no states"},
		{"lengths", []*learner.State{tiny(t, cfg)}, []float64{1, 1}, "1 states but 2 weights"},
		{"nil", []*learner.State{nil}, []float64{1}, "state 0 is nil"},
		{"invalid", []*learner.State{tiny(t, cfg), invalid}, []float64{1, 1}, "state 1: state bias"},
		{"eta", []*learner.State{tiny(t, cfg), other(func(c *learner.Config) { c.Eta = 2 })}, []float64{1, 1}, "config eta differs"},
		{"classes", []*learner.State{other(func(c *learner.Config) { c.Classes = []string{"a", "b"} }), other(func(c *learner.Config) { c.Classes = []string{"b", "a"} })}, []float64{1, 1}, "config classes differs"},
		{"negative", []*learner.State{tiny(t, cfg), tiny(t, cfg)}, []float64{1, -1}, "weight 1 must be a finite number >= 0"},
		{"nan", []*learner.State{tiny(t, cfg)}, []float64{math.NaN()}, "weight 0 must be"},
		{"inf", []*learner.State{tiny(t, cfg)}, []float64{math.Inf(1)}, "weight 0 must be"},
		{"zero", []*learner.State{tiny(t, cfg), tiny(t, cfg)}, []float64{0, 0}, "positive, finite sum"},
		{"overflowing sum", []*learner.State{tiny(t, cfg), tiny(t, cfg)}, []float64{math.MaxFloat64, math.MaxFloat64}, "positive, finite sum"},
		{"kernel", []*learner.State{tiny(t, kernel), tiny(t, kernel)}, []float64{1, 1}, "kernel models cannot be mixed in global scope with more than one shard"},
		{"pending", []*learner.State{tiny(t, batch), pending}, []float64{1, 1}, "state 1 has a pending mini-batch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := learner.Mix(c.states, c.weights)
			if err == nil || out != nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, %v; want an error containing %q", out, err, c.want)
			}
		})
	}
	// The configuration's own errors stay inspectable.
	bad := tiny(t, cfg)
	bad.Config.HashBits = 0
	var fe *learner.FieldError
	if _, err := learner.Mix([]*learner.State{bad}, []float64{1}); !errors.As(err, &fe) || fe.Field != "hash_bits" {
		t.Fatalf("got %v, want a *FieldError naming hash_bits", err)
	}
}
