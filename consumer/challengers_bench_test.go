package consumer

import (
	"context"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
	"go.uber.org/zap"
)

// BenchmarkWorkerChallengers is BenchmarkWorkerProcess with the model's
// challengers: none; three that hash as the model does (other
// algorithms), sharing its decoded example; and three of which two hash
// otherwise and decode the message again. The model is the default
// (AROW, 2^18 weights). ns/op is per message; the ratio of msgs/s to
// none's is the cost of the challengers.
//
//	go test ./consumer -run XXX -bench BenchmarkWorkerChallengers -benchmem -count 6
func BenchmarkWorkerChallengers(b *testing.B) {
	base := learner.DefaultConfig()
	base.HashBits = 18
	with := func(f func(c *learner.Config)) learner.Config {
		c := base
		f(&c)
		return c
	}
	shared := []learner.ChallengerConfig{
		{Name: "perceptron", Config: with(func(c *learner.Config) { c.Algorithm = learner.Perceptron })},
		{Name: "pa1", Config: with(func(c *learner.Config) { c.Algorithm = learner.PA1 })},
		{Name: "arow-r", Config: with(func(c *learner.Config) { c.AROWR = 0.1 })},
	}
	hashings := []learner.ChallengerConfig{
		shared[0],
		{Name: "bits17", Config: with(func(c *learner.Config) { c.HashBits = 17 })},
		{Name: "seed7", Config: with(func(c *learner.Config) { c.HashSeed = 7 })},
	}
	for _, c := range []struct {
		name        string
		challengers []learner.ChallengerConfig
		outputs     bool
	}{
		{"none", nil, false},
		{"three-shared", shared, false},
		{"three-shared-outputs", shared, true},
		{"three-hashings", hashings, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			model, err := learner.New(base)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := model.SetChallengers(c.challengers); err != nil {
				b.Fatal(err)
			}
			sink := limitSink{limit: 1 << 20}
			cfg := WorkerConfig{
				Model:              "m",
				Predictions:        Destination{Sink: sink, Topic: "pred"},
				Misclassifications: Destination{Sink: sink, Topic: "mis"},
				DeadLetter:         Destination{Sink: sink, Topic: "dead"},
			}
			if c.outputs {
				cfg.ChallengerPredictions = Destination{Sink: sink, Topic: "challengers"}
			}
			w := NewWorker(cfg, nil, model, nil, nil, zap.NewNop())
			benchProcess(b, w)
		})
	}
}

// benchProcess runs w's per-message path over a generated stream, its
// outputs published every 1024 messages to the sinks, and reports
// msgs/s.
func benchProcess(b *testing.B, w *Worker) {
	o := synth.DefaultOptions()
	o.Vocab, o.Features = 1000, 20
	s := synth.New(o)
	msgs := make([]Message, 1024)
	for i := range msgs {
		v := synth.AppendJSON(nil, s.Next())
		msgs[i] = Message{Position: wire.Position{Source: "kafka:t/0", Offset: int64(i)}, Resume: int64(i + 1), Value: v[:len(v)-1]}
	}
	w.refreshLimits()
	batch := w.batchPool.Get().(*outBatch)
	batch.resume = map[string]int64{}
	var x learner.Example
	var line []byte
	ctx := context.Background()
	publish := func() {
		batch.seal()
		for i, s := range batch.sinks {
			if err := s.Publish(ctx, batch.outputs[i]); err != nil {
				b.Fatal(err)
			}
		}
		batch.reset()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		line = w.process(&msgs[i%len(msgs)], &x, batch, line)
		if (i+1)%len(msgs) == 0 {
			publish()
		}
	}
	publish()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
