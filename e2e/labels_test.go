package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hyperplane-ml/hyperplane/consumer"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// labelWindow is the tests' labels.window.
const labelWindow = 2 * time.Second

// delayedRecord is a record of the examples' or the labels' log, with its
// record time; as a stream stored it (storedRecords), with its subject and
// sequence too.
type delayedRecord struct {
	value   []byte
	t       time.Time
	subject string
	seq     int64
}

// delayedInput makes n examples without their labels, one every 10 ms of
// record time from a fixed day, and their labels in the order of their
// times: most within labelWindow, some after it, some twice, some never,
// a few for ids no example has.
func delayedInput(n int, seed uint64) (examples, labels []delayedRecord) {
	o := synth.DefaultOptions()
	o.Seed, o.Vocab = seed, 500
	s := synth.New(o)
	rng := rand.New(rand.NewPCG(seed, 9))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := labelWindow.Milliseconds()
	for i := range n {
		rec := s.Next()
		y := rec.Label
		rec.Labeled = false
		t := base.Add(time.Duration(i) * 10 * time.Millisecond)
		b := synth.AppendJSON(nil, rec)
		examples = append(examples, delayedRecord{value: b[:len(b)-1], t: t})
		id := strconv.FormatUint(rec.Seq, 10)
		at := func(ms int64) time.Time { return t.Add(time.Duration(ms) * time.Millisecond) }
		label := func(id string, y int, ms int64) delayedRecord {
			return delayedRecord{value: fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, y), t: at(ms)}
		}
		switch r := rng.IntN(20); {
		case r < 14:
			labels = append(labels, label(id, y, rng.Int64N(w)))
		case r < 16:
			labels = append(labels, label(id, y, w+100+rng.Int64N(w)))
		case r < 17:
			labels = append(labels, label(id, y, rng.Int64N(w)), label(id, -y, rng.Int64N(w)))
		case r < 18:
			labels = append(labels, label("x"+id, y, rng.Int64N(w)))
		}
	}
	for i := 1; i < len(labels); i++ {
		for k := i; k > 0 && labels[k].t.Before(labels[k-1].t); k-- {
			labels[k], labels[k-1] = labels[k-1], labels[k]
		}
	}
	return examples, labels
}

// expectedJoin is what the join decides over the two logs, the marks the
// workers append after the labels closing every window: the counts of
// each outcome.
func expectedJoin(examples, labels []delayedRecord) consumer.JoinCounts {
	j := consumer.NewJoin(consumer.JoinConfig{Window: labelWindow, Default: -1, HasDefault: true})
	for i, e := range examples {
		var rec struct{ ID string }
		json.Unmarshal(e.value, &rec) //nolint:errcheck // the test wrote it
		j.Example(int64(i), consumer.Millis(e.t), true, []byte(rec.ID), consumer.Served{})
	}
	for i, l := range labels {
		var rec struct {
			ID    string
			Label int
		}
		json.Unmarshal(l.value, &rec) //nolint:errcheck // the test wrote it
		j.Label(int64(i), consumer.Millis(l.t), false, []byte(rec.ID), rec.Label)
	}
	j.Label(int64(len(labels)), consumer.Millis(time.Now()), true, nil, 0)
	for {
		if _, decided, ok := j.Next(); !ok || !decided {
			break
		}
		j.Learned()
	}
	return j.Counts()
}

func labelsKafkaConfig(c *testbroker.KafkaCluster, store string) string {
	return fmt.Sprintf(`
model:
  name: e2e
  learner:
    hash_bits: 16
kafka:
  brokers: [%s]
source:
  kind: kafka
  topics: [examples]
labels:
  kind: kafka
  topics: [labels]
  window: %s
  default: "-1"
outputs:
  predictions: kafka:predictions
  misclassifications: kafka:misclassifications
  dead_letter: kafka:dead
  late_labels: kafka:late
snapshot:
  url: %s
  every: 300
  interval: 200ms
  keep: 3
`, strings.Join(c.ListenAddrs(), ", "), labelWindow, store)
}

// joinedSnapshot is the newest generation in store with its join.
func joinedSnapshot(t *testing.T, store string) (*snapshot.Snapshot, *consumer.JoinState) {
	t.Helper()
	s := latestSnapshot(t, store)
	if s.Join == nil {
		t.Fatal("the newest generation holds no join")
	}
	st, err := consumer.DecodeJoinState(s.Join)
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}

