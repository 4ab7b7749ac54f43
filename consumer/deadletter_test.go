package consumer

import (
	"context"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
	"go.uber.org/zap"
)

// limitSink takes every output and has a fixed limit.
type limitSink struct{ limit int }

func (s limitSink) Publish(context.Context, []Output) error { return nil }
func (s limitSink) MaxOutputBytes(string) int               { return s.limit }
func (s limitSink) Close() error                            { return nil }

// BenchmarkWorkerProcess measures the worker's per-message path: process,
// and for every batch of 1024 messages the sealing of its outputs and
// their hand-over to a sink that states its limit. It must not allocate
// in steady state.
func BenchmarkWorkerProcess(b *testing.B) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 18
	model, err := learner.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	sink := limitSink{limit: 1 << 20}
	w := NewWorker(WorkerConfig{
		Model:              "m",
		Predictions:        Destination{Sink: sink, Topic: "pred"},
		Misclassifications: Destination{Sink: sink, Topic: "mis"},
		DeadLetter:         Destination{Sink: sink, Topic: "dead"},
	}, nil, model, nil, nil, zap.NewNop())
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
}
