package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// joinBenchN is how many examples an op of BenchmarkJoinThroughput
// learns.
const joinBenchN = 200_000

// BenchmarkJoinThroughput compares the worker over examples that carry
// their labels (labeled) with the worker over the same examples without
// them, whose labels come on a topic of their own up to a second of record
// time later (joined: the head predicts, the labels join, the tail reads
// the examples again and learns), each over an in-process Kafka of one
// partition a topic, at the defaults (labels.window 10m). One op is
// joinBenchN examples, from opening the clients until the model has
// learned them all and their outputs are durable: enough that opening the
// joined path's two more readers is not what is measured. cpu-s/op is the
// CPU this process (the worker and the broker) used while timed, the
// figure to read on a machine busy with other work.
func BenchmarkJoinThroughput(b *testing.B) {
	o := synth.DefaultOptions()
	o.Features, o.Seed = 36, 3
	s := synth.New(o)
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var labeled, examples, labels []*kgo.Record
	for i := range joinBenchN {
		rec := s.Next()
		t := base.Add(time.Duration(i) * 500 * time.Microsecond)
		line := synth.AppendJSON(nil, rec)
		labeled = append(labeled, &kgo.Record{Topic: "examples", Value: line[:len(line)-1], Timestamp: t})
		y := rec.Label
		rec.Labeled = false
		line = synth.AppendJSON(nil, rec)
		examples = append(examples, &kgo.Record{Topic: "examples", Value: line[:len(line)-1], Timestamp: t})
		labels = append(labels, &kgo.Record{Topic: "labels", Value: fmt.Appendf(nil, `{"id":"%s","label":%d}`, strconv.FormatUint(rec.Seq, 10), y),
			Timestamp: t.Add(time.Duration(rng.Int64N(int64(time.Second))))})
	}
	slices.SortStableFunc(labels, func(a, b *kgo.Record) int { return a.Timestamp.Compare(b.Timestamp) })
	b.Run("labeled", func(b *testing.B) { benchJoin(b, labeled, false) })
	b.Run("joined", func(b *testing.B) { benchJoin(b, append(examples, labels...), true) })
}

func benchJoin(b *testing.B, recs []*kgo.Record, joined bool) {
	ctx := context.Background()
	var cpu float64 // this process's CPU seconds while timed: the broker's and the worker's
	for range b.N {
		b.StopTimer()
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "examples", "labels", "predictions"))
		if err != nil {
			b.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			b.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		cl.Close()
		began := readCPU(b)
		b.StartTimer()
		kc := kafkaio.Config{Brokers: c.ListenAddrs()}
		open := func(topic string) consumer.Source {
			src, err := kafkaio.NewSource(ctx, kc, []string{topic}, "", nil, wire.Start{Kind: wire.StartEarliest}, zap.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			return src
		}
		sink, err := kafkaio.NewSink(kc, zap.NewNop())
		if err != nil {
			b.Fatal(err)
		}
		head := open("examples")
		closers := []consumer.Source{head}
		cfg := consumer.WorkerConfig{Predictions: consumer.Destination{Sink: sink, Topic: "predictions"}}
		if joined {
			lb := open("labels")
			closers = append(closers, lb)
			cfg.Labels = &consumer.LabelsConfig{
				Join:   consumer.JoinConfig{Window: 10 * time.Minute},
				Source: lb, Format: wire.FormatAuto,
				OpenTail: func(ctx context.Context, resume map[string]int64) (consumer.Source, error) {
					return kafkaio.NewSource(ctx, kc, []string{"examples"}, "", resume, wire.Start{Kind: wire.StartEarliest}, zap.NewNop())
				},
				Marks: consumer.Destination{Sink: sink, Topic: "labels"}, Writer: "bench",
			}
		}
		if err := runBenchWorker(b, cfg, learner.DefaultConfig(), head, "kafka:examples/0", joinBenchN); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += readCPU(b).self - began.self
		for _, s := range closers {
			s.Close()
		}
		sink.Close()
		c.Close()
	}
	b.ReportMetric(float64(b.N*joinBenchN)/b.Elapsed().Seconds(), "examples/s")
	b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
}

// BenchmarkJoinPendingRSS measures the worker's resident memory with a
// million examples waiting for their labels: the real binary at the
// defaults (labels.window 10m, the head's cache of 64 MiB) over an
// in-process Kafka whose examples topic holds a million examples without
// labels and whose labels topic is empty, against the same binary over
// the same examples with their labels. It reports the RSS of each once
// the million are read (MiB), the difference per pending example, and the
// heap in use of each (Go's collector lets the heap grow to about twice
// what is live before it collects, so RSS is about that much more).
func BenchmarkJoinPendingRSS(b *testing.B) {
	const n = 1_000_000
	o := synth.DefaultOptions()
	o.Features, o.Seed = 36, 3
	s := synth.New(o)
	base := time.Now().Add(-time.Minute)
	var labeled, examples []*kgo.Record
	for range n {
		rec := s.Next()
		line := synth.AppendJSON(nil, rec)
		labeled = append(labeled, &kgo.Record{Topic: "labeled", Value: line[:len(line)-1]})
		rec.Labeled = false
		line = synth.AppendJSON(nil, rec)
		examples = append(examples, &kgo.Record{Topic: "examples", Value: line[:len(line)-1], Timestamp: base})
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "examples", "labeled", "labels", "predictions"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	if err := cl.ProduceSync(context.Background(), append(labeled, examples...)...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	cl.Close()
	labeled, examples = nil, nil
	config := func(topic, labels string) string {
		return fmt.Sprintf(`
model:
  name: rss
kafka:
  brokers: [%s]
source:
  kind: kafka
  topics: [%s]
outputs:
  predictions: kafka:predictions
%s`, c.ListenAddrs()[0], topic, labels)
	}
	rss := func(b *testing.B, cfg string, done func(*proc) bool) (rss, heap float64) {
		p := start(b, "run", "--config", writeConfig(b, cfg))
		wait.For(b, 10*time.Minute, 50*time.Millisecond, "the worker through the examples", func() bool { return done(p) })
		rss, heap = p.metric("process_resident_memory_bytes"), p.metric("go_memstats_heap_inuse_bytes")
		p.cmd.Process.Kill() //nolint:errcheck // measured
		<-p.done
		return rss / (1 << 20), heap / (1 << 20)
	}
	for b.Loop() {
		plain, plainHeap := rss(b, config("labeled", ""), func(p *proc) bool {
			return p.metric(`hyperplane_position{source="kafka:labeled/0"}`) >= n
		})
		joined, joinedHeap := rss(b, config("examples", "labels:\n  kind: kafka\n  topics: [labels]\n"), func(p *proc) bool {
			return p.metric("hyperplane_join_pending") >= n
		})
		b.ReportMetric(plain, "labeled-RSS-MiB")
		b.ReportMetric(joined, "pending-RSS-MiB")
		b.ReportMetric((joined-plain)*(1<<20)/n, "RSS-B/pending")
		b.ReportMetric(plainHeap, "labeled-heap-MiB")
		b.ReportMetric(joinedHeap, "pending-heap-MiB")
	}
}
