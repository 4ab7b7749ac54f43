package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// partitionShards is how many partitions the tests' log has.
const partitionShards = 3

// partitionRig is a partitioned log, a store and a sink that partition
// scope runs on, with the examples of each partition in the order they
// were appended.
type partitionRig struct {
	log   *memory.Log
	store *snapshot.Store
	sink  *memory.Sink
	cfg   learner.Config
	data  [][][]byte
	// opens counts Open's calls, by shard.
	mu    sync.Mutex
	opens map[string]int
}

func newPartitionRig(t *testing.T) *partitionRig {
	store := snapshot.NewStore(memblob.OpenBucket(nil), "models")
	t.Cleanup(func() { store.Close() })
	cfg := learner.DefaultConfig()
	cfg.HashBits = 12
	return &partitionRig{
		log:   memory.NewLog("px", partitionShards),
		store: store,
		sink:  memory.NewSink(),
		cfg:   cfg,
		data:  make([][][]byte, partitionShards),
		opens: map[string]int{},
	}
}

// appendPart appends the k-th part of every partition's examples: parts
// of different lengths per partition, drawn from one stream, so that no
// two partitions learn the same model.
func (r *partitionRig) appendPart(k int) {
	msgs, _ := messages(partitionShards * 1000)
	for p := range partitionShards {
		n := 300 + 70*p + 11*k
		part := msgs[(p*1000+k*37)%(partitionShards*1000-n):][:n]
		r.data[p] = append(r.data[p], part...)
		r.log.Append(p, part...)
	}
}

// reference is the model one worker learns from partition p alone: every
// example that decodes, in order.
func (r *partitionRig) reference(t *testing.T, p int) [32]byte {
	t.Helper()
	m, err := learner.New(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	dec := wire.NewDecoder(r.cfg, wire.DecoderOptions{})
	var x learner.Example
	for _, v := range r.data[p] {
		if _, err := dec.Decode(v, &x); err == nil {
			m.Learn(&x)
		}
	}
	return m.State().Digest()
}

// chain is the store tree of shard's chain.
func (r *partitionRig) chain(shard string) *snapshot.Store {
	id, err := shardid.Parse(shard)
	if err != nil {
		panic(err)
	}
	seg, err := id.Segment()
	if err != nil {
		panic(err)
	}
	return r.store.Sub("clicks/partition/" + seg)
}

// newest is the newest generation of shard's chain, nil if none.
func (r *partitionRig) newest(shard string) *snapshot.Snapshot {
	snap, err := r.chain(shard).Latest(context.Background(), "clicks", nil)
	if err != nil {
		return nil
	}
	return snap
}

// chainSnapshots marks the snapshotter's fatal errors with ErrFatal, as
// the command's adapter does.
type chainSnapshots struct{ *snapshot.Snapshotter }

func (s chainSnapshots) Snapshot(ctx context.Context, st *learner.State, positions map[string]int64, join []byte) error {
	err := s.Snapshotter.Snapshot(ctx, st, positions, join)
	if snapshot.Fatal(err) {
		return fmt.Errorf("%w: %w", consumer.ErrFatal, err)
	}
	return err
}

func (r *partitionRig) config(t *testing.T, writer string) consumer.PartitionsConfig {
	return consumer.PartitionsConfig{
		Worker: consumer.WorkerConfig{
			Model:            "clicks",
			Predictions:      consumer.Destination{Sink: r.sink, Topic: "pred"},
			DeadLetter:       consumer.Destination{Sink: r.sink, Topic: "dead"},
			Batch:            64,
			SnapshotEvery:    200,
			SnapshotInterval: 10 * time.Millisecond,
			Views:            true,
		},
		Shards: r.log,
		Open: func(ctx context.Context, id shardid.ID) (consumer.Chain, error) {
			shard := id.String()
			r.mu.Lock()
			r.opens[shard]++
			r.mu.Unlock()
			res, err := snapshot.Resume(ctx, r.chain(shard), "clicks", r.cfg, snapshot.ResumeOptions{
				Writer: writer, Keep: 1000, Log: zaptest.NewLogger(t),
			})
			if err != nil {
				return consumer.Chain{}, err
			}
			return consumer.Chain{Model: res.Model, Positions: res.Positions, Snapshots: chainSnapshots{res.Snapshotter}}, nil
		},
		Start:        wire.Start{Kind: wire.StartEarliest},
		RestartDelay: 20 * time.Millisecond,
	}
}

// runPartitions starts p; the error Run returns arrives on the channel.
func runPartitions(ctx context.Context, p *consumer.Partitions) <-chan error {
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return done
}

// stopPartitions cancels a run and checks that it stopped cleanly.
func stopPartitions(t *testing.T, name string, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: Run: %v, want nil", name, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s: Run did not return", name)
	}
}

