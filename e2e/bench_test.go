package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
	"github.com/hyperplane-ml/hyperplane/wire"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// benchMessages is the stream the throughput benchmarks push through:
// labeled examples of 36 features, about 580 bytes each.
func benchMessages(n int) (msgs [][]byte, size int) { return synthMessages(n, 36, 3) }

// synthMessages are n labeled synth examples of the given number of
// features from seed, as JSON without the line's newline, and their mean
// size in bytes.
func synthMessages(n, features int, seed uint64) (msgs [][]byte, size int) {
	o := synth.DefaultOptions()
	o.Features, o.Seed = features, seed
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
			if err := publishWindowed(ctx, js, prefix+".IN", msgs); err != nil {
				b.Fatal(err)
			}
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
	// passthrough publishes each message with a Nats-Msg-Id, as the
	// worker does for its exactly-once outputs; passthrough_bare
	// publishes bare bytes, which is what the header costs against.
	for _, c := range []struct {
		name string
		id   bool
	}{{"passthrough", true}, {"passthrough_bare", false}} {
		b.Run(c.name, func(b *testing.B) {
			run(b, func(prefix string, js jetstream.JetStream) (func(), error) {
				return jetStreamPassThrough(ctx, js, prefix, len(msgs), c.id)
			})
		})
	}
	b.Run("worker", func(b *testing.B) {
		run(b, func(prefix string, js jetstream.JetStream) (func(), error) {
			nc := js.Conn()
			src, err := natsio.NewJetStreamSource(ctx, nc, prefix+"_IN", "", nil, wire.Start{Kind: "earliest"}, zap.NewNop())
			if err != nil {
				return func() {}, err
			}
			sink, err := natsio.NewSink(nc, true, zap.NewNop())
			if err != nil {
				return func() { src.Close() }, err
			}
			err = runBenchWorker(b, consumer.WorkerConfig{Predictions: consumer.Destination{Sink: sink, Topic: prefix + ".PRED"}}, learner.DefaultConfig(), src, "jetstream:"+prefix+"_IN", int64(len(msgs)))
			return func() { src.Close(); sink.Close() }, err
		})
	})
}

