//go:build linux

package e2e

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// barrierBenchHashBits is the model's size in BenchmarkEpochBarrier:
// 2^18 weights, whatever the learner's default is.
const barrierBenchHashBits = 18

// BenchmarkEpochBarrier measures what an epoch's barrier costs on each
// snapshot store, and what each epoch size costs in throughput. One
// worker (consumer.Epochs owning every shard) learns the epochsBenchN
// synth examples (JSON, 40 features) of a memory Log of four partitions,
// publishing every prediction to a memory Sink, so that only the store
// differs between runs:
//
//   - store=memblob: gocloud's in-memory bucket;
//   - store=file: a file:// store in a temporary directory, as
//     snapshot.OpenStore makes it;
//   - store=s3: the in-process S3 server the snapshot tests use
//     (s3test, gofakes3), over HTTP on loopback;
//   - store=minio: the S3 server HYPERPLANE_TEST_S3_ENDPOINT names, with
//     HYPERPLANE_TEST_S3_ACCESS_KEY, _SECRET_KEY and _BUCKET (MinIO, as
//     .ci/run starts it); skipped when the variable is not set.
//
// The epoch sizes are epoch=E<n>, model.mixing.epoch_examples n with
// growth 0 (every epoch n examples of each shard), and epoch=defaults,
// model.mixing as config.Default sets it (epochs that grow with the
// model from a new one, up to the default epoch_examples). The learner
// is config.Default's (AROW) with 2^18 weights, the mixing weights and
// rule config.Default's. Snapshots are off, so the store holds only the
// epoch log: every epoch writes its boundary and one result R per
// shard, and reads them back at the barrier. epoch=defaults+snapshots
// adds config.Default's snapshot settings: generations written every
// snapshot.every labeled examples (or interval), kept as snapshot.keep
// says, and epochs cut where a generation falls due (at most
// snapshot.every shared among the shards), as a worker at the defaults
// runs; it reports generations/op and the mean time to write one
// (generation-ms) and to apply retention after it (retain-ms).
//
// One op is the whole stream, timed from the start of the epochs to the
// mixed model of the epoch that includes every partition's end; the log
// holds the stream twice over (the same messages), so that the epoch that
// reaches the end is cut at its size, not by model.mixing.interval for
// want of data, as on a live topic. What is learned is the same in every
// op and on every store.
//
// Metrics, besides examples/s (examples in the mixed model over the
// op's time) and epochs/op:
//
//   - barrier-ms/epoch, mix-ms/epoch: the hyperplane_epoch_barrier_seconds
//     and hyperplane_epoch_mix_seconds histograms' means. The barrier
//     runs from the end of this worker's ranges (their results written)
//     to every result read: it looks for each shard's result (HEAD) and
//     reads and decodes it (GET);
//   - epochs/s-sustained: 1000 / (barrier-ms + mix-ms), the most epochs a
//     second the store and the mix allow were learning free;
//   - R-bytes: the mean size of a shard's result object in the store
//     (of those retention left, with snapshots);
//   - put-R-ms/shard: the mean time to write one shard's result (encode
//     and PUT), which the four shards' ranges do in parallel before the
//     barrier; get-R-ms/shard: the mean time to read and decode one
//     (inside the barrier); exists-ms and exists/epoch: the barrier's
//     looks for the results (HEAD), the mean time of one and how many an
//     epoch takes (one a shard unless it polls); learn-exists-ms: the
//     look for a shard's result before its range is learned, the four
//     in parallel with the ranges; boundary-ms/epoch: looking for the
//     next boundary (GET, not found) and creating it (conditional PUT);
//   - epochs/s-store: 1000 / (barrier-ms + mix-ms + boundary-ms +
//     put-R-ms), the same bound with the boundary and the results'
//     writes counted (one write's time: they run in parallel).
//
// The store's operations are counted over the op's epochs, the CPU
// times (cpu-s/op, machine-cpu-s/op, as in BenchmarkEpochs) while timed.
//
//	cd e2e && go test -run XXX -bench BenchmarkEpochBarrier -benchtime 1x -count 3 -timeout 0 .
func BenchmarkEpochBarrier(b *testing.B) {
	msgs, size := epochsBenchMessages(epochsBenchN)
	b.Logf("%d messages of %d bytes on average, %d partitions", len(msgs), size, epochsBenchPartitions)
	defaults := config.Default()
	sizes := []barrierEpochs{
		{"E1000", 1000, 0, false},
		{"E10000", 10000, 0, false},
		{"E100000", 100000, 0, false},
		{"defaults", int64(defaults.Model.Mixing.EpochExamples), defaults.EpochGrowth(), false},
		{"defaults+snapshots", int64(defaults.Model.Mixing.EpochExamples), defaults.EpochGrowth(), true},
	}
	b.Logf("defaults: model.mixing.epoch_examples %d, growth %d, rule %s, weights %s; snapshot.every %d, interval %s, keep %d",
		defaults.Model.Mixing.EpochExamples, defaults.EpochGrowth(), defaults.MixRule(), defaults.Model.Mixing.Weights,
		defaults.Snapshot.Every, defaults.Snapshot.Interval, defaults.Snapshot.Keep)
	for _, store := range []string{"memblob", "file", "s3", "minio"} {
		for _, es := range sizes {
			b.Run("store="+store+"/epoch="+es.name, func(b *testing.B) {
				open := barrierStore(b, store)
				var st barrierStats
				for range b.N {
					b.StopTimer()
					if err := benchBarrier(b, msgs, open, es, &st); err != nil {
						b.Fatal(err)
					}
				}
				st.report(b)
			})
		}
	}
}

