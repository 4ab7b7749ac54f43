package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// The scale-out test's topic: six partitions of scaleOutPerPartition
// examples each, learned in epochs of at most scaleOutEpoch examples of a
// partition (not a divisor of the partition's length, so that the last
// epoch is cut by model.mixing.interval).
const (
	scaleOutPartitions   = 6
	scaleOutPerPartition = 5000
	scaleOutEpoch        = 400
)

// TestScaleOutKafka is the end-to-end test of a model learned over a
// six-partition Kafka topic in recorded epochs (docs/scale-out.md,
// section 10): one worker learns the whole topic uninterrupted; then three
// workers, in the same consumer group (which the first worker has left)
// but on another store, learn it while random workers are killed with
// SIGKILL at five random moments and the group is scaled down to two
// (SIGTERM) and back to three. The input is
// all in the topic before any worker starts, so every boundary is
// min(from + E, end) and the history is a function of the data alone:
// the final state_sha256 (as hyperplane inspect prints it) must be the
// same, every input position must have its prediction (or dead letter),
// and every event, repeated or not, must have the same bytes in both runs.
func TestScaleOutKafka(t *testing.T) {
	ctx := testContext(t)
	began := time.Now()
	// A killed worker's partitions move once the coordinator has missed
	// its heartbeats for kafka.session_timeout; kfake allows 6 s at least
	// unless told otherwise.
	c := testbroker.Kafka(t, kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(scaleOutPartitions, "examples"),
		kfake.SeedTopics(1, "predictions-1", "misclassifications-1", "dead-1", "predictions-3", "misclassifications-3", "dead-3"))
	in := makeInput(scaleOutPartitions*scaleOutPerPartition, 21, 89)
	produceScaleOut(t, ctx, c, in)
	srv := s3test.Start(t)

	// Run A: one worker, uninterrupted.
	storeA := srv.URL(t)
	outA := scaleOutOutputs(t, c, "1")
	cfgA := writeConfig(t, scaleOutConfig(c, "1", storeA))
	a := start(t, "run", "--config", cfgA, "--snapshot.writer", "one")
	waitScaleOutComplete(t, []*proc{a}, storeA, 2*time.Minute, nil)
	a.stop()
	tookA := time.Since(began)
	sumA := inspectStore(t, storeA)
	t.Logf("one worker: generation %d, state_sha256 %s, in %v", sumA.Generation, sumA.StateSHA256, tookA.Round(time.Millisecond))

	// Run B: three workers, five kills, a scale-down and back.
	began = time.Now()
	storeB := srv.URL(t)
	outB := scaleOutOutputs(t, c, "3")
	cfgB := writeConfig(t, scaleOutConfig(c, "3", storeB))
	s, err := snapshot.OpenStore(ctx, storeB)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(11, 6))
	started := 0
	run := func() *proc {
		started++
		return start(t, "run", "--config", cfgB, "--snapshot.writer", fmt.Sprintf("w%d", started))
	}
	workers := []*proc{run(), run(), run()}
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
	progress := func() string {
		snap, err := s.Latest(ctx, "e2e", nil)
		if errors.Is(err, snapshot.ErrNotFound) {
			return "no generation yet"
		}
		if err != nil {
			t.Fatal(err)
		}
		if scaleOutComplete(snap) {
			return fmt.Sprintf("generation %d, complete", snap.Generation)
		}
		return fmt.Sprintf("generation %d", snap.Generation)
	}
	// Seven disruptions: five kills, and a scale-down followed, after at
	// least one kill, by the scale-up. Each comes at a random moment of
	// the history, so that they fall in every part of it whatever the
	// machine's speed: once the newest generation reaches a random epoch
	// (0, before the first, to the fourth before the last), and a random
	// part of an epoch later.
	events := []string{"kill", "kill", "kill", "kill", "kill"}
	d := r.IntN(4)
	events = slices.Insert(events, d, "down")
	events = slices.Insert(events, d+2+r.IntN(5-d), "up")
	epochs := (scaleOutPerPartition + scaleOutEpoch - 1) / scaleOutEpoch
	moments := make([]uint64, len(events))
	for i := range moments {
		moments[i] = uint64(r.IntN(epochs - 3))
	}
	slices.Sort(moments)
	kills := 0
	dead := &graveyard{c: c, group: "scaleout", dead: map[string]time.Time{}}
	for i, ev := range events {
		wait.For(t, 2*time.Minute, 50*time.Millisecond, fmt.Sprintf("generation %d", moments[i]), func() bool {
			assertRunning(t, workers)
			dead.sweep(t, ctx)
			return newest() >= moments[i]
		})
		// A random moment past the generation, not a wait.
		time.Sleep(time.Duration(r.IntN(500)) * time.Millisecond)
		switch ev {
		case "kill":
			kills++
			j := r.IntN(len(workers))
			victim := workers[j]
			var member string
			wait.For(t, time.Minute, 50*time.Millisecond, victim.name()+" to hold a generation of the group (kfake, see graveyard)", func() bool {
				assertRunning(t, workers)
				var holds bool
				member, holds = groupMember(t, victim)
				return holds
			})
			victim.cmd.Process.Kill() //nolint:errcheck // it may have died already, which the wait reports
			<-victim.done
			dead.add(member)
			workers = append(slices.Delete(workers, j, j+1), run())
			t.Logf("kill %d: SIGKILL %s at %s, replaced by %s", kills, victim.name(), progress(), workers[len(workers)-1].name())
		case "down":
			j := r.IntN(len(workers))
			downed := workers[j]
			workers = slices.Delete(workers, j, j+1)
			downed.stop()
			t.Logf("scale-down: SIGTERM %s at %s", downed.name(), progress())
		case "up":
			workers = append(workers, run())
			t.Logf("scale-up: started %s at %s", workers[len(workers)-1].name(), progress())
		}
	}
	if p := progress(); strings.Contains(p, "complete") {
		t.Fatalf("the workers were through the topic (%s) before the last disruption: the test proves less than it should", p)
	}
	chaos := time.Since(began)
	waitScaleOutComplete(t, workers, storeB, 2*time.Minute, func() { dead.sweep(t, ctx) })
	for _, p := range workers {
		p.stop()
	}
	tookB := time.Since(began)
	sumB := inspectStore(t, storeB)
	t.Logf("three workers (%d processes): generation %d, state_sha256 %s, in %v (disruptions over the first %v)",
		started, sumB.Generation, sumB.StateSHA256, tookB.Round(time.Millisecond), chaos.Round(time.Millisecond))
	if sumA.StateSHA256 != sumB.StateSHA256 {
		t.Fatalf("state_sha256: one uninterrupted worker %s (generation %d), three disrupted workers %s (generation %d)",
			sumA.StateSHA256, sumA.Generation, sumB.StateSHA256, sumB.Generation)
	}

	// The events: each run's every position, and every repeat with the
	// same bytes as the first event of that id, in either run.
	first := map[string]map[string][]byte{} // kind -> event id -> bytes
	for _, run := range []struct {
		name string
		out  scaleOutTopics
	}{{"one worker", outA}, {"three workers", outB}} {
		repeats := map[string]int{}
		positions := map[string]bool{}
		for _, o := range run.out.all() {
			if first[o.kind] == nil {
				first[o.kind] = map[string][]byte{}
			}
			seen := map[string]bool{}
			for _, rec := range o.read(t, ctx, c) {
				e := decodeEvents(t, [][]byte{rec.Value})[0]
				id := string(rec.Key)
				if id != e.EventID {
					t.Fatalf("%s: %s event keyed %q has event id %q", run.name, o.kind, id, e.EventID)
				}
				if o.kind != "misclassification" {
					positions[id] = true
				}
				if seen[id] {
					repeats[o.kind]++
				}
				seen[id] = true
				if prev, ok := first[o.kind][id]; !ok {
					first[o.kind][id] = rec.Value
				} else if string(prev) != string(rec.Value) {
					t.Fatalf("%s: %s %s differs from the first one (of either run):\nfirst: %s\nthis:  %s", run.name, o.kind, id, prev, rec.Value)
				}
			}
		}
		for i := range in.messages {
			pos := fmt.Sprintf("kafka:examples/%d/%d", i%scaleOutPartitions, i/scaleOutPartitions)
			if !positions[pos] {
				t.Fatalf("%s: position %s (message %d, garbage %v) has no prediction or dead letter", run.name, pos, i, in.garbage[i])
			}
		}
		t.Logf("%s: each of the %d positions has its event; repeated events, each identical to the first: %v", run.name, len(in.messages), repeats)
	}
}