// jetStreamPassThrough reads n messages of prefix's input stream with an
// ordered consumer and publishes each one's bytes to its predictions'
// subject, in windows of 1,024 awaiting their acknowledgements; with id,
// each carries a Nats-Msg-Id made of its stream and sequence, so that the
// server deduplicates it as it does the worker's outputs.
func jetStreamPassThrough(ctx context.Context, js jetstream.JetStream, prefix string, n int, id bool) (func(), error) {
	c, err := js.OrderedConsumer(ctx, prefix+"_IN", jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	it, err := c.Messages()
	if err != nil {
		return nil, err
	}
	subject := prefix + ".PRED"
	for i := range n {
		m, err := it.Next()
		if err != nil {
			return it.Stop, err
		}
		if id {
			meta, err := m.Metadata()
			if err != nil {
				return it.Stop, err
			}
			out := &natsgo.Msg{Subject: subject, Data: m.Data(), Header: natsgo.Header{}}
			out.Header.Set(jetstream.MsgIDHeader, meta.Stream+"/"+strconv.FormatUint(meta.Sequence.Stream, 10))
			_, err = js.PublishMsgAsync(out)
			if err != nil {
				return it.Stop, err
			}
		} else if _, err := js.PublishAsync(subject, m.Data()); err != nil {
			return it.Stop, err
		}
		if i%1024 == 1023 {
			<-js.PublishAsyncComplete()
		}
	}
	<-js.PublishAsyncComplete()
	return it.Stop, nil
}

// publishWindow bounds the publishes publishWindowed keeps awaiting their
// acknowledgement, as the JetStream sink does (consumer/nats/sink.go): well
// below nats.go's PublishAsyncMaxPending (4000 by default), beyond which a
// publish stalls, and fails with "stalled with too many outstanding async
// published messages" when no acknowledgement frees a place within 200ms,
// as on a busy machine.
const publishWindow = 1024

// publishWindowed publishes msgs on subject in order, asynchronously, with
// at most publishWindow in flight: when the window is full it waits for
// the oldest acknowledgement, however long that takes or until ctx is
// done. It returns once every message is acknowledged, or the first error.
// A client whose PublishAsyncMaxPending is publishWindow or more never
// stalls in it.
func publishWindowed(ctx context.Context, js jetstream.JetStream, subject string, msgs [][]byte, opts ...jetstream.PublishOpt) error {
	return publishEach(ctx, js, func(int) string { return subject }, msgs, opts...)
}

// publishEach is publishWindowed with message i published on subject(i).
func publishEach(ctx context.Context, js jetstream.JetStream, subject func(i int) string, msgs [][]byte, opts ...jetstream.PublishOpt) error {
	var inflight []jetstream.PubAckFuture
	var subjects []string
	settle := func() error {
		f, subj := inflight[0], subjects[0]
		inflight, subjects = inflight[1:], subjects[1:]
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return fmt.Errorf("publish to %s: %w", subj, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i, m := range msgs {
		if len(inflight) == publishWindow {
			if err := settle(); err != nil {
				return err
			}
		}
		subj := subject(i)
		f, err := js.PublishAsync(subj, m, opts...)
		if err != nil {
			return fmt.Errorf("publish to %s: %w", subj, err)
		}
		inflight, subjects = append(inflight, f), append(subjects, subj)
	}
	for len(inflight) > 0 {
		if err := settle(); err != nil {
			return err
		}
	}
	return nil
}

// TestPublishWindowed: publishWindowed never stalls a client that allows
// as many pending acknowledgements as its window, even one that gives up
// on a stalled publish at once, and every message is stored.
func TestPublishWindowed(t *testing.T) {
	ns := startNATS(t)
	ctx := testContext(t)
	nc := ns.Conn(t)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(publishWindow))
	if err != nil {
		t.Fatal(err)
	}
	name := uniquePrefix("WINDOW")
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: name, Subjects: []string{name}, Storage: jetstream.MemoryStorage})
	t.Cleanup(func() { js.DeleteStream(context.Background(), name) }) //nolint:errcheck // the server may be gone
	msgs, _ := benchMessages(3*publishWindow + 7)
	if err := publishWindowed(ctx, js, name, msgs, jetstream.WithStallWait(time.Nanosecond)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, ctx, js, name); n != len(msgs) {
		t.Fatalf("the stream holds %d messages, want %d", n, len(msgs))
	}
}

// runBenchWorker runs a worker with cfg until its outputs for the n
// messages at source key are out, then stops the timer and the worker:
// shutdown is not timed.
func runBenchWorker(b *testing.B, cfg consumer.WorkerConfig, lcfg learner.Config, src consumer.Source, key string, n int64) error {
	model, err := learner.New(lcfg)
	if err != nil {
		return err
	}
	cfg.Model, cfg.Batch = "bench", 1024
	w := consumer.NewWorker(cfg, src, model, nil, nil, zap.NewNop())
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
	b.StopTimer()
	cancel()
	return <-done
}

// benchKafkaTopics runs pass b.N times, each time on a new in-process
// Kafka cluster whose topic in holds msgs, and reports msgs/s. Only pass
// is timed; the cleanup it returns is not.
func benchKafkaTopics(b *testing.B, msgs [][]byte, pass func(b *testing.B, addrs []string, in, out string) (func(), error)) {
	for range b.N {
		b.StopTimer()
		addrs, in, out, closeTopic := newBenchTopic(b, msgs)
		b.StartTimer()
		cleanup, err := pass(b, addrs, in, out)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		cleanup()
		closeTopic()
	}
	b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "msgs/s")
}

// newBenchTopic starts an in-process Kafka cluster whose one-partition
// topic in holds msgs, and whose topic out exists. A cluster and client
// of its own per pass, closed at its end: testbroker's are closed only
// when the benchmark ends, and keeping every pass's cluster and records
// alive made even the pass-through a third slower.
func newBenchTopic(b *testing.B, msgs [][]byte) (addrs []string, in, out string, closeTopic func()) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1))
	if err != nil {
		b.Fatal(err)
	}
	addrs = c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.AllowAutoTopicCreation())
	if err != nil {
		c.Close()
		b.Fatal(err)
	}
	defer cl.Close()
	in, out = "examples", "predictions"
	recs := make([]*kgo.Record, 0, len(msgs)+1)
	for _, m := range msgs {
		recs = append(recs, &kgo.Record{Topic: in, Value: m})
	}
	recs = append(recs, &kgo.Record{Topic: out, Value: []byte("x")})
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		c.Close()
		b.Fatal(err)
	}
	return addrs, in, out, c.Close
}

