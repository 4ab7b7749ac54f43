package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestRestartAfterKill: a worker over a topic of three partitions, killed
// with SIGKILL and started again under the same name (snapshot.writer,
// which names its static membership of the consumer group), owns its
// partitions again and mixes epochs well before the coordinator would
// have dropped its dead self (kafka.session_timeout 30s): the restart
// replaces the old member instead of waiting for a rebalance. (With
// kafka.group_instance none it waits about 15 s, kfake's rebalance
// timeout of half the session.)
func TestRestartAfterKill(t *testing.T) {
	ctx := testContext(t)
	const partitions, perPartition, session = 3, 6000, 30 * time.Second
	c := testbroker.Kafka(t, kfake.SeedTopics(partitions, "examples"),
		kfake.SeedTopics(1, "predictions-r", "misclassifications-r", "dead-r"))
	in := makeInput(partitions*perPartition, 5, 0)
	cl := c.Client(t)
	var recs []*kgo.Record
	for i, m := range in.messages {
		recs = append(recs, &kgo.Record{Topic: "examples", Partition: int32(i % partitions), Value: m})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`
model:
  name: e2e
  learner:
    hash_bits: 16
  mixing:
    epoch_examples: 200
    interval: 200ms
kafka:
  brokers: [%s]
  session_timeout: %s
source:
  kind: kafka
  topics: [examples]
  group: restart
outputs:
  predictions: kafka:predictions-r
  misclassifications: kafka:misclassifications-r
  dead_letter: kafka:dead-r
snapshot:
  url: file://%s
  every: 1
  interval: 0s
`, strings.Join(c.ListenAddrs(), ", "), session, store))
	s, err := snapshot.OpenStore(ctx, "file://"+store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	newest := func() uint64 {
		gens, err := s.Generations(ctx, "e2e")
		if err != nil {
			t.Fatal(err)
		}
		if len(gens) == 0 {
			return 0
		}
		return gens[len(gens)-1]
	}

	first := start(t, "run", "--config", cfg, "--snapshot.writer", "w")
	var member string
	wait.For(t, time.Minute, 50*time.Millisecond, "the first worker to own its partitions and write a generation", func() bool {
		assertRunning(t, []*proc{first})
		m, holds := groupMember(t, first)
		member = m
		return holds && newest() >= 2
	})
	first.cmd.Process.Kill() //nolint:errcheck // it may have died already, which the wait reports
	<-first.done
	killedAt := newest()

	began := time.Now()
	second := start(t, "run", "--config", cfg, "--snapshot.writer", "w")
	wait.For(t, time.Minute, 20*time.Millisecond, "the restarted worker to own its partitions", func() bool {
		assertRunning(t, []*proc{second})
		m, holds := groupMember(t, second)
		return holds && m != member
	})
	owned := time.Since(began)
	var epoch float64
	wait.For(t, time.Minute, 20*time.Millisecond, "the restarted worker to mix two epochs", func() bool {
		assertRunning(t, []*proc{second})
		e := second.metric("hyperplane_epoch")
		if epoch == 0 {
			epoch = e
		}
		return epoch > 0 && e >= epoch+2
	})
	mixed := time.Since(began)
	t.Logf("killed at generation %d; the restarted worker owned its partitions %v after it started, and mixed two more epochs after %v (session %v)",
		killedAt, owned.Round(time.Millisecond), mixed.Round(time.Millisecond), session)
	if limit := session / 3; mixed > limit {
		t.Fatalf("the restarted worker took %v to own its partitions and mix two epochs, want at most %v: it waited for the group", mixed, limit)
	}
	second.stop()
}