// barrierEpochs is an epoch size of BenchmarkEpochBarrier: the most
// examples of a shard in an epoch, model.mixing.growth, and whether
// generations are written as config.Default's snapshot settings say.
type barrierEpochs struct {
	name      string
	examples  int64
	growth    int
	snapshots bool
}

// barrierStore returns how to open a new, empty store of the kind named
// for each op, skipping the benchmark when it has none.
func barrierStore(b *testing.B, kind string) func(b *testing.B) (*snapshot.Store, error) {
	ctx := context.Background()
	switch kind {
	case "memblob":
		return func(*testing.B) (*snapshot.Store, error) {
			return snapshot.NewStore(memblob.OpenBucket(nil), ""), nil
		}
	case "file":
		return func(b *testing.B) (*snapshot.Store, error) {
			return snapshot.OpenStore(ctx, "file://"+b.TempDir())
		}
	case "s3":
		// The in-process server even when an external one is named.
		b.Setenv("HYPERPLANE_TEST_S3_ENDPOINT", "")
		srv := s3test.Start(b)
		return func(b *testing.B) (*snapshot.Store, error) {
			return snapshot.OpenStore(ctx, srv.URL(b))
		}
	case "minio":
		if os.Getenv("HYPERPLANE_TEST_S3_ENDPOINT") == "" {
			b.Skip("HYPERPLANE_TEST_S3_ENDPOINT is not set: no MinIO to measure (see .ci/run)")
		}
		srv := s3test.Start(b)
		b.Logf("S3 server %s, bucket %s", srv.Endpoint, srv.Bucket)
		return func(b *testing.B) (*snapshot.Store, error) {
			return snapshot.OpenStore(ctx, srv.URL(b))
		}
	}
	b.Fatalf("no store %q", kind)
	return nil
}

// errCovered stops the epochs once the mixed model includes the stream.
var errCovered = errors.New("the mixed model includes every partition's end")

