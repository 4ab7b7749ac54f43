package learner

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCalibratorAtTheBounds: whatever the scores (infinite, NaN, at the
// float's limits) and the calibrator's state, the probabilities are
// numbers in [0, 1], a multiclass model's summing to 1, and learning
// keeps the state finite and valid.
func TestCalibratorAtTheBounds(t *testing.T) {
	scores := []float64{0, 1, -1, 1e300, -1e300, math.MaxFloat64, -math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN(), 5e-324}
	for _, k := range []int{1, 3} {
		for _, a := range []float64{1, 1e300, -1e300, 0} {
			for _, m := range []float64{0, 5e-324, 1, 1e300} {
				c := newCalibrator(k)
				c.v[calA], c.v[calM], c.v[calN] = a, m, 1
				z, p := make([]float64, calibratorInputs(k)), make([]float64, k)
				in := make([]float64, k)
				for i := range scores {
					for j := range in {
						in[j] = scores[(i+j)%len(scores)]
					}
					c.probability(in, z, p)
					var sum float64
					for _, q := range p {
						if !(q >= 0 && q <= 1) {
							t.Fatalf("k %d, a %v, m %v: scores %v give probabilities %v", k, a, m, in, p)
						}
						sum += q
					}
					if k > 1 && math.Abs(sum-1) > 1e-12 {
						t.Fatalf("scores %v: probabilities %v sum to %v", in, p, sum)
					}
					y := 1
					if k > 1 {
						y = i % k
					}
					c.learn(in, z, p, y)
					if err := validCalibrator(c.v, k); err != nil {
						t.Fatalf("k %d, a %v, m %v: after scores %v: %v", k, a, m, in, err)
					}
				}
			}
		}
	}
}

// TestCalibratorFormat2: a binary calibrator written before the histogram
// summed the expected positives loads with each bin's count times its
// middle, where it publishes what it published before: (pos_j + κ·q)/(n_j + κ).
// A state whose bin expects more positives than it has examples is refused.
func TestCalibratorFormat2(t *testing.T) {
	old := make([]float64, calibratorLengthPositives)
	old[calN], old[calM], old[calA], old[calGA] = 5000, 1, 1.5, 30
	for j := range histogramBins {
		old[calPos+histogramBins+j] = float64(100 * (j + 1))
		old[calPos+j] = float64(7 * j)
	}
	if err := validCalibrator(old, 1); err != nil {
		t.Fatalf("a format-2 state is refused: %v", err)
	}
	c := newCalibrator(1)
	c.restore(old)
	if len(c.export()) != calibratorLength(1) {
		t.Fatalf("restored into %d values, want %d", len(c.export()), calibratorLength(1))
	}
	for j := range histogramBins {
		q := (float64(j) + 0.5) / histogramBins
		pos, n := old[calPos+j], old[calPos+histogramBins+j]
		got := c.chosen(withCorrections(&c, q, j))
		if want := (pos + histogramPrior*q) / (n + histogramPrior); math.Abs(got-want) > 1e-12 {
			t.Errorf("bin %d at its middle: %v, format 2 gave %v", j, got, want)
		}
	}
	bad := c.export()
	bad[calExp+3] = bad[calPos+histogramBins+3] + 1
	if err := validCalibrator(bad, 1); err == nil {
		t.Error("a bin expecting more positives than its examples is accepted")
	}
	if err := validCalibrator(old[:len(old)-1], 1); err == nil {
		t.Error("a state of neither length is accepted")
	}
}

// TestOddsCorrectedKeepsOrder: within a bin that has seen many examples,
// the odds correction rises with q and averages the bin's frequency of
// positives where Platt's q averaged otherwise.
func TestOddsCorrectedKeepsOrder(t *testing.T) {
	const n, pos, e = 10000, 100, 250 // Platt expected 2.5%, 1% came
	prev := -1.0
	var sum float64
	const steps = 1000
	for i := range steps {
		q := (float64(i) + 0.5) / steps / histogramBins
		p := oddsCorrected(q, pos, n, e)
		if !(p > prev) {
			t.Fatalf("q %v gives %v, not above %v", q, p, prev)
		}
		prev = p
		sum += p
	}
	if mean := sum / steps; math.Abs(mean-float64(pos)/n) > 0.002 {
		t.Errorf("the bin's probabilities average %v, its frequency is %v", mean, float64(pos)/n)
	}
}

// TestMixCalibratorFormat2: a state of format 2 mixes with one of format
// 3 as its upgrade would, into the current layout.
func TestMixCalibratorFormat2(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HashBits = 8
	base, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	learn := func(m *Model, from, n int) *State {
		for i := from; i < from+n; i++ {
			x := Example{Index: []uint32{uint32(i % 7), uint32(i % 11)}, Value: []float64{1, float64(i%3) - 1}, Labeled: true, Label: 1 - 2*(i%2)}
			m.Learn(&x)
		}
		return m.State()
	}
	b := learn(base, 0, 200)
	states := make([]*State, 2)
	for s, n := range []int{100, 300} {
		m, err := Restore(b)
		if err != nil {
			t.Fatal(err)
		}
		states[s] = learn(m, 200+1000*s, n)
	}
	// The first learner's calibrator as format 2 wrote it: without e_j.
	upgraded := upgradeCalibrator(states[0].Calibration.Parameters[:calibratorLengthPositives], 1)
	states[0].Calibration.Parameters = states[0].Calibration.Parameters[:calibratorLengthPositives]
	out := &State{Config: cfg}
	mixCalibration(out, b, states, false)
	got := out.Calibration.Parameters
	if len(got) != calibratorLength(1) {
		t.Fatalf("mixed into %d values, want %d", len(got), calibratorLength(1))
	}
	for j := range histogramBins {
		want := 0.25*upgraded[calExp+j] + 0.75*states[1].Calibration.Parameters[calExp+j]
		if math.Abs(got[calExp+j]-want) > 1e-9*(1+want) {
			t.Errorf("bin %d expects %v positives, want %v", j, got[calExp+j], want)
		}
	}
	mixCalibration(out, b, states[:1], false)
	if len(out.Calibration.Parameters) != calibratorLength(1) {
		t.Errorf("one learner of format 2 mixed into %d values", len(out.Calibration.Parameters))
	}
}

// TestCorrectedByTheBetter: a bin publishes the correction whose squared
// error on its examples was the lower. Over a bin of 20,000 examples whose q runs
// from 0 to 0.05 while the label is positive at 1% below q = 0.02 and at
// 5% above it, the odds correction must carry the bin; over one where the
// label is positive at 3% whatever q, the flat one.
func TestCorrectedByTheBetter(t *testing.T) {
	for _, c := range []struct {
		name     string
		rate     func(q float64) float64
		wantOdds bool
	}{
		{"rising", func(q float64) float64 { return map[bool]float64{true: 0.01, false: 0.05}[q < 0.02] }, true},
		{"flat", func(float64) float64 { return 0.03 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cal := newCalibrator(1)
			cal.v[calN], cal.v[calM] = outlierWarmup, 1
			r := rand.New(rand.NewPCG(3, 5))
			for range 20000 {
				q := r.Float64() * 0.05
				y := -1
				if r.Float64() < c.rate(q) {
					y = 1
				}
				// Scores of 0 leave Platt's a and b, and the scale, where
				// they are; q is the one given.
				flat, odds := cal.corrections(q, binOf(q, histogramBins))
				cal.learnBin(q, float64(max(y, 0)), flat, odds)
			}
			d := cal.v[calBrier]
			t.Logf("flat's squared error less odds' over the bin: %.4f", d)
			q := 0.04 // where the two corrections differ most
			flat, odds := cal.corrections(q, 0)
			want := map[bool]float64{true: odds, false: flat}[c.wantOdds]
			if got := cal.chosen(withCorrections(&cal, q, 0)); got != want || flat == odds {
				t.Errorf("d = %.4f: the bin publishes %v at q = %v, flat %v, odds %v (odds wanted: %v)", d, got, q, flat, odds, c.wantOdds)
			}
		})
	}
}

// TestSigmoidAsDocumented: σ's two forms, 1/(1 + e^−l) and e^l/(1 + e^l),
// round apart, and near the bins' edges they put q in different bins, so
// a reader that computes q in the other form publishes another bin's
// probability. docs/snapshot-format.md says which form is used where,
// and sigmoid is that.
func TestSigmoidAsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "snapshot-format.md"))
	if err != nil {
		t.Fatal(err)
	}
	const documented = "σ(l) = 1/(1 + e^−l) for l ≥ 0 and\n  e^l/(1 + e^l) for l < 0"
	if !strings.Contains(string(doc), documented) {
		t.Errorf("docs/snapshot-format.md does not say σ(l) = %s", documented)
	}
	apart := 0
	for j := 1; j < histogramBins; j++ {
		p := float64(j) / histogramBins
		l := math.Log(p / (1 - p))
		for range 40 {
			l = math.Nextafter(l, math.Inf(-1))
		}
		for range 81 {
			plain, split := 1/(1+math.Exp(-l)), 1/(1+math.Exp(-l))
			if l < 0 {
				split = math.Exp(l) / (1 + math.Exp(l))
			}
			if got := sigmoid(l); got != split {
				t.Errorf("σ(%v) = %v, the documented form gives %v", l, got, split)
			}
			if binOf(plain, histogramBins) != binOf(split, histogramBins) {
				apart++
			}
			l = math.Nextafter(l, math.Inf(1))
		}
	}
	if apart == 0 {
		t.Error("the two forms put every q near the edges in the same bin: the doc need not say which")
	}
}

// withCorrections is bin j's two corrections of q and j, for chosen.
func withCorrections(c *calibrator, q float64, j int) (flat, odds float64, bin int) {
	flat, odds = c.corrections(q, j)
	return flat, odds, j
}