// scaleOutConfig is the configuration of a run: its outputs (topics with
// the suffix) and its store. The runs follow each other in one consumer
// group, which the history digest includes.
func scaleOutConfig(c *testbroker.KafkaCluster, suffix, store string) string {
	return fmt.Sprintf(`
model:
  name: e2e
  learner:
    hash_bits: 16
  mixing:
    epoch_examples: %d
    interval: 200ms
kafka:
  brokers: [%s]
  session_timeout: 2s
source:
  kind: kafka
  topics: [examples]
  group: scaleout
  batch: 64
outputs:
  predictions: kafka:predictions-%s
  misclassifications: kafka:misclassifications-%s
  dead_letter: kafka:dead-%s
snapshot:
  url: %s
  every: 1
  interval: 0s
  keep: 3
shutdown:
  timeout: 10s
`, scaleOutEpoch, strings.Join(c.ListenAddrs(), ", "), suffix, suffix, suffix, store)
}

// produceScaleOut writes message i of in to partition i%6, at offset i/6.
func produceScaleOut(t *testing.T, ctx context.Context, c *testbroker.KafkaCluster, in input) {
	t.Helper()
	cl := c.Client(t)
	var recs []*kgo.Record
	for i, m := range in.messages {
		recs = append(recs, &kgo.Record{Topic: "examples", Partition: int32(i % scaleOutPartitions), Value: m})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// scaleOutComplete reports whether snap includes every example of the
// topic.
func scaleOutComplete(snap *snapshot.Snapshot) bool {
	for p := range scaleOutPartitions {
		if snap.Positions[fmt.Sprintf("kafka:examples/%d", p)] != scaleOutPerPartition {
			return false
		}
	}
	return true
}

// waitScaleOutComplete waits until the newest generation in store
// includes the whole topic, calling tick (if not nil) at every look, and
// fails if one of the workers exits meanwhile.
func waitScaleOutComplete(t *testing.T, workers []*proc, store string, d time.Duration, tick func()) {
	t.Helper()
	ctx := testContext(t)
	s, err := snapshot.OpenStore(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var seen uint64
	wait.For(t, d, 50*time.Millisecond, "a generation that includes the whole topic", func() bool {
		assertRunning(t, workers)
		if tick != nil {
			tick()
		}
		gens, err := s.Generations(ctx, "e2e")
		if err != nil {
			t.Fatal(err)
		}
		if len(gens) == 0 || gens[len(gens)-1] == seen {
			return false
		}
		seen = gens[len(gens)-1]
		snap, err := s.Load(ctx, "e2e", seen)
		if errors.Is(err, snapshot.ErrNotFound) {
			return false // retained away meanwhile
		}
		if err != nil {
			t.Fatal(err)
		}
		return scaleOutComplete(snap)
	})
}

// assertRunning fails if a worker exited on its own.
func assertRunning(t *testing.T, workers []*proc) {
	t.Helper()
	for _, p := range workers {
		select {
		case err := <-p.done:
			t.Fatalf("worker %s exited by itself (%v):\n%s", p.name(), err, p.log())
		default:
		}
	}
}

// name is the worker's snapshot.writer.
func (p *proc) name() string {
	if i := slices.Index(p.cmd.Args, "--snapshot.writer"); i >= 0 && i+1 < len(p.cmd.Args) {
		return p.cmd.Args[i+1]
	}
	return p.httpAddr()
}

// inspectStore runs hyperplane inspect on the model in store and returns
// what it says of the newest generation.
func inspectStore(t *testing.T, store string) snapshot.Summary {
	t.Helper()
	u, err := url.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	u.Path += "/e2e"
	out, err := exec.Command(hyperplane.path, "inspect", "--top", "0", u.String()).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("hyperplane inspect %s: %v\n%s", u, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var sum snapshot.Summary
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("hyperplane inspect: %v\n%s", err, out)
	}
	if sum.StateSHA256 == "" {
		t.Fatalf("hyperplane inspect printed no state_sha256:\n%s", out)
	}
	for p := range scaleOutPartitions {
		if got := sum.Positions[fmt.Sprintf("kafka:examples/%d", p)]; got != scaleOutPerPartition {
			t.Fatalf("hyperplane inspect: the newest generation %d is at %d of partition %d, want %d", sum.Generation, got, p, scaleOutPerPartition)
		}
	}
	return sum
}

// scaleOutTopics are a run's output topics.
type scaleOutTopics struct {
	predictions, misclassifications, dead scaleOutTopic
}

type scaleOutTopic struct {
	kind, topic string
	r           *topicReader
}

func scaleOutOutputs(t *testing.T, c *testbroker.KafkaCluster, suffix string) scaleOutTopics {
	t.Helper()
	o := func(kind, topic string) scaleOutTopic {
		return scaleOutTopic{kind: kind, topic: topic + "-" + suffix, r: readTopic(t, c, topic+"-"+suffix)}
	}
	return scaleOutTopics{o("prediction", "predictions"), o("misclassification", "misclassifications"), o("dead letter", "dead")}
}

func (o scaleOutTopics) all() []scaleOutTopic {
	return []scaleOutTopic{o.predictions, o.misclassifications, o.dead}
}

// read returns every record of the topic, once the reader has read up to
// its end: call it once the workers have stopped.
func (o scaleOutTopic) read(t *testing.T, ctx context.Context, c *testbroker.KafkaCluster) []*kgo.Record {
	t.Helper()
	end := endOffset(t, ctx, c, o.topic)
	wait.For(t, time.Minute, 50*time.Millisecond, "every record of "+o.topic, func() bool { return int64(o.r.count()) >= end })
	return o.r.records()
}

// endOffset is the next offset of the topic's partition 0.
func endOffset(t *testing.T, ctx context.Context, c *testbroker.KafkaCluster, topic string) int64 {
	t.Helper()
	cl := c.Client(t)
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("end of %s: %v", topic, err)
	}
	return p.Offset
}

// groupMember returns the consumer group member id of the worker's
// newest generation, and whether it holds that generation now: it
// logged the generation's beginning and not yet its end.
func groupMember(t *testing.T, p *proc) (member string, holds bool) {
	t.Helper()
	for line := range strings.SplitSeq(p.log(), "\n") {
		var l struct {
			Msg    string `json:"msg"`
			Member string `json:"member"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch l.Msg {
		case "kafka consumer group generation":
			member, holds = l.Member, true
		case "kafka consumer group generation ended":
			holds = false
		}
	}
	return member, holds
}

// graveyard works around a bug of kfake (v0.0.0-20260918054303, groups.go):
// a member that dies while its JoinGroup waits for the others stays in
// the group forever. The join completes with it; its answer cannot be
// delivered, so its session timer never starts (group.reply), and the
// leader's SyncGroup cancels the timeout that would have removed a member
// that never syncs (completeLeaderSync, clearPendingSync). Its partitions
// then wait forever, where Kafka drops the member after the session
// timeout. The test kills only workers that hold a generation, which
// leaves a window of a few milliseconds (a rebalance that the worker has
// just seen), and sweep makes the group leave for a killed worker's
// member that is still in the group well after the session and rebalance
// timeouts, as Kafka would have dropped it.
type graveyard struct {
	c     *testbroker.KafkaCluster
	cl    *kgo.Client
	group string
	dead  map[string]time.Time // member id -> killed at
	last  time.Time
}

func (g *graveyard) add(member string) { g.dead[member] = time.Now() }

func (g *graveyard) sweep(t *testing.T, ctx context.Context) {
	t.Helper()
	if time.Since(g.last) < time.Second {
		return
	}
	g.last = time.Now()
	if g.cl == nil {
		g.cl = g.c.Client(t)
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{g.group}
	resp, err := req.RequestWith(ctx, g.cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Groups[0].Members {
		killed, ok := g.dead[m.MemberID]
		if !ok || time.Since(killed) < 10*time.Second {
			continue
		}
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Group = g.group
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m.MemberID
		leave.Members = append(leave.Members, lm)
		if _, err := leave.RequestWith(ctx, g.cl); err != nil {
			t.Fatal(err)
		}
		t.Logf("kfake kept member %s in the group %v after its worker was killed: made it leave (see graveyard)", m.MemberID, time.Since(killed).Round(time.Second))
		delete(g.dead, m.MemberID)
	}
}
