package learner_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// TestProbabilities: every prediction of every configuration carries a
// probability in [0, 1]; a multiclass one's Probabilities sum to 1 and
// Probability is the predicted class's; a binary one has none. Predict
// and a View taken at the same moment give the same bits as Learn.
func TestProbabilities(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			m := mustNew(t, cfg)
			xs := streamFor(cfg, 3, 600)
			var s learner.Scratch
			for i := range xs {
				v := m.View()
				p := m.Predict(&xs[i])
				pp := append([]float64(nil), p.Probabilities...)
				vp := v.Predict(&xs[i], &s)
				o := m.Learn(&xs[i])
				if math.Float64bits(o.Probability) != math.Float64bits(p.Probability) || math.Float64bits(vp.Probability) != math.Float64bits(p.Probability) ||
					!reflect.DeepEqual(o.Probabilities, pp) || !reflect.DeepEqual(vp.Probabilities, pp) {
					t.Fatalf("example %d: Learn %v %v, Predict %v %v, View %v %v", i, o.Probability, o.Probabilities, p.Probability, pp, vp.Probability, vp.Probabilities)
				}
				if !(o.Probability >= 0 && o.Probability <= 1) {
					t.Fatalf("example %d: probability %v", i, o.Probability)
				}
				if !cfg.Multiclass() {
					if o.Probabilities != nil {
						t.Fatalf("example %d: a binary model gave probabilities %v", i, o.Probabilities)
					}
					continue
				}
				var sum float64
				for c, q := range o.Probabilities {
					if !(q >= 0 && q <= 1) {
						t.Fatalf("example %d: class %d has probability %v", i, c, q)
					}
					sum += q
				}
				if math.Abs(sum-1) > 1e-12 || o.Probability != o.Probabilities[o.Label] {
					t.Fatalf("example %d: probabilities %v sum to %v", i, o.Probabilities, sum)
				}
			}
		})
	}
}

// calibrationAfter is the expected calibration error (10 equal-width
// bins) of the probabilities Learn published for the labeled examples of
// xs from index from on, and their mean log-loss; with raw, of σ(score)
// instead (a binary model).
func calibrationAfter(m *learner.Model, xs []learner.Example, from int, raw bool) (ece, logLoss float64) {
	var count, events, sum [10]float64
	var n float64
	for i := range xs {
		o := m.Learn(&xs[i])
		if !o.Labeled || i < from {
			continue
		}
		p, event := o.Probability, o.Correct
		if !m.Config().Multiclass() {
			event = xs[i].Label > 0
		}
		if raw {
			p = 1 / (1 + math.Exp(-o.Score))
		}
		b := min(int(p*10), 9)
		count[b]++
		sum[b] += p
		q := p
		if event {
			events[b]++
		} else {
			q = 1 - p
		}
		if m.Config().Multiclass() {
			q = o.Probabilities[xs[i].Label]
		}
		logLoss -= math.Log(max(q, 1e-15))
		n++
	}
	for b := range count {
		ece += math.Abs(events[b] - sum[b])
	}
	return ece / n, logLoss / n
}

// calibrationCase is an algorithm, binary (classes 0) or with classes
// classes, whose calibration a test measures.
type calibrationCase struct {
	alg     learner.Algorithm
	classes int
}

func (c calibrationCase) name() string {
	if c.classes > 0 {
		return string(c.alg) + "/multiclass"
	}
	return string(c.alg)
}

// stream is c's configuration over 2^18 weights and the first n examples
// of synth's stream of seed 1 over vocab features, with c's classes.
func (c calibrationCase) stream(vocab, n int) (learner.Config, []learner.Example) {
	o := synth.DefaultOptions()
	o.Vocab, o.Seed, o.Classes = vocab, 1, c.classes
	cfg := perceptronConfig()
	cfg.HashBits, cfg.Algorithm = 18, c.alg
	for k := range c.classes {
		cfg.Classes = append(cfg.Classes, string(rune('a'+k)))
	}
	return cfg, genStream(o, n, cfg).xs
}

