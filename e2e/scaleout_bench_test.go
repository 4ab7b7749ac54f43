//go:build linux

package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// The scale-out throughput benchmarks' stream: epochsBenchN labeled
// examples of 40 features (629 bytes of JSON each on average), spread over
// epochsBenchPartitions partitions as example i to partition i mod 4, at
// offset i/4, or all in one partition in their order.
const (
	epochsBenchN          = 400000
	epochsBenchPartitions = 4
)

func epochsBenchMessages(n int) (msgs [][]byte, size int) { return synthMessages(n, 40, 5) }

// BenchmarkEpochs compares, in one process, the same epochsBenchN
// examples learned by the single Worker from a topic of one partition
// (path=single, what a one-partition topic runs today) with the same
// examples in a topic of four partitions learned in recorded epochs by
// consumer.Epochs (path=epochs-E<n>, model.mixing.epoch_examples n: one
// Worker goroutine per partition's range, every shard's result written to
// an in-memory snapshot store, the barrier, the mix). Every example's
// prediction is published in both. One op is the whole stream, timed
// from the start of the worker to the last prediction acknowledged (single)
// or to the mixed model that includes every partition's end (epochs);
// loading the topic and shutting down are not timed.
//
// broker=kafka reads kfake, in this process, with a cluster of its own per
// op (kafka.Shards and a kafka.Source, the Kafka sink); broker=jetstream
// reads a JetStream stream on an in-process nats-server of its own per op,
// partitioned as `hyperplane setup` makes it (nats.JetStreamShards and a
// nats.JetStreamSource, the JetStream sink): a broker that serves its
// clients in parallel, where kfake serves every request on one goroutine.
// There a shard's positions are the stream's sequences, so an epoch of
// epoch_examples E holds about E/4 examples of each partition.
// broker=memory reads a consumer/memory Log and publishes to a memory
// Sink: the ceiling without a broker. Besides examples/s it reports the CPU time this
// process and the whole machine used while timed (cpu-s/op,
// machine-cpu-s/op: how many cores the op used, and whether anything else
// ran), and for the epochs their number and the mean time per epoch at the
// barrier and mixing (the hyperplane_epoch_barrier_seconds and
// hyperplane_epoch_mix_seconds histograms). Linux only: the CPU times
// come from /proc.
//
//	go test -run XXX -bench 'BenchmarkEpochs$' -benchtime 1x -count 10 -timeout 90m ./e2e/
func BenchmarkEpochs(b *testing.B) {
	msgs, size := epochsBenchMessages(epochsBenchN)
	b.Logf("%d messages of %d bytes on average", len(msgs), size)
	paths := []struct {
		name       string
		partitions int
		epoch      int64
	}{
		{"single", 1, 0},
		{"epochs-E100000", epochsBenchPartitions, 100000},
		{"epochs-E10000", epochsBenchPartitions, 10000},
	}
	for _, broker := range []string{"kafka", "jetstream", "memory"} {
		for _, p := range paths {
			b.Run("broker="+broker+"/path="+p.name, func(b *testing.B) {
				var st epochStats
				for range b.N {
					b.StopTimer()
					var err error
					switch broker {
					case "kafka":
						err = benchEpochsKafka(b, msgs, p.partitions, p.epoch, &st)
					case "jetstream":
						err = benchEpochsJetStream(b, msgs, p.partitions, p.epoch, &st)
					default:
						err = benchEpochsMemory(b, msgs, p.partitions, p.epoch, &st)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "examples/s")
				st.report(b)
			})
		}
	}
}

// epochStats sums, over a benchmark's ops, the epochs' histograms and the
// CPU time used while timed.
type epochStats struct {
	barrier, mix           float64
	barrierCount, mixCount uint64
	cpu                    cpuClock
	began                  cpuClock
}

// start starts the timer; stop stops it, adding the CPU time used
// between the two.
func (s *epochStats) start(b *testing.B) {
	s.began = readCPU(b)
	b.StartTimer()
}

func (s *epochStats) stop(b *testing.B) {
	b.StopTimer()
	now := readCPU(b)
	s.cpu.self += now.self - s.began.self
	s.cpu.machine += now.machine - s.began.machine
}

// cpuClock is CPU time so far, in seconds: this process's, and the
// machine's (every process's, on every core).
type cpuClock struct{ self, machine float64 }

// readCPU reads the CPU clocks: getrusage(2) and /proc/stat (Linux).
func readCPU(b testing.TB) cpuClock {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	self := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	// cpu user nice system idle iowait irq softirq steal …, in USER_HZ
	// (100 a second): busy is all but idle and iowait.
	var busy float64
	for i, f := range strings.Fields(line)[1:] {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			b.Fatal(err)
		}
		if i != 3 && i != 4 && i < 8 {
			busy += v
		}
	}
	return cpuClock{self: self, machine: busy / 100}
}

