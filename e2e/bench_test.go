package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/nats-io/nats.go/jetstream"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// benchMessages is the stream the throughput benchmarks push through:
// labeled examples of 36 features, about 580 bytes each.
func benchMessages(n int) (msgs [][]byte, size int) {
	o := synth.DefaultOptions()
	o.Features, o.Seed = 36, 3
	s := synth.New(o)
	for range n {
		b := synth.AppendJSON(nil, s.Next())
		msgs = append(msgs, b[:len(b)-1])
		size += len(b) - 1
	}
	return msgs, size / n
}

const benchN = 20000

// BenchmarkThroughput compares the worker (decode, predict, publish a
// prediction for every example, learn) with a bare pass-through that
// reads each message and writes its bytes to an output with the same
// client library, on the same in-process broker in the same run. One op
// is benchN messages, from opening the clients to the last output being
// acknowledged; closing the clients is not timed (kafka-go's reader waits
// out a fetch in flight when it closes).
func BenchmarkThroughput(b *testing.B) {
	msgs, size := benchMessages(benchN)
	b.Logf("%d messages of %d bytes on average", benchN, size)
	b.Run("jetstream", func(b *testing.B) { benchJetStream(b, msgs) })
	b.Run("kafka", func(b *testing.B) { benchKafka(b, msgs) })
}

func benchJetStream(b *testing.B, msgs [][]byte) {
	b.Setenv("HYPERPLANE_E2E_NATS_URL", "")
	ns := startNATS(b)
	ctx := context.Background()
	run := func(b *testing.B, pass func(prefix string, js jetstream.JetStream) (func(), error)) {
		var js jetstream.JetStream
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			prefix := uniquePrefix("BENCH")
			js, _ = ns.streams(ctx, prefix)
			for _, m := range msgs {
				if _, err := js.PublishAsync(prefix+".IN", m); err != nil {
					b.Fatal(err)
				}
			}
			<-js.PublishAsyncComplete()
			b.StartTimer()
			cleanup, err := pass(prefix, js)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			cleanup()
			// Every op starts on an empty server.
			for _, s := range []string{"IN", "PRED", "MIS", "DEAD"} {
				if err := js.DeleteStream(ctx, prefix+"_"+s); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "msgs/s")
	}
	b.Run("passthrough", func(b *testing.B) {
		run(b, func(prefix string, js jetstream.JetStream) (func(), error) {
			c, err := js.OrderedConsumer(ctx, prefix+"_IN", jetstream.OrderedConsumerConfig{})
			if err != nil {
				return nil, err
			}
			it, err := c.Messages()
			if err != nil {
				return nil, err
			}
			for i := range msgs {
				m, err := it.Next()
				if err != nil {
					return it.Stop, err
				}
				if _, err := js.PublishAsync(prefix+".PRED", m.Data()); err != nil {
					return it.Stop, err
				}
				if i%1024 == 1023 {
					<-js.PublishAsyncComplete()
				}
			}
			<-js.PublishAsyncComplete()
			return it.Stop, nil
		})
	})
	b.Run("worker", func(b *testing.B) {
		run(b, func(prefix string, js jetstream.JetStream) (func(), error) {
			nc := js.Conn()
			src, err := natsio.NewJetStreamSource(ctx, nc, prefix+"_IN", "", nil, natsio.Start{Kind: "earliest"}, zap.NewNop())
			if err != nil {
				return func() {}, err
			}
			sink, err := natsio.NewSink(nc, true, zap.NewNop())
			if err != nil {
				return func() { src.Close() }, err
			}
			err = runBenchWorker(src, consumer.Destination{Sink: sink, Topic: prefix + ".PRED"}, "jetstream:"+prefix+"_IN", int64(len(msgs)))
			return func() { src.Close(); sink.Close() }, err
		})
	})
}

// runBenchWorker runs a worker until its outputs for n messages are out.
func runBenchWorker(src consumer.Source, pred consumer.Destination, key string, n int64) error {
	cfg := learner.DefaultConfig()
	model, err := learner.New(cfg)
	if err != nil {
		return err
	}
	w := consumer.NewWorker(consumer.WorkerConfig{Model: "bench", Predictions: pred, Batch: 1024}, src, model, nil, nil, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for w.Published()[key] < n {
		select {
		case err := <-done:
			cancel()
			return fmt.Errorf("worker stopped: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	return <-done
}

func benchKafka(b *testing.B, msgs [][]byte) {
	ctx := context.Background()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	topics := 0
	run := func(b *testing.B, pass func(in, out string) (func(), error)) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			topics++
			in, out := fmt.Sprintf("in%d", topics), fmt.Sprintf("out%d", topics)
			cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.AllowAutoTopicCreation())
			if err != nil {
				b.Fatal(err)
			}
			var recs []*kgo.Record
			for _, m := range msgs {
				recs = append(recs, &kgo.Record{Topic: in, Value: m})
			}
			recs = append(recs, &kgo.Record{Topic: out, Value: []byte("x")})
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			cl.Close()
			b.StartTimer()
			cleanup, err := pass(in, out)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			cleanup()
		}
		b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "msgs/s")
	}
	b.Run("passthrough", func(b *testing.B) {
		run(b, func(in, out string) (func(), error) {
			r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: addrs, Topic: in, Partition: 0, MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 100 * time.Millisecond})
			w := &kafkago.Writer{Addr: kafkago.TCP(addrs...), Transport: &kafkago.Transport{}, RequiredAcks: kafkago.RequireAll, BatchSize: 512, BatchTimeout: time.Millisecond, BatchBytes: 16 << 20}
			cleanup := func() { r.Close(); w.Close() }
			batch := make([]kafkago.Message, 0, 512)
			for i := range msgs {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					return cleanup, err
				}
				batch = append(batch, kafkago.Message{Topic: out, Key: m.Key, Value: m.Value})
				if len(batch) == cap(batch) || i == len(msgs)-1 {
					if err := w.WriteMessages(ctx, batch...); err != nil {
						return cleanup, err
					}
					batch = batch[:0]
				}
			}
			return cleanup, nil
		})
	})
	b.Run("worker", func(b *testing.B) {
		run(b, func(in, out string) (func(), error) {
			kc := kafkaio.Config{Brokers: addrs}
			src, err := kafkaio.NewSource(ctx, kc, []string{in}, "", nil, kafkaio.Start{Kind: "earliest"}, zap.NewNop())
			if err != nil {
				return func() {}, err
			}
			sink, err := kafkaio.NewSink(kc, zap.NewNop())
			if err != nil {
				return func() { src.Close() }, err
			}
			err = runBenchWorker(src, consumer.Destination{Sink: sink, Topic: out}, "kafka:"+in+"/0", int64(len(msgs)))
			return func() { src.Close(); sink.Close() }, err
		})
	})
}
