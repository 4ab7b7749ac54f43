package consumer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// promotedLearner is a perceptron, which an AROW challenger beats fast.
func promotedLearner() learner.Config {
	cfg := epochLearner()
	cfg.Algorithm = learner.Perceptron
	return cfg
}

func arowChallenger() []learner.ChallengerConfig {
	return []learner.ChallengerConfig{{Name: "arow", Config: epochLearner()}}
}

func promotingEpochs(log *memory.Log, store *snapshot.Store, sink *memory.Sink, writer string, auto bool) consumer.EpochConfig {
	cfg := epochConfig(log, store, sink, writer)
	cfg.Rule, cfg.ChallengerRule = learner.MixAuto, learner.MixAuto
	cfg.Worker.AutoPromote = auto
	cfg.Worker.Promotions = consumer.Destination{Sink: sink, Topic: "promo"}
	cfg.Requests = func(ctx context.Context) (*snapshot.PromotionRequest, error) {
		return store.PromotionRequest(ctx, "mixed")
	}
	return cfg
}

// startPromoting is startEpochs for a perceptron with an AROW challenger;
// a generation is continued as it is, promotions included.
func startPromoting(t *testing.T, ctx context.Context, cfg consumer.EpochConfig, store *snapshot.Store) (*consumer.Epochs, <-chan error) {
	t.Helper()
	return startEpochsOf(t, ctx, cfg, store, promotedLearner(), func(m *learner.Model, resumed bool) error {
		if resumed {
			return nil
		}
		_, _, err := m.SetChallengers(arowChallenger())
		return err
	})
}