// TestLabelsKafka: examples on one topic, their labels later on another,
// over a Kafka partition each. Every run is through when its tail has
// learned every example and it has read every label the test wrote. An uninterrupted worker, one killed with
// SIGKILL three times and restarted, and a replay, learn the same model
// (state_sha256), each example once, and count the same outcomes, those
// the join's rule gives over the two logs.
func TestLabelsKafka(t *testing.T) {
	ctx := testContext(t)
	const n = 20000
	c := testbroker.Kafka(t, kfake.SeedTopics(1, "examples", "labels", "predictions", "misclassifications", "dead", "late"))
	examples, labels := delayedInput(n, 21)
	cl := c.Client(t)
	var recs []*kgo.Record
	for _, e := range examples {
		recs = append(recs, &kgo.Record{Topic: "examples", Value: e.value, Timestamp: e.t})
	}
	for _, l := range labels {
		recs = append(recs, &kgo.Record{Topic: "labels", Value: l.value, Timestamp: l.t})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want := expectedJoin(examples, labels)
	if want.Labels[consumer.LabelLate] == 0 || want.Labels[consumer.LabelDuplicate] == 0 || want.Labels[consumer.LabelUnknown] == 0 || want.Expired == 0 {
		t.Fatalf("the input does not exercise every outcome: %+v", want)
	}

	learned := func(p *proc) bool {
		return p.metric(`hyperplane_position{source="kafka:examples/0"}`) >= n && p.metric("hyperplane_join_pending") == 0 &&
			p.metric(`hyperplane_position{source="kafka:labels/0"}`) >= float64(len(labels))
	}
	whole := fileStore(t)
	p := start(t, "run", "--config", writeConfig(t, labelsKafkaConfig(c, whole)))
	wait.For(t, 2*time.Minute, 50*time.Millisecond, "every example learned", func() bool { return learned(p) })
	p.stop()
	ref, st := joinedSnapshot(t, whole)
	sha := ref.State.StateSHA256()
	assertJoinCounts(t, "uninterrupted", st, want)
	if got := ref.State.Labeled; got != n {
		t.Errorf("%d examples learned with a label, want every one of %d (joined or defaulted)", got, n)
	}

	assertJoinRuns(t, ctx, sha, want, func(store string) string { return writeConfig(t, labelsKafkaConfig(c, store)) }, "kafka:examples/0", n, learned)
}

// assertJoinRuns runs the worker of config(store) on a store of its own,
// killing it with SIGKILL three times (killAt) before it runs to the end
// (learned), and replays the same topics into another store: both models
// must be the uninterrupted run's (sha), with the rule's outcomes (want).
func assertJoinRuns(t *testing.T, ctx context.Context, sha string, want consumer.JoinCounts, config func(store string) string, source string, n int, learned func(*proc) bool) {
	t.Helper()
	killed := fileStore(t)
	cfg := config(killed)
	snaps := killAt(t, cfg, killed, source, n/5, n/2, 4*n/5)
	p := start(t, "run", "--config", cfg)
	wait.For(t, 2*time.Minute, 50*time.Millisecond, "every example learned after the kills", func() bool { return learned(p) })
	p.stop()
	got, st := joinedSnapshot(t, killed)
	if got.State.StateSHA256() != sha {
		t.Errorf("after kills at %v: state_sha256 %s, uninterrupted %s", snaps, got.State.StateSHA256(), sha)
	}
	assertJoinCounts(t, "killed", st, want)
	t.Logf("kills with the newest generation at %v; outcomes %+v", snaps, want)

	dir := t.TempDir()
	if out, err := exec.CommandContext(ctx, hyperplane.path, "replay", "--config", config(""), "--out", "file://"+dir).CombinedOutput(); err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	replayed, err := snapshot.LoadURL(ctx, "file://"+dir+"/e2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	if replayed.State.StateSHA256() != sha {
		t.Errorf("replay: state_sha256 %s, the worker's %s", replayed.State.StateSHA256(), sha)
	}
}

// killAt starts the worker and kills it with SIGKILL once the newest
// generation in store includes at least each of at examples of source,
// then starts it again: each kill comes after a snapshot, with whatever
// the worker did since lost. It returns, for each kill, the position at
// source of that generation: where the next run resumed.
func killAt(t *testing.T, cfg, store, source string, at ...int) []int64 {
	t.Helper()
	var snaps []int64
	for _, n := range at {
		p := start(t, "run", "--config", cfg, "--source.batch", "64")
		var pos int64
		wait.For(t, 2*time.Minute, 50*time.Millisecond, fmt.Sprintf("a generation with %d examples learned", n), func() bool {
			if s, err := snapshot.LoadURL(testContext(t), store+"/e2e", nil); err == nil {
				pos = s.Positions[source]
			}
			return pos >= int64(n)
		})
		p.cmd.Process.Kill() //nolint:errcheck // it may have died already, which the wait reports
		<-p.done
		snaps = append(snaps, pos)
	}
	return snaps
}

// assertJoinCounts compares a join's outcomes with the rule's.
func assertJoinCounts(t *testing.T, what string, st *consumer.JoinState, want consumer.JoinCounts) {
	t.Helper()
	c := st.Counts
	got := [4]uint64{c.Joined, c.Late, c.Unknown, c.Duplicate}
	if got != want.Labels || c.Expired != want.Expired {
		t.Errorf("%s: outcomes joined/late/unknown/duplicate %v and %d expired, the rule's %v and %d", what, got, c.Expired, want.Labels, want.Expired)
	}
}

// fileStore is a new store for a test's model.
func fileStore(t *testing.T) string {
	return "file://" + t.TempDir()
}

// storedRecords reads every message of stream with the time the server
// stored it at: the record time the join counts.
func storedRecords(t *testing.T, js jetstream.JetStream, stream string) []delayedRecord {
	t.Helper()
	ctx := testContext(t)
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var recs []delayedRecord
	for len(recs) < int(info.State.Msgs) {
		m, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		meta, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, delayedRecord{m.Data(), meta.Timestamp, m.Subject(), int64(meta.Sequence.Stream)})
	}
	return recs
}

