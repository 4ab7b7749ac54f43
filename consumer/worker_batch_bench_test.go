package consumer_test

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// BenchmarkWorkerRunBatch is the whole worker (fetch, decode, learn,
// encode, publish to an in-memory sink, metrics per batch) over 100,000
// generated examples of 20 features, in batches of 16 (a worker at the
// tail of a live stream), 256 (a range of an epoch: what a partition's
// reader holds) and 1,024 (source.batch's default). The model is the
// default (AROW, 2^18 weights). It reports msgs/s.
//
//	go test ./consumer -run XXX -bench BenchmarkWorkerRunBatch -count 6
func BenchmarkWorkerRunBatch(b *testing.B) {
	in := workerRunInput(workerRunN)
	cfg := workerRunConfig()
	for _, batch := range []int{16, 256, 1024} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			for b.Loop() {
				model, err := learner.New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				runWorkerOnce(b, in, model, batch)
			}
			b.ReportMetric(float64(workerRunN)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// workerRunN is how many examples the worker benchmarks run.
const workerRunN = 100000

// workerRunInput is a partition of n generated examples of 20 features.
func workerRunInput(n int) *memory.Log {
	in := memory.NewLog("in", 1)
	o := synth.DefaultOptions()
	o.Vocab, o.Features = 1000, 20
	s := synth.New(o)
	for range n {
		v := synth.AppendJSON(nil, s.Next())
		in.Append(0, v[:len(v)-1])
	}
	return in
}

// workerRunConfig is the default model over 2^18 weights.
func workerRunConfig() learner.Config {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 18
	return cfg
}

// runWorkerOnce runs a worker of model over every message of in, in
// batches of batch (0: the default), and checks that it published them.
func runWorkerOnce(b *testing.B, in *memory.Log, model *learner.Model, batch int) {
	n := in.Len(0)
	sink := memory.NewSink()
	r := &consumer.Range{Source: memory.NewSource(in, nil), Idle: true,
		End: func(m *consumer.Message) (in, last bool) { return true, m.Position.Offset == int64(n-1) }}
	w := consumer.NewWorker(consumer.WorkerConfig{
		Model:              "m",
		Batch:              batch,
		Predictions:        consumer.Destination{Sink: sink, Topic: "pred"},
		Misclassifications: consumer.Destination{Sink: sink, Topic: "mis"},
	}, r, model, nil, consumer.NewMetrics(nil), zap.NewNop())
	if err := consumer.ReplayRange(context.Background(), w, r, nil, 0, nil); err != nil {
		b.Fatal(err)
	}
	if got := w.Published()[in.Key(0)]; got != int64(n) {
		b.Fatalf("published %d of %d", got, n)
	}
}
