package consumer_test

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// epochChallengers are three challengers of epochLearner: another
// algorithm, another hash seed and more hash bits (the last two decode
// every message again).
func epochChallengers() []learner.ChallengerConfig {
	perceptron, seed, wide := epochLearner(), epochLearner(), epochLearner()
	perceptron.Algorithm = learner.Perceptron
	seed.HashSeed = 7
	wide.HashBits = 13
	return []learner.ChallengerConfig{{Name: "perceptron", Config: perceptron}, {Name: "seed", Config: seed}, {Name: "wide", Config: wide}}
}

func challengedEpochs(log *memory.Log, store *snapshot.Store, sink *memory.Sink, writer string) consumer.EpochConfig {
	cfg := epochConfig(log, store, sink, writer)
	cfg.Rule = learner.MixAuto
	return cfg
}

// startChallenged is startEpochs for a model with epochChallengers.
func startChallenged(t *testing.T, ctx context.Context, cfg consumer.EpochConfig, store *snapshot.Store) (*consumer.Epochs, <-chan error) {
	t.Helper()
	return startEpochsOf(t, ctx, cfg, store, epochLearner(), func(m *learner.Model, _ bool) error {
		_, _, err := m.SetChallengers(epochChallengers())
		return err
	})
}

// TestEpochsChallengersAreAFunctionOfTheLogs learns six shards in
// epochs with three challengers: with one worker, with three workers
// stopped and restarted at random moments, and by following the log as
// replay does. All hold one state_sha256, challengers included, and each
// challenger's comparison counts every labeled example once.
func TestEpochsChallengersAreAFunctionOfTheLogs(t *testing.T) {
	log := epochLog(600)

	one := snapshot.NewStore(memblob.OpenBucket(nil), "")
	ctx, cancel := context.WithCancel(context.Background())
	x, done := startChallenged(t, ctx, challengedEpochs(log, one, memory.NewSink(), "one"), one)
	last := waitComplete(t, one, log)
	want := finalDigest(t, x, done, cancel, last)
	st := x.Model().State()
	checkCountedOnce(t, st)
	snap, err := one.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.State.Digest(); snap.Generation != last || got != want || len(snap.State.Challengers) != 3 {
		t.Fatalf("generation %d holds %d challengers and state %x, want epoch %d's with 3 and %x", snap.Generation, len(snap.State.Challengers), got, last, want)
	}
	standings, err := compare.Standings("mixed", snap.State, 0.05)
	if err != nil || len(standings) != 4 {
		t.Fatalf("standings %v: %v", standings, err)
	}
	for _, s := range standings[1:] {
		t.Logf("%s: %v", s.Name, s.Result)
	}

	three := snapshot.NewStore(memblob.OpenBucket(nil), "")
	sink := memory.NewSink()
	threeWorkersAgree(t, three, log, last, want, 3, 4, func(ctx context.Context, i int, owned []string) (*consumer.Epochs, <-chan error) {
		cfg := challengedEpochs(log, three, sink, fmt.Sprintf("w%d", i))
		cfg.Owned = func() []shardid.ID { return shardIDs(owned) }
		return startChallenged(t, ctx, cfg, three)
	})

	// Following the log, as replay does, from where it begins.
	live := epochlog.New(one)
	begin, err := consumer.FollowStart(context.Background(), live, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	out := snapshot.NewStore(memblob.OpenBucket(nil), "")
	f, err := consumer.Follow(context.Background(), challengedEpochs(log, out, memory.NewSink(), "replay"), live, epochlog.New(out), begin,
		epochLearner(), epochChallengers(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Model.State().Digest(); f.Mixed != last || len(f.Checked) == 0 || got != want {
		t.Fatalf("replay mixed %d epochs (checked %v) into %x; the live log has %d, and %x", f.Mixed, f.Checked, got, last, want)
	}
}

// checkCountedOnce checks that each challenger's comparison in st
// counts every labeled example of the model once: every message decodes
// for every challenger alike, so both learn every labeled example.
func checkCountedOnce(t *testing.T, st *learner.State) {
	t.Helper()
	if len(st.Challengers) != 3 {
		t.Fatalf("%d challengers, want 3", len(st.Challengers))
	}
	for _, c := range st.Challengers {
		cs := c.Comparison
		if cs.LogLoss.Count != st.Labeled || cs.Errors.Count != st.Labeled || c.State.Labeled != st.Labeled {
			t.Errorf("challenger %s: the comparison counts %d and %d examples, the challenger learned %d labeled, the model %d",
				c.Name, cs.LogLoss.Count, cs.Errors.Count, c.State.Labeled, st.Labeled)
		}
		if cs.ModelErrors != float64(st.Mistakes) || cs.ChallengerErrors != float64(c.State.Mistakes) {
			t.Errorf("challenger %s: the comparison counts %v and %v errors, the model made %d mistakes and the challenger %d",
				c.Name, cs.ModelErrors, cs.ChallengerErrors, st.Mistakes, c.State.Mistakes)
		}
	}
}
