package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// TestPromotionInEpochsAfterKill: `hyperplane promote` asks for a
// challenger while `hyperplane run` learns a six-partition topic in
// epochs; the worker makes the challenger the model between two epochs,
// and is killed with SIGKILL once it has cut the next epoch's boundary,
// while the promotion's event cannot be published (outputs.promotions
// names a topic deleted once the worker has started: run refuses to start
// without it).
// Once the topic is made, the worker started in its place publishes the
// event: outputs.promotions holds one event id, every copy of it the same
// bytes, and `hyperplane replay` of the epoch log gives the worker's
// state_sha256, the promotion included.
func TestPromotionInEpochsAfterKill(t *testing.T) {
	ctx := testContext(t)
	c := testbroker.Kafka(t, kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(scaleOutPartitions, "examples"),
		kfake.SeedTopics(1, "predictions-pe", "misclassifications-pe", "dead-pe", "promotions-pe"))
	in := makeInput(scaleOutPartitions*scaleOutPerPartition, 23, 89)
	// Half of each partition now, the rest once the request is written,
	// so that epochs follow it.
	half := len(in.messages) / 2
	produceFrom(t, c, in.messages, 0, half)
	srv := s3test.Start(t)
	store := srv.URL(t)
	args := []string{"--config", writeConfig(t, scaleOutConfig(c, "pe", store)),
		"--model.challengers", "perceptron:algorithm=perceptron", "--outputs.promotions", "kafka:promotions-pe"}
	s, err := snapshot.OpenStore(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	first := start(t, append([]string{"run", "--snapshot.writer", "w"}, args...)...)
	wait.For(t, 2*time.Minute, 20*time.Millisecond, "a first generation", func() bool {
		assertRunning(t, []*proc{first})
		gens, err := s.Generations(ctx, "e2e")
		return err == nil && len(gens) > 0
	})
	c.DeleteTopic(t, "promotions-pe")
	if out, err := exec.CommandContext(ctx, hyperplane.path, append([]string{"promote", "--challenger", "perceptron"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	produceFrom(t, c, in.messages, half, len(in.messages))
	// The promotion is in a generation, and the next epoch's boundary is
	// cut: the kill falls after it, before the event can be published.
	var promoted uint64
	wait.For(t, 2*time.Minute, 20*time.Millisecond, "a generation of the promoted model, and the next boundary", func() bool {
		assertRunning(t, []*proc{first})
		if promoted == 0 {
			snap, err := s.Latest(ctx, "e2e", nil)
			if err != nil || len(snap.State.Promotions) == 0 {
				return false
			}
			promoted = snap.State.Promotions[0].Epoch
		}
		_, _, err := epochlog.New(s).Boundary(ctx, "e2e", promoted+1)
		return err == nil
	})
	t.Logf("killed with %v publish errors", first.metric("hyperplane_publish_errors_total"))
	first.cmd.Process.Kill() //nolint:errcheck // it may have died already, which the wait reports
	<-first.done
	c.CreateTopic(t, "promotions-pe", 1)

	second := start(t, append([]string{"run", "--snapshot.writer", "w"}, args...)...)
	waitScaleOutComplete(t, []*proc{second}, store, 3*time.Minute, nil)
	second.stop()
	sum := inspectStore(t, store)
	if len(sum.Promotions) != 1 || sum.Promotions[0].Epoch != promoted || sum.Promotions[0].Challenger != "perceptron" {
		t.Fatalf("the history holds %+v, want perceptron promoted after epoch %d", sum.Promotions, promoted)
	}

	// Every output of the announcing range is durable once the worker
	// has gone past its epoch, the event first.
	events := c.ReadTopic(t, ctx, "promotions-pe")
	want := fmt.Sprintf("epoch:e2e/%d", promoted)
	if len(events) == 0 {
		t.Fatalf("no promotion event on outputs.promotions, want %s", want)
	}
	for _, e := range events {
		var ev struct {
			EventID  string `json:"event_id"`
			Promoted string `json:"promoted"`
			Request  string `json:"request"`
		}
		if err := json.Unmarshal(e, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.EventID != want || ev.Promoted != "perceptron" || ev.Request != sum.Promotions[0].Request || string(e) != string(events[0]) {
			t.Fatalf("promotion events %s and %s, want copies of one event %s promoting perceptron on request %s",
				events[0], e, want, sum.Promotions[0].Request)
		}
	}
	t.Logf("promoted after epoch %d of %d; %d copies of its event", promoted, sum.Generation, len(events))

	dir := t.TempDir()
	out, err := exec.CommandContext(ctx, hyperplane.path, append([]string{"replay", "--out", "file://" + dir}, args...)...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("replay: %v\n%s", err, stderr)
	}
	var replayed struct {
		StateSHA256 string `json:"state_sha256"`
	}
	if err := json.Unmarshal(out, &replayed); err != nil {
		t.Fatalf("replay printed %s: %v", out, err)
	}
	if replayed.StateSHA256 != sum.StateSHA256 {
		t.Fatalf("replay: state_sha256 %s, the worker's %s (generation %d)", replayed.StateSHA256, sum.StateSHA256, sum.Generation)
	}
}

// produceFrom writes messages from to to of all, message i to partition
// i%6 (at offset i/6), as produceScaleOut does.
func produceFrom(t *testing.T, c *testbroker.KafkaCluster, all [][]byte, from, to int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: "examples", Partition: int32(i % scaleOutPartitions), Value: all[i]})
	}
	if err := c.Client(t).ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