func (s *epochStats) add(m *consumer.Metrics) {
	sum, n := histogram(m.Barrier)
	s.barrier, s.barrierCount = s.barrier+sum, s.barrierCount+n
	sum, n = histogram(m.Mixing)
	s.mix, s.mixCount = s.mix+sum, s.mixCount+n
}

// report adds the CPU times per op and, for the benchmarks that learn in
// epochs, epochs/op and the mean time per epoch at the barrier and mixing.
func (s *epochStats) report(b *testing.B) {
	b.ReportMetric(s.cpu.self/float64(b.N), "cpu-s/op")
	b.ReportMetric(s.cpu.machine/float64(b.N), "machine-cpu-s/op")
	if s.mixCount == 0 {
		return
	}
	b.ReportMetric(float64(s.mixCount)/float64(b.N), "epochs/op")
	b.ReportMetric(1000*s.barrier/float64(s.barrierCount), "barrier-ms/epoch")
	b.ReportMetric(1000*s.mix/float64(s.mixCount), "mix-ms/epoch")
}

func histogram(h prometheus.Histogram) (sum float64, count uint64) {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		return 0, 0
	}
	return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
}

// benchEpochsKafka is one op on a kfake cluster of its own, closed at its
// end, whose topic "examples" of partitions partitions holds msgs.
func benchEpochsKafka(b *testing.B, msgs [][]byte, partitions int, epoch int64, st *epochStats) error {
	ctx := context.Background()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), "examples"), kfake.SeedTopics(1, "predictions"))
	if err != nil {
		return err
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	if err := produceEpochs(ctx, addrs, msgs, partitions); err != nil {
		return err
	}
	kc := kafkaio.Config{Brokers: addrs}
	sink, err := kafkaio.NewSink(kc, zap.NewNop())
	if err != nil {
		return err
	}
	defer sink.Close()
	out := consumer.Destination{Sink: sink, Topic: "predictions"}
	if partitions == 1 {
		src, err := kafkaio.NewSource(ctx, kc, []string{"examples"}, "", nil, wire.Start{Kind: wire.StartEarliest}, zap.NewNop())
		if err != nil {
			return err
		}
		defer src.Close()
		return runSingle(b, out, src, "kafka:examples/0", int64(len(msgs)), st)
	}
	shards, err := kafkaio.NewShards(kc, []string{"examples"}, zap.NewNop())
	if err != nil {
		return err
	}
	defer shards.Close()
	ends := map[shardid.ID]int64{}
	for p := range partitions {
		ends[shardid.Kafka("examples", p)] = int64((len(msgs) - p + partitions - 1) / partitions)
	}
	return runBenchEpochs(b, out, shards, ends, epoch, st)
}