// TestCalibrationError: on the synthetic stream (40 of 100,000 features,
// 5% label noise, 2^18 weights), the probabilities published after the
// first 10,000 examples have a calibration error of at most 0.02 for the
// perceptron family, AROW and a multiclass model, and no more than that
// of σ(score), which for the perceptron and the averaged perceptron is
// off by more than 0.05.
func TestCalibrationError(t *testing.T) {
	const n, from = 40000, 10000
	for _, c := range []calibrationCase{{learner.AROW, 0}, {learner.Perceptron, 0}, {learner.PA1, 0}, {learner.Averaged, 0}, {learner.Perceptron, 4}} {
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			cfg, xs := c.stream(100000, n)
			ece, logLoss := calibrationAfter(mustNew(t, cfg), xs, from, false)
			t.Logf("calibration error %.4f, log-loss %.4f", ece, logLoss)
			if ece > 0.02 {
				t.Errorf("calibration error %.4f after %d examples, want at most 0.02", ece, from)
			}
			if c.classes == 0 {
				raw, rawLoss := calibrationAfter(mustNew(t, cfg), xs, from, true)
				t.Logf("σ(score): calibration error %.4f, log-loss %.4f", raw, rawLoss)
				if ece > raw || (raw < 0.05 && (c.alg == learner.Perceptron || c.alg == learner.Averaged)) {
					t.Errorf("σ(score) has calibration error %.4f and log-loss %.4f", raw, rawLoss)
				}
			}
		})
	}
}

// TestProbabilityMetrics: Metrics' log-loss, Brier score, calibration
// error and AUC, over the stream and the window, are those computed here
// from the published probabilities.
func TestProbabilityMetrics(t *testing.T) {
	for _, classes := range []int{0, 4} {
		cfg := perceptronConfig()
		cfg.HashBits, cfg.Window = 10, 300
		for k := range classes {
			cfg.Classes = append(cfg.Classes, string(rune('a'+k)))
		}
		m := mustNew(t, cfg)
		xs := sparseStream(4, 2000, cfg.HashBits, 12, classes)
		type outcome struct {
			p, loss, brier float64
			event          bool
		}
		var all []outcome
		for i := range xs {
			o := m.Learn(&xs[i])
			if !o.Labeled {
				continue
			}
			y := xs[i].Label
			var r outcome
			if classes == 0 {
				t := 0.0
				if y > 0 {
					t = 1
				}
				r = outcome{p: o.Probability, event: y > 0, brier: (o.Probability - t) * (o.Probability - t)}
				r.loss = -math.Log(max(t*o.Probability+(1-t)*(1-o.Probability), 1e-15))
			} else {
				r = outcome{p: o.Probability, event: o.Label == y, loss: -math.Log(max(o.Probabilities[y], 1e-15))}
				for c, q := range o.Probabilities {
					if c == y {
						q--
					}
					r.brier += q * q
				}
			}
			all = append(all, r)
		}
		measures := func(rs []outcome) (loss, brier, ece, auc float64) {
			var count, events, sum [10]float64
			var pos, neg, wins float64
			for _, r := range rs {
				loss += r.loss
				brier += r.brier
				b := min(int(r.p*10), 9)
				count[b]++
				sum[b] += r.p
				if r.event {
					events[b]++
					pos++
				} else {
					neg++
				}
			}
			for b := range count {
				ece += math.Abs(events[b] - sum[b])
			}
			for _, a := range rs {
				for _, b := range rs {
					if a.event && !b.event {
						switch {
						case a.p > b.p:
							wins++
						case a.p == b.p:
							wins += 0.5
						}
					}
				}
			}
			n := float64(len(rs))
			return loss / n, brier / n, ece / n, wins / (pos * neg)
		}
		got := m.Metrics()
		loss, brier, ece, auc := measures(all)
		rl, rb, re, ra := measures(all[len(all)-cfg.Window:])
		near := func(a, b, tol float64) bool { return math.Abs(a-b) <= tol }
		if !near(got.LogLoss, loss, 1e-9) || !near(got.Brier, brier, 1e-9) || !near(got.CalibrationError, ece, 1e-9) ||
			!near(got.RollingLogLoss, rl, 1e-9) || !near(got.RollingBrier, rb, 1e-9) || !near(got.RollingCalibrationError, re, 1e-9) {
			t.Errorf("classes %d: metrics %+v, want log-loss %v, Brier %v, calibration error %v, rolling %v, %v, %v", classes, got, loss, brier, ece, rl, rb, re)
		}
		if classes > 0 {
			if got.AUC != 0 || got.RollingAUC != 0 {
				t.Errorf("a multiclass model has AUC %v and rolling AUC %v", got.AUC, got.RollingAUC)
			}
			continue
		}
		// The stream's AUC counts pairs in one of 1,024 bins as ties.
		if !near(got.AUC, auc, 0.002) || !near(got.RollingAUC, ra, 1e-12) || auc < 0.55 {
			t.Errorf("AUC %v, rolling %v; want %v, %v", got.AUC, got.RollingAUC, auc, ra)
		}
	}
}

