package learner_test

import (
	"fmt"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// minEpochExamples, minSnapshotShare and restartShrink are
// consumer/epochs_boundary.go's: the least examples of a shard in an
// epoch that grows (unless the configuration sets another:
// autoMinEpochExamples), and in one that ends where a snapshot falls
// due; and how much smaller than the whole history's the epochs are at
// least once a drift has restarted the model.
const (
	minEpochExamples = 250
	minSnapshotShare = 1000
	restartShrink    = 4
)

// autoGrowth is the growth model.mixing.growth auto gives a model of
// algorithm a without challengers (config.Config.EpochGrowth).
func autoGrowth(a learner.Algorithm) int {
	if a == learner.AROW {
		return 8
	}
	return 16
}

// autoMinEpochExamples is the least examples of a shard in an epoch that
// grows for a model of algorithm a without challengers
// (config.Config.EpochMinExamples).
func autoMinEpochExamples(a learner.Algorithm) int {
	if a == learner.AROW {
		return 1000
	}
	return minEpochExamples
}

// autoEpochs is the worker's epoch schedule at the defaults for a model
// of algorithm a without challengers: defaultEpochs at the growth and
// the floor the configuration gives it, epoch_examples 100,000.
func autoEpochs(a learner.Algorithm, every int) epochSchedule {
	return epochLimits(autoGrowth(a), autoMinEpochExamples(a), 100_000, every, true)
}

// defaultEpochs is the worker's epoch schedule at the defaults
// (consumer/epochs.go epochLimit), a function of the mixed model W_{e-1}
// and of the shards' data left, as the worker's is: each epoch holds
// 1/growth of the model's examples per shard of the boundary (every shard
// of the topic) or, once a drift started the model afresh, of its labeled
// examples since then (learner.Model.SinceRestart) but at least
// 1/restartShrink of the first, at least minEpochExamples and at most
// epochExamples; and, when every > 0, no more
// than the labeled examples left to the model's next multiple of every
// shared among the shards with data left, each share minSnapshotShare at
// least (every epoch costs a barrier).
func defaultEpochs(growth, epochExamples, every int) epochSchedule {
	return epochLimits(growth, minEpochExamples, epochExamples, every, true)
}

// epochLimits is defaultEpochs with the floor of a growing epoch and
// regrow; without regrow, the epochs grow from the model's examples even
// after a restart, as the worker's did before they grew again from a
// drift.
func epochLimits(growth, floor, epochExamples, every int, regrow bool) epochSchedule {
	return func(_ int, w *learner.State, left []int) int {
		c := countsOf(w)
		limit := epochExamples
		if shards := len(left); growth > 0 && shards > 0 {
			grown := int(c.examples) / shards / growth
			if c.restarted && regrow {
				grown = max(int(c.since)/shards/growth, grown/restartShrink)
			}
			limit = min(limit, max(floor, grown))
		}
		if every > 0 {
			n := 0
			for _, l := range left {
				if l > 0 {
					n++
				}
			}
			n = max(n, 1)
			due := every - int(c.labeled)%every
			if share := max((due+n-1)/n, minSnapshotShare); share < limit {
				limit = share
			}
		}
		return limit
	}
}

// modelCounts is what epochLimit reads of W_{e-1}: the model's examples
// and labeled examples (learner.Model.Counts) and its labeled examples
// since its last restart, if it restarted (learner.Model.SinceRestart).
type modelCounts struct {
	examples, labeled, since uint64
	restarted                bool
}

// countsOf reads the modelCounts of the model that learner.Restore makes
// of w off the state itself, without copying its parameters.
func countsOf(w *learner.State) modelCounts {
	c := modelCounts{examples: w.Examples, labeled: w.Labeled}
	if w.Detector.Drifts > 0 {
		c.since, c.restarted = w.Labeled-w.Detector.Restarted, true
	}
	return c
}

// BenchmarkMixingDefaults simulates the worker at the defaults (growth,
// epoch_examples 100,000, rule auto: learner.MixRule.For, weights
// examples) over the first 400,000 examples of `hyperplane gen -vocab
// 100000` split as a Kafka topic of S partitions (the same examples in the
// same partitions as the real topic) and cut as a backlog, for every
// mixable linear algorithm: E=grow16 cuts by growth alone (1/16 of the
// model's examples per shard, 250 at least), E=grow16+every100k also
// where snapshot.every (100,000 labeled examples) falls due, each shard's
// share 1,000 at least, as epochLimit does; E=auto+every100k is the
// latter at the growth model.mixing.growth auto gives the algorithm
// (autoGrowth) and from the floor the configuration gives it
// (autoMinEpochExamples: 1,000 for AROW), run where the growth is not
// 16. All grow from the mixed model's
// examples, or from its labeled examples since a drift last restarted it
// (defaultEpochs). The time-based cuts (model.mixing.interval,
// snapshot.interval) are not simulated. S=1 is sequential learning, which
// is what one partition is. Deterministic: run with -benchtime 1x.
//
//	go test -run XXX -bench BenchmarkMixingDefaults -benchtime 1x -timeout 0 ./learner/
//
// Metrics: accuracy (prequential, over the whole stream), seq-accuracy,
// cost-pp (seq-accuracy − accuracy, in points), gain-pp (accuracy minus
// each partition learning alone, model.scope: partition), epochs, and
// restarts: the mixes in which a shard's drift started the model afresh
// (0 on a stream without drift, where the schedule is the positions').
func BenchmarkMixingDefaults(b *testing.B) {
	opt := synth.DefaultOptions()
	opt.Vocab = 100_000
	benchmarkMixingDefaults(b, opt, 400_000, "")
}

// BenchmarkMixingDefaultsLong is BenchmarkMixingDefaults over the first
// 1,000,000 examples of the same stream.
//
//	go test -run XXX -bench BenchmarkMixingDefaultsLong -benchtime 1x -timeout 0 ./learner/
func BenchmarkMixingDefaultsLong(b *testing.B) {
	opt := synth.DefaultOptions()
	opt.Vocab = 100_000
	benchmarkMixingDefaults(b, opt, 1_000_000, "")
}

// BenchmarkMixingDefaultsDrift is BenchmarkMixingDefaults over `hyperplane
// gen -examples 400000 -vocab 100000 -drift-at 200000`: the labels follow
// an independent hidden hyperplane from example 200,000 on (BENCHMARKS.md,
// "Mixing at the defaults", which measures the real worker on the same
// topic).
//
//	go test -run XXX -bench BenchmarkMixingDefaultsDrift -benchtime 1x -timeout 0 ./learner/
func BenchmarkMixingDefaultsDrift(b *testing.B) {
	opt := synth.DefaultOptions()
	opt.Vocab = 100_000
	opt.DriftAt = 200_000
	benchmarkMixingDefaults(b, opt, 400_000, "")
}

// BenchmarkMixingDefaultsRotate is BenchmarkMixingDefaults over the same
// 400,000 examples labeled by a hidden hyperplane that turns by a right
// angle over the stream (relabel "rotate", 5% label noise): a change of
// concept so gradual that the detector need not find it.
//
//	go test -run XXX -bench BenchmarkMixingDefaultsRotate -benchtime 1x -timeout 0 ./learner/
func BenchmarkMixingDefaultsRotate(b *testing.B) {
	opt := synth.DefaultOptions()
	opt.Vocab = 100_000
	benchmarkMixingDefaults(b, opt, 400_000, "rotate")
}

// benchmarkMixingDefaults runs the grid over the first n examples of
// opt's stream, relabeled by relabel's drift unless it is "".
func benchmarkMixingDefaults(b *testing.B, opt synth.Options, n int, drift string) {
	cfg := perceptronConfig()
	algs := []learner.Algorithm{learner.Perceptron, learner.Averaged, learner.PA, learner.PA1, learner.PA2, learner.Margin, learner.Pegasos, learner.AROW}
	s := genStream(opt, n, cfg)
	if drift != "" {
		relabel(s.xs, cfg.HashBits, drift, opt.Noise, 1)
	}
	seq := map[learner.Algorithm]prequential{}
	for _, shards := range []int{1, 2, 4, 6} {
		split := s.kafkaShards(shards)
		alone := map[learner.Algorithm]prequential{}
		for _, sched := range []string{"grow16", "grow16+every100k", "auto+every100k"} {
			if shards == 1 && sched != "grow16" {
				continue
			}
			for _, alg := range algs {
				if sched == "auto+every100k" && autoGrowth(alg) == 16 {
					continue
				}
				rule := learner.MixAuto.For(alg)
				b.Run(fmt.Sprintf("S=%d/E=%s/alg=%s", shards, sched, alg), func(b *testing.B) {
					cfg := cfg
					cfg.Algorithm = alg
					if _, ok := seq[alg]; !ok {
						seq[alg], _ = learnSequentially(b, cfg, s.xs, inOrder(len(s.xs)))
					}
					if shards == 1 {
						b.ReportMetric(seq[alg].accuracy(), "accuracy")
						b.ReportMetric(0, "cost-pp")
						return
					}
					mix := func(base *learner.State, states []*learner.State) (*learner.State, error) {
						return learner.MixWithRule(rule, base, states, learner.MixWeightsOf(learner.MixExamples, base, states))
					}
					var r mixResult
					for b.Loop() {
						every := 0
						if sched != "grow16" {
							every = 100_000
						}
						schedule := defaultEpochs(16, 100_000, every)
						if sched == "auto+every100k" {
							schedule = autoEpochs(alg, every)
						}
						r = simulateSchedule(b, cfg, s.xs, split, schedule, mix, cutBacklog)
					}
					b.ReportMetric(r.accuracy(), "accuracy")
					b.ReportMetric(seq[alg].accuracy(), "seq-accuracy")
					b.ReportMetric(100*(seq[alg].accuracy()-r.accuracy()), "cost-pp")
					if _, ok := alone[alg]; !ok {
						alone[alg] = learnAlone(b, cfg, s.xs, split)
					}
					b.ReportMetric(100*(r.accuracy()-alone[alg].accuracy()), "gain-pp")
					b.ReportMetric(float64(r.epochs), "epochs")
					b.ReportMetric(float64(r.restarts), "restarts")
				})
			}
		}
	}
}
