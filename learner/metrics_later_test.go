package learner_test

import (
	"math"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestMetricsLater: the measures MetricsLater takes are those Metrics
// returns at the same moment, to the bit, whether they are read at once,
// or after the model learned on, and for binary and
// multiclass models, before and after the window fills. Known gives them
// without computing the rolling AUC, which is pending for a binary model.
func TestMetricsLater(t *testing.T) {
	for _, classes := range []int{0, 4} {
		cfg := perceptronConfig()
		cfg.HashBits, cfg.Window = 10, 300
		for k := range classes {
			cfg.Classes = append(cfg.Classes, string(rune('a'+k)))
		}
		m := mustNew(t, cfg)
		xs := sparseStream(5, 1500, cfg.HashBits, 12, classes)
		var l, old learner.LaterMetrics
		var want learner.Metrics
		checked := 0
		for i := range xs {
			if i%97 == 0 {
				// Known is Metrics but for a pending rolling AUC, left 0.
				m.MetricsLater(&l)
				known, pending := l.Known()
				now := m.Metrics()
				if pending != (classes == 0 && i > 0) {
					t.Fatalf("classes %d, example %d: pending %v", classes, i, pending)
				}
				if pending && known.RollingAUC != 0 {
					t.Fatalf("classes %d, example %d: a pending rolling AUC is %v", classes, i, known.RollingAUC)
				}
				if known.RollingAUC = now.RollingAUC; !sameMetrics(known, now) {
					t.Fatalf("classes %d, example %d: Known %+v, Metrics %+v", classes, i, known, now)
				}
				m.MetricsLater(&l)
				if got, w := l.Metrics(), m.Metrics(); !sameMetrics(got, w) {
					t.Fatalf("classes %d, example %d: MetricsLater %+v, Metrics %+v", classes, i, got, w)
				}
				if i > 0 {
					// Read after the model learned on: as of when taken.
					if got := old.Metrics(); !sameMetrics(got, want) {
						t.Fatalf("classes %d, example %d: MetricsLater read later %+v, taken at %+v", classes, i, got, want)
					}
				}
				m.MetricsLater(&old)
				want = m.Metrics()
				checked++
			}
			m.Learn(&xs[i])
		}
		if classes == 0 && want.RollingAUC == 0 {
			t.Errorf("binary model: rolling AUC 0 after %d examples", len(xs))
		}
		if checked < 10 {
			t.Fatalf("checked %d times", checked)
		}
	}
}

// TestLaterMetricsSet: a copy that Set makes keeps the measures of when
// it was made, its rolling AUC included, whatever the original takes next.
func TestLaterMetricsSet(t *testing.T) {
	cfg := perceptronConfig()
	cfg.HashBits, cfg.Window = 10, 300
	m := mustNew(t, cfg)
	xs := sparseStream(5, 800, cfg.HashBits, 12, 0)
	for i := range xs[:400] {
		m.Learn(&xs[i])
	}
	var l, c learner.LaterMetrics
	m.MetricsLater(&l)
	c.Set(&l)
	want := m.Metrics()
	for i := range xs[400:] {
		m.Learn(&xs[400+i])
	}
	m.MetricsLater(&l)
	if _, pending := c.Known(); !pending {
		t.Fatal("the copy's rolling AUC is not pending")
	}
	if got := c.Metrics(); !sameMetrics(got, want) {
		t.Fatalf("the copy reads %+v, the model had %+v", got, want)
	}
	if got := l.Metrics(); sameMetrics(got, want) {
		t.Fatalf("the original reads the measures of 400 examples ago: %+v", got)
	}
}

func sameMetrics(a, b learner.Metrics) bool {
	fa := []float64{a.LogLoss, a.RollingLogLoss, a.Brier, a.RollingBrier, a.CalibrationError, a.RollingCalibrationError, a.AUC, a.RollingAUC, a.Accuracy, a.RollingAccuracy, a.R}
	fb := []float64{b.LogLoss, b.RollingLogLoss, b.Brier, b.RollingBrier, b.CalibrationError, b.RollingCalibrationError, b.AUC, b.RollingAUC, b.Accuracy, b.RollingAccuracy, b.R}
	for i := range fa {
		if math.Float64bits(fa[i]) != math.Float64bits(fb[i]) {
			return false
		}
	}
	return a.Examples == b.Examples && a.Labeled == b.Labeled && a.Mistakes == b.Mistakes && a.Updates == b.Updates
}