// TestCalibrationResumes: a state taken mid-stream restores to a model
// whose probabilities and metrics go on bit for bit, and a state without
// calibration (one written before it existed) restores to a model that
// calibrates afresh: P(label = +1) of 1/2 until it learns.
func TestCalibrationResumes(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits = 10
	xs := streamFor(cfg, 5, 2000)
	whole := mustNew(t, cfg)
	var want []learner.Outcome
	for i := range xs {
		want = append(want, strip(whole.Learn(&xs[i])))
	}
	first := mustNew(t, cfg)
	for i := range xs[:700] {
		first.Learn(&xs[i])
	}
	st := first.State()
	if len(st.Calibration.Parameters) == 0 || st.Calibration.Count == 0 {
		t.Fatalf("a model that learned 700 examples has no calibration: %+v", st.Calibration)
	}
	second, err := learner.Restore(st)
	if err != nil {
		t.Fatal(err)
	}
	if second.Metrics() != first.Metrics() {
		t.Fatalf("restored metrics %+v, want %+v", second.Metrics(), first.Metrics())
	}
	for i := 700; i < len(xs); i++ {
		if o := strip(second.Learn(&xs[i])); !reflect.DeepEqual(o, want[i]) {
			t.Fatalf("example %d: %+v, uninterrupted %+v", i, o, want[i])
		}
	}
	if second.Metrics() != whole.Metrics() {
		t.Fatalf("metrics %+v, uninterrupted %+v", second.Metrics(), whole.Metrics())
	}

	old := first.State()
	old.Calibration = learner.Calibration{}
	fresh, err := learner.Restore(old)
	if err != nil {
		t.Fatal(err)
	}
	mt := fresh.Metrics()
	if p := fresh.Predict(&xs[700]); p.Probability != 0.5 || mt.LogLoss != 0 || mt.RollingLogLoss != 0 || mt.Accuracy != first.Metrics().Accuracy {
		t.Fatalf("a state without calibration: probability %v, metrics %+v", p.Probability, mt)
	}
	labeled := 0
	for i := 700; i < 800; i++ {
		if fresh.Learn(&xs[i]).Labeled {
			labeled++
		}
	}
	if c := fresh.State().Calibration; c.Count != uint64(labeled) || labeled == 0 || fresh.Metrics().RollingLogLoss == 0 {
		t.Fatalf("after %d labeled examples the calibration counts %d", labeled, c.Count)
	}
}