// TestEpochsPromoteAutoIsAFunctionOfTheLogs learns six shards in epochs
// with a perceptron and an AROW challenger under auto promotion: one
// worker, three workers stopped and restarted at random moments, and a
// replay that follows the log all promote AROW after the same epoch and
// hold one state_sha256; the one worker publishes one event, the three
// the same event, once or more.
func TestEpochsPromoteAutoIsAFunctionOfTheLogs(t *testing.T) {
	log := epochLog(4000)

	one := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sinkOne := memory.NewSink()
	ctx, cancel := context.WithCancel(context.Background())
	x, done := startPromoting(t, ctx, promotingEpochs(log, one, sinkOne, "one", true), one)
	last := waitComplete(t, one, log)
	want := finalDigest(t, x, done, cancel, last)
	ps := x.Model().Promotions()
	if len(ps) != 1 || ps[0].Challenger != "arow" || ps[0].Replaced != "mixed" || !ps[0].Auto || ps[0].Epoch == 0 || ps[0].Epoch >= last {
		t.Fatalf("promotions %+v after %d epochs, want arow over mixed, auto, after an epoch before the last", ps, last)
	}
	if a := x.Model().Config().Algorithm; a != learner.AROW {
		t.Fatalf("the model is %s after the promotion, want arow", a)
	}
	t.Logf("promoted after epoch %d of %d, at example %d", ps[0].Epoch, last, ps[0].Examples)
	events := sinkOne.Outputs("promo")
	if len(events) != 1 {
		t.Fatalf("%d promotion events, want 1", len(events))
	}
	var ev struct {
		EventID     string  `json:"event_id"`
		Promoted    string  `json:"promoted"`
		Auto        bool    `json:"auto"`
		Compared    uint64  `json:"compared"`
		LogLossDiff float64 `json:"log_loss_diff"`
		Low         float64 `json:"low"`
	}
	if err := json.Unmarshal(events[0].Value, &ev); err != nil {
		t.Fatal(err)
	}
	// The band that decided it lay above zero.
	if id := fmt.Sprintf("epoch:mixed/%d", ps[0].Epoch); ev.EventID != id || string(events[0].Key) != id+"#promotion" ||
		ev.Promoted != "arow" || !ev.Auto || ev.Compared == 0 || !(ev.Low > 0 && ev.LogLossDiff > ev.Low) {
		t.Fatalf("the event %s (key %s), want %s promoting arow with its band above zero", events[0].Value, events[0].Key, id)
	}
	gen, err := one.Load(context.Background(), "mixed", ps[0].Epoch)
	if err != nil {
		t.Fatalf("the generation of the promotion's epoch: %v", err)
	}
	if h := gen.State.Promotions; len(h) != 1 || h[0] != ps[0] {
		t.Fatalf("generation %d holds history %+v, want %+v", gen.Generation, h, ps)
	}
	snap, err := one.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.State.Digest(); snap.Generation != last || got != want {
		t.Fatalf("generation %d holds %x, want epoch %d's %x", snap.Generation, got, last, want)
	}
	if s, err := compare.Standings("mixed", snap.State, 0.05); err != nil || len(s) != 2 || s[0].Name != "arow" || s[1].Name != "mixed" {
		t.Fatalf("standings %+v: %v, want arow the model and mixed its challenger", s, err)
	}

	three := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	threeWorkersAgree(t, three, log, last, want, 5, 5, func(ctx context.Context, i int, owned []string) (*consumer.Epochs, <-chan error) {
		cfg := promotingEpochs(log, three, sink, fmt.Sprintf("w%d", i), true)
		cfg.Owned = func() []shardid.ID { return shardIDs(owned) }
		return startPromoting(t, ctx, cfg, three)
	})
	// Stopped workers learn ranges again: the event may be repeated, as
	// the same event.
	if n, got := promotionEvents(t, sink, fmt.Sprintf("epoch:mixed/%d", ps[0].Epoch)); n == 0 || !bytes.Equal(got, events[0].Value) {
		t.Errorf("three workers published %d promotion events %s, want %s at least once", n, got, events[0].Value)
	}

	// Following the log, as replay does, from where it begins.
	begin, err := consumer.FollowStart(context.Background(), epochlog.New(one), "mixed")
	if err != nil {
		t.Fatal(err)
	}
	out := snapshot.NewStore(memblob.OpenBucket(nil), "")
	f, err := consumer.Follow(context.Background(), promotingEpochs(log, out, memory.NewSink(), "replay", true), epochlog.New(one), epochlog.New(out), begin,
		promotedLearner(), arowChallenger(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Model.State().Digest(); f.Mixed != last || len(f.Checked) == 0 || got != want {
		t.Fatalf("replay mixed %d epochs (checked %v) into %x; the live log has %d, and %x", f.Mixed, f.Checked, got, last, want)
	}
}

// TestEpochsPromoteOnRequest writes a request while three workers learn a
// model with manual promotion: it is recorded in one boundary, applied
// once, after that boundary's epoch, recorded in the history with its
// id, and seen in the generations; a replay makes it at the same epoch.
func TestEpochsPromoteOnRequest(t *testing.T) {
	log := epochLog(600)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	owners := [][]string{{"memory:ex/0", "memory:ex/3"}, {"memory:ex/1", "memory:ex/4"}, {"memory:ex/2", "memory:ex/5"}}
	type running struct {
		x      *consumer.Epochs
		done   <-chan error
		cancel context.CancelFunc
	}
	var workers []running
	for i := range 3 {
		cfg := promotingEpochs(log, store, sink, fmt.Sprintf("w%d", i), false)
		owned := owners[i]
		cfg.Owned = func() []shardid.ID { return shardIDs(owned) }
		ctx, cancel := context.WithCancel(context.Background())
		x, done := startPromoting(t, ctx, cfg, store)
		workers = append(workers, running{x, done, cancel})
	}
	// The request is written once the workers are under way.
	wait.For(t, time.Minute, 5*time.Millisecond, "epoch 3 mixed", func() bool { return workers[0].x.Mixed() >= 3 })
	r := snapshot.NewPromotionRequest("arow", time.Now())
	if err := store.RequestPromotion(context.Background(), "mixed", r); err != nil {
		t.Fatal(err)
	}
	// More data comes, for epochs after the request.
	for p := range 6 {
		msgs, _ := messages(900)
		log.Append(p, msgs...)
	}
	last := waitComplete(t, store, log)
	var want [32]byte
	for i, w := range workers {
		got := finalDigest(t, w.x, w.done, w.cancel, last)
		if i == 0 {
			want = got
		} else if got != want {
			t.Errorf("worker %d holds %x, worker 0 %x", i, got, want)
		}
	}
	ps := workers[0].x.Model().Promotions()
	if len(ps) != 1 || ps[0].Challenger != "arow" || ps[0].Auto || ps[0].Request != r.ID || ps[0].Epoch < 3 {
		t.Fatalf("promotions %+v, want one of arow on request %s after epoch 3 or later", ps, r.ID)
	}
	// The request is in one boundary at most of those retention left:
	// that of the epoch after which it took effect.
	lg := epochlog.New(store)
	epochs, err := lg.Epochs(context.Background(), "mixed")
	if err != nil {
		t.Fatal(err)
	}
	var in []uint64
	for _, e := range epochs {
		b, _, err := lg.Boundary(context.Background(), "mixed", e)
		if err != nil {
			t.Fatal(err)
		}
		if b.Promote != nil {
			if *b.Promote != (epochlog.Promote{Challenger: "arow", Request: r.ID}) {
				t.Fatalf("boundary %d records %+v", e, *b.Promote)
			}
			in = append(in, e)
		}
	}
	if len(in) > 1 || len(in) == 1 && in[0] != ps[0].Epoch {
		t.Fatalf("the request is in boundaries %v, and took effect after epoch %d", in, ps[0].Epoch)
	}
	if n, _ := promotionEvents(t, sink, fmt.Sprintf("epoch:mixed/%d", ps[0].Epoch)); n == 0 && ps[0].Epoch < last {
		t.Errorf("no promotion event, though epoch %d followed the promotion's", ps[0].Epoch+1)
	}
	snap, err := store.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if h := snap.State.Promotions; len(h) != 1 || h[0] != ps[0] || snap.Promotable("arow", "mixed") == nil || snap.Promotable("mixed", "mixed") != nil {
		t.Fatalf("generation %d: history %+v, want %+v; arow is the model and mixed a challenger to promote", snap.Generation, h, ps)
	}
	if sum := snapshot.Summarize(snap, 0); len(sum.Promotions) != 1 || sum.Promotions[0].Epoch != ps[0].Epoch || sum.Promotions[0].Request != r.ID {
		t.Fatalf("inspect's summary shows promotions %+v", sum.Promotions)
	}

	begin, err := consumer.FollowStart(context.Background(), lg, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	out := snapshot.NewStore(memblob.OpenBucket(nil), "")
	f, err := consumer.Follow(context.Background(), promotingEpochs(log, out, memory.NewSink(), "replay", false), lg, epochlog.New(out), begin,
		promotedLearner(), arowChallenger(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Model.State().Digest(); f.Mixed != last || got != want {
		t.Fatalf("replay mixed %d epochs into %x; the live log has %d, and %x", f.Mixed, got, last, want)
	}
}

// promotionEvents requires every promotion event in sink to be one event:
// the same key and the same bytes, the key id's and "#promotion"; it
// returns how many copies there are and their bytes.
func promotionEvents(t *testing.T, sink *memory.Sink, id string) (int, []byte) {
	t.Helper()
	events := sink.Outputs("promo")
	for _, e := range events {
		if string(e.Key) != id+"#promotion" || !bytes.Equal(e.Value, events[0].Value) {
			t.Fatalf("promotion events %q (key %s) and %q (key %s), want copies of one event %s", events[0].Value, events[0].Key, e.Value, e.Key, id)
		}
	}
	if len(events) == 0 {
		return 0, nil
	}
	return len(events), events[0].Value
}

// killingLog is an epoch log that "kills" its worker at the creation of
// epoch at's boundary, before or after the boundary is created: the call
// never returns until the worker is stopped, and then fails.
type killingLog struct {
	consumer.EpochLog
	at     uint64
	after  bool
	killed chan struct{}
}

func (l *killingLog) CreateBoundary(ctx context.Context, b *epochlog.Boundary) (*epochlog.Boundary, [32]byte, error) {
	if b.Epoch != l.at {
		return l.EpochLog.CreateBoundary(ctx, b)
	}
	if l.after {
		if _, _, err := l.EpochLog.CreateBoundary(ctx, b); err != nil {
			return nil, [32]byte{}, err
		}
	}
	close(l.killed)
	<-ctx.Done()
	return nil, [32]byte{}, ctx.Err()
}

// holdingSink holds every publish to topic "promo" until ctx is done:
// after the publish with durable (the worker killed after the event is
// durable), before it without (an output that does not answer). held is
// closed at the first.
type holdingSink struct {
	*memory.Sink
	durable bool
	held    chan struct{}
	once    sync.Once
}

func (s *holdingSink) Publish(ctx context.Context, batch []consumer.Output) error {
	if len(batch) == 0 || batch[0].Topic != "promo" {
		return s.Sink.Publish(ctx, batch)
	}
	if s.durable {
		if err := s.Sink.Publish(ctx, batch); err != nil {
			return err
		}
	}
	s.once.Do(func() { close(s.held) })
	<-ctx.Done()
	return ctx.Err()
}

// TestEpochsPromotionEventSurvivesAKill promotes a challenger on a request
// recorded in the first boundary, so after epoch 1, and stops the worker
// as a kill would around the event: before B_2 is created, after it and
// before the event is published, after the event is published and before
// the announcing range's result. A worker started in its place publishes
// the event (again), with the same id and bytes as a run not killed, and
// ends with its model. Two workers that both own every shard publish it
// twice, identical; and when the announcing shard moves while its owner
// cannot publish, the new owner publishes it.
func TestEpochsPromotionEventSurvivesAKill(t *testing.T) {
	log := epochLog(600)
	request := snapshot.NewPromotionRequest("arow", time.Now())
	const id = "epoch:mixed/1"
	newStore := func() *snapshot.Store {
		s := snapshot.NewStore(memblob.OpenBucket(nil), "")
		if err := s.RequestPromotion(context.Background(), "mixed", request); err != nil {
			t.Fatal(err)
		}
		return s
	}
	checkPromoted := func(t *testing.T, x *consumer.Epochs) {
		t.Helper()
		if ps := x.Model().Promotions(); len(ps) != 1 || ps[0].Epoch != 1 || ps[0].Request != request.ID {
			t.Fatalf("promotions %+v, want one on request %s after epoch 1", ps, request.ID)
		}
	}

	// Uninterrupted.
	one := newStore()
	sinkOne := memory.NewSink()
	ctx, cancel := context.WithCancel(context.Background())
	x, done := startPromoting(t, ctx, promotingEpochs(log, one, sinkOne, "one", false), one)
	last := waitComplete(t, one, log)
	want := finalDigest(t, x, done, cancel, last)
	checkPromoted(t, x)
	n, event := promotionEvents(t, sinkOne, id)
	if n != 1 {
		t.Fatalf("one worker published the promotion event %d times, want once", n)
	}

	for _, c := range []struct {
		name string
		// kill makes the first worker's configuration, and returns
		// what is closed once it is "killed".
		kill func(cfg *consumer.EpochConfig, sink *memory.Sink) <-chan struct{}
		// copies of the event: the killed worker's and its successor's.
		copies int
	}{
		{"before the next boundary", func(cfg *consumer.EpochConfig, _ *memory.Sink) <-chan struct{} {
			l := &killingLog{EpochLog: cfg.Log, at: 2, killed: make(chan struct{})}
			cfg.Log = l
			return l.killed
		}, 1},
		{"after the next boundary", func(cfg *consumer.EpochConfig, _ *memory.Sink) <-chan struct{} {
			l := &killingLog{EpochLog: cfg.Log, at: 2, after: true, killed: make(chan struct{})}
			cfg.Log = l
			return l.killed
		}, 1},
		{"after the event", func(cfg *consumer.EpochConfig, sink *memory.Sink) <-chan struct{} {
			s := &holdingSink{Sink: sink, durable: true, held: make(chan struct{})}
			cfg.Worker.Promotions.Sink = s
			return s.held
		}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := newStore()
			sink := memory.NewSink()
			cfg := promotingEpochs(log, store, sink, "killed", false)
			killed := c.kill(&cfg, sink)
			ctx, cancel := context.WithCancel(context.Background())
			_, done := startPromoting(t, ctx, cfg, store)
			select {
			case <-killed:
			case err := <-done:
				t.Fatalf("the worker stopped (%v) before the kill", err)
			case <-time.After(time.Minute):
				t.Fatal("the worker never reached the kill")
			}
			cancel()
			<-done
			ctx, cancel = context.WithCancel(context.Background())
			x, done := startPromoting(t, ctx, promotingEpochs(log, store, sink, "restarted", false), store)
			if got := finalDigest(t, x, done, cancel, waitComplete(t, store, log)); got != want {
				t.Fatalf("after the kill the model is %x, without %x", got, want)
			}
			checkPromoted(t, x)
			if n, got := promotionEvents(t, sink, id); n != c.copies || !bytes.Equal(got, event) {
				t.Fatalf("%d promotion events %s, want %d of %s", n, got, c.copies, event)
			}
		})
	}

	t.Run("two workers", func(t *testing.T) {
		store := newStore()
		sink := memory.NewSink()
		var xs []*consumer.Epochs
		var dones []<-chan error
		var cancels []context.CancelFunc
		for _, w := range []string{"a", "b"} {
			ctx, cancel := context.WithCancel(context.Background())
			x, done := startPromoting(t, ctx, promotingEpochs(log, store, sink, w, false), store)
			xs, dones, cancels = append(xs, x), append(dones, done), append(cancels, cancel)
		}
		last := waitComplete(t, store, log)
		for i, x := range xs {
			if got := finalDigest(t, x, dones[i], cancels[i], last); got != want {
				t.Fatalf("worker %d holds %x, one worker %x", i, got, want)
			}
		}
		if n, got := promotionEvents(t, sink, id); n == 0 || !bytes.Equal(got, event) {
			t.Fatalf("%d promotion events %s, want %s at least once", n, got, event)
		}
	})

	t.Run("a rebalance", func(t *testing.T) {
		store := newStore()
		sink := memory.NewSink()
		own := newOwnership()
		all := map[string]string{}
		for p := range 6 {
			all[log.Key(p)] = "a"
		}
		own.set(all)
		held := &holdingSink{Sink: sink, held: make(chan struct{})}
		cfgA := promotingEpochs(log, store, sink, "a", false)
		cfgA.Worker.Promotions.Sink = held
		cfgA.Owned, cfgA.Changed = own.owned("a"), own.changes
		ctxA, cancelA := context.WithCancel(context.Background())
		a, doneA := startPromoting(t, ctxA, cfgA, store)
		cfgB := promotingEpochs(log, store, sink, "b", false)
		cfgB.Owned, cfgB.Changed = own.owned("b"), own.changes
		ctxB, cancelB := context.WithCancel(context.Background())
		b, doneB := startPromoting(t, ctxB, cfgB, store)
		select {
		case <-held.held:
		case <-time.After(time.Minute):
			t.Fatal("a never published the promotion event")
		}
		// The announcing range is the first of B_2 that reads anything.
		b2, _, err := epochlog.New(store).Boundary(context.Background(), "mixed", 2)
		if err != nil {
			t.Fatal(err)
		}
		first := b2.Shards[slices.IndexFunc(b2.Shards, func(r epochlog.Range) bool { return !r.Empty() })].Shard
		moved := maps.Clone(all)
		moved[first.String()] = "b"
		own.set(moved)
		last := waitComplete(t, store, log)
		for _, w := range []struct {
			x      *consumer.Epochs
			done   <-chan error
			cancel context.CancelFunc
		}{{a, doneA, cancelA}, {b, doneB, cancelB}} {
			if got := finalDigest(t, w.x, w.done, w.cancel, last); got != want {
				t.Fatalf("worker %s holds %x, one worker %x", w.x.Model().Name("mixed"), got, want)
			}
		}
		if n, got := promotionEvents(t, sink, id); n != 1 || !bytes.Equal(got, event) {
			t.Fatalf("%d promotion events %s, want %s once, by the new owner", n, got, event)
		}
	})
}