// publishDelayed publishes examples, each on exSubject of its id, to the
// stream exStream, and labels on lbSubject of their id to lbStream, as the
// server gives them their times: each label a few messages after its
// example, some twice, some never, some for an id no example has; then,
// once the server's clock is a window past the last example's time, the
// labels held back of the newest examples first (late, whatever the
// machine's speed: they land within the second window); and once it is a
// window past the last label's, the last 50 examples, which have no label
// and move the examples' watermark a window past every label's before
// them, so that a label for an id never seen is unknown. It returns how
// many labels it published.
func publishDelayed(t *testing.T, ctx context.Context, js jetstream.JetStream, examples []delayedRecord, exStream, lbStream string, exSubject, lbSubject func(id string) string) int {
	t.Helper()
	const tail = 50
	rng := rand.New(rand.NewPCG(7, 8))
	var exMsgs, lbMsgs, lateMsgs [][]byte
	var exIDs, lbIDs, lateIDs []string
	for i, e := range examples {
		var rec struct{ ID string }
		json.Unmarshal(e.value, &rec) //nolint:errcheck // the test wrote it
		exMsgs, exIDs = append(exMsgs, e.value), append(exIDs, rec.ID)
		if i >= len(examples)-tail {
			continue
		}
		label := fmt.Appendf(nil, `{"id":%q,"label":%d}`, rec.ID, 1-2*(i%2))
		switch r := rng.IntN(20); {
		case r < 14:
			lbMsgs, lbIDs = append(lbMsgs, label), append(lbIDs, rec.ID)
		case r < 16:
			lbMsgs, lbIDs = append(lbMsgs, label, label), append(lbIDs, rec.ID, rec.ID)
		case r < 18:
			lateMsgs, lateIDs = append(lateMsgs, label), append(lateIDs, rec.ID)
		case r < 19:
			lbMsgs, lbIDs = append(lbMsgs, fmt.Appendf(nil, `{"id":"x%s","label":1}`, rec.ID)), append(lbIDs, "x"+rec.ID)
		}
	}
	publish := func(subject func(string) string, ids []string, msgs [][]byte) {
		t.Helper()
		if err := publishEach(ctx, js, func(i int) string { return subject(ids[i]) }, msgs); err != nil {
			t.Fatal(err)
		}
	}
	// Labels a few messages behind their examples.
	body := len(exMsgs) - tail
	for i := 0; i < body; i += 100 {
		j := min(i+100, body)
		publish(exSubject, exIDs[i:j], exMsgs[i:j])
		from, to := len(lbMsgs)*i/body, len(lbMsgs)*j/body
		publish(lbSubject, lbIDs[from:to], lbMsgs[from:to])
	}
	after := func(stream string) {
		t.Helper()
		at := lastStored(t, ctx, js, stream).Add(labelWindow + 100*time.Millisecond)
		wait.For(t, time.Minute, 20*time.Millisecond, "a window past the last time of "+stream, func() bool { return time.Now().After(at) })
	}
	after(exStream)
	slices.Reverse(lateMsgs)
	slices.Reverse(lateIDs)
	publish(lbSubject, lateIDs, lateMsgs)
	after(lbStream)
	publish(exSubject, exIDs[body:], exMsgs[body:])
	return len(lbMsgs) + len(lateMsgs)
}