func benchKafka(b *testing.B, msgs [][]byte) {
	ctx := context.Background()
	run := func(b *testing.B, pass func(addrs []string, in, out string) (func(), error)) {
		benchKafkaTopics(b, msgs, func(_ *testing.B, addrs []string, in, out string) (func(), error) { return pass(addrs, in, out) })
	}
	b.Run("passthrough", func(b *testing.B) {
		run(b, func(addrs []string, in, out string) (func(), error) {
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
		run(b, func(addrs []string, in, out string) (func(), error) {
			kc := kafkaio.Config{Brokers: addrs}
			src, err := kafkaio.NewSource(ctx, kc, []string{in}, "", nil, wire.Start{Kind: "earliest"}, zap.NewNop())
			if err != nil {
				return func() {}, err
			}
			sink, err := kafkaio.NewSink(kc, zap.NewNop())
			if err != nil {
				return func() { src.Close() }, err
			}
			err = runBenchWorker(b, consumer.WorkerConfig{Predictions: consumer.Destination{Sink: sink, Topic: out}}, learner.DefaultConfig(), src, "kafka:"+in+"/0", int64(len(msgs)))
			return func() { src.Close(); sink.Close() }, err
		})
	})
}

// BenchmarkSnapshotting measures the worker's throughput over a Kafka
// topic with a model of 2^20 weights, without snapshots and with one every
// second to S3 (in-process, or the server HYPERPLANE_TEST_S3_ENDPOINT
// names). One op is a stream of a few seconds, so that the snapshots fall
// inside it; the ratio of the two msgs/s figures is the cost of
// snapshotting. snapshots/op counts the one at shutdown, which is not
// timed.
func BenchmarkSnapshotting(b *testing.B) {
	msgs, size := benchMessages(32 * benchN)
	b.Logf("%d messages of %d bytes on average", len(msgs), size)
	lcfg := learner.DefaultConfig()
	lcfg.HashBits = 20
	srv := s3test.Start(b)
	for _, every := range []time.Duration{0, time.Second} {
		name := "off"
		if every > 0 {
			name = "every-" + every.String()
		}
		b.Run(name, func(b *testing.B) {
			var snapshots int
			benchKafkaTopics(b, msgs, func(b *testing.B, addrs []string, in, out string) (func(), error) {
				kc := kafkaio.Config{Brokers: addrs}
				src, err := kafkaio.NewSource(context.Background(), kc, []string{in}, "", nil, wire.Start{Kind: "earliest"}, zap.NewNop())
				if err != nil {
					return func() {}, err
				}
				sink, err := kafkaio.NewSink(kc, zap.NewNop())
				if err != nil {
					return func() { src.Close() }, err
				}
				cleanup := func() { src.Close(); sink.Close() }
				cfg := consumer.WorkerConfig{Predictions: consumer.Destination{Sink: sink, Topic: out}}
				var store *snapshot.Store
				if every > 0 {
					store, err = snapshot.OpenStore(context.Background(), srv.URL(b))
					if err != nil {
						return cleanup, err
					}
					cleanup = func() { src.Close(); sink.Close(); store.Close() }
					cfg.Snapshots = snapshot.NewSnapshotter(store, "bench", "bench", 1, 2, zap.NewNop())
					cfg.SnapshotInterval = every
				}
				if err := runBenchWorker(b, cfg, lcfg, src, "kafka:"+in+"/0", int64(len(msgs))); err != nil {
					return cleanup, err
				}
				if store != nil {
					gens, err := store.Generations(context.Background(), "bench")
					if err != nil {
						return cleanup, err
					}
					snapshots += int(gens[len(gens)-1])
				}
				return cleanup, nil
			})
			b.ReportMetric(float64(snapshots)/float64(b.N), "snapshots/op")
		})
	}
}
