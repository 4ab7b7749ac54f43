package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// joinPartitions is how many co-partitioned partitions the examples' and
// the labels' logs of the partition scope tests have.
const joinPartitions = 4

// partitionMarks appends each mark a worker writes to the partition of
// the labels' log it chose, with the wall clock's time, as a broker
// would stamp it; it counts the marks of each partition, and those that
// chose none (or no partition the log has).
type partitionMarks struct {
	log *memory.Log

	mu       sync.Mutex
	marks    [joinPartitions]int
	unchosen int
}

func (s *partitionMarks) Publish(_ context.Context, batch []consumer.Output) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range batch {
		if !o.HasPartition || o.Partition < 0 || o.Partition >= joinPartitions {
			s.unchosen++
			continue
		}
		s.marks[o.Partition]++
		s.log.AppendAt(int(o.Partition), time.Now(), o.Value)
	}
	return nil
}

func (*partitionMarks) Close() error { return nil }

// partitionJoinRun is partition scope over two co-partitioned logs, the
// examples' and the labels', each partition of its own seed, resumed
// from its chains in store.
type partitionJoinRun struct {
	t          *testing.T
	ex, labels *memory.Log
	store      *snapshot.Store
	sink       *memory.Sink
	marks      *partitionMarks
	cfg        learner.Config
}

func newPartitionJoinRun(t *testing.T, n int) *partitionJoinRun {
	ex, labels := memory.NewLog("examples", joinPartitions), memory.NewLog("labels", joinPartitions)
	for p := range joinPartitions {
		k := n + 100*p
		appendDelayed(ex, labels, p, k, uint64(11+p))
		// A few examples after every label, whose windows only a mark
		// closes: the labels' input has gone quiet.
		o := synth.DefaultOptions()
		o.Vocab, o.Features, o.Seed = 500, 12, uint64(31+p)
		s := synth.New(o)
		quiet := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(k)*10*time.Millisecond + 3*joinWindow)
		for i := range 5 {
			rec := s.Next()
			rec.Labeled, rec.Seq = false, uint64(1e9+i)
			b := synth.AppendJSON(nil, rec)
			ex.AppendAt(p, quiet.Add(time.Duration(i)*time.Millisecond), b[:len(b)-1])
		}
	}
	cfg := learner.DefaultConfig()
	cfg.HashBits = 14
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { store.Close() })
	return &partitionJoinRun{t: t, ex: ex, labels: labels, store: store, sink: memory.NewSink(),
		marks: &partitionMarks{log: labels}, cfg: cfg}
}

func (r *partitionJoinRun) chain(shard string) *snapshot.Store {
	id, err := shardid.Parse(shard)
	if err != nil {
		r.t.Fatal(err)
	}
	chain, err := r.store.PartitionChain("joined", id)
	if err != nil {
		r.t.Fatal(err)
	}
	return chain
}

// run runs partition scope until the tail of every partition has
// learned the fraction stop of its examples (every one for 1), then
// stops it: each partition's worker writes a last generation.
func (r *partitionJoinRun) run(stop float64) {
	t := r.t
	t.Helper()
	log := zaptest.NewLogger(t)
	cfg := consumer.PartitionsConfig{
		Worker: consumer.WorkerConfig{
			Model:              "joined",
			Predictions:        consumer.Destination{Sink: r.sink, Topic: "pred"},
			Misclassifications: consumer.Destination{Sink: r.sink, Topic: "mis"},
			SnapshotEvery:      300,
			Batch:              64,
		},
		Shards: r.ex,
		Open: func(ctx context.Context, id shardid.ID) (consumer.Chain, error) {
			shard := id.String()
			res, err := snapshot.Resume(ctx, r.chain(shard), "joined", r.cfg, snapshot.ResumeOptions{Writer: "w", Keep: 100, Log: log})
			if err != nil {
				return consumer.Chain{}, err
			}
			c := consumer.Chain{Model: res.Model, Positions: res.Positions, Snapshots: chainSnapshots{res.Snapshotter}}
			if res.Snapshot != nil && res.Snapshot.Join != nil {
				if c.Join, err = consumer.DecodeJoinState(res.Snapshot.Join); err != nil {
					return consumer.Chain{}, err
				}
			}
			return c, nil
		},
		Labels: func(ctx context.Context, id shardid.ID, positions map[string]int64) (*consumer.LabelsConfig, error) {
			shard := id.String()
			var p int
			for p = 0; p < joinPartitions && r.ex.Key(p) != shard; p++ {
			}
			src, err := r.labels.Open(ctx, r.labels.Shard(p), positions[r.labels.Key(p)])
			if err != nil {
				return nil, err
			}
			return &consumer.LabelsConfig{
				Join:       consumer.JoinConfig{Window: joinWindow, Default: -1, HasDefault: true},
				Source:     src,
				CacheBytes: 8192, // the tail reads the examples again
				Format:     wire.FormatJSON,
				Marks:      consumer.Destination{Sink: r.marks, Topic: "marks", Partition: int32(p), HasPartition: true},
				Writer:     "w",
				LateLabels: consumer.Destination{Sink: r.sink, Topic: "late"},
			}, nil
		},
		Start: wire.Start{Kind: wire.StartEarliest},
	}
	metrics := consumer.NewMetrics(nil)
	part := consumer.NewPartitions(cfg, metrics, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := runPartitions(ctx, part)
	wait.For(t, 2*time.Minute, 5*time.Millisecond, fmt.Sprintf("every partition's tail past %.0f%% of its examples", 100*stop), func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run stopped: %v", err)
		default:
		}
		pos := part.Positions()
		for p := range joinPartitions {
			if float64(pos[r.ex.Key(p)]) < stop*float64(r.ex.Len(p)) {
				return false
			}
		}
		return true
	})
	if stop == 1 {
		// Every example learned: nothing is pending in any partition.
		wait.For(t, time.Minute, 5*time.Millisecond, "hyperplane_join_pending at 0", func() bool {
			return testutil.ToFloat64(metrics.Join.Pending) == 0
		})
	}
	stopPartitions(t, "partition scope with labels", cancel, done)
}

