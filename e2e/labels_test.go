package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// labelWindow is the tests' labels.window.
const labelWindow = 2 * time.Second

// delayedRecord is a record of the examples' or the labels' log, with its
// record time.
type delayedRecord struct {
	value []byte
	t     time.Time
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
		examples = append(examples, delayedRecord{b[:len(b)-1], t})
		id := strconv.FormatUint(rec.Seq, 10)
		at := func(ms int64) time.Time { return t.Add(time.Duration(ms) * time.Millisecond) }
		label := func(id string, y int, ms int64) delayedRecord {
			return delayedRecord{fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, y), at(ms)}
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
		recs = append(recs, delayedRecord{m.Data(), meta.Timestamp})
	}
	return recs
}

// TestLabelsJetStream: as TestLabelsKafka, over JetStream streams, whose
// record times are the server's: each label follows its example a few
// messages later, some come again, some never, and some a window and more
// after the last example.
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
	rng := rand.New(rand.NewPCG(7, 8))
	var exMsgs, lbMsgs, lateMsgs [][]byte
	for i, e := range examples {
		exMsgs = append(exMsgs, e.value)
		var rec struct{ ID string }
		json.Unmarshal(e.value, &rec) //nolint:errcheck // the test wrote it
		label := fmt.Appendf(nil, `{"id":%q,"label":%d}`, rec.ID, 1-2*(i%2))
		switch r := rng.IntN(10); {
		case r < 7:
			lbMsgs = append(lbMsgs, label)
		case r < 8:
			lbMsgs = append(lbMsgs, label, label)
		case r < 9:
			lateMsgs = append(lateMsgs, label)
		}
	}
	// Labels a few messages behind their examples, then the late ones.
	for i := 0; i < len(exMsgs); i += 100 {
		if err := publishWindowed(ctx, js, prefix+".IN", exMsgs[i:min(i+100, len(exMsgs))]); err != nil {
			t.Fatal(err)
		}
		k := len(lbMsgs) * i / len(exMsgs)
		if err := publishWindowed(ctx, js, prefix+".LB", lbMsgs[k:len(lbMsgs)*min(i+100, len(exMsgs))/len(exMsgs)]); err != nil {
			t.Fatal(err)
		}
	}
	// The late labels' record times, which the server gives them, are a
	// window past the last example's: wait for its clock to get there.
	// The newest examples' go first, so that some land within the second
	// window however slow the machine (late), the rest after it (unknown).
	examplesStored := storedRecords(t, js, prefix+"_IN")
	lateFrom := examplesStored[len(examplesStored)-1].t.Add(labelWindow + 100*time.Millisecond)
	wait.For(t, time.Minute, 50*time.Millisecond, "a window past the last example's time", func() bool { return time.Now().After(lateFrom) })
	slices.Reverse(lateMsgs)
	if err := publishWindowed(ctx, js, prefix+".LB", lateMsgs); err != nil {
		t.Fatal(err)
	}
	want := expectedJoin(examplesStored, storedRecords(t, js, prefix+"_LB"))
	// How many of the late labels land within the second window depends
	// on how fast the machine publishes them (the server gives their
	// times); TestLabelsKafka, whose times the test sets, requires them.
	if want.Labels[consumer.LabelDuplicate] == 0 || want.Expired == 0 {
		t.Fatalf("the input does not exercise the outcomes: %+v", want)
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
	labelRecords := float64(len(lbMsgs) + len(lateMsgs))
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

// chainSnapshot is the newest generation of partition p's chain in store,
// with its join; nil when the chain has none yet.
func chainSnapshot(t *testing.T, store string, p int) (*snapshot.Snapshot, *consumer.JoinState) {
	t.Helper()
	s, err := snapshot.LoadURL(testContext(t), fmt.Sprintf("%s/e2e/partition/kafka.examples.%d/e2e", store, p), nil)
	if err != nil {
		return nil, nil
	}
	if s.Join == nil {
		t.Fatalf("partition %d: the newest generation holds no join", p)
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
	var want [labelPartitions]consumer.JoinCounts
	var labelCounts [labelPartitions]int
	for p := range labelPartitions {
		examples, labels := delayedInput(n, uint64(31+p))
		for _, e := range examples {
			recs = append(recs, &kgo.Record{Topic: "examples", Partition: int32(p), Value: e.value, Timestamp: e.t})
		}
		for _, l := range labels {
			recs = append(recs, &kgo.Record{Topic: "labels", Partition: int32(p), Value: l.value, Timestamp: l.t})
		}
		want[p], labelCounts[p] = expectedJoin(examples, labels), len(labels)
		if w := want[p]; w.Labels[consumer.LabelLate] == 0 || w.Labels[consumer.LabelDuplicate] == 0 || w.Labels[consumer.LabelUnknown] == 0 || w.Expired == 0 {
			t.Fatalf("partition %d: the input does not exercise every outcome: %+v", p, w)
		}
	}
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	config := func(store string) string {
		return writeConfig(t, strings.Replace(labelsKafkaConfig(c, store), "  name: e2e\n", "  name: e2e\n  scope: partition\n", 1))
	}
	learned := func(p *proc) bool {
		if p.metric("hyperplane_join_pending") != 0 {
			return false
		}
		for k := range labelPartitions {
			if p.metric(fmt.Sprintf(`hyperplane_position{source="kafka:examples/%d"}`, k)) < n ||
				p.metric(fmt.Sprintf(`hyperplane_position{source="kafka:labels/%d"}`, k)) < float64(labelCounts[k]) {
				return false
			}
		}
		return true
	}
	check := func(what, store string) [labelPartitions]string {
		t.Helper()
		var shas [labelPartitions]string
		for p := range labelPartitions {
			s, st := chainSnapshot(t, store, p)
			if s == nil {
				t.Fatalf("%s: partition %d has no generation", what, p)
			}
			shas[p] = s.State.StateSHA256()
			assertJoinCounts(t, fmt.Sprintf("%s, partition %d", what, p), st, want[p])
			if got := s.State.Labeled; got != n {
				t.Errorf("%s, partition %d: %d examples learned with a label, want every one of %d", what, p, got, n)
			}
		}
		return shas
	}

	whole := fileStore(t)
	p := start(t, "run", "--config", config(whole))
	wait.For(t, 3*time.Minute, 50*time.Millisecond, "every example learned", func() bool { return learned(p) })
	p.stop()
	shas := check("uninterrupted", whole)
	for p := 1; p < labelPartitions; p++ {
		if shas[p] == shas[0] {
			t.Errorf("partitions 0 and %d learned the same model", p)
		}
	}

	killed := fileStore(t)
	cfg := config(killed)
	var kills [][labelPartitions]int64
	for _, at := range []int64{n / 5, n / 2, 4 * n / 5} {
		p := start(t, "run", "--config", cfg, "--source.batch", "64")
		var pos [labelPartitions]int64
		wait.For(t, 3*time.Minute, 50*time.Millisecond, fmt.Sprintf("a generation of every partition with %d examples learned", at), func() bool {
			for k := range labelPartitions {
				if s, _ := chainSnapshot(t, killed, k); s != nil {
					pos[k] = s.Positions[fmt.Sprintf("kafka:examples/%d", k)]
				}
				if pos[k] < at {
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
	if got := check("killed", killed); got != shas {
		t.Errorf("after kills at %v: state_sha256 by partition %v, uninterrupted %v", kills, got, shas)
	}
	t.Logf("kills with the newest generations at %v", kills)

	dir := t.TempDir()
	out, err := exec.CommandContext(ctx, hyperplane.path, "replay", "--config", config(""), "--out", "file://"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	var replayed [labelPartitions]string
	for p := range labelPartitions {
		s, _ := chainSnapshot(t, "file://"+dir, p)
		if s == nil {
			t.Fatalf("replay: partition %d has no generation\n%s", p, out)
		}
		replayed[p] = s.State.StateSHA256()
	}
	if replayed != shas {
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
	learned := func(store string) bool {
		s, _ := epochsSnapshot(t, store)
		if s == nil {
			return false
		}
		for k := range labelPartitions {
			if s.Positions[fmt.Sprintf("kafka:examples/%d", k)] < n {
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
		if len(s.Joins) != labelPartitions {
			t.Errorf("%s: the generation holds %d joins, want one for each of %d partitions", what, len(s.Joins), labelPartitions)
		}
		if g := [4]uint64{got.Joined, got.Late, got.Unknown, got.Duplicate}; g != want.Labels || got.Expired != want.Expired {
			t.Errorf("%s: outcomes joined/late/unknown/duplicate %v and %d expired, the rule's %v and %d", what, g, got.Expired, want.Labels, want.Expired)
		}
		if got := s.State.Labeled; got != labelPartitions*n {
			t.Errorf("%s: %d examples learned with a label, want every one of %d", what, got, labelPartitions*n)
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
	var kills [][labelPartitions]int64
	for _, at := range []int64{n / 5, n / 2, 4 * n / 5} {
		p := start(t, "run", "--config", cfg, "--source.batch", "64")
		var pos [labelPartitions]int64
		wait.For(t, 3*time.Minute, 50*time.Millisecond, fmt.Sprintf("a generation with %d examples of every partition learned", at), func() bool {
			s, _ := epochsSnapshot(t, killed)
			if s == nil {
				return false
			}
			for k := range labelPartitions {
				if pos[k] = s.Positions[fmt.Sprintf("kafka:examples/%d", k)]; pos[k] < at {
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
