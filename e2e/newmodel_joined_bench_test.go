package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// joinedBenchN is how many examples an op of BenchmarkNewModelJoined
// learns.
const joinedBenchN = 400_000

// BenchmarkNewModelJoined is BenchmarkNewModel with labels that come
// later: the real binary at the defaults but for `labels` (kind kafka,
// the topic labels, co-partitioned), a new model learning joinedBenchN
// examples without their labels, whose labels are on the labels topic up
// to a second of record time after them (the examples 0.5 ms apart), from
// topics of one partition (the single worker's join) or four (the join in
// epochs, docs/labels.md section 11). Both topics are full before the
// worker starts, as in a replay of a backlog. An op is timed from the
// worker's start until its /metrics positions cover every example.
//
//	go test -run XXX -bench BenchmarkNewModelJoined -benchtime 1x -count 3 ./e2e/
func BenchmarkNewModelJoined(b *testing.B) {
	broker := buildBenchBroker(b)
	for _, partitions := range []int{1, 4} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			recs := joinedBenchRecords(partitions)
			var cpu float64
			for range b.N {
				b.StopTimer()
				cpu += newModelJoinedOp(b, broker, recs, partitions)
			}
			b.ReportMetric(float64(b.N*joinedBenchN)/b.Elapsed().Seconds(), "examples/s")
			b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
		})
	}
}

// joinedBenchRecords are the examples, without their labels, and the
// labels of BenchmarkNewModelJoined: example i in partition i mod
// partitions, its label in the same partition of labels, each
// partition's labels in the order of their times.
func joinedBenchRecords(partitions int) []*kgo.Record {
	o := synth.DefaultOptions()
	o.Features, o.Seed = 40, 5
	s := synth.New(o)
	rng := rand.New(rand.NewPCG(5, 6))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]*kgo.Record, 0, 2*joinedBenchN)
	labels := make([][]*kgo.Record, partitions)
	for i := range joinedBenchN {
		rec := s.Next()
		p := int32(i % partitions)
		t := base.Add(time.Duration(i) * 500 * time.Microsecond)
		y := rec.Label
		rec.Labeled = false
		line := synth.AppendJSON(nil, rec)
		recs = append(recs, &kgo.Record{Topic: "examples", Partition: p, Value: line[:len(line)-1], Timestamp: t})
		labels[p] = append(labels[p], &kgo.Record{Topic: "labels", Partition: p,
			Value:     fmt.Appendf(nil, `{"id":"%s","label":%d}`, strconv.FormatUint(rec.Seq, 10), y),
			Timestamp: t.Add(time.Duration(rng.Int64N(int64(time.Second))))})
	}
	for _, ls := range labels {
		slices.SortStableFunc(ls, func(a, b *kgo.Record) int { return a.Timestamp.Compare(b.Timestamp) })
		recs = append(recs, ls...)
	}
	return recs
}

// newModelJoinedOp is one op of BenchmarkNewModelJoined, with a broker
// and a store of its own. It returns the CPU time the worker's process
// used, from its start until it exited after the op.
func newModelJoinedOp(b *testing.B, brokerBin string, recs []*kgo.Record, partitions int) (cpu float64) {
	br := startBenchProc(b, brokerBin, []string{"-partitions", strconv.Itoa(partitions), "-topics", "examples,labels", "-outputs", "predictions"}, true)
	defer br.stop(b)
	addrs := br.firstLine(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addrs, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	err = cl.ProduceSync(ctx, recs...).FirstErr()
	cl.Close()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
model:
  name: joined
kafka:
  brokers: [%[1]s]
source:
  kind: kafka
  topics: [examples]
  group: joined
labels:
  kind: kafka
  topics: [labels]
outputs:
  predictions: kafka:predictions
snapshot:
  url: file://%[2]s?create_dir=1
`, addrs, filepath.Join(dir, "store"))), 0o644); err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	b.StartTimer()
	w := startBenchProc(b, hyperplane.path, []string{"run", "--config", cfg, "--http.addr", addr}, false)
	w.addr = addr
	defer func() {
		w.stop(b)
		if st := w.cmd.ProcessState; st != nil {
			cpu = (st.UserTime() + st.SystemTime()).Seconds()
		}
	}()
	waitBench(b, []*benchProc{w}, 10*time.Minute, "the positions at every example", func() bool {
		m, err := w.metrics()
		if err != nil {
			return false
		}
		return sumOf(m, `hyperplane_position{source="kafka:examples`) == joinedBenchN
	})
	b.StopTimer()
	return cpu
}