// lastStored is the time the server stored stream's last message at.
func lastStored(t *testing.T, ctx context.Context, js jetstream.JetStream, stream string) time.Time {
	t.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastTime
}

// TestLabelsJetStream: as TestLabelsKafka, over JetStream streams, whose
// record times are the server's (publishDelayed): every outcome occurs,
// and each is counted as the rule gives it over the streams as stored.
func TestLabelsJetStream(t *testing.T) {
	// Three runs and a replay of a stream published in real time: longer
	// than testContext allows under the race detector.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const n = 10000
	ns := startNATS(t)
	prefix := uniquePrefix("LABELS")
	js, _ := ns.streams(ctx, prefix)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: prefix + "_LB", Subjects: []string{prefix + ".LB"}})
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: prefix + "_LATE", Subjects: []string{prefix + ".LATE"}})
	examples, _ := delayedInput(n, 22)
	labelRecords := float64(publishDelayed(t, ctx, js, examples, prefix+"_IN", prefix+"_LB",
		func(string) string { return prefix + ".IN" }, func(string) string { return prefix + ".LB" }))
	want := expectedJoin(storedRecords(t, js, prefix+"_IN"), storedRecords(t, js, prefix+"_LB"))
	if want.Labels[consumer.LabelLate] == 0 || want.Labels[consumer.LabelDuplicate] == 0 || want.Labels[consumer.LabelUnknown] == 0 || want.Expired == 0 {
		t.Fatalf("the input does not exercise every outcome: %+v", want)
	}
	source := "jetstream:" + prefix + "_IN"
	config := func(store string) string {
		return writeConfig(t, jetStreamConfig(ns.url, prefix)+fmt.Sprintf(`  late_labels: jetstream:%[1]s.LATE
labels:
  kind: jetstream
  stream: %[1]s_LB
  subject: %[1]s.LB
  window: %[2]s
  default: "-1"
snapshot:
  url: %[3]s
  every: 300
  interval: 200ms
  keep: 3
`, prefix, labelWindow, store))
	}
	learned := func(p *proc) bool {
		return p.metric(`hyperplane_position{source="`+source+`"}`) >= n && p.metric("hyperplane_join_pending") == 0 &&
			p.metric(`hyperplane_position{source="jetstream:`+prefix+`_LB"}`) >= labelRecords
	}
	whole := fileStore(t)
	p := start(t, "run", "--config", config(whole))
	wait.For(t, 2*time.Minute, 50*time.Millisecond, "every example learned", func() bool { return learned(p) })
	p.stop()
	ref, st := joinedSnapshot(t, whole)
	sha := ref.State.StateSHA256()
	assertJoinCounts(t, "uninterrupted", st, want)

	assertJoinRuns(t, ctx, sha, want, config, source, n, learned)
}

// labelPartitions is how many co-partitioned partitions the examples'
// and the labels' topics of TestLabelsKafkaPartitionScope have.
const labelPartitions = 4

// chainSnapshot is the newest generation of shard's chain in store, with
// its join; nil when the chain has none yet.
func chainSnapshot(t *testing.T, store, shard string) (*snapshot.Snapshot, *consumer.JoinState) {
	t.Helper()
	id, err := shardid.Parse(shard)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := id.Segment()
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.LoadURL(testContext(t), fmt.Sprintf("%s/e2e/partition/%s/e2e", store, seg), nil)
	if err != nil {
		return nil, nil
	}
	if s.Join == nil {
		t.Fatalf("%s: the newest generation holds no join", shard)
	}
	st, err := consumer.DecodeJoinState(s.Join)
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}

// TestLabelsKafkaPartitionScope: as TestLabelsKafka in partition scope,
// over topics of four co-partitioned partitions (the same ids in each):
// an uninterrupted worker, one killed with SIGKILL three times and
// restarted, and a replay give each partition's model the same
// state_sha256, and its join the outcomes the rule gives over that
// partition's two logs.
func TestLabelsKafkaPartitionScope(t *testing.T) {
	ctx := testContext(t)
	const n = 5000
	c := testbroker.Kafka(t, kfake.SeedTopics(labelPartitions, "examples", "labels"), kfake.SeedTopics(1, "predictions", "misclassifications", "dead", "late"))
	var recs []*kgo.Record
	parts := map[string]partitionJoin{}
	for p := range labelPartitions {
		examples, labels := delayedInput(n, uint64(31+p))
		for _, e := range examples {
			recs = append(recs, &kgo.Record{Topic: "examples", Partition: int32(p), Value: e.value, Timestamp: e.t})
		}
		for _, l := range labels {
			recs = append(recs, &kgo.Record{Topic: "labels", Partition: int32(p), Value: l.value, Timestamp: l.t})
		}
		w := expectedJoin(examples, labels)
		if w.Labels[consumer.LabelLate] == 0 || w.Labels[consumer.LabelDuplicate] == 0 || w.Labels[consumer.LabelUnknown] == 0 || w.Expired == 0 {
			t.Fatalf("partition %d: the input does not exercise every outcome: %+v", p, w)
		}
		parts[fmt.Sprintf("kafka:examples/%d", p)] = partitionJoin{want: w, examples: n, end: n,
			labels: fmt.Sprintf("kafka:labels/%d", p), labelsEnd: int64(len(labels))}
	}
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	config := func(store string) string {
		return writeConfig(t, strings.Replace(labelsKafkaConfig(c, store), "  name: e2e\n", "  name: e2e\n  scope: partition\n", 1))
	}
	assertPartitionJoinRuns(t, ctx, config, parts)
}