// benchBarrier is one op: a memory Log holding msgs twice, partitioned as
// example i to partition i mod epochsBenchPartitions, learned in epochs
// of size es until the mixed model includes the first copy, on a new
// store from open.
func benchBarrier(b *testing.B, msgs [][]byte, open func(*testing.B) (*snapshot.Store, error), es barrierEpochs, st *barrierStats) error {
	ctx := context.Background()
	log := memory.NewLog("examples", epochsBenchPartitions)
	parts := make([][][]byte, epochsBenchPartitions)
	for range 2 {
		for i, m := range msgs {
			parts[i%epochsBenchPartitions] = append(parts[i%epochsBenchPartitions], m)
		}
	}
	ends := map[shardid.ID]int64{}
	for p, part := range parts {
		log.Append(p, part...)
		ends[log.Shard(p)] = int64(len(part) / 2)
	}
	store, err := open(b)
	if err != nil {
		return err
	}
	defer store.Close()
	defaults := config.Default()
	lcfg := defaults.Model.Learner
	lcfg.Drift = defaults.Model.Drift
	lcfg.HashBits = barrierBenchHashBits
	model, err := learner.New(lcfg)
	if err != nil {
		return err
	}
	elog := &timedLog{Log: epochlog.New(store)}
	metrics := consumer.NewMetrics(nil)
	var (
		covered   map[string]int64
		epochs    uint64
		histAtEnd epochStats
	)
	var x *consumer.Epochs
	cfg := consumer.EpochConfig{
		Worker:        consumer.WorkerConfig{Model: "bench", Predictions: consumer.Destination{Sink: memory.NewSink(), Topic: "predictions"}, Batch: defaults.Source.Batch},
		Shards:        log,
		Log:           elog,
		Writer:        "bench",
		ConfigDigest:  sha256.Sum256([]byte("bench")),
		EpochExamples: es.examples,
		Interval:      defaults.Model.Mixing.Interval,
		Growth:        es.growth,
		Weights:       defaults.Model.Mixing.Weights,
		Rule:          defaults.MixRule(),
		Start:         defaults.Source.Start,
		// Verify is called as each epoch is mixed, on the epochs'
		// goroutine: the op ends with the epoch that reaches the ends.
		Verify: func(_ context.Context, e uint64, _ [32]byte) error {
			pos := x.Positions()
			if !covers(pos, ends) {
				return nil
			}
			covered, epochs = pos, e
			histAtEnd.add(metrics)
			return errCovered
		},
	}
	if es.snapshots {
		cfg.SnapshotEvery, cfg.SnapshotInterval, cfg.Keep = defaults.Snapshot.Every, defaults.Snapshot.Interval, defaults.Snapshot.Keep
	}
	st.start(b)
	x = consumer.NewEpochs(cfg, model, 1, nil, nil, metrics, zap.NewNop())
	err = x.Run(ctx)
	st.stop(b)
	if !errors.Is(err, errCovered) {
		return fmt.Errorf("epochs stopped before the ends: %v", err)
	}
	for _, p := range covered {
		st.examples += p
	}
	st.epochs += epochs
	st.hist.barrier += histAtEnd.barrier
	st.hist.barrierCount += histAtEnd.barrierCount
	st.hist.mix += histAtEnd.mix
	st.hist.mixCount += histAtEnd.mixCount
	st.ops.add(elog.stats())
	// The results' sizes, read back once the op is over.
	for e := uint64(1); e <= epochs; e++ {
		for shard := range maps.Keys(ends) {
			key, err := epochlog.ShardKey(store.Prefix(), "bench", e, shard)
			if err != nil {
				return err
			}
			data, err := store.ReadObject(ctx, key)
			if errors.Is(err, snapshot.ErrNotFound) && es.snapshots {
				continue // retention deleted it once a generation held it
			}
			if err != nil {
				return fmt.Errorf("epoch %d, shard %s: %w", e, shard, err)
			}
			st.rBytes += int64(len(data))
			st.rCount++
		}
	}
	return nil
}

// barrierStats sums BenchmarkEpochBarrier's ops.
type barrierStats struct {
	epochStats
	hist     epochStats // the histograms as the last epoch was mixed
	examples int64
	epochs   uint64
	ops      logOps
	rBytes   int64
	rCount   int64
}

func (s *barrierStats) report(b *testing.B) {
	if s.epochs == 0 {
		return
	}
	b.ReportMetric(float64(s.examples)/b.Elapsed().Seconds(), "examples/s")
	b.ReportMetric(s.cpu.self/float64(b.N), "cpu-s/op")
	b.ReportMetric(s.cpu.machine/float64(b.N), "machine-cpu-s/op")
	epochs := float64(s.epochs)
	b.ReportMetric(epochs/float64(b.N), "epochs/op")
	barrier := 1000 * s.hist.barrier / float64(s.hist.barrierCount)
	mix := 1000 * s.hist.mix / float64(s.hist.mixCount)
	b.ReportMetric(barrier, "barrier-ms/epoch")
	b.ReportMetric(mix, "mix-ms/epoch")
	b.ReportMetric(1000/(barrier+mix), "epochs/s-sustained")
	if s.rCount > 0 {
		b.ReportMetric(float64(s.rBytes)/float64(s.rCount), "R-bytes")
	}
	put := s.ops[opWriteShard].mean()
	b.ReportMetric(put, "put-R-ms/shard")
	b.ReportMetric(s.ops[opShard].mean(), "get-R-ms/shard")
	b.ReportMetric(s.ops[opShardExists].mean(), "exists-ms")
	b.ReportMetric(float64(s.ops[opShardExists].count)/epochs, "exists/epoch")
	b.ReportMetric(s.ops[opLearnExists].mean(), "learn-exists-ms")
	boundary := (s.ops[opBoundary].ms() + s.ops[opCreateBoundary].ms()) / epochs
	b.ReportMetric(boundary, "boundary-ms/epoch")
	b.ReportMetric(1000/(barrier+mix+boundary+put), "epochs/s-store")
	if gens := s.ops[opWrite]; gens.count > 0 {
		b.ReportMetric(float64(gens.count)/float64(b.N), "generations/op")
		b.ReportMetric(gens.mean(), "generation-ms")
		b.ReportMetric(s.ops[opRetain].mean(), "retain-ms")
	}
}