// dropNewest deletes each chain's newest generation, as if the worker
// had been killed before it wrote them.
func (r *partitionJoinRun) dropNewest() {
	ctx := context.Background()
	for p := range joinPartitions {
		chain := r.chain(r.ex.Key(p))
		gens, err := chain.Generations(ctx, "joined")
		if err != nil || len(gens) == 0 {
			r.t.Fatalf("partition %d: generations %v: %v", p, gens, err)
		}
		if err := chain.Delete(ctx, snapshot.Key(chain.Prefix(), "joined", gens[len(gens)-1])); err != nil {
			r.t.Fatal(err)
		}
	}
}

// partitionResult is what a partition's newest generation holds.
type partitionResult struct {
	sha     string
	labeled uint64
	counts  consumer.JoinCountsState
}

func (r *partitionJoinRun) results() [joinPartitions]partitionResult {
	var res [joinPartitions]partitionResult
	for p := range joinPartitions {
		snap, err := r.chain(r.ex.Key(p)).Latest(context.Background(), "joined", nil)
		if err != nil {
			r.t.Fatalf("partition %d: %v", p, err)
		}
		if snap.Join == nil {
			r.t.Fatalf("partition %d: the newest generation holds no join", p)
		}
		st, err := consumer.DecodeJoinState(snap.Join)
		if err != nil {
			r.t.Fatal(err)
		}
		res[p] = partitionResult{sha: snap.State.StateSHA256(), labeled: snap.State.Labeled, counts: st.Counts}
	}
	return res
}

// TestPartitionsJoinIsAFunctionOfEachPartitionsLogs: partition scope over
// four co-partitioned partitions of examples and of labels, the same ids
// in every partition: an uninterrupted run, and one stopped three times
// and resumed from the generation before its last (a kill), give each
// partition the same state_sha256 and the same outcomes; every example is
// learned, every mark lands on its own partition of the labels' log, and
// no two partitions learn one model.
func TestPartitionsJoinIsAFunctionOfEachPartitionsLogs(t *testing.T) {
	const n = 1500
	whole := newPartitionJoinRun(t, n)
	whole.run(1)
	want := whole.results()
	seen := map[string]int{}
	for p, res := range want {
		c := res.counts
		if c.Joined < uint64(n/2) || c.Late == 0 || c.Duplicate == 0 || c.Unknown == 0 || c.Expired == 0 {
			t.Fatalf("partition %d: the logs do not exercise every outcome: %+v", p, c)
		}
		if res.labeled != uint64(whole.ex.Len(p)) {
			t.Errorf("partition %d: %d examples learned with a label, want all %d (joined or defaulted)", p, res.labeled, whole.ex.Len(p))
		}
		if q, ok := seen[res.sha]; ok {
			t.Errorf("partitions %d and %d learned the same model", q, p)
		}
		seen[res.sha] = p
	}
	if whole.marks.unchosen != 0 {
		t.Errorf("%d marks chose no partition of the labels' log", whole.marks.unchosen)
	}
	for p, m := range whole.marks.marks {
		if m == 0 {
			t.Errorf("no mark on partition %d of the labels' log, whose last windows only a mark closes", p)
		}
	}

	killed := newPartitionJoinRun(t, n)
	for _, at := range []float64{0.2, 0.5, 0.8} {
		killed.run(at)
		killed.dropNewest()
		var resumed []int64
		for p := range joinPartitions {
			if snap, err := killed.chain(killed.ex.Key(p)).Latest(context.Background(), "joined", nil); err == nil {
				resumed = append(resumed, snap.Positions[killed.ex.Key(p)])
			}
		}
		t.Logf("stopped past %.0f%%: the chains resume at %v", 100*at, resumed)
	}
	killed.run(1)
	got := killed.results()
	for p := range joinPartitions {
		if got[p].sha != want[p].sha {
			t.Errorf("partition %d: state_sha256 after three kills %s, uninterrupted %s", p, got[p].sha, want[p].sha)
		}
		if outcomes(got[p].counts) != outcomes(want[p].counts) {
			t.Errorf("partition %d: outcomes joined/late/unknown/duplicate/expired after three kills %v, uninterrupted %v", p, outcomes(got[p].counts), outcomes(want[p].counts))
		}
	}
}

// outcomes are a join's counts that the two logs decide: joined, late,
// unknown, duplicate and expired. (The served predictions' scores depend
// on how far the tail had learned when each was served.)
func outcomes(c consumer.JoinCountsState) [5]uint64 {
	return [5]uint64{c.Joined, c.Late, c.Unknown, c.Duplicate, c.Expired}
}
