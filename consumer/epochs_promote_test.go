package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
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
// hold one state_sha256; the one worker publishes one event.
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
		cfg.Owned = func() []string { return owned }
		return startPromoting(t, ctx, cfg, three)
	})
	if got := len(sink.Outputs("promo")); got > 1 {
		t.Errorf("three workers published %d promotion events, want at most 1", got)
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
		cfg.Owned = func() []string { return owned }
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
	if got := len(sink.Outputs("promo")); got > 1 {
		t.Errorf("%d promotion events, want at most 1", got)
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
