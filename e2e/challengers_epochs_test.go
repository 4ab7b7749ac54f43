package e2e

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// TestChallengersInEpochsAfterKill: the scale-out topic learned in epochs
// by the real binary with two challengers (one of another hashing), once
// uninterrupted and once killed with SIGKILL at a random generation and
// started again: both runs end with one state_sha256, challengers
// included, and inspect shows both challengers mixed.
func TestChallengersInEpochsAfterKill(t *testing.T) {
	ctx := testContext(t)
	c := testbroker.Kafka(t, kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(scaleOutPartitions, "examples"),
		kfake.SeedTopics(1, "predictions-ca", "misclassifications-ca", "dead-ca", "predictions-cb", "misclassifications-cb", "dead-cb"))
	produceScaleOut(t, ctx, c, makeInput(scaleOutPartitions*scaleOutPerPartition, 21, 89))
	srv := s3test.Start(t)
	challengers := []string{"--model.challengers", "perceptron:algorithm=perceptron;seed:hash_seed=7"}

	storeA := srv.URL(t)
	a := start(t, append([]string{"run", "--config", writeConfig(t, scaleOutConfig(c, "ca", storeA)), "--snapshot.writer", "w"}, challengers...)...)
	waitScaleOutComplete(t, []*proc{a}, storeA, 3*time.Minute, nil)
	a.stop()
	sumA := inspectStore(t, storeA)
	if len(sumA.Challengers) != 2 {
		t.Fatalf("inspect shows %d challengers, want 2", len(sumA.Challengers))
	}

	storeB := srv.URL(t)
	cfgB := append([]string{"run", "--config", writeConfig(t, scaleOutConfig(c, "cb", storeB)), "--snapshot.writer", "w"}, challengers...)
	s, err := snapshot.OpenStore(ctx, storeB)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	epochs := (scaleOutPerPartition + scaleOutEpoch - 1) / scaleOutEpoch
	at := uint64(1 + rand.New(rand.NewPCG(7, 30)).IntN(epochs-4))
	first := start(t, cfgB...)
	wait.For(t, 2*time.Minute, 20*time.Millisecond, "the generation to kill at", func() bool {
		assertRunning(t, []*proc{first})
		gens, err := s.Generations(ctx, "e2e")
		return err == nil && len(gens) > 0 && gens[len(gens)-1] >= at
	})
	first.cmd.Process.Kill() //nolint:errcheck // it may have died already, which the wait reports
	<-first.done
	second := start(t, cfgB...)
	waitScaleOutComplete(t, []*proc{second}, storeB, 3*time.Minute, nil)
	second.stop()
	sumB := inspectStore(t, storeB)
	t.Logf("killed at generation %d; state_sha256 %s uninterrupted, %s killed and restarted", at, sumA.StateSHA256, sumB.StateSHA256)
	if sumA.StateSHA256 != sumB.StateSHA256 {
		t.Fatalf("state_sha256: uninterrupted %s (generation %d), killed at generation %d and restarted %s (generation %d)",
			sumA.StateSHA256, sumA.Generation, at, sumB.StateSHA256, sumB.Generation)
	}
	for i, ch := range sumB.Challengers {
		if ch.StateSHA256 != sumA.Challengers[i].StateSHA256 {
			t.Errorf("challenger %s: state_sha256 %s after the kill, %s without", ch.Name, ch.StateSHA256, sumA.Challengers[i].StateSHA256)
		}
	}
}