// TestCalibrationValidate: a calibration that does not fit the
// configuration or holds a number out of range is refused, naming its
// field.
func TestCalibrationValidate(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits = 6
	good := trained(t, cfg, 1, 200)
	for field, change := range map[string]func(*learner.Calibration){
		"calibration":        func(c *learner.Calibration) { c.Parameters = c.Parameters[1:] },
		"calibration_count":  func(c *learner.Calibration) { c.Count = 1 << 40 },
		"log_loss":           func(c *learner.Calibration) { c.LogLoss = math.NaN() },
		"brier":              func(c *learner.Calibration) { c.Brier = -1 },
		"calibration_bins":   func(c *learner.Calibration) { c.BinCount[3]++ },
		"auc":                func(c *learner.Calibration) { c.AUCPositive = nil },
		"window_probability": func(c *learner.Calibration) { c.WindowProbability[0] = 1.5 },
		"window_log_loss":    func(c *learner.Calibration) { c.WindowLogLoss[0] = math.Inf(1) },
		"window_brier":       func(c *learner.Calibration) { c.WindowBrier = c.WindowBrier[1:] },
	} {
		st := trained(t, cfg, 1, 200)
		change(&st.Calibration)
		err := st.Validate()
		var se *learner.StateError
		if !errors.As(err, &se) || (se.Field != field && !(field == "window_brier" && se.Field == "window_probability")) {
			t.Errorf("%s: got %v", field, err)
		}
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestDigestCalibration: an empty calibration adds nothing to the digest
// (a state written before calibration existed keeps its digest); any part
// of one changes it.
func TestDigestCalibration(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits = 6
	a := trained(t, cfg, 1, 200)
	for name, change := range map[string]func(*learner.Calibration){
		"parameters": func(c *learner.Calibration) { c.Parameters[2] = math.Nextafter(c.Parameters[2], 2) },
		"count":      func(c *learner.Calibration) { c.Count++ },
		"log_loss":   func(c *learner.Calibration) { c.LogLoss++ },
		"bins":       func(c *learner.Calibration) { c.BinEvents[5]++ },
		"auc":        func(c *learner.Calibration) { c.AUCNegative[9]++ },
		"window":     func(c *learner.Calibration) { c.WindowEvent[7] = !c.WindowEvent[7] },
	} {
		b := trained(t, cfg, 1, 200)
		change(&b.Calibration)
		if a.Digest() == b.Digest() {
			t.Errorf("%s: the digest did not change", name)
		}
	}
	b := trained(t, cfg, 1, 200)
	b.Calibration = learner.Calibration{}
	if a.Digest() == b.Digest() {
		t.Error("dropping the calibration left the digest unchanged")
	}
}

// TestMixCalibration: the calibrators' parameters mix by the mean
// weighted by the labeled examples each state learned beyond base, the
// measures add as the counters do, the window continues as the outcomes
// do, the result is the same bits every time, and one learner's mix is
// its own calibration.
func TestMixCalibration(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits, cfg.Window = 10, 50
	xs := streamFor(cfg, 8, 3000)
	base := mustNew(t, cfg)
	for i := range xs[:1000] {
		base.Learn(&xs[i])
	}
	b := base.State()
	shards := [][]learner.Example{xs[1000:1900], xs[1900:2200]}
	var states []*learner.State
	var n []float64
	for _, shard := range shards {
		m, err := learner.Restore(b)
		if err != nil {
			t.Fatal(err)
		}
		for i := range shard {
			m.Learn(&shard[i])
		}
		st := m.State()
		states = append(states, st)
		n = append(n, float64(st.Labeled-b.Labeled))
	}
	mixed, err := learner.Mix(b, states, []float64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := learner.Mix(b, states, []float64{1, 1})
	if mixed.Digest() != again.Digest() {
		t.Fatal("two mixes of the same states differ")
	}
	c := mixed.Calibration
	for i, v := range c.Parameters {
		want := n[0]/(n[0]+n[1])*states[0].Calibration.Parameters[i] + n[1]/(n[0]+n[1])*states[1].Calibration.Parameters[i]
		if math.Abs(v-want) > 1e-12*math.Max(1, math.Abs(want)) {
			t.Errorf("parameter %d is %v, want the examples-weighted mean %v", i, v, want)
		}
	}
	bc := &b.Calibration
	if want := bc.Count + (states[0].Calibration.Count - bc.Count) + (states[1].Calibration.Count - bc.Count); c.Count != want || c.Count != mixed.Labeled {
		t.Errorf("count %d, want %d (labeled %d)", c.Count, want, mixed.Labeled)
	}
	wantLoss := bc.LogLoss + (states[0].Calibration.LogLoss - bc.LogLoss) + (states[1].Calibration.LogLoss - bc.LogLoss)
	if math.Abs(c.LogLoss-wantLoss) > 1e-9 {
		t.Errorf("log-loss sum %v, want %v", c.LogLoss, wantLoss)
	}
	// The window ends with the last shard's last outcomes.
	last := states[1]
	for j := range cfg.Window {
		from := (last.WindowNext + cfg.Window - 1 - j) % cfg.Window
		to := (mixed.WindowNext + cfg.Window - 1 - j) % cfg.Window
		if c.WindowProbability[to] != last.Calibration.WindowProbability[from] || c.WindowEvent[to] != last.Calibration.WindowEvent[from] {
			t.Fatalf("window slot %d is not the last shard's", to)
		}
	}
	m, err := learner.Restore(mixed)
	if err != nil {
		t.Fatal(err)
	}
	if mt := m.Metrics(); !(mt.LogLoss > 0 && mt.AUC > 0.5 && mt.RollingLogLoss > 0) {
		t.Errorf("the mixed model's metrics %+v", mt)
	}

	// One learner: its own calibration, bit for bit, as a sequential
	// model's.
	idle, _ := learner.Restore(b)
	idle.Learn(&learner.Example{Index: []uint32{1}, Value: []float64{1}})
	one, err := learner.Mix(b, []*learner.State{states[0], idle.State()}, []float64{1, 0})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(one.Calibration, states[0].Calibration) {
		t.Error("a mix in which one state learned does not keep its calibration")
	}
}

// TestCalibrationAfterAnOutlier: two examples with a feature at 1e20,
// within learner.MaxValue, give scores some 1e19 times the others', after
// the first 100 labeled examples or among them.
// Neither the running mean of |s| that scales the calibrator's input (taken
// whole, it would divide every later score by ~1e16 and publish the prior
// for tens of thousands of examples) nor AdaGrad's sums (an input of
// maxInput would all but freeze the slope) may keep them: the
// probabilities after them are as good as without them, binary and
// multiclass.
func TestCalibrationAfterAnOutlier(t *testing.T) {
	const n, from = 30000, 10000
	for _, at := range []int{5000, 50} {
		for _, c := range []calibrationCase{{learner.Perceptron, 0}, {learner.Averaged, 0}, {learner.Pegasos, 0}, {learner.Perceptron, 4}} {
			testCalibrationAfterAnOutlier(t, c, n, at, from)
		}
	}
}

func testCalibrationAfterAnOutlier(t *testing.T, c calibrationCase, n, at, from int) {
	t.Helper()
	t.Run(fmt.Sprintf("%s/at_%d", c.name(), at), func(t *testing.T) {
		t.Parallel()
		cfg, clean := c.stream(10000, n)
		_, want := calibrationAfter(mustNew(t, cfg), clean, from, false)
		// The outliers' feature is one no other example has: what the
		// model learns of it touches no other score, and whatever
		// changes is the calibrator's doing.
		used := map[uint32]bool{}
		for _, x := range clean {
			for _, i := range x.Index {
				used[i] = true
			}
		}
		var unused uint32
		for used[unused] {
			unused++
		}
		_, xs := c.stream(10000, n)
		// Labels that alternate make the model learn the feature (a
		// mistake) and then score it at ~1e20 (the next).
		for i := at; i < at+4; i++ {
			xs[i].Index = append(append([]uint32(nil), xs[i].Index...), unused)
			xs[i].Value = append(append([]float64(nil), xs[i].Value...), 1e20)
			if c.classes > 0 {
				xs[i].Label = i % 2
			} else {
				xs[i].Label = 1 - 2*(i%2)
			}
		}
		ece, got := calibrationAfter(mustNew(t, cfg), xs, from, false)
		t.Logf("log-loss %.4f (%.4f without the outliers), calibration error %.4f", got, want, ece)
		if got > want+0.01 || ece > 0.02 {
			t.Errorf("after the outliers: log-loss %.4f, calibration error %.4f; without them log-loss %.4f", got, ece, want)
		}
	})
}

// TestCalibrationAfterAScorelessStart: a model without a bias whose
// first 150 labeled examples have no features scores them all 0, which
// tells the calibrator no scale. The probabilities that follow, once the
// examples have features, must be as good as on the stream without that
// start, binary and multiclass, for AROW and the perceptron.
func TestCalibrationAfterAScorelessStart(t *testing.T) {
	const n, from, empty = 20000, 5000, 150
	for _, c := range []calibrationCase{{learner.AROW, 0}, {learner.Perceptron, 0}, {learner.AROW, 4}} {
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			cfg, clean := c.stream(10000, n)
			cfg.Bias = learner.BiasNone
			_, want := calibrationAfter(mustNew(t, cfg), clean, from, false)
			_, xs := c.stream(10000, n)
			for i := range empty {
				xs[i].Index, xs[i].Value, xs[i].Dense = nil, nil, nil
			}
			ece, got := calibrationAfter(mustNew(t, cfg), xs, from, false)
			t.Logf("log-loss %.4f (%.4f with features from the start), calibration error %.4f", got, want, ece)
			if got > want+0.01 || ece > 0.02 {
				t.Errorf("after %d examples without features: log-loss %.4f, calibration error %.4f; with features from the start log-loss %.4f", empty, got, ece, want)
			}
		})
	}
}

// TestProbabilitiesWithoutFeatures: a model whose first examples have no
// features scores each by its bias alone, and that bias, moved up and
// down by the labels, can cancel to a rounding residue: with these labels
// AROW's fifth score is 5.6e-17 where the others are near 0.1. Such a
// score tells the calibrator no scale, as a score of 0 does; taken into
// the geometric mean of the first magnitudes, it shrank the scale a
// thousandfold, and the next scores, near -0.1, were published as
// probabilities of 2e-16 (a log-loss of 34 for the positive among them).
// A model that has seen no feature knows no more than the labels'
// frequency: its probabilities stay within [0.01, 0.99].
func TestProbabilitiesWithoutFeatures(t *testing.T) {
	labels := []int{1, 1, -1, -1, -1, -1, 1, -1, -1, 1, -1, 1, 1, -1, -1, 1}
	m := mustNew(t, learner.DefaultConfig())
	residue := false
	for i, y := range labels {
		o := m.Learn(&learner.Example{Labeled: true, Label: y})
		if o.Score != 0 && math.Abs(o.Score) < 1e-12 {
			residue = true
		}
		if !(o.Probability >= 0.01 && o.Probability <= 0.99) {
			t.Fatalf("example %d, without features, score %v: probability %v", i, o.Score, o.Probability)
		}
	}
	if !residue {
		t.Fatal("no score was a rounding residue: the stream no longer tests what it should")
	}
}

// TestProbabilitiesRankRareLabels: on a stream where one label is rare
// (1% of the examples, the rest separated from it by a hyperplane), nearly
// every Platt probability falls into one bin of the histogram. The
// probabilities must still rank the examples as the scores do, and tell
// more than the rare label's frequency: over the second half, their ROC
// AUC within 0.02 of the scores' and their log-loss at most 0.9 of the
// frequency's.
func TestProbabilitiesRankRareLabels(t *testing.T) {
	for _, a := range []learner.Algorithm{learner.AROW, learner.Perceptron} {
		for _, rare := range []int{1, -1} {
			t.Run(fmt.Sprintf("%s/rare_%d", a, rare), func(t *testing.T) {
				t.Parallel()
				cfg := learner.DefaultConfig()
				cfg.Algorithm = a
				m := mustNew(t, cfg)
				xs := rareLabels(40000, 0.01, rare)
				var scorePos, scoreNeg, probPos, probNeg []float64
				var logLoss float64
				positives := 0
				for i := range xs {
					o := m.Learn(&xs[i])
					if i < len(xs)/2 {
						continue
					}
					if xs[i].Label > 0 {
						positives++
						scorePos, probPos = append(scorePos, o.Score), append(probPos, o.Probability)
						logLoss -= math.Log(max(o.Probability, 1e-15))
					} else {
						scoreNeg, probNeg = append(scoreNeg, o.Score), append(probNeg, o.Probability)
						logLoss -= math.Log(max(1-o.Probability, 1e-15))
					}
				}
				n := float64(len(xs) - len(xs)/2)
				logLoss /= n
				f := float64(positives) / n
				prior := -(f*math.Log(f) + (1-f)*math.Log(1-f))
				byScore, byProb := pairwiseAUC(scorePos, scoreNeg), pairwiseAUC(probPos, probNeg)
				t.Logf("AUC %.4f by score, %.4f by probability; log-loss %.4f, the frequency's %.4f", byScore, byProb, logLoss, prior)
				if byProb < byScore-0.02 {
					t.Errorf("the probabilities rank with AUC %.4f, the scores with %.4f", byProb, byScore)
				}
				if logLoss > 0.9*prior {
					t.Errorf("log-loss %.4f, the rare label's frequency gives %.4f", logLoss, prior)
				}
			})
		}
	}
}

// rareLabels is n examples of 50 dense Gaussian features whose label is
// rare (the share given) beyond a hidden hyperplane: +1 there if rare is
// 1, -1 there if it is -1.
func rareLabels(n int, share float64, rare int) []learner.Example {
	r := rand.New(rand.NewPCG(7, 11))
	const d = 50
	w := make([]float64, d)
	for i := range w {
		w[i] = r.NormFloat64()
	}
	xs := make([]learner.Example, n)
	s := make([]float64, n)
	for i := range xs {
		x := learner.Example{Index: make([]uint32, d), Value: make([]float64, d), Labeled: true}
		for j := range d {
			x.Index[j], x.Value[j] = uint32(j), r.NormFloat64()
			s[i] += w[j] * x.Value[j]
		}
		xs[i] = x
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	threshold := sorted[int((1-share)*float64(n))]
	for i := range xs {
		xs[i].Label = -rare
		if s[i] > threshold {
			xs[i].Label = rare
		}
	}
	return xs
}