// running fails the test if a run already returned.
func running(t *testing.T, name string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s: Run returned %v while its context was live", name, err)
	default:
	}
}

// waitRunning waits for cond as waitFor does, and fails at once if one of
// runs, by name, returns.
func waitRunning(t *testing.T, what string, runs map[string]<-chan error, cond func() bool) {
	t.Helper()
	wait.For(t, time.Minute, 5*time.Millisecond, what, func() bool {
		for name, done := range runs {
			running(t, name, done)
		}
		return cond()
	})
}

// waitChains waits until every chain's newest generation includes all of
// its partition, while runs run.
func (r *partitionRig) waitChains(t *testing.T, runs map[string]<-chan error) {
	t.Helper()
	waitRunning(t, "every chain at its partition's end", runs, func() bool {
		for p := range partitionShards {
			snap := r.newest(r.log.Key(p))
			if snap == nil || snap.Positions[r.log.Key(p)] != int64(len(r.data[p])) {
				return false
			}
		}
		return true
	})
}

// checkChains checks that every chain's newest generation is the
// reference model of its partition, to the bit, and holds that shard
// alone.
func (r *partitionRig) checkChains(t *testing.T) {
	t.Helper()
	for p := range partitionShards {
		shard := r.log.Key(p)
		snap := r.newest(shard)
		if snap == nil {
			t.Fatalf("%s: no generation", shard)
		}
		if got, want := snap.State.Digest(), r.reference(t, p); got != want {
			t.Errorf("%s: the chain's generation %d has digest %x, one worker on the partition alone learns %x", shard, snap.Generation, got, want)
		}
		if len(snap.Positions) != 1 || snap.Positions[shard] != int64(len(r.data[p])) {
			t.Errorf("%s: the chain's positions %v, want {%s: %d}", shard, snap.Positions, shard, len(r.data[p]))
		}
	}
}

// eventCounts counts the outputs (predictions and dead letters) of each
// event id.
func (r *partitionRig) eventCounts() map[string]int {
	counts := map[string]int{}
	for _, topic := range []string{"pred", "dead"} {
		for _, o := range r.sink.Outputs(topic) {
			counts[string(o.Key)]++
		}
	}
	return counts
}

// checkEvents checks that every position of every partition has an
// output.
func (r *partitionRig) checkEvents(t *testing.T) {
	t.Helper()
	counts := r.eventCounts()
	for p := range partitionShards {
		for off := range r.data[p] {
			if id := fmt.Sprintf("%s/%d", r.log.Key(p), off); counts[id] == 0 {
				t.Fatalf("%s has no output", id)
			}
		}
	}
}

