package learner_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestExactAUC: the AUC of every window and of the stream so far, windows
// merged as a learning curve merges them, equal the share of (positive,
// negative) pairs ranked right counted pair by pair, ties one half; with
// probabilities drawn from a few values, so that ties are many.
func TestExactAUC(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var a learner.ExactAUC
	var allPos, allNeg []float64
	for w, size := range []int{0, 1, 7, 300, 50, 1000} {
		var pos, neg []float64
		for range size {
			p := float64(rng.IntN(20)) / 19
			positive := rng.Float64() < p
			a.Add(p, positive)
			if positive {
				pos = append(pos, p)
			} else {
				neg = append(neg, p)
			}
		}
		allPos, allNeg = append(allPos, pos...), append(allNeg, neg...)
		window, overall := a.Window()
		if want := pairwiseAUC(pos, neg); window != want {
			t.Errorf("window %d: AUC %v, want %v", w, window, want)
		}
		if want := pairwiseAUC(allPos, allNeg); !closeTo(overall, want) {
			t.Errorf("after window %d: AUC %v, want %v", w, overall, want)
		}
	}
}

// TestExactAUCLargeWindow: a window large enough to be sorted on two
// goroutines gives the AUC that the same probabilities give in windows
// of 1,000, merged.
func TestExactAUCLargeWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var large, small learner.ExactAUC
	var overall float64
	for i := range 200_000 {
		p := rng.Float64()
		if i%3 == 0 {
			p = float64(rng.IntN(20)) / 19 // ties
		}
		positive := rng.Float64() < p
		large.Add(p, positive)
		small.Add(p, positive)
		if i%1000 == 999 {
			_, overall = small.Window()
		}
	}
	window, all := large.Window()
	if window != overall || all != overall {
		t.Errorf("one window of 200,000: AUC %v and %v over it, want %v as in windows of 1,000", window, all, overall)
	}
}

// TestCurveWindowsAreTheMetrics: a curve's window measures are the
// model's: over a window of the whole stream they are its measures over
// the stream (the AUC, exact, within the binned one's bound), over
// windows of Config.Window labeled examples its rolling ones; the last
// point is the model's Metrics, the points fall every window labeled
// examples, and a multiclass model's points have no AUC.
func TestCurveWindowsAreTheMetrics(t *testing.T) {
	for _, classes := range []int{0, 3} {
		cfg := learner.DefaultConfig()
		cfg.HashBits = 12
		cfg.Window = 500
		if classes > 0 {
			cfg.Classes = []string{"a", "b", "c"}
		}
		xs := streamFor(cfg, 5, 4000)
		for _, window := range []uint64{0, uint64(cfg.Window), 1 << 40} {
			m := mustNew(t, cfg)
			c := learner.NewCurve(m, window)
			checked := 0
			for i := range xs {
				o := c.Learn(&xs[i])
				if window == uint64(cfg.Window) && o.Labeled && m.Metrics().Labeled%window == 0 {
					pts := c.Points()
					p, mt := pts[len(pts)-1], m.Metrics()
					checked++
					for _, v := range []struct {
						name      string
						got, want float64
					}{
						{"log-loss", p.WindowLogLoss, mt.RollingLogLoss},
						{"Brier score", p.WindowBrier, mt.RollingBrier},
						{"calibration error", p.WindowCalibrationError, mt.RollingCalibrationError},
						{"AUC", p.WindowAUC, mt.RollingAUC},
						{"accuracy", p.WindowAccuracy, mt.RollingAccuracy},
					} {
						if !closeTo(v.got, v.want) {
							t.Fatalf("classes %d: at %d labeled, the window's %s is %v, the rolling %v", classes, mt.Labeled, v.name, v.got, v.want)
						}
					}
				}
			}
			if window == uint64(cfg.Window) && checked < 2 {
				t.Fatalf("classes %d: %d windows compared with the rolling ones, want several", classes, checked)
			}
			c.End()
			mt, pts := m.Metrics(), c.Points()
			auc, binary := c.AUC()
			if binary != (classes == 0) || (binary && (auc <= 0.5 || math.Abs(auc-mt.AUC) > 0.01)) {
				t.Errorf("classes %d, window %d: AUC %v (%v), the binned one %v", classes, window, auc, binary, mt.AUC)
			}
			if window == 0 {
				if len(pts) != 0 {
					t.Errorf("classes %d: %d points without a window", classes, len(pts))
				}
				continue
			}
			if want := int((mt.Labeled + window - 1) / window); len(pts) != want {
				t.Fatalf("classes %d, window %d: %d points for %d labeled, want %d", classes, window, len(pts), mt.Labeled, want)
			}
			for i, p := range pts[:len(pts)-1] {
				if p.Labeled != uint64(i+1)*window {
					t.Errorf("classes %d: point %d at %d labeled, want %d", classes, i, p.Labeled, uint64(i+1)*window)
				}
			}
			last := pts[len(pts)-1]
			if last.Labeled != mt.Labeled || last.Examples != mt.Examples || last.Accuracy != mt.Accuracy || last.LogLoss != mt.LogLoss ||
				last.Brier != mt.Brier || last.CalibrationError != mt.CalibrationError || last.HasAUC != binary || last.AUC != auc {
				t.Errorf("classes %d, window %d: the last point %+v, the model's metrics %+v, AUC %v", classes, window, last, mt, auc)
			}
			if len(pts) == 1 && (!closeTo(last.WindowLogLoss, mt.LogLoss) || !closeTo(last.WindowBrier, mt.Brier) ||
				!closeTo(last.WindowCalibrationError, mt.CalibrationError) || last.WindowAUC != last.AUC || last.WindowAccuracy != mt.Accuracy) {
				t.Errorf("classes %d: one window's measures %+v, the stream's %+v", classes, last, mt)
			}
		}
	}
}

// TestScoreProbabilityIsTheMetrics: the mean of ScoreProbability's
// scores of the predictions Learn returns, in ProbabilitySums, are the
// model's log-loss, Brier score and calibration error.
func TestScoreProbabilityIsTheMetrics(t *testing.T) {
	for name, cfg := range configs() {
		var sums learner.ProbabilitySums
		m := mustNew(t, cfg)
		xs := streamFor(cfg, 9, 800)
		for i := range xs {
			if o := m.Learn(&xs[i]); o.Labeled {
				sums.Add(learner.ScoreProbability(&o.Prediction, xs[i].Label))
			}
		}
		mt := m.Metrics()
		logLoss, brier, calibration := sums.Means()
		if sums.Count() != mt.Labeled || logLoss != mt.LogLoss || brier != mt.Brier || calibration != mt.CalibrationError || mt.Labeled == 0 {
			t.Errorf("%s: %d scores: %v, %v, %v; the model's %d: %v, %v, %v", name, sums.Count(), logLoss, brier, calibration,
				mt.Labeled, mt.LogLoss, mt.Brier, mt.CalibrationError)
		}
	}
}

// pairwiseAUC is the ROC AUC of probabilities pos (of positives) and neg
// (of negatives) by its definition: the share of pairs a positive ranks
// above, ties counting a half; 0 without both.
func pairwiseAUC(pos, neg []float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return 0
	}
	var wins float64
	for _, p := range pos {
		for _, q := range neg {
			switch {
			case p > q:
				wins++
			case p == q:
				wins += 0.5
			}
		}
	}
	return wins / float64(len(pos)*len(neg))
}

// closeTo says a and b agree but for the rounding of sums taken in
// another order.
func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-12*max(1, math.Abs(b)) }
