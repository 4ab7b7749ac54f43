package learner_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// BenchmarkLearn is learning alone on pre-hashed examples with 40 non-zero
// features over 2^18 weights: one op is one example, predict then learn.
func BenchmarkLearn(b *testing.B) {
	for _, alg := range []learner.Algorithm{learner.Perceptron, learner.Averaged, learner.Margin, learner.PA1, learner.Pegasos, learner.AROW} {
		b.Run(string(alg), func(b *testing.B) {
			cfg := perceptronConfig()
			cfg.Algorithm = alg
			benchmarkLearn(b, cfg, 0)
		})
	}
	b.Run("multiclass-perceptron-4", func(b *testing.B) {
		cfg := perceptronConfig()
		cfg.Classes = []string{"a", "b", "c", "d"}
		benchmarkLearn(b, cfg, 4)
	})
	b.Run("kernel-rbf-budget-100", func(b *testing.B) {
		cfg := perceptronConfig()
		cfg.Algorithm, cfg.Kernel, cfg.Budget = learner.Kernel, learner.RBFKernel, 100
		benchmarkLearn(b, cfg, 0)
	})
}

// BenchmarkLearnLarge is BenchmarkLearn of the default learner over
// 65,536 examples, whose 2.6 million features touch every weight: AROW's
// weights and variances, 4 MiB, leave the cache between two visits, as
// they do in train over a long stream.
func BenchmarkLearnLarge(b *testing.B) {
	benchmarkLearnN(b, learner.DefaultConfig(), 0, 1<<16)
}

// BenchmarkLearnInTurn is BenchmarkLearnLarge with the examples shared
// among models of their own, each learning run examples in turn, as the
// ranges of an epoch over four partitions share a worker's cores: each
// model's 4 MiB is another working set for the caches and the TLB.
//
//	go test ./learner/ -run '^$' -bench 'BenchmarkLearnInTurn|BenchmarkLearnLarge' -count 6
func BenchmarkLearnInTurn(b *testing.B) {
	const n = 1 << 16
	xs := sparseStream(1, n, learner.DefaultConfig().HashBits, 40, 0)
	for i := range xs {
		xs[i].Labeled, xs[i].Dense = true, nil
		if xs[i].Label == 0 {
			xs[i].Label = 1
		}
	}
	for _, tc := range []struct{ models, run int }{{1, n}, {4, 256}, {4, 1}} {
		b.Run(fmt.Sprintf("models=%d/run=%d", tc.models, tc.run), func(b *testing.B) {
			ms := make([]*learner.Model, tc.models)
			for k := range ms {
				ms[k] = mustNew(b, learner.DefaultConfig())
			}
			for i := range xs {
				ms[(i/tc.run)%tc.models].Learn(&xs[i])
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				ms[(i/tc.run)%tc.models].Learn(&xs[i%n])
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "examples/s")
		})
	}
}

func benchmarkLearn(b *testing.B, cfg learner.Config, classes int) {
	benchmarkLearnN(b, cfg, classes, 4096)
}

// benchmarkLearnN learns n examples of 40 features, cycling. Beside the
// wall time it reports the process's CPU time per example (user and
// system), which a machine shared with other work disturbs less.
func benchmarkLearnN(b *testing.B, cfg learner.Config, classes, n int) {
	xs := sparseStream(1, n, cfg.HashBits, 40, classes)
	for i := range xs {
		xs[i].Labeled = true
		xs[i].Dense = nil
		if classes == 0 && xs[i].Label == 0 {
			xs[i].Label = 1
		}
	}
	m := mustNew(b, cfg)
	for i := range xs {
		m.Learn(&xs[i]) // warm up: the weights are touched, the scratch sized
	}
	b.ReportAllocs()
	b.ResetTimer()
	before := cpuTime(b)
	for i := 0; b.Loop(); i++ {
		m.Learn(&xs[i%n])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "examples/s")
	b.ReportMetric(float64(cpuTime(b)-before)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkViewPredict is the cost of one prediction from a View, as a
// serving request pays it: 40 non-zero features over 2^18 weights.
func BenchmarkViewPredict(b *testing.B) {
	for _, alg := range []learner.Algorithm{learner.Perceptron, learner.Averaged} {
		b.Run(string(alg), func(b *testing.B) {
			cfg := perceptronConfig()
			cfg.Algorithm = alg
			xs := sparseStream(1, 4096, cfg.HashBits, 40, 0)
			m := mustNew(b, cfg)
			for i := range xs {
				m.Learn(&xs[i])
			}
			v := m.View()
			var s learner.Scratch
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				v.Predict(&xs[i%len(xs)], &s)
			}
		})
	}
}