// The epoch log's operations that timedLog times.
const (
	opBoundary = iota
	opCreateBoundary
	opWriteShard
	opShard
	opShardExists
	opLearnExists
	opWrite
	opRetain
	opKinds
)

// opStat is the number of calls of an operation and their total time.
type opStat struct {
	count int
	total time.Duration
}

func (o opStat) ms() float64 { return float64(o.total) / float64(time.Millisecond) }

// mean is the mean time of a call in milliseconds, 0 without calls.
func (o opStat) mean() float64 {
	if o.count == 0 {
		return 0
	}
	return o.ms() / float64(o.count)
}

type logOps [opKinds]opStat

func (l *logOps) add(o logOps) {
	for i := range l {
		l[i].count += o[i].count
		l[i].total += o[i].total
	}
}

// timedLog is an epoch log that times the operations an epoch makes on
// the store: the boundary's, and the shards' results'.
type timedLog struct {
	*epochlog.Log
	mu     sync.Mutex
	ops    logOps
	looked map[string]bool // the shards' results of an epoch looked for
}

func (l *timedLog) observe(op int, began time.Time) {
	d := time.Since(began)
	l.mu.Lock()
	l.ops[op].count++
	l.ops[op].total += d
	l.mu.Unlock()
}

func (l *timedLog) stats() logOps {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops
}

func (l *timedLog) Boundary(ctx context.Context, model string, e uint64) (*epochlog.Boundary, [32]byte, error) {
	defer l.observe(opBoundary, time.Now())
	return l.Log.Boundary(ctx, model, e)
}

func (l *timedLog) CreateBoundary(ctx context.Context, b *epochlog.Boundary) (*epochlog.Boundary, [32]byte, error) {
	defer l.observe(opCreateBoundary, time.Now())
	return l.Log.CreateBoundary(ctx, b)
}

func (l *timedLog) WriteShard(ctx context.Context, r *epochlog.ShardResult, base *epochlog.Base) error {
	defer l.observe(opWriteShard, time.Now())
	return l.Log.WriteShard(ctx, r, base)
}

func (l *timedLog) Shard(ctx context.Context, model string, e uint64, shard shardid.ID, base *epochlog.Base) (*epochlog.ShardResult, error) {
	defer l.observe(opShard, time.Now())
	return l.Log.Shard(ctx, model, e, shard, base)
}

func (l *timedLog) Write(ctx context.Context, snap *snapshot.Snapshot) error {
	defer l.observe(opWrite, time.Now())
	return l.Log.Write(ctx, snap)
}

func (l *timedLog) Retain(ctx context.Context, model string, keep int) error {
	defer l.observe(opRetain, time.Now())
	return l.Log.Retain(ctx, model, keep)
}

// ShardExists is timed as opLearnExists the first time it is called for
// a shard's result of an epoch (a range looks before it is learned), and
// as opShardExists after (the barrier's looks).
func (l *timedLog) ShardExists(ctx context.Context, model string, e uint64, shard shardid.ID) (bool, error) {
	op := opShardExists
	l.mu.Lock()
	key := fmt.Sprintf("%d/%s", e, shard)
	if !l.looked[key] {
		if l.looked == nil {
			l.looked = map[string]bool{}
		}
		l.looked[key] = true
		op = opLearnExists
	}
	l.mu.Unlock()
	defer l.observe(op, time.Now())
	return l.Log.ShardExists(ctx, model, e, shard)
}

var _ consumer.EpochLog = (*timedLog)(nil)