// produceEpochs writes message i of msgs to partition i mod partitions of
// the topic "examples".
func produceEpochs(ctx context.Context, addrs []string, msgs [][]byte, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = &kgo.Record{Topic: "examples", Partition: int32(i % partitions), Value: m}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// benchEpochsMemory is one op over a memory Log that holds msgs, and a
// memory Sink.
func benchEpochsMemory(b *testing.B, msgs [][]byte, partitions int, epoch int64, st *epochStats) error {
	log := memory.NewLog("examples", partitions)
	parts := make([][][]byte, partitions)
	for i, m := range msgs {
		parts[i%partitions] = append(parts[i%partitions], m)
	}
	for p, part := range parts {
		log.Append(p, part...)
	}
	out := consumer.Destination{Sink: memory.NewSink(), Topic: "predictions"}
	if partitions == 1 {
		src := memory.NewSource(log, nil)
		defer src.Close()
		return runSingle(b, out, src, log.Key(0), int64(len(msgs)), st)
	}
	ends, err := log.Ends(context.Background())
	if err != nil {
		return err
	}
	return runBenchEpochs(b, out, log, ends, epoch, st)
}

// runBenchEpochs learns shards in epochs of at most epoch examples per
// shard, as one worker owning every shard, with the epoch log in memory,
// and stops the timer once the mixed model includes every shard up to its
// end in ends. Shutting down (it writes the last mixed model) is not
// timed.
func runBenchEpochs(b *testing.B, out consumer.Destination, shards consumer.Shards, ends map[shardid.ID]int64, epoch int64, st *epochStats) error {
	return runBenchEpochsOf(b, out, shards, ends, epoch, nil, st)
}

// runBenchEpochsOf is runBenchEpochs of a model with challengers.
func runBenchEpochsOf(b *testing.B, out consumer.Destination, shards consumer.Shards, ends map[shardid.ID]int64, epoch int64, challengers []learner.ChallengerConfig, st *epochStats) error {
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	model, err := learner.New(learner.DefaultConfig())
	if err != nil {
		return err
	}
	if _, _, err := model.SetChallengers(challengers); err != nil {
		return err
	}
	cfg := consumer.EpochConfig{
		Worker:        consumer.WorkerConfig{Model: "bench", Predictions: out, Batch: 1024},
		Shards:        shards,
		Log:           epochlog.New(store),
		Writer:        "bench",
		ConfigDigest:  sha256.Sum256([]byte("bench")),
		EpochExamples: epoch,
		Interval:      5 * time.Second,
		Weights:       learner.MixExamples,
		Start:         wire.Start{Kind: wire.StartEarliest},
		Keep:          3,
	}
	metrics := consumer.NewMetrics(nil)
	st.start(b)
	x := consumer.NewEpochs(cfg, model, 1, nil, nil, metrics, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	for !covers(x.Positions(), ends) {
		select {
		case err := <-done:
			return fmt.Errorf("epochs stopped: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	st.stop(b)
	cancel()
	err = <-done
	// The last epoch's mix is observed as it returns, just after the
	// positions move: read the histograms once Run has returned.
	st.add(metrics)
	return err
}

// runSingle runs a Worker, as a source of one partition runs today, over
// src until the predictions of the n messages at source key are
// published, then stops the timer and the worker: shutdown is not timed.
func runSingle(b *testing.B, out consumer.Destination, src consumer.Source, key string, n int64, st *epochStats) error {
	model, err := learner.New(learner.DefaultConfig())
	if err != nil {
		return err
	}
	st.start(b)
	w := consumer.NewWorker(consumer.WorkerConfig{Model: "bench", Predictions: out, Batch: 1024}, src, model, nil, nil, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for w.Published()[key] < n {
		select {
		case err := <-done:
			return fmt.Errorf("worker stopped: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	st.stop(b)
	cancel()
	return <-done
}

// covers reports whether positions reach every shard's end.
func covers(positions map[string]int64, ends map[shardid.ID]int64) bool {
	for shard, end := range ends {
		if positions[shard.String()] < end {
			return false
		}
	}
	return true
}

// benchEpochsJetStream is one op on an in-process NATS server of its own,
// shut down at its end, whose stream "examples" (memory storage) holds
// msgs on the subjects ex.<i>: one stream read in order (partitions 1),
// or partitioned by the key i over partitions partitions, the stream's
// subject transform as `hyperplane setup` makes it. The predictions go to
// a stream of their own, each published with an acknowledgement.
func benchEpochsJetStream(b *testing.B, msgs [][]byte, partitions int, epoch int64, st *epochStats) error {
	ctx := context.Background()
	srv := testbroker.NATS(b)
	defer srv.Shutdown()
	nc, err := natsgo.Connect(srv.URL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cfg := jetstream.StreamConfig{Name: "examples", Subjects: []string{"ex.*"}}
	if partitions > 1 {
		cfg = natsio.PartitionedStreamConfig("examples", "ex.*", partitions)
	}
	cfg.Storage = jetstream.MemoryStorage
	testbroker.CreateStream(b, js, cfg)
	testbroker.CreateStream(b, js, jetstream.StreamConfig{Name: "predictions", Subjects: []string{"predictions"}, Storage: jetstream.MemoryStorage})
	// Published in windows of acknowledgements, within the client's
	// limit of pending ones.
	const window = 1000
	for i := 0; i < len(msgs); i += window {
		for j := i; j < min(i+window, len(msgs)); j++ {
			if _, err := js.PublishAsync("ex."+strconv.Itoa(j), msgs[j]); err != nil {
				return err
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			return fmt.Errorf("publishing examples: no acknowledgements after 30s")
		}
	}
	sink, err := natsio.NewSink(nc, true, zap.NewNop())
	if err != nil {
		return err
	}
	defer sink.Close()
	out := consumer.Destination{Sink: sink, Topic: "predictions"}
	if partitions == 1 {
		src, err := natsio.NewJetStreamSource(ctx, nc, "examples", "", nil, wire.Start{Kind: wire.StartEarliest}, zap.NewNop())
		if err != nil {
			return err
		}
		defer src.Close()
		return runSingle(b, out, src, "jetstream:examples", int64(len(msgs)), st)
	}
	shards, err := natsio.NewJetStreamShards(ctx, nc, "examples", partitions, zap.NewNop())
	if err != nil {
		return err
	}
	ends, err := shards.Ends(ctx)
	if err != nil {
		return err
	}
	return runBenchEpochs(b, out, shards, ends, epoch, st)
}