// partitionJoin is what a partition's join must come to: the rule's
// outcomes, its examples learned, its end (the examples' position once
// every one is read), and its labels' partition with its end.
type partitionJoin struct {
	want      consumer.JoinCounts
	examples  int
	end       int64
	labels    string
	labelsEnd int64
}

// assertPartitionJoinRuns runs the worker of config(store), which learns
// in partition scope the partitions of parts (by shard): uninterrupted,
// killed with SIGKILL three times (once every chain's newest generation
// is at a fifth, a half, four fifths of its end) and restarted, and
// replayed. Each partition must learn every example with the same
// state_sha256 each time, and its join the rule's outcomes.
func assertPartitionJoinRuns(t *testing.T, ctx context.Context, config func(store string) string, parts map[string]partitionJoin) {
	t.Helper()
	learned := func(p *proc) bool {
		if p.metric("hyperplane_join_pending") != 0 {
			return false
		}
		for shard, pj := range parts {
			if p.metric(`hyperplane_position{source="`+shard+`"}`) < float64(pj.end) ||
				p.metric(`hyperplane_position{source="`+pj.labels+`"}`) < float64(pj.labelsEnd) {
				return false
			}
		}
		return true
	}
	check := func(what, store string) map[string]string {
		t.Helper()
		shas := map[string]string{}
		for shard, pj := range parts {
			s, st := chainSnapshot(t, store, shard)
			if s == nil {
				t.Fatalf("%s: partition %s has no generation", what, shard)
			}
			shas[shard] = s.State.StateSHA256()
			assertJoinCounts(t, fmt.Sprintf("%s, partition %s", what, shard), st, pj.want)
			if got := s.State.Labeled; got != uint64(pj.examples) {
				t.Errorf("%s, partition %s: %d examples learned with a label, want every one of %d", what, shard, got, pj.examples)
			}
		}
		return shas
	}

	whole := fileStore(t)
	p := start(t, "run", "--config", config(whole))
	wait.For(t, 3*time.Minute, 50*time.Millisecond, "every example learned", func() bool { return learned(p) })
	p.stop()
	shas := check("uninterrupted", whole)
	seen := map[string]string{}
	for shard, sha := range shas {
		if other, ok := seen[sha]; ok {
			t.Errorf("partitions %s and %s learned the same model", other, shard)
		}
		seen[sha] = shard
	}

	killed := fileStore(t)
	cfg := config(killed)
	var kills []map[string]int64
	for _, at := range [][2]int64{{1, 5}, {1, 2}, {4, 5}} {
		p := start(t, "run", "--config", cfg, "--source.batch", "64")
		pos := map[string]int64{}
		wait.For(t, 3*time.Minute, 50*time.Millisecond, fmt.Sprintf("a generation of every partition with %d/%d learned", at[0], at[1]), func() bool {
			for shard, pj := range parts {
				if s, _ := chainSnapshot(t, killed, shard); s != nil {
					pos[shard] = s.Positions[shard]
				}
				if pos[shard] < pj.end*at[0]/at[1] {
					return false
				}
			}
			return true
		})
		p.cmd.Process.Kill() //nolint:errcheck // it may have died already, which the wait reports
		<-p.done
		kills = append(kills, pos)
	}
	p = start(t, "run", "--config", cfg)
	wait.For(t, 3*time.Minute, 50*time.Millisecond, "every example learned after the kills", func() bool { return learned(p) })
	p.stop()
	if got := check("killed", killed); !maps.Equal(got, shas) {
		t.Errorf("after kills at %v: state_sha256 by partition %v, uninterrupted %v", kills, got, shas)
	}
	t.Logf("kills with the newest generations at %v", kills)

	dir := t.TempDir()
	out, err := exec.CommandContext(ctx, hyperplane.path, "replay", "--config", config(""), "--out", "file://"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	replayed := map[string]string{}
	for shard := range parts {
		s, _ := chainSnapshot(t, "file://"+dir, shard)
		if s == nil {
			t.Fatalf("replay: partition %s has no generation\n%s", shard, out)
		}
		replayed[shard] = s.State.StateSHA256()
	}
	if !maps.Equal(replayed, shas) {
		t.Errorf("replay: state_sha256 by partition %v, the worker's %v\n%s", replayed, shas, out)
	}
}

// epochsSnapshot is the newest generation of the model learned in epochs
// in store, with its shards' joins' outcomes summed; nil when there is
// none yet.
func epochsSnapshot(t *testing.T, store string) (*snapshot.Snapshot, consumer.JoinCountsState) {
	t.Helper()
	var sum consumer.JoinCountsState
	s, err := snapshot.LoadURL(testContext(t), store+"/e2e", nil)
	if err != nil {
		return nil, sum
	}
	joins, err := consumer.DecodeJoins(s.Joins)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range joins {
		c := st.Counts
		sum.Joined += c.Joined
		sum.Late += c.Late
		sum.Unknown += c.Unknown
		sum.Duplicate += c.Duplicate
		sum.Expired += c.Expired
	}
	return s, sum
}

// TestLabelsKafkaEpochs: labels that come later joined in epochs, global
// scope over topics of four co-partitioned partitions (docs/labels.md,
// section 11): an uninterrupted worker, one killed with SIGKILL three
// times and restarted, and a replay of the epoch log give the same
// state_sha256, every example learned, and the outcomes the rule gives
// over each partition's two logs, summed.
func TestLabelsKafkaEpochs(t *testing.T) {
	ctx := testContext(t)
	const n = 3000
	c := testbroker.Kafka(t, kfake.SeedTopics(labelPartitions, "examples", "labels"), kfake.SeedTopics(1, "predictions", "misclassifications", "dead", "late"))
	var recs []*kgo.Record
	var want consumer.JoinCounts
	for p := range labelPartitions {
		examples, labels := delayedInput(n, uint64(31+p))
		for _, e := range examples {
			recs = append(recs, &kgo.Record{Topic: "examples", Partition: int32(p), Value: e.value, Timestamp: e.t})
		}
		for _, l := range labels {
			recs = append(recs, &kgo.Record{Topic: "labels", Partition: int32(p), Value: l.value, Timestamp: l.t})
		}
		w := expectedJoin(examples, labels)
		for k := range w.Labels {
			want.Labels[k] += w.Labels[k]
		}
		want.Expired += w.Expired
	}
	if want.Labels[consumer.LabelLate] == 0 || want.Labels[consumer.LabelDuplicate] == 0 || want.Labels[consumer.LabelUnknown] == 0 || want.Expired == 0 {
		t.Fatalf("the input does not exercise every outcome: %+v", want)
	}
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	config := func(store string) string { return writeConfig(t, labelsKafkaConfig(c, store)) }
	ends := map[string]int64{}
	for k := range labelPartitions {
		ends[fmt.Sprintf("kafka:examples/%d", k)] = n
	}
	assertEpochJoinRuns(t, ctx, want, config, ends, labelPartitions*n)
}

// assertEpochJoinRuns runs the worker of config(store), which learns its
// partitions in epochs: uninterrupted, killed with SIGKILL three times
// (once every partition's position in the newest generation is a fifth,
// a half, four fifths of its end in ends) and restarted, and replayed
// from the uninterrupted run's epoch log. Each must learn every one of
// total examples to the end of each partition, with the same
// state_sha256 and the rule's outcomes (want), and inspect must show
// them.
func assertEpochJoinRuns(t *testing.T, ctx context.Context, want consumer.JoinCounts, config func(store string) string, ends map[string]int64, total int) {
	t.Helper()
	learned := func(store string) bool {
		s, _ := epochsSnapshot(t, store)
		if s == nil {
			return false
		}
		for shard, end := range ends {
			if s.Positions[shard] < end {
				return false
			}
		}
		return true
	}
	check := func(what, store string) string {
		t.Helper()
		s, got := epochsSnapshot(t, store)
		if s == nil {
			t.Fatalf("%s: no generation", what)
		}
		if len(s.Joins) != len(ends) {
			t.Errorf("%s: the generation holds %d joins, want one for each of %d partitions", what, len(s.Joins), len(ends))
		}
		if g := [4]uint64{got.Joined, got.Late, got.Unknown, got.Duplicate}; g != want.Labels || got.Expired != want.Expired {
			t.Errorf("%s: outcomes joined/late/unknown/duplicate %v and %d expired, the rule's %v and %d", what, g, got.Expired, want.Labels, want.Expired)
		}
		if got := s.State.Labeled; got != uint64(total) {
			t.Errorf("%s: %d examples learned with a label, want every one of %d", what, got, total)
		}
		return s.State.StateSHA256()
	}

	whole := fileStore(t)
	p := start(t, "run", "--config", config(whole))
	wait.For(t, 3*time.Minute, 50*time.Millisecond, "every example learned", func() bool { return learned(whole) })
	p.stop()
	sha := check("uninterrupted", whole)
	insp, err := exec.CommandContext(ctx, hyperplane.path, "inspect", whole+"/e2e").Output()
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	var sum struct {
		Join *consumer.JoinSummary `json:"join"`
	}
	if err := json.Unmarshal(insp, &sum); err != nil {
		t.Fatal(err)
	}
	if j := sum.Join; j == nil || j.Labels["joined"] != want.Labels[consumer.LabelJoined] || j.Expired != want.Expired || j.Pending != 0 {
		t.Errorf("inspect's join: %+v, the rule's %+v", j, want)
	}

	killed := fileStore(t)
	cfg := config(killed)
	var kills []map[string]int64
	for _, at := range [][2]int64{{1, 5}, {1, 2}, {4, 5}} {
		p := start(t, "run", "--config", cfg, "--source.batch", "64")
		var pos map[string]int64
		wait.For(t, 3*time.Minute, 50*time.Millisecond, fmt.Sprintf("a generation with %d/%d of every partition learned", at[0], at[1]), func() bool {
			s, _ := epochsSnapshot(t, killed)
			if s == nil {
				return false
			}
			pos = s.Positions
			for shard, end := range ends {
				if pos[shard] < end*at[0]/at[1] {
					return false
				}
			}
			return true
		})
		p.cmd.Process.Kill() //nolint:errcheck // it may have died already, which the wait reports
		<-p.done
		kills = append(kills, pos)
	}
	p = start(t, "run", "--config", cfg)
	wait.For(t, 3*time.Minute, 50*time.Millisecond, "every example learned after the kills", func() bool { return learned(killed) })
	p.stop()
	if got := check("killed", killed); got != sha {
		t.Errorf("after kills at %v: state_sha256 %s, uninterrupted %s", kills, got, sha)
	}
	t.Logf("kills with the newest generations at %v", kills)

	dir := t.TempDir()
	out, err := exec.CommandContext(ctx, hyperplane.path, "replay", "--config", config(whole), "--out", "file://"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	var replayed struct {
		StateSHA256 string `json:"state_sha256"`
		Checked     int    `json:"generations_checked"`
	}
	if err := json.Unmarshal(out[bytes.LastIndexByte(out[:len(out)-1], '\n')+1:], &replayed); err != nil {
		t.Fatalf("replay's summary: %v\n%s", err, out)
	}
	if replayed.StateSHA256 != sha || replayed.Checked == 0 {
		t.Errorf("replay: state_sha256 %s with %d generations checked, the worker's %s\n%s", replayed.StateSHA256, replayed.Checked, sha, out)
	}
}

// partitionedLabels are the streams of a test of labels over partitioned
// JetStream streams: the worker's configuration, and each partition's
// examples and labels as the streams store them.
type partitionedLabels struct {
	config             func(store string) string
	exStream, lbStream string
	examples, labels   [labelPartitions][]delayedRecord
}

// publishPartitioned has hyperplane setup create an examples' and a
// labels' stream, each partitioned into four by the id, for a worker in
// scope (global or partition), publishes n examples and their labels as
// publishDelayed says, and reads back each partition's records.
func publishPartitioned(t *testing.T, ctx context.Context, scope string, n int) *partitionedLabels {
	t.Helper()
	ns := startNATS(t)
	prefix := uniquePrefix("LBPARTS")
	pl := &partitionedLabels{exStream: prefix + "_EX", lbStream: prefix + "_LB"}
	// A standalone server outlives the test: what setup made goes with it.
	t.Cleanup(func() {
		js := ns.JetStream(t)
		for _, s := range []string{pl.exStream, pl.lbStream, "pred", "mis", "dead", "late"} {
			if !strings.HasPrefix(s, prefix) {
				s = natsio.StreamName(prefix + "." + s)
			}
			js.DeleteStream(context.Background(), s) //nolint:errcheck // absent if the test failed early
		}
	})
	pl.config = func(store string) string {
		return writeConfig(t, fmt.Sprintf(`
model:
  name: e2e
  scope: %[6]s
  learner:
    hash_bits: 16
nats:
  url: %[1]s
source:
  kind: jetstream
  stream: %[2]s_EX
  subject: %[2]s.ex.*
  stream_partitions: %[3]d
labels:
  kind: jetstream
  stream: %[2]s_LB
  subject: %[2]s.lb.*
  window: %[4]s
  default: "-1"
outputs:
  predictions: jetstream:%[2]s.pred
  misclassifications: jetstream:%[2]s.mis
  dead_letter: jetstream:%[2]s.dead
  late_labels: jetstream:%[2]s.late
snapshot:
  url: %[5]s
  every: 300
  interval: 200ms
  keep: 3
`, ns.url, prefix, labelPartitions, labelWindow, store, scope))
	}
	out := runBinary(t, "setup", "--config", pl.config(fileStore(t)))
	if want := fmt.Sprintf("stored as %s.lb.{{partition(%d,1)}}.{{wildcard(1)}}", prefix, labelPartitions); !strings.Contains(out, want) {
		t.Fatalf("setup did not create the labels' stream partitioned (no %q):\n%s", want, out)
	}

	js := ns.JetStream(t)
	examples, _ := delayedInput(n, 23)
	publishDelayed(t, ctx, js, examples, pl.exStream, pl.lbStream,
		func(id string) string { return prefix + ".ex." + id }, func(id string) string { return prefix + ".lb." + id })
	// Each partition's two logs as stored, by the partition token of the
	// subject the transform stored each record on.
	for _, split := range []struct {
		stream string
		parts  *[labelPartitions][]delayedRecord
	}{{pl.exStream, &pl.examples}, {pl.lbStream, &pl.labels}} {
		for _, r := range storedRecords(t, js, split.stream) {
			k, err := strconv.Atoi(strings.Split(r.subject, ".")[2])
			if err != nil || k >= labelPartitions {
				t.Fatalf("%s: a record stored on %s, no partition's subject", split.stream, r.subject)
			}
			split.parts[k] = append(split.parts[k], r)
		}
	}
	for k := range labelPartitions {
		if len(pl.examples[k]) == 0 || len(pl.labels[k]) == 0 {
			t.Fatalf("partition %d holds %d examples and %d labels: the test wants some of each in every partition", k, len(pl.examples[k]), len(pl.labels[k]))
		}
	}
	return pl
}

// TestLabelsJetStreamEpochs: labels that come later joined in epochs over
// partitioned JetStream streams (docs/labels.md, sections 9.1 and 11),
// published by publishPartitioned. An uninterrupted worker, one killed
// with SIGKILL three times and restarted, and a replay of the epoch log
// give the same state_sha256, every example learned, and the outcomes
// the rule gives over each partition's two logs as stored, summed.
func TestLabelsJetStreamEpochs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const n = 8000
	pl := publishPartitioned(t, ctx, "global", n)
	var want consumer.JoinCounts
	ends := map[string]int64{}
	for k := range labelPartitions {
		w := expectedJoin(pl.examples[k], pl.labels[k])
		for o := range w.Labels {
			want.Labels[o] += w.Labels[o]
		}
		want.Expired += w.Expired
		ends[fmt.Sprintf("jetstream:%s#%d", pl.exStream, k)] = pl.examples[k][len(pl.examples[k])-1].seq
	}
	if want.Labels[consumer.LabelLate] == 0 || want.Labels[consumer.LabelDuplicate] == 0 || want.Labels[consumer.LabelUnknown] == 0 || want.Expired == 0 {
		t.Fatalf("the input does not exercise every outcome: %+v", want)
	}
	assertEpochJoinRuns(t, ctx, want, pl.config, ends, n)
}

// TestLabelsJetStreamPartitionScope: as TestLabelsKafkaPartitionScope,
// over partitioned JetStream streams published by publishPartitioned:
// partition k of the examples joined to partition k of the labels, each
// partition's model the same uninterrupted, killed three times, and
// replayed, with the rule's outcomes over that partition's two logs.
func TestLabelsJetStreamPartitionScope(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const n = 8000
	pl := publishPartitioned(t, ctx, "partition", n)
	parts := map[string]partitionJoin{}
	for k := range labelPartitions {
		ex, lb := pl.examples[k], pl.labels[k]
		parts[fmt.Sprintf("jetstream:%s#%d", pl.exStream, k)] = partitionJoin{want: expectedJoin(ex, lb), examples: len(ex), end: ex[len(ex)-1].seq,
			labels: fmt.Sprintf("jetstream:%s#%d", pl.lbStream, k), labelsEnd: lb[len(lb)-1].seq}
	}
	assertPartitionJoinRuns(t, ctx, pl.config, parts)
}
