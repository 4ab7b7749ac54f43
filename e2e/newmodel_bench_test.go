package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkNewModel is what a new user's first run costs: the real
// binary, a new model at the defaults (model.mixing and snapshot.* as
// config.Default has them), learning the same epochsBenchN examples from
// a topic of one partition (partitions=1, the single worker) or spread
// round-robin over four (partitions=4, epochs). kfake runs in a process
// of its own; the examples are in the topic before the worker starts. An
// op is timed from the worker's start until its /metrics positions cover
// every example, which in epochs is the newest mixed model's.
//
//	go test -run XXX -bench BenchmarkNewModel -benchtime 1x -count 6 ./e2e/
func BenchmarkNewModel(b *testing.B) {
	broker, msgs := newModelInput(b)
	for _, partitions := range []int{1, 4} {
		b.Run(fmt.Sprintf("partitions=%d/path=worker", partitions), func(b *testing.B) {
			newModelRuns(b, broker, msgs, partitions, roundRobin)
		})
		b.Run(fmt.Sprintf("partitions=%d/path=kcat", partitions), func(b *testing.B) {
			if _, err := exec.LookPath("kcat"); err != nil {
				b.Skip("no kcat on PATH (Debian: apt-get install kcat): the librdkafka pass-through is not measured")
			}
			for range b.N {
				b.StopTimer()
				passThroughOp(b, broker, msgs, partitions)
			}
			b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "examples/s")
		})
	}
}

// BenchmarkNewModelKeyed is BenchmarkNewModel over a topic whose
// producer keys its messages, as most do (and `hyperplane gen -to kafka:`
// does): each example has a key of its own, and the producer's default
// partitioner (murmur2, as Kafka's Java client) puts it in a partition.
// The partitions then differ by a few hundred messages, and the last
// epochs of a new model are not the round-robin topic's.
//
//	go test -run XXX -bench BenchmarkNewModelKeyed -benchtime 1x -count 6 ./e2e/
func BenchmarkNewModelKeyed(b *testing.B) {
	broker, msgs := newModelInput(b)
	for _, partitions := range []int{1, 4} {
		b.Run(fmt.Sprintf("partitions=%d/path=worker", partitions), func(b *testing.B) {
			newModelRuns(b, broker, msgs, partitions, byKey)
		})
	}
}

// newModelInput builds the benchmarks' broker and returns its path with
// the epochsBenchN examples a new model learns.
func newModelInput(b *testing.B) (broker string, msgs [][]byte) {
	broker = buildBenchBroker(b)
	msgs, size := epochsBenchMessages(epochsBenchN)
	b.Logf("%d messages of %d bytes on average", len(msgs), size)
	return broker, msgs
}

// newModelRuns runs b.N ops of newModelOp and reports their rate and
// costs.
func newModelRuns(b *testing.B, broker string, msgs [][]byte, partitions int, spread spread) {
	var epochs, cpu, brokerCPU float64
	for range b.N {
		b.StopTimer()
		e, c, bc := newModelOp(b, broker, msgs, partitions, spread)
		epochs, cpu, brokerCPU = epochs+e, cpu+c, brokerCPU+bc
	}
	b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "examples/s")
	b.ReportMetric(epochs/float64(b.N), "epochs/op")
	b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
	b.ReportMetric(brokerCPU/float64(b.N), "broker-cpu-s/op")
}

// spread is how loadedBroker spreads the examples over the partitions.
type spread int

const (
	// roundRobin puts example i, without a key, in partition i mod n:
	// every partition holds the same number.
	roundRobin spread = iota
	// byKey gives example i the key k<i> and lets the producer's default
	// partitioner hash it.
	byKey
)

// brokerHeapPerByte is how many bytes of heap the broker is given at
// start (kfakebroker -prefault) for each byte of the examples it is
// loaded with: the examples, the outputs the worker publishes and the
// slices kfake keeps them in.
const brokerHeapPerByte = 3

