package consumer_test

import (
	"context"
	"testing"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// BenchmarkWorkerRunChallengers is the whole worker (fetch, decode,
// learn, encode, publish to an in-memory sink, metrics per batch) over
// 100,000 generated examples of 20 features, with no challenger and with
// three of other algorithms that share the model's decoded example
// (perceptron, PA-I, AROW with r = 0.1). The model is the default (AROW,
// 2^18 weights). It reports msgs/s.
//
//	go test ./consumer -run XXX -bench BenchmarkWorkerRunChallengers -count 6
func BenchmarkWorkerRunChallengers(b *testing.B) {
	const n = 100000
	in := memory.NewLog("in", 1)
	o := synth.DefaultOptions()
	o.Vocab, o.Features = 1000, 20
	s := synth.New(o)
	for range n {
		v := synth.AppendJSON(nil, s.Next())
		in.Append(0, v[:len(v)-1])
	}
	base := learner.DefaultConfig()
	base.HashBits = 18
	with := func(f func(c *learner.Config)) learner.Config {
		c := base
		f(&c)
		return c
	}
	three := []learner.ChallengerConfig{
		{Name: "perceptron", Config: with(func(c *learner.Config) { c.Algorithm = learner.Perceptron })},
		{Name: "pa1", Config: with(func(c *learner.Config) { c.Algorithm = learner.PA1 })},
		{Name: "arow-r", Config: with(func(c *learner.Config) { c.AROWR = 0.1 })},
	}
	for _, c := range []struct {
		name        string
		challengers []learner.ChallengerConfig
	}{{"none", nil}, {"three", three}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				model, err := learner.New(base)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := model.SetChallengers(c.challengers); err != nil {
					b.Fatal(err)
				}
				sink := memory.NewSink()
				r := &consumer.Range{Source: memory.NewSource(in, nil), Idle: true,
					End: func(m *consumer.Message) (in, last bool) { return true, m.Position.Offset == n-1 }}
				w := consumer.NewWorker(consumer.WorkerConfig{
					Model:              "m",
					Predictions:        consumer.Destination{Sink: sink, Topic: "pred"},
					Misclassifications: consumer.Destination{Sink: sink, Topic: "mis"},
				}, r, model, nil, consumer.NewMetrics(nil), zap.NewNop())
				if err := consumer.ReplayRange(context.Background(), w, r, nil, 0, nil); err != nil {
					b.Fatal(err)
				}
				if got := w.Published()[in.Key(0)]; got != n {
					b.Fatalf("published %d of %d", got, n)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
