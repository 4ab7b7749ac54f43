package nats_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestJetStreamShardsEpochs: the epoch protocol learns a four-partition
// stream through JetStreamShards, epoch after epoch, to the shards' ends.
// One worker and two workers owning two shards each reach the same model,
// bit for bit, and every message has its event, under its shard and
// sequence. The partitions share the stream's sequences, so a range of
// epoch_examples messages spans four times as many sequences (Spread).
func TestJetStreamShardsEpochs(t *testing.T) {
	_, nc, js := startJetStream(t)
	partitionedStream(t, js, "learn", "learn.*", 4)
	o := synth.DefaultOptions()
	o.Vocab, o.Features, o.Unlabeled = 200, 10, 0.2
	gen := synth.New(o)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var msgs []sent
	for i := range 500 {
		key := strconv.Itoa(i)
		ack, err := js.Publish(ctx, "learn."+key, bytes.TrimSuffix(synth.AppendJSON(nil, gen.Next()), []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, sent{seq: int64(ack.Sequence), key: key, part: partitionOf(key, 4)})
	}
	s := newShards(t, nc, "learn", 4)
	end := map[string]int64{} // by the shards' names, as boundaries hold them
	for shard, e := range ends(t, s) {
		end[shard.String()] = e
	}

	one, events, store := learnEpochs(t, s, end, [][]shardid.ID{nil})
	checkSpread(t, store, msgs)
	for _, m := range msgs {
		id := wire.Position{Source: s.Shard(m.part).String(), Offset: m.seq}.EventID()
		if !events[id] {
			t.Fatalf("message %d (learn.%s) has no event %s", m.seq, m.key, id)
		}
	}
	if len(events) != len(msgs) {
		t.Fatalf("%d events for %d messages", len(events), len(msgs))
	}
	two, _, _ := learnEpochs(t, s, end, [][]shardid.ID{{s.Shard(0), s.Shard(2)}, {s.Shard(1), s.Shard(3)}})
	if one != two {
		t.Fatalf("two workers learned the model %x, one worker %x", two, one)
	}
}

// learnEpochs runs one Epochs per entry of owners, each owning the shards
// listed (nil: all), over a new epoch log, until every worker has mixed
// the epoch that ends each shard at end. It returns the digest of the
// model they hold, the ids of the events published and the store of the
// epoch log.
func learnEpochs(t *testing.T, s *nats.JetStreamShards, end map[string]int64, owners [][]shardid.ID) ([32]byte, map[string]bool, *snapshot.Store) {
	t.Helper()
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	lcfg := learner.DefaultConfig()
	lcfg.HashBits = 12
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var workers []*consumer.Epochs
	errs := make([]error, len(owners))
	var wg sync.WaitGroup
	for i, owned := range owners {
		cfg := shardsEpochConfig(s, store, sink, fmt.Sprintf("w%d", i))
		if owned != nil {
			cfg.Owned = func() []shardid.ID { return owned }
		}
		m, e, prev, pos, err := consumer.Continue(nil, lcfg, cfg.ConfigDigest)
		if err != nil {
			t.Fatal(err)
		}
		x := consumer.NewEpochs(cfg, m, e, prev, pos, nil, zaptest.NewLogger(t))
		workers = append(workers, x)
		wg.Go(func() { errs[i] = x.Run(ctx) })
	}
	wait.For(t, time.Minute, 10*time.Millisecond, "the epoch at the shards' ends", func() bool {
		for i, err := range errs {
			if err != nil {
				t.Fatalf("worker %d stopped: %v", i, err)
			}
		}
		return learnedTo(ctx, store, end, workers)
	})
	cancel()
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	digest := workers[0].Model().State().Digest()
	for i, x := range workers[1:] {
		if d := x.Model().State().Digest(); d != digest {
			t.Fatalf("worker %d holds %x, worker 0 %x", i+1, d, digest)
		}
	}
	events := map[string]bool{}
	for _, topic := range []string{"pred", "dead"} {
		for _, o := range sink.Outputs(topic) {
			events[string(o.Key)] = true
		}
	}
	return digest, events, store
}

// checkSpread checks that the stream of msgs (about 500 sequences) was
// learned in epochs of 4·60 sequences, 60 messages a shard, and not of
// 60 sequences: each boundary left in the log records that limit unless
// a snapshot or the start cut it, and the newest epoch is at most the
// start's, two full ones and the rest.
func checkSpread(t *testing.T, store *snapshot.Store, msgs []sent) {
	t.Helper()
	ctx := context.Background()
	lg := epochlog.New(store)
	epochs, err := lg.Epochs(ctx, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	if len(epochs) == 0 {
		t.Fatal("no epoch in the log")
	}
	for _, e := range epochs {
		b, _, err := lg.Boundary(ctx, "mixed", e)
		if err != nil {
			t.Fatalf("boundary %d: %v", e, err)
		}
		switch b.Cut.Reason {
		case epochlog.CutExamples, epochlog.CutInterval, epochlog.CutBacklog:
			if b.Cut.EpochExamples != 4*60 {
				t.Errorf("epoch %d (%s): the cut's limit is %d sequences, want 4·60", e, b.Cut.Reason, b.Cut.EpochExamples)
			}
		}
	}
	last := msgs[len(msgs)-1].seq
	if newest, most := epochs[len(epochs)-1], uint64(1+(last+4*60-1)/(4*60)+1); newest > most {
		t.Errorf("the stream's %d sequences took %d epochs, want %d at most", last, newest, most)
	}
}

// learnedTo reports whether the log's newest boundary ends every shard at
// end, and every worker has mixed its epoch.
func learnedTo(ctx context.Context, store *snapshot.Store, end map[string]int64, workers []*consumer.Epochs) bool {
	lg := epochlog.New(store)
	epochs, err := lg.Epochs(ctx, "mixed")
	if err != nil || len(epochs) == 0 {
		return false
	}
	e := epochs[len(epochs)-1]
	b, _, err := lg.Boundary(ctx, "mixed", e)
	if err != nil || len(b.Shards) != len(end) {
		return false
	}
	for _, r := range b.Shards {
		if r.To != end[r.Shard.String()] {
			return false
		}
	}
	for _, x := range workers {
		if x.Mixed() < e {
			return false
		}
	}
	return true
}

// TestJetStreamEpochsLabelsRecreated: a labels' stream deleted and
// created again under epochs that join it stops them, naming the stream,
// where the shard's head stopped without a word and its examples waited
// for labels for ever, the worker ready (docs/operations.md).
func TestJetStreamEpochsLabelsRecreated(t *testing.T) {
	_, nc, js := startJetStream(t)
	partitionedStream(t, js, "jx", "jx.*", 2)
	partitionedStream(t, js, "jl", "jl.*", 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	publishN := func(n int, subject func(int) string, body func(int) string) {
		for i := range n {
			if _, err := js.Publish(ctx, subject(i), []byte(body(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 60
	publishN(n, func(i int) string { return fmt.Sprintf("jl.e%d", i) }, func(i int) string { return fmt.Sprintf(`{"id":"e%d","label":%d}`, i, 1-2*(i%2)) })
	publishN(n, func(i int) string { return fmt.Sprintf("jx.e%d", i) }, func(i int) string { return fmt.Sprintf(`{"id":"e%d","features":{"a":1,"b%d":0.5}}`, i, i%7) })
	ex := newShards(t, nc, "jx", 2)
	lb := newShards(t, nc, "jl", 2)
	lb.PartitioningCheck = 10 * time.Millisecond
	end := map[string]int64{}
	for shard, e := range ends(t, ex) {
		end[shard.String()] = e
	}

	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { store.Close() })
	sink := memory.NewSink()
	cfg := shardsEpochConfig(ex, store, sink, "w")
	cfg.Labels = &consumer.EpochLabels{
		Join:   consumer.JoinConfig{Window: time.Hour},
		Format: wire.FormatJSON,
		Shards: lb,
		CoShard: func(shard shardid.ID) (shardid.ID, error) {
			co, _, err := lb.CoShard(shard)
			return co, err
		},
	}
	lcfg := learner.DefaultConfig()
	lcfg.HashBits = 12
	m, e, prev, pos, err := consumer.Continue(nil, lcfg, cfg.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	x := consumer.NewEpochs(cfg, m, e, prev, pos, nil, zaptest.NewLogger(t))
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	wait.For(t, time.Minute, 10*time.Millisecond, "every example learned", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the epochs stopped: %v", err)
		default:
		}
		p := x.Positions()
		for shard, e := range end {
			if p[shard] != e {
				return false
			}
		}
		return true
	})

	if err := js.DeleteStream(ctx, "jl"); err != nil {
		t.Fatal(err)
	}
	partitionedStream(t, js, "jl", "jl.*", 2)
	publishN(2, func(i int) string { return fmt.Sprintf("jl.e%d", n+i) }, func(i int) string { return fmt.Sprintf(`{"id":"e%d","label":1}`, n+i) })
	publishN(2, func(i int) string { return fmt.Sprintf("jx.e%d", n+i) }, func(i int) string { return fmt.Sprintf(`{"id":"e%d","features":{"a":1}}`, n+i) })
	select {
	case err := <-done:
		for _, w := range []string{"jetstream jl", "recreated"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Fatalf("the epochs after the labels' stream was recreated: %v, want an error saying %q", err, w)
			}
		}
	case <-ctx.Done():
		t.Fatal("the epochs went on after the labels' stream was recreated under them, its new labels never read")
	}
}

// shardsEpochConfig is the epochs of model "mixed" over the partitions
// of s, with the store's log, in epochs of at most 60 examples a shard
// and a generation every 200 labeled examples, writing as writer.
func shardsEpochConfig(s consumer.Shards, store *snapshot.Store, sink *memory.Sink, writer string) consumer.EpochConfig {
	return consumer.EpochConfig{
		Worker: consumer.WorkerConfig{
			Model:       "mixed",
			Predictions: consumer.Destination{Sink: sink, Topic: "pred"},
			DeadLetter:  consumer.Destination{Sink: sink, Topic: "dead"},
			Batch:       32,
		},
		Shards:        s,
		Log:           epochlog.New(store),
		Writer:        writer,
		ConfigDigest:  sha256.Sum256([]byte("history")),
		EpochExamples: 60,
		Interval:      10 * time.Millisecond,
		Weights:       learner.MixExamples,
		SnapshotEvery: 200,
		Keep:          1000,
	}
}