// loadedBroker starts a broker of its own with the topic examples of
// partitions partitions holding msgs, spread as spread says, and returns
// it with its addresses.
func loadedBroker(b *testing.B, brokerBin string, msgs [][]byte, partitions int, spread spread) (*benchProc, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	size := 0
	for _, m := range msgs {
		size += len(m)
	}
	prefault := strconv.Itoa(brokerHeapPerByte * size >> 20)
	b.Logf("the broker touches %s MiB first, for %d examples of %d MiB", prefault, len(msgs), size>>20)
	br := startBenchProc(b, brokerBin, []string{"-partitions", strconv.Itoa(partitions), "-topics", "examples", "-outputs", "predictions", "-prefault", prefault}, true)
	addrs := br.firstLine(b)
	partitioner := kgo.ManualPartitioner()
	if spread == byKey {
		partitioner = kgo.StickyKeyPartitioner(nil)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addrs, ",")...), kgo.RecordPartitioner(partitioner))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = &kgo.Record{Topic: "examples", Value: m}
		if spread == byKey {
			recs[i].Key = []byte("k" + strconv.Itoa(i))
		} else {
			recs[i].Partition = int32(i % partitions)
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	return br, addrs
}

// passThroughOp is one op of the librdkafka pass-through: kcat reads the
// examples from the beginning to the end and a second kcat produces each
// to the predictions topic, as the issue that set the goal measured it
// (kcat -C … | kcat -P …), timed from their start until both exit. The
// count of records produced is checked after.
func passThroughOp(b *testing.B, brokerBin string, msgs [][]byte, partitions int) {
	br, addrs := loadedBroker(b, brokerBin, msgs, partitions, roundRobin)
	defer br.stop(b)
	b.StartTimer()
	consume := exec.Command("kcat", "-C", "-b", addrs, "-t", "examples", "-o", "beginning", "-e", "-q")
	produce := exec.Command("kcat", "-P", "-b", addrs, "-t", "predictions")
	pipe, err := consume.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	produce.Stdin = pipe
	var cerr, perr strings.Builder
	consume.Stderr, produce.Stderr = &cerr, &perr
	if err := produce.Start(); err != nil {
		b.Fatal(err)
	}
	if err := consume.Run(); err != nil {
		b.Fatalf("kcat -C: %v\n%s", err, cerr.String())
	}
	if err := produce.Wait(); err != nil {
		b.Fatalf("kcat -P: %v\n%s", err, perr.String())
	}
	b.StopTimer()
	count := exec.Command("kcat", "-C", "-b", addrs, "-t", "predictions", "-o", "beginning", "-e", "-q", "-f", ".")
	out, err := count.Output()
	if err != nil {
		b.Fatal(err)
	}
	if len(out) != len(msgs) {
		b.Fatalf("the pass-through produced %d records, want %d", len(out), len(msgs))
	}
}

// newModelOp is one op of BenchmarkNewModel, with a broker and a store of
// its own. It returns the epochs the worker mixed, the CPU time (user
// and system) the worker's process used, from its start until it exited
// after the op, and the broker's over the op: the two share the machine's
// cores.
func newModelOp(b *testing.B, brokerBin string, msgs [][]byte, partitions int, spread spread) (epochs, cpu, brokerCPU float64) {
	br, addrs := loadedBroker(b, brokerBin, msgs, partitions, spread)
	defer br.stop(b)
	brokerBefore := br.cpu(b)
	b.StartTimer()
	w := startDefaultWorker(b, addrs, "new")
	defer func() {
		w.stop(b)
		if st := w.cmd.ProcessState; st != nil {
			cpu = (st.UserTime() + st.SystemTime()).Seconds()
		}
	}()
	var last map[string]float64
	waitBench(b, []*benchProc{w}, 10*time.Minute, "the positions at every example", func() bool {
		m, err := w.metrics()
		if err != nil {
			return false
		}
		last = m
		return sumOf(m, "hyperplane_position{") == float64(len(msgs))
	})
	b.StopTimer()
	return last["hyperplane_epoch"], 0, br.cpu(b) - brokerBefore
}

// startDefaultWorker starts the real binary at the defaults on the topic
// examples of the broker at addrs, a new model named name with a store
// of its own in a directory, publishing its predictions to the topic
// predictions.
func startDefaultWorker(b *testing.B, addrs, name string) *benchProc {
	b.Helper()
	dir := b.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
model:
  name: %[1]s
kafka:
  brokers: [%[2]s]
source:
  kind: kafka
  topics: [examples]
  group: %[1]s
outputs:
  predictions: kafka:predictions
snapshot:
  url: file://%[3]s?create_dir=1
`, name, addrs, filepath.Join(dir, "store"))), 0o644); err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	w := startBenchProc(b, hyperplane.path, []string{"run", "--config", cfg, "--http.addr", addr}, false)
	w.addr = addr
	return w
}

// sumOf is the sum of m's series whose names begin with prefix.
func sumOf(m map[string]float64, prefix string) float64 {
	sum := 0.0
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			sum += v
		}
	}
	return sum
}
