package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
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

// BenchmarkServedDelay measures what the delay of labels costs the
// predictions as they are served, with the real binary at the defaults
// (the default learner, labels.window 10m, no labels.default) over an
// in-process Kafka: `hyperplane gen` publishes servedDelayN examples at
// 2,000 a second without their labels, and each label later, after an
// exponentially distributed delay of mean 0 (the anchor: labeled at once,
// through the same join), 10 s and 60 s; on a stationary stream and on one
// whose concept changes halfway. Once servedDelayShare of the labels have
// joined, it reports the served accuracy and log-loss (each joined label
// scores the prediction published for its example, by the model of that
// moment) and the model's own prequential accuracy (each example predicted
// when its label joined, just before it is learned). Which labels are
// still out then depends on their delay alone, not on their example, so
// the figures are of a sample the delay did not choose.
func BenchmarkServedDelay(b *testing.B) {
	const rate = 2000
	for _, stream := range []struct {
		name  string
		drift []string
	}{{"stationary", nil}, {"drift", []string{"-drift-at", fmt.Sprint(servedDelayN / 2)}}} {
		for _, delay := range []time.Duration{0, 10 * time.Second, time.Minute} {
			b.Run(fmt.Sprintf("%s/delay=%s", stream.name, delay), func(b *testing.B) {
				var accuracy, logLoss, prequential float64
				for b.Loop() {
					accuracy, logLoss, prequential = servedDelayRun(b, rate, delay, stream.drift)
				}
				b.ReportMetric(accuracy, "served-accuracy")
				b.ReportMetric(logLoss, "served-logloss")
				b.ReportMetric(prequential, "prequential-accuracy")
			})
		}
	}
}

const (
	// servedDelayN is how many examples a run of BenchmarkServedDelay
	// publishes: 200 s of them at 2,000 a second. The tail learns in the
	// examples' order, so it trails the head by about D·ln(r·D) (100 s at a
	// mean delay D of 10 s, the whole window at 60 s): a shorter stream
	// would be served by a model that has learned next to nothing.
	servedDelayN = 400_000
	// servedDelayShare is the share of the labels that must have joined
	// before the served figures are read: with a mean delay of 60 s, the
	// last ones take minutes more.
	servedDelayShare = 0.98
)

func servedDelayRun(b *testing.B, rate int, delay time.Duration, drift []string) (accuracy, logLoss, prequential float64) {
	c := testbroker.Kafka(b, kfake.SeedTopics(1, "examples", "labels", "predictions"))
	addr := c.ListenAddrs()[0]
	w := start(b, "run", "--config", writeConfig(b, fmt.Sprintf(`
model:
  name: served
kafka:
  brokers: [%s]
source:
  kind: kafka
  topics: [examples]
labels:
  kind: kafka
  topics: [labels]
outputs:
  predictions: kafka:predictions
`, addr)))
	wait.For(b, time.Minute, 50*time.Millisecond, "the worker to be ready", w.ready)
	gen := exec.Command(hyperplane.path, append([]string{"gen", "-examples", fmt.Sprint(servedDelayN),
		"-unlabeled", "0", "-rate", fmt.Sprint(rate), "-to", "kafka:examples", "-labels-to", "kafka:labels",
		"-label-delay", delay.String(), "-kafka-brokers", addr}, drift...)...)
	var genErr bytes.Buffer
	gen.Stderr = &genErr
	if err := gen.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		gen.Process.Kill() //nolint:errcheck // may have exited
		gen.Wait()         //nolint:errcheck // killed
	}()
	joined := `hyperplane_labels_total{outcome="joined"}`
	wait.For(b, 30*time.Minute, 200*time.Millisecond, "the labels to join", func() bool {
		return w.metric(joined) >= servedDelayShare*servedDelayN
	})
	accuracy, logLoss = w.metric("hyperplane_served_accuracy"), w.metric("hyperplane_served_log_loss")
	correct, mistakes := w.metric(`hyperplane_examples_total{result="correct"}`), w.metric(`hyperplane_examples_total{result="mistake"}`)
	prequential = correct / (correct + mistakes)
	if accuracy <= 0 || accuracy > 1 || logLoss <= 0 {
		b.Fatalf("served accuracy %v, log-loss %v after %v labels joined\n%s", accuracy, logLoss, w.metric(joined), genErr.String())
	}
	return accuracy, logLoss, prequential
}
