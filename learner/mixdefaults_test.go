package learner_test

import (
	"fmt"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// minEpochExamples is consumer/epochs.go's: the least positions of a shard
// in an epoch that grows or ends where a snapshot falls due.
const minEpochExamples = 1000

// defaultEpochs is the worker's epoch schedule at the defaults
// (consumer/epochs.go epochLimit) over a backlog of shards of the given
// lengths: each epoch holds 1/growth of the examples the model learned
// before it per shard (the model's examples over the shards of the
// boundary), at least minEpochExamples and at most epochExamples, and,
// when every > 0, no more than the labeled examples left to the next
// multiple of every shared among the shards with data left, each share
// minEpochExamples at least (every epoch costs a barrier). It keeps its
// own positions, as the backlog cut gives each shard min(limit,
// remaining): simulateEpochs calls it once per epoch, in order. Every
// example of the stream is labeled (gen's default), so the model's
// examples and labeled examples are the examples learned.
func defaultEpochs(lens []int, growth, epochExamples, every int) func(e int) int {
	pos := make([]int, len(lens))
	return func(int) int {
		learned, n := 0, 0
		for s, p := range pos {
			learned += p
			if p < lens[s] {
				n++
			}
		}
		limit := epochExamples
		if growth > 0 {
			limit = min(limit, max(minEpochExamples, learned/len(lens)/growth))
		}
		if every > 0 {
			left := every - learned%every
			n = max(n, 1)
			if share := max((left+n-1)/n, minEpochExamples); share < limit {
				limit = share
			}
		}
		for s := range pos {
			pos[s] = min(pos[s]+limit, lens[s])
		}
		return limit
	}
}

// BenchmarkMixingDefaults simulates the worker at the defaults (growth 8,
// epoch_examples 100,000, rule auto: learner.MixRule.For, weights
// examples) over the first 400,000 examples of `hyperplane gen -vocab
// 100000` split as a Kafka topic of S partitions (the same examples in the
// same partitions as the real topic) and cut as a backlog, for every
// mixable linear algorithm: E=grow8 cuts by growth alone (the research
// schedule of BenchmarkMixingRules), E=grow8+every100k also where
// snapshot.every (100,000 labeled examples) falls due, each shard's share
// 1,000 at least, as epochLimit does. The time-based cuts
// (model.mixing.interval, snapshot.interval) are not simulated. S=1 is
// sequential learning, which is what one partition is. Deterministic: run
// with -benchtime 1x.
//
//	go test -run XXX -bench BenchmarkMixingDefaults -benchtime 1x -timeout 0 ./learner/
//
// Metrics: accuracy (prequential, over the whole stream), seq-accuracy,
// cost-pp (seq-accuracy − accuracy, in points), gain-pp (accuracy minus
// each partition learning alone, model.scope: partition), epochs.
func BenchmarkMixingDefaults(b *testing.B) {
	opt := synth.DefaultOptions()
	opt.Vocab = 100_000
	benchmarkMixingDefaults(b, opt, 400_000)
}

// BenchmarkMixingDefaultsLong is BenchmarkMixingDefaults over the first
// 1,000,000 examples of the same stream.
//
//	go test -run XXX -bench BenchmarkMixingDefaultsLong -benchtime 1x -timeout 0 ./learner/
func BenchmarkMixingDefaultsLong(b *testing.B) {
	opt := synth.DefaultOptions()
	opt.Vocab = 100_000
	benchmarkMixingDefaults(b, opt, 1_000_000)
}

// BenchmarkMixingDefaultsDrift is BenchmarkMixingDefaults over `hyperplane
// gen -examples 400000 -vocab 100000 -drift-at 200000`: the labels follow
// an independent hidden hyperplane from example 200,000 on (BENCHMARKS.md,
// "With an abrupt change of concept halfway", measured the real worker on
// the same topic).
//
//	go test -run XXX -bench BenchmarkMixingDefaultsDrift -benchtime 1x -timeout 0 ./learner/
func BenchmarkMixingDefaultsDrift(b *testing.B) {
	opt := synth.DefaultOptions()
	opt.Vocab = 100_000
	opt.DriftAt = 200_000
	benchmarkMixingDefaults(b, opt, 400_000)
}

func benchmarkMixingDefaults(b *testing.B, opt synth.Options, n int) {
	cfg := perceptronConfig()
	algs := []learner.Algorithm{learner.Perceptron, learner.Averaged, learner.PA, learner.PA1, learner.PA2, learner.Margin, learner.Pegasos, learner.AROW}
	s := genStream(opt, n, cfg)
	seq := map[learner.Algorithm]prequential{}
	for _, shards := range []int{1, 2, 4, 6} {
		split := s.kafkaShards(shards)
		alone := map[learner.Algorithm]prequential{}
		lens := make([]int, len(split))
		for i, idx := range split {
			lens[i] = len(idx)
		}
		for _, sched := range []string{"grow8", "grow8+every100k"} {
			if shards == 1 && sched != "grow8" {
				continue
			}
			for _, alg := range algs {
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
						if sched == "grow8+every100k" {
							every = 100_000
						}
						r = simulateEpochs(b, cfg, s.xs, split, defaultEpochs(lens, 8, 100_000, every), mix, cutBacklog)
					}
					b.ReportMetric(r.accuracy(), "accuracy")
					b.ReportMetric(seq[alg].accuracy(), "seq-accuracy")
					b.ReportMetric(100*(seq[alg].accuracy()-r.accuracy()), "cost-pp")
					if _, ok := alone[alg]; !ok {
						alone[alg] = learnAlone(b, cfg, s.xs, split)
					}
					b.ReportMetric(100*(r.accuracy()-alone[alg].accuracy()), "gain-pp")
					b.ReportMetric(float64(r.epochs), "epochs")
				})
			}
		}
	}
}