// TestPartitionsEqualOneWorkerPerPartition: partition scope over three
// partitions learns, for each, the model one worker learns from that
// partition alone, to the bit, in memory and in its chain; every position
// has an output; views, positions and readiness follow the shards.
func TestPartitionsEqualOneWorkerPerPartition(t *testing.T) {
	r := newPartitionRig(t)
	r.appendPart(0)
	r.appendPart(1)
	p := consumer.NewPartitions(r.config(t, "a"), nil, zaptest.NewLogger(t))
	if got := p.NotReady(); len(got) == 0 {
		t.Error("ready before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := runPartitions(ctx, p)
	r.waitChains(t, map[string]<-chan error{"a": done})
	if got := p.NotReady(); len(got) > 0 {
		t.Errorf("not ready while running: %q", got)
	}
	stopPartitions(t, "a", cancel, done)
	r.checkChains(t)
	r.checkEvents(t)
	want := map[string]int64{}
	digests := map[[32]byte]bool{}
	for q := range partitionShards {
		shard := r.log.Key(q)
		want[shard] = int64(len(r.data[q]))
		m := p.Model(r.log.Shard(q))
		if m == nil {
			t.Fatalf("%s: no model", shard)
		}
		d := m.State().Digest()
		if d != r.reference(t, q) {
			t.Errorf("%s: the model's digest %x differs from one worker's on the partition alone", shard, d)
		}
		digests[d] = true
		if v := p.View(r.log.Shard(q)); v == nil || v.Version() != m.Version() {
			t.Errorf("%s: view %v, want one of version %d", shard, v, m.Version())
		}
	}
	if len(digests) != partitionShards {
		t.Errorf("%d distinct models for %d partitions: the shards were mixed", len(digests), partitionShards)
	}
	if got := p.Positions(); !equalPositions(got, want) {
		t.Errorf("positions %v, want %v", got, want)
	}
	if p.View(shardid.Memory("px", 7)) != nil || p.Model(shardid.Memory("px", 7)) != nil {
		t.Error("a model for a shard that does not exist")
	}
	if got := p.NotReady(); len(got) != 1 || !strings.HasPrefix(got[0], consumer.NotReadySource+":") {
		t.Errorf("after Run: not ready because %q, want the source alone", got)
	}
}

func equalPositions(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// gatedSink lets through, of each shard, the outputs up to and including
// its first batch past beyond[shard], and holds back later ones until
// release is closed. A worker's learning runs at most its queue of
// batches ahead of its outputs, so a worker stopped while its outputs
// wait here is stopped in the middle of what the log holds, however fast
// the machine.
type gatedSink struct {
	*memory.Sink
	beyond  map[string]int64
	release <-chan struct{}
	mu      sync.Mutex
	past    map[string]bool // the shards whose batch past beyond went through
}

func (s *gatedSink) Publish(ctx context.Context, batch []consumer.Output) error {
	past := map[string]bool{}
	for _, o := range batch {
		key := string(o.Key)
		i := strings.LastIndexByte(key, '/')
		offset, err := strconv.ParseInt(key[i+1:], 10, 64)
		if err != nil {
			return fmt.Errorf("output key %q: %w", o.Key, err)
		}
		if offset > s.beyond[key[:i]] {
			past[key[:i]] = true
		}
	}
	s.mu.Lock()
	hold := false
	for shard := range past {
		hold = hold || s.past[shard]
	}
	if !hold {
		maps.Copy(s.past, past)
	}
	s.mu.Unlock()
	if hold {
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Sink.Publish(ctx, batch)
}

// TestPartitionsResumeFromTheirChains stops partition scope where the
// log ends, then in the middle of the log, and runs it again each time:
// each shard continues from its chain, so no position has its output
// twice, and the final models are the references to the bit.
func TestPartitionsResumeFromTheirChains(t *testing.T) {
	r := newPartitionRig(t)
	r.appendPart(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := runPartitions(ctx, consumer.NewPartitions(r.config(t, "a"), nil, zaptest.NewLogger(t)))
	r.waitChains(t, map[string]<-chan error{"first run": done})
	stopPartitions(t, "first run", cancel, done)
	first := map[string]int64{}
	for q := range partitionShards {
		first[r.log.Key(q)] = int64(len(r.data[q]))
	}

	for k := 1; k <= 5; k++ {
		r.appendPart(k)
	}
	// Of each shard, the second run publishes one batch of outputs past
	// the first run's end, which carries a snapshot, and then waits until
	// it is stopped.
	release := make(chan struct{})
	cfg := r.config(t, "a")
	cfg.Worker.SnapshotEvery = 1
	gated := &gatedSink{Sink: r.sink, beyond: first, release: release, past: map[string]bool{}}
	cfg.Worker.Predictions.Sink, cfg.Worker.DeadLetter.Sink = gated, gated
	ctx, cancel = context.WithCancel(context.Background())
	done = runPartitions(ctx, consumer.NewPartitions(cfg, nil, zaptest.NewLogger(t)))
	waitRunning(t, "every chain past the first run", map[string]<-chan error{"second run": done}, func() bool {
		for shard, end := range first {
			if snap := r.newest(shard); snap == nil || snap.Positions[shard] <= end {
				return false
			}
		}
		return true
	})
	stopPartitions(t, "second run", func() { cancel(); close(release) }, done)
	midway := false
	for q := range partitionShards {
		at := r.newest(r.log.Key(q)).Positions[r.log.Key(q)]
		t.Logf("%s: the second run stopped at %d of %d", r.log.Key(q), at, len(r.data[q]))
		midway = midway || at < int64(len(r.data[q]))
	}
	if !midway {
		t.Fatal("the second run learned every partition to its end before it was stopped")
	}

	r.appendPart(6)
	ctx, cancel = context.WithCancel(context.Background())
	p := consumer.NewPartitions(r.config(t, "a"), nil, zaptest.NewLogger(t))
	done = runPartitions(ctx, p)
	r.waitChains(t, map[string]<-chan error{"third run": done})
	stopPartitions(t, "third run", cancel, done)

	r.checkChains(t)
	r.checkEvents(t)
	for id, n := range r.eventCounts() {
		if n != 1 {
			t.Fatalf("%s has %d outputs: a shard learned again what its chain held", id, n)
		}
	}
	for q := range partitionShards {
		if d := p.Model(r.log.Shard(q)).State().Digest(); d != r.reference(t, q) {
			t.Errorf("%s: the third run's model differs from the reference", r.log.Key(q))
		}
	}
}

// ownership is an assignment of shards to workers that a test changes,
// with a channel closed at each change, as kafka.Group's.
type ownership struct {
	mu      sync.Mutex
	owner   map[string]string
	changed chan struct{}
}

func newOwnership() *ownership {
	return &ownership{owner: map[string]string{}, changed: make(chan struct{})}
}

func (o *ownership) set(owner map[string]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owner = owner
	close(o.changed)
	o.changed = make(chan struct{})
}

func (o *ownership) owned(worker string) func() []shardid.ID {
	return func() []shardid.ID {
		o.mu.Lock()
		defer o.mu.Unlock()
		var shards []string
		for shard, w := range o.owner {
			if w == worker {
				shards = append(shards, shard)
			}
		}
		slices.Sort(shards)
		return shardIDs(shards)
	}
}

// shardIDs are the shards named names.
func shardIDs(names []string) []shardid.ID {
	if names == nil {
		return nil
	}
	ids := make([]shardid.ID, len(names))
	for i, name := range names {
		id, err := shardid.Parse(name)
		if err != nil {
			panic(err)
		}
		ids[i] = id
	}
	return ids
}

func (o *ownership) changes() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// TestPartitionsFollowOwnership moves shards between two workers while
// the stream grows, and back: each worker stops the shards it loses and
// continues the ones it gains from their chains; both workers write every
// chain; the final models are the references to the bit, and each shard's
// model is held by its last owner alone.
func TestPartitionsFollowOwnership(t *testing.T) {
	r := newPartitionRig(t)
	s0, s1, s2 := r.log.Key(0), r.log.Key(1), r.log.Key(2)
	own := newOwnership()
	own.set(map[string]string{s0: "a", s1: "a", s2: "a"})
	workers := map[string]*consumer.Partitions{}
	dones := map[string]<-chan error{}
	cancels := map[string]context.CancelFunc{}
	for _, w := range []string{"a", "b"} {
		cfg := r.config(t, w)
		cfg.Owned, cfg.Changed = own.owned(w), own.changes
		workers[w] = consumer.NewPartitions(cfg, nil, zaptest.NewLogger(t).Named(w))
		ctx, cancel := context.WithCancel(context.Background())
		cancels[w], dones[w] = cancel, runPartitions(ctx, workers[w])
	}
	assignments := []map[string]string{
		{s0: "a", s1: "b", s2: "b"},
		{s0: "b", s1: "a", s2: "b"},
		{s0: "b", s1: "a", s2: "a"},
		{s0: "a", s1: "b", s2: "a"},
		{s0: "b", s1: "b", s2: "b"},
		{s0: "a", s1: "b", s2: "a"},
	}
	for k, a := range assignments {
		learned := map[string]int64{}
		for q := range partitionShards {
			learned[r.log.Key(q)] = int64(len(r.data[q]))
		}
		r.appendPart(k)
		// The owners learn part of it alone; then the shards move.
		waitRunning(t, "some of the new examples learned", dones, func() bool {
			for shard, end := range learned {
				if snap := r.newest(shard); snap == nil || snap.Positions[shard] <= end {
					return false
				}
			}
			return true
		})
		own.set(a)
		waitRunning(t, "the shards moved", dones, func() bool {
			for shard, owner := range a {
				for w, p := range workers {
					if (p.View(shardOf(t, shard)) != nil) != (w == owner) {
						return false
					}
				}
			}
			return true
		})
	}
	r.waitChains(t, dones)
	// A shard's old owner writes the generations of what it learned before
	// it let go, up to the partition's end maybe, while its new owner,
	// opened from an earlier one, catches up until it is fenced and
	// reloads the chain: its model is the reference once it holds the end.
	last := assignments[len(assignments)-1]
	waitRunning(t, "every shard's owner at its partition's end", dones, func() bool {
		for q := range partitionShards {
			shard := r.log.Key(q)
			if workers[last[shard]].Positions()[shard] != int64(len(r.data[q])) {
				return false
			}
		}
		return true
	})
	for w := range workers {
		stopPartitions(t, w, cancels[w], dones[w])
	}
	r.checkChains(t)
	r.checkEvents(t)

	for q := range partitionShards {
		shard := r.log.Key(q)
		for w, p := range workers {
			m := p.Model(r.log.Shard(q))
			switch {
			case w == last[shard] && m == nil:
				t.Errorf("%s: its owner %s has no model", shard, w)
			case w == last[shard] && m.State().Digest() != r.reference(t, q):
				t.Errorf("%s: its owner %s's model differs from the reference", shard, w)
			case w != last[shard] && (m != nil || p.View(r.log.Shard(q)) != nil):
				t.Errorf("%s: %s, which lost it, still holds its model", shard, w)
			}
		}
		writers := map[string]bool{}
		chain := r.chain(shard)
		gens, err := chain.Generations(context.Background(), "clicks")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gens {
			snap, err := chain.Load(context.Background(), "clicks", g)
			if err != nil {
				t.Fatal(err)
			}
			writers[snap.Writer] = true
		}
		if !writers["a"] || !writers["b"] {
			t.Errorf("%s: the chain was written by %v, want both workers", shard, writers)
		}
	}
}

// TestPartitionsOverlappingOwners runs two workers that own every shard
// at once, as the old and the new owner do after a rebalance: the second
// starts from the first one's generations and both learn what follows,
// so each chain's next generation is written by one and refused to the
// other, which reloads the chain rather than stopping. Both keep running,
// and each chain's final model is the reference to the bit.
func TestPartitionsOverlappingOwners(t *testing.T) {
	r := newPartitionRig(t)
	r.appendPart(0)
	ctxA, cancelA := context.WithCancel(context.Background())
	a := consumer.NewPartitions(r.config(t, "a"), nil, zaptest.NewLogger(t).Named("a"))
	doneA := runPartitions(ctxA, a)
	r.waitChains(t, map[string]<-chan error{"a": doneA})

	ctxB, cancelB := context.WithCancel(context.Background())
	b := consumer.NewPartitions(r.config(t, "b"), nil, zaptest.NewLogger(t).Named("b"))
	doneB := runPartitions(ctxB, b)
	runs := map[string]<-chan error{"a": doneA, "b": doneB}
	waitRunning(t, "b's workers open", runs, func() bool {
		for q := range partitionShards {
			if b.View(r.log.Shard(q)) == nil {
				return false
			}
		}
		return true
	})
	// One part at a time, each written to every chain before the next:
	// both workers contend for every chain's next generation four times.
	for k := 1; k <= 4; k++ {
		r.appendPart(k)
		r.waitChains(t, runs)
	}
	// Each chain's next generation after b opened it was attempted by both:
	// one of them was fenced and reloaded, once per shard at least.
	waitRunning(t, "a reload of every chain", runs, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for q := range partitionShards {
			if r.opens[r.log.Key(q)] < 3 {
				return false
			}
		}
		return true
	})
	// A worker fenced at an earlier position holds that model until it
	// reloads; once both hold every partition's end, both models are the
	// references.
	ends := map[string]int64{}
	for p := range partitionShards {
		ends[r.log.Key(p)] = int64(r.log.Len(p))
	}
	waitRunning(t, "both workers at every partition's end", runs, func() bool {
		return equalPositions(a.Positions(), ends) && equalPositions(b.Positions(), ends)
	})
	stopPartitions(t, "a", cancelA, doneA)
	stopPartitions(t, "b", cancelB, doneB)
	r.checkChains(t)
	r.checkEvents(t)
	for q := range partitionShards {
		shard := r.log.Key(q)
		for name, p := range map[string]*consumer.Partitions{"a": a, "b": b} {
			if m := p.Model(r.log.Shard(q)); m == nil || m.State().Digest() != r.reference(t, q) {
				t.Errorf("%s: %s's final model differs from the reference", shard, name)
			}
		}
	}
}

// TestPartitionsStopOnAnOpenError: a chain that cannot be opened (a store
// that fails, a chain of another configuration) stops the shards that
// run, and Run returns the error naming the shard.
func TestPartitionsStopOnAnOpenError(t *testing.T) {
	r := newPartitionRig(t)
	r.appendPart(0)
	cfg := r.config(t, "a")
	open := cfg.Open
	broken := errors.New("the chain is broken")
	var p *consumer.Partitions
	cfg.Open = func(ctx context.Context, id shardid.ID) (consumer.Chain, error) {
		shard := id.String()
		if shard != r.log.Key(2) {
			return open(ctx, id)
		}
		// Open runs on a goroutine of Run's, where the test cannot fail:
		// it polls, and the test's own wait for Run bounds it.
		for ctx.Err() == nil && (p.View(r.log.Shard(0)) == nil || p.View(r.log.Shard(1)) == nil) {
			time.Sleep(time.Millisecond)
		}
		return consumer.Chain{}, broken
	}
	p = consumer.NewPartitions(cfg, nil, zaptest.NewLogger(t))
	select {
	case err := <-runPartitions(context.Background(), p):
		if !errors.Is(err, broken) || !strings.Contains(err.Error(), r.log.Key(2)) {
			t.Fatalf("Run: %v, want the open error naming %s", err, r.log.Key(2))
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not stop")
	}
	if got := p.NotReady(); len(got) != 1 || !strings.HasPrefix(got[0], consumer.NotReadySource+":") {
		t.Errorf("after Run: not ready because %q, want the source alone", got)
	}
}

// TestPartitionsWaitForAStoreThatDoesNotAnswer: a shard gained while its
// chain's store does not answer (snapshot.ErrUnavailable, from
// snapshot.Resume on a store whose server refuses every request) waits
// for it, named in NotReady, while the other shards learn; once the store
// answers, its chain opens and every shard learns its partition to the
// end, as without the outage.
func TestPartitionsWaitForAStoreThatDoesNotAnswer(t *testing.T) {
	r := newPartitionRig(t)
	r.appendPart(0)
	down, err := snapshot.OpenStore(context.Background(), s3test.StartRefusing(t).URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { down.Close() })
	cfg := r.config(t, "a")
	open := cfg.Open
	held := r.log.Key(2)
	var healed atomic.Bool
	var refused atomic.Int32
	cfg.Open = func(ctx context.Context, id shardid.ID) (consumer.Chain, error) {
		if id.String() != held || healed.Load() {
			return open(ctx, id)
		}
		refused.Add(1)
		_, err := snapshot.Resume(ctx, down, "clicks", r.cfg, snapshot.ResumeOptions{Writer: "a", Log: zaptest.NewLogger(t)})
		if err == nil {
			return consumer.Chain{}, errors.New("a store that refuses every request resumed a chain")
		}
		return consumer.Chain{}, fmt.Errorf("shard %s: %w", id, err)
	}
	p := consumer.NewPartitions(cfg, nil, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	runs := map[string]<-chan error{"a": runPartitions(ctx, p)}
	want := consumer.NotReadySnapshots + ": " + held + ": open the chain: "
	waitRunning(t, "the held shard named in NotReady, retried, the others at their ends", runs, func() bool {
		named := slices.ContainsFunc(p.NotReady(), func(r string) bool { return strings.HasPrefix(r, want) })
		others := true
		for q := range partitionShards {
			if key := r.log.Key(q); key != held && p.Positions()[key] != int64(len(r.data[q])) {
				others = false
			}
		}
		return named && refused.Load() >= 2 && others
	})
	if _, ok := p.Positions()[held]; ok {
		t.Errorf("the held shard has a position before its chain opened")
	}
	healed.Store(true)
	r.waitChains(t, runs)
	if got := p.NotReady(); len(got) != 0 {
		t.Errorf("once the store answers, not ready because %q", got)
	}
	stopPartitions(t, "a", cancel, runs["a"])
	r.checkChains(t)
	r.checkEvents(t)
}

// TestPartitionsWaitForAShardTheSourceDoesNotListYet: a shard assigned
// before the source lists it (a partition added to the topic, handed over
// by the group before this worker's metadata shows it) waits, named in
// NotReady, while the other shards learn; once the source has it, the
// shard learns its partition from its start, as a new chain.
func TestPartitionsWaitForAShardTheSourceDoesNotListYet(t *testing.T) {
	r := newPartitionRig(t)
	r.appendPart(0)
	cfg := r.config(t, "a")
	added := r.log.Shard(partitionShards)
	cfg.Owned = func() []shardid.ID {
		ids := []shardid.ID{added}
		for q := range partitionShards {
			ids = append(ids, r.log.Shard(q))
		}
		return ids
	}
	p := consumer.NewPartitions(cfg, nil, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	runs := map[string]<-chan error{"a": runPartitions(ctx, p)}
	want := consumer.NotReadySource + ": " + added.String() + ": find where the shard begins: "
	waitRunning(t, "the added shard named in NotReady, the others at their ends", runs, func() bool {
		if !slices.ContainsFunc(p.NotReady(), func(r string) bool { return strings.HasPrefix(r, want) }) {
			return false
		}
		for q := range partitionShards {
			if p.Positions()[r.log.Key(q)] != int64(len(r.data[q])) {
				return false
			}
		}
		return true
	})
	r.log.AddPartitions(1)
	msgs, _ := messages(200)
	r.log.Append(partitionShards, msgs...)
	waitRunning(t, "the added shard at its end", runs, func() bool {
		return p.Positions()[added.String()] == int64(len(msgs)) && len(p.NotReady()) == 0
	})
	stopPartitions(t, "a", cancel, runs["a"])
	r.checkChains(t)
	if snap := r.newest(added.String()); snap == nil || snap.Positions[added.String()] != int64(len(msgs)) {
		t.Errorf("the added shard's chain: %+v, want a generation at %d", snap, len(msgs))
	}
}

// shardOf is the shard named name, which the test made.
func shardOf(t *testing.T, name string) shardid.ID {
	t.Helper()
	id, err := shardid.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPartitionsBeforeTheFirstAssignment: until its first assignment (a
// consumer group not joined yet) a worker of partition scope is not
// ready, saying so, and may learn any shard (Learns), so that a request
// for one is told to try again rather than that another replica learns
// it; once assigned it learns its shards alone, and is ready.
func TestPartitionsBeforeTheFirstAssignment(t *testing.T) {
	r := newPartitionRig(t)
	s0, s1 := r.log.Key(0), r.log.Key(1)
	own := newOwnership()
	var settled atomic.Bool
	cfg := r.config(t, "a")
	cfg.Owned, cfg.Changed, cfg.Settled = own.owned("a"), own.changes, settled.Load
	p := consumer.NewPartitions(cfg, nil, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := runPartitions(ctx, p)
	dones := map[string]<-chan error{"a": done}
	waitRunning(t, "not ready, waiting for the first assignment", dones, func() bool {
		return slices.ContainsFunc(p.NotReady(), func(r string) bool { return strings.Contains(r, "waiting for the first assignment") })
	})
	if !p.Learns(shardOf(t, s0)) || !p.Learns(shardOf(t, s1)) {
		t.Fatal("before its first assignment, the worker says it learns no shard")
	}
	settled.Store(true)
	own.set(map[string]string{s0: "a", s1: "b", r.log.Key(2): "b"})
	waitRunning(t, "ready, learning its shard", dones, func() bool {
		return len(p.NotReady()) == 0 && p.View(shardOf(t, s0)) != nil
	})
	if !p.Learns(shardOf(t, s0)) || p.Learns(shardOf(t, s1)) {
		t.Fatalf("assigned %s, the worker says it learns %s: %v, %s: %v", s0, s0, p.Learns(shardOf(t, s0)), s1, p.Learns(shardOf(t, s1)))
	}
	stopPartitions(t, "a", cancel, done)
}

// TestPartitionsNotReadyWhileTheGroupFails: a worker whose consumer group
// fails to take it in (PartitionsConfig.Failure: another application's
// consumers in the group, say) is not ready, with the group's error, and
// ready again once it takes part.
func TestPartitionsNotReadyWhileTheGroupFails(t *testing.T) {
	r := newPartitionRig(t)
	own := newOwnership()
	own.set(map[string]string{r.log.Key(0): "a", r.log.Key(1): "a", r.log.Key(2): "a"})
	var failure atomic.Pointer[error]
	cfg := r.config(t, "a")
	cfg.Owned, cfg.Changed = own.owned("a"), own.changes
	cfg.Failure = func() error {
		if err := failure.Load(); err != nil {
			return *err
		}
		return nil
	}
	p := consumer.NewPartitions(cfg, nil, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := runPartitions(ctx, p)
	dones := map[string]<-chan error{"a": done}
	waitRunning(t, "ready", dones, func() bool { return len(p.NotReady()) == 0 })
	err := errors.New("consumer group g: [23] Inconsistent Group Protocol")
	failure.Store(&err)
	if got := p.NotReady(); !slices.Contains(got, "source: "+err.Error()) {
		t.Fatalf("NotReady while the group fails: %q, want the group's error", got)
	}
	failure.Store(nil)
	if got := p.NotReady(); len(got) != 0 {
		t.Fatalf("NotReady once the group takes the worker in: %q", got)
	}
	stopPartitions(t, "a", cancel, done)
}

// stallingStart is a source's shards whose Start of one shard waits for
// its context to end, then fails as a broker's client does when its
// request is given up: with an error of its own, not the context's.
type stallingStart struct {
	consumer.Shards
	shard shardid.ID
}

func (s stallingStart) Start(ctx context.Context, id shardid.ID, start wire.Start) (int64, error) {
	if id != s.shard {
		return s.Shards.Start(ctx, id, start)
	}
	<-ctx.Done()
	return 0, errors.New("list offsets: [-1] Unknown: an unexpected server error occurred")
}

// TestPartitionsStopWhileAShardFindsItsStart: a worker stopped while a
// shard of a new chain looks up where it begins stops cleanly, whatever
// error the lookup given up returns, and the other shards write their
// last generations.
func TestPartitionsStopWhileAShardFindsItsStart(t *testing.T) {
	r := newPartitionRig(t)
	r.appendPart(0)
	cfg := r.config(t, "a")
	cfg.Shards = stallingStart{Shards: r.log, shard: r.log.Shard(2)}
	p := consumer.NewPartitions(cfg, nil, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	runs := map[string]<-chan error{"a": runPartitions(ctx, p)}
	waitRunning(t, "shards 0 and 1 at their ends", runs, func() bool {
		return p.Positions()[r.log.Key(0)] == int64(len(r.data[0])) && p.Positions()[r.log.Key(1)] == int64(len(r.data[1]))
	})
	stopPartitions(t, "a", cancel, runs["a"])
	for q := range 2 {
		if snap := r.newest(r.log.Key(q)); snap == nil || snap.Positions[r.log.Key(q)] != int64(len(r.data[q])) {
			t.Errorf("shard %d's chain: %+v, want a generation at %d", q, snap, len(r.data[q]))
		}
	}
}
