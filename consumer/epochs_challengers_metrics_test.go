package consumer_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestEpochsChallengerMetricsAreTheMixedOnes: over six shards learned
// in epochs, each challenger's hyperplane_examples_total{model} counts
// every example once, as the mixed challenger does (each range's copy
// starts from the mixed model's counts: adding them up counted those
// once a shard), and its hyperplane_rolling_accuracy{model} and
// probability gauges are the mixed challenger's, as the model's are.
func TestEpochsChallengerMetricsAreTheMixedOnes(t *testing.T) {
	log := epochLog(600)
	x, reg := learnEpochsWithChallengers(t, log, func(store *snapshot.Store) consumer.EpochConfig {
		return challengedEpochs(log, store, memory.NewSink(), "w")
	}, epochLearner(), epochChallengers())

	mixed := x.Model()
	total := mixed.Metrics().Examples
	for _, c := range mixed.Challengers() {
		mt := c.Model.Metrics()
		var n float64
		for _, result := range []string{"correct", "mistake", "unlabeled"} {
			v, ok := counter(t, reg, "hyperplane_examples_total", "model", c.Name, "result", result)
			if !ok {
				t.Fatalf("no hyperplane_examples_total{model=%q,result=%q}", c.Name, result)
			}
			n += v
		}
		if n != float64(mt.Examples) || mt.Examples != total {
			t.Errorf("hyperplane_examples_total{model=%q} counts %v examples; the mixed challenger learned %d of %d", c.Name, n, mt.Examples, total)
		}
		if v, ok := gauge(t, reg, "hyperplane_rolling_accuracy", "model", c.Name); !ok || v != mt.RollingAccuracy {
			t.Errorf("hyperplane_rolling_accuracy{model=%q} is %v (%v), the mixed challenger's is %v", c.Name, v, ok, mt.RollingAccuracy)
		}
		if v, ok := gauge(t, reg, "hyperplane_log_loss", "model", c.Name); !ok || v != mt.LogLoss {
			t.Errorf("hyperplane_log_loss{model=%q} is %v (%v), the mixed challenger's is %v", c.Name, v, ok, mt.LogLoss)
		}
	}
}

// TestEpochsPromotionLeavesNoChallengerSeries: once AROW is promoted
// over the perceptron in epochs, no series names AROW a challenger, on a
// shard or not: every one is the replaced perceptron's, under the
// model's name.
func TestEpochsPromotionLeavesNoChallengerSeries(t *testing.T) {
	log := epochLog(4000)
	x, reg := learnEpochsWithChallengers(t, log, func(store *snapshot.Store) consumer.EpochConfig {
		return promotingEpochs(log, store, memory.NewSink(), "w", true)
	}, promotedLearner(), arowChallenger())
	if ps := x.Model().Promotions(); len(ps) != 1 || ps[0].Challenger != "arow" {
		t.Fatalf("promotions %+v, want arow's", ps)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	replaced := 0
	for _, f := range families {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() != "model" {
					continue
				}
				switch l.GetValue() {
				case "arow":
					t.Errorf("%s %v names the promoted arow a challenger", f.GetName(), s.GetLabel())
				case "mixed":
					replaced++
				}
			}
		}
	}
	if replaced == 0 {
		t.Error("no series of the replaced model, now a challenger")
	}
}

// learnEpochsWithChallengers learns every example of log in epochs, by one
// worker of the configuration cfg makes over a store of its own, from a
// new model of lcfg with challengers, and returns the epochs and the
// registry of their metrics.
func learnEpochsWithChallengers(t *testing.T, log *memory.Log, cfg func(*snapshot.Store) consumer.EpochConfig, lcfg learner.Config, challengers []learner.ChallengerConfig) (*consumer.Epochs, *prometheus.Registry) {
	t.Helper()
	store, err := snapshot.OpenStore(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c := cfg(store)
	m, e, prev, pos, err := consumer.Continue(nil, lcfg, c.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.SetChallengers(challengers); err != nil {
		t.Fatal(err)
	}
	c.BaseDigest = consumer.BaseDigestOf(nil, m)
	reg := prometheus.NewRegistry()
	x := consumer.NewEpochs(c, m, e, prev, pos, consumer.NewMetrics(reg), zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	finalDigest(t, x, done, cancel, waitComplete(t, store, log))
	return x, reg
}
