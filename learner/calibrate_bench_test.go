package learner_test

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// BenchmarkProbabilities measures the calibrated probabilities of four
// learners, prequentially, on the synthetic stream of 1M examples (40 of
// 100,000 features, 5% label noise, 2^18 weights: `hyperplane gen
// -examples 1000000 -vocab 100000`): the log-loss, ROC AUC, calibration
// error (10 bins) and Brier score that Metrics reports over the stream,
// and the log-loss and calibration error of the examples after the first
// 10,000; and the same on a stream of 200,000 examples whose positives
// are 1% (rareLabels). With HYPERPLANE_TEXT_STREAM naming a file of JSON lines
// {"label": 1 or -1, "features": {"name": value, …}} it measures that
// stream too (after its first 1,000 examples).
func BenchmarkProbabilities(b *testing.B) {
	type stream struct {
		name string
		xs   func(cfg learner.Config) []learner.Example
		from int
	}
	streams := []stream{{"synthetic-1M", func(cfg learner.Config) []learner.Example {
		o := synth.DefaultOptions()
		o.Vocab, o.Seed = 100000, 1
		return genStream(o, 1_000_000, cfg).xs
	}, 10000}, {"rare-1pct", func(learner.Config) []learner.Example {
		return rareLabels(200_000, 0.01, 1)
	}, 10000}}
	if path := os.Getenv("HYPERPLANE_TEXT_STREAM"); path != "" {
		streams = append(streams, stream{"text", func(cfg learner.Config) []learner.Example { return textStream(b, path, cfg) }, 1000})
	}
	for _, s := range streams {
		for _, alg := range []learner.Algorithm{learner.AROW, learner.Perceptron, learner.PA1, learner.Averaged} {
			b.Run(s.name+"/"+string(alg), func(b *testing.B) {
				cfg := learner.DefaultConfig()
				cfg.HashBits, cfg.Algorithm = 18, alg
				xs := s.xs(cfg)
				b.ResetTimer()
				for range b.N {
					m, err := learner.New(cfg)
					if err != nil {
						b.Fatal(err)
					}
					ece, logLoss := calibrationAfter(m, xs, s.from, false)
					mt := m.Metrics()
					b.ReportMetric(mt.Accuracy, "accuracy")
					b.ReportMetric(mt.LogLoss, "log-loss")
					b.ReportMetric(mt.AUC, "auc")
					b.ReportMetric(mt.CalibrationError, "ece")
					b.ReportMetric(mt.Brier, "brier")
					b.ReportMetric(logLoss, "log-loss-after")
					b.ReportMetric(ece, "ece-after")
				}
			})
		}
	}
}

// textStream reads a stream of JSON lines {"label", "features"}, hashing
// each feature name as the decoders do.
func textStream(b *testing.B, path string, cfg learner.Config) []learner.Example {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	h := learner.NewHasher(cfg.HashBits, cfg.HashSeed)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	var xs []learner.Example
	for sc.Scan() {
		var line struct {
			Label    int                `json:"label"`
			Features map[string]float64 `json:"features"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			b.Fatal(err)
		}
		sum := map[uint32]float64{}
		for name, v := range line.Features {
			sum[learner.Index(h, name)] += v
		}
		x := learner.Example{Labeled: true, Label: line.Label}
		for _, i := range slices.Sorted(maps.Keys(sum)) {
			if v := sum[i]; v != 0 {
				x.Index = append(x.Index, i)
				x.Value = append(x.Value, v)
			}
		}
		xs = append(xs, x)
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return xs
}

// BenchmarkMetrics is the cost of Model.Metrics with a full window of the
// default 1,000 slots, on the synthetic stream: again with no example
// learned since the last call (the rolling measures are kept), and after
// one (they are computed over the window, whose AUC sorts it), with the
// cost of learning it.
func BenchmarkMetrics(b *testing.B) {
	cfg := learner.DefaultConfig()
	o := synth.DefaultOptions()
	o.Seed = 1
	xs := genStream(o, 20000, cfg).xs
	m := mustNew(b, cfg)
	for i := range xs[:16384] {
		m.Learn(&xs[i])
	}
	b.Run("again", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.Metrics()
		}
	})
	b.Run("after-an-example", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			m.Learn(&xs[16384+i&2047])
			m.Metrics()
		}
	})
	// What a worker records of each challenger after a batch: the
	// measures but for the rolling AUC, computed when collected.
	b.Run("later-after-an-example", func(b *testing.B) {
		b.ReportAllocs()
		var l learner.LaterMetrics
		for i := 0; b.Loop(); i++ {
			m.Learn(&xs[16384+i&2047])
			m.MetricsLater(&l)
		}
	})
}
