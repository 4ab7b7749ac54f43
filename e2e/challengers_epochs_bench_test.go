//go:build linux

package e2e

import (
	"context"
	"testing"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/learner"
)

// BenchmarkEpochsChallengers is BenchmarkEpochs' memory broker in epochs
// of 10,000 examples, with no challenger and with three (another
// algorithm, another hash seed, which decodes every message again, and
// another regularisation): what the challengers cost a model learned in
// epochs, their learning, results, mixes and comparisons included.
//
//	go test -run XXX -bench 'BenchmarkEpochsChallengers$' -benchtime 1x -count 5 -timeout 60m ./e2e/
func BenchmarkEpochsChallengers(b *testing.B) {
	msgs, _ := epochsBenchMessages(epochsBenchN)
	base := learner.DefaultConfig()
	perceptron, seed, r := base, base, base
	perceptron.Algorithm = learner.Perceptron
	seed.HashSeed = 7
	r.AROWR = base.AROWR * 10
	three := []learner.ChallengerConfig{{Name: "perceptron", Config: perceptron}, {Name: "seed", Config: seed}, {Name: "r", Config: r}}
	for _, c := range []struct {
		name        string
		challengers []learner.ChallengerConfig
	}{{"none", nil}, {"three", three}} {
		b.Run("challengers="+c.name, func(b *testing.B) {
			var st epochStats
			for range b.N {
				b.StopTimer()
				log := memory.NewLog("examples", epochsBenchPartitions)
				for i, m := range msgs {
					log.Append(i%epochsBenchPartitions, m)
				}
				ends, err := log.Ends(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				out := consumer.Destination{Sink: memory.NewSink(), Topic: "predictions"}
				if err := runBenchEpochsOf(b, out, log, ends, 10000, c.challengers, &st); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "examples/s")
			st.report(b)
		})
	}
}
