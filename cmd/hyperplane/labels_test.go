package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/hyperplane-ml/hyperplane/consumer"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// readRecords reads n records of topic, failing after 30 s.
func readRecords(t *testing.T, c *testbroker.KafkaCluster, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("%s: after %d records: %v", topic, len(recs), err)
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	return recs
}

// TestGenLabelsTo: gen -labels-to publishes the examples without their
// labels and each label, keyed as its example, after its example: every
// one names an example's id, none is lost but the share -label-missing
// leaves out, and a label's record time follows its example's.
func TestGenLabelsTo(t *testing.T) {
	c := testbroker.Kafka(t, kfake.SeedTopics(1, "examples", "labels"))
	const n = 400
	_, stderr, err := runCmd(t, "", "gen", "-examples", fmt.Sprint(n), "-seed", "5", "-to", "kafka:examples",
		"-labels-to", "kafka:labels", "-label-delay", "20ms", "-label-missing", "0.25", "-kafka-brokers", strings.Join(c.ListenAddrs(), ","))
	if err != nil {
		t.Fatalf("gen: %v\n%s", err, stderr)
	}
	var labeled int
	if _, err := fmt.Sscanf(stderr[strings.Index(stderr, "published "):], "published %d labels", &labeled); err != nil {
		t.Fatalf("gen did not say how many labels it published: %q", stderr)
	}
	if labeled < n/2 || labeled > n-n/10 {
		t.Errorf("%d labels of %d examples with -label-missing 0.25", labeled, n)
	}
	examples := map[string]*kgo.Record{}
	for _, r := range readRecords(t, c, "examples", n) {
		var ex struct {
			ID    string
			Label *int
		}
		if err := json.Unmarshal(r.Value, &ex); err != nil || ex.ID == "" || ex.Label != nil {
			t.Fatalf("example %s: want an id and no label (%v)", r.Value, err)
		}
		examples[ex.ID] = r
	}
	for _, r := range readRecords(t, c, "labels", labeled) {
		var l struct {
			ID    string
			Label int
		}
		if err := json.Unmarshal(r.Value, &l); err != nil || (l.Label != 1 && l.Label != -1) {
			t.Fatalf("label %s: %v", r.Value, err)
		}
		ex, ok := examples[l.ID]
		switch {
		case !ok:
			t.Fatalf("label %s names no example", r.Value)
		case string(ex.Key) != string(r.Key):
			t.Errorf("label %s is keyed %s, its example %s", r.Value, r.Key, ex.Key)
		case r.Timestamp.Before(ex.Timestamp):
			t.Errorf("label %s at %v, before its example at %v", r.Value, r.Timestamp, ex.Timestamp)
		}
	}
}

// TestGenLabelsToTheExamplesTopic: gen refuses -labels-to the topic the
// examples go to, where the worker could never join them, and publishes
// nothing.
func TestGenLabelsToTheExamplesTopic(t *testing.T) {
	c := testbroker.Kafka(t, kfake.SeedTopics(1, "examples"))
	_, stderr, err := runCmd(t, "", "gen", "-examples", "10", "-to", "kafka:examples", "-labels-to", "kafka:examples",
		"-label-delay", "1ms", "-kafka-brokers", strings.Join(c.ListenAddrs(), ","))
	var u *usageError
	if !errors.As(err, &u) || !strings.HasPrefix(err.Error(), "-labels-to: kafka:examples is -to's") {
		t.Fatalf("gen: got %v, want a usage error naming -labels-to\n%s", err, stderr)
	}
	if strings.Contains(stderr, "published") {
		t.Errorf("gen published: %s", stderr)
	}
}

// TestDemoLabelDelay: the demo with labels that come later joins them and
// says so in its summary, with the served accuracy, and inspect shows the
// join of the snapshot.
func TestDemoLabelDelay(t *testing.T) {
	data := t.TempDir()
	out, stderr, err := runCmd(t, "", "demo", "-examples", "3000", "-garbage", "0", "-label-delay", "50ms", "-http", "", "-data", data)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr)
	}
	for _, want := range []string{"done: 3000 examples", "labels: ", " joined, ", "served accuracy ", "3000     prediction events", "in JetStream stream LABELS"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	var sum struct {
		Join *consumer.JoinSummary `json:"join"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "", "inspect", "file://"+data+"/demo")), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Join == nil || sum.Join.Labels["joined"] == 0 || sum.Join.Pending != 0 || sum.Join.Served != sum.Join.Labels["joined"] {
		t.Fatalf("inspect's join of the demo's snapshot: %+v", sum.Join)
	}
}

// TestLabelsPartitionScopeCoPartitioned: in partition scope the worker
// refuses to start on a labels' topic with another partition count than
// the source's, naming labels.topics and both counts.
func TestLabelsPartitionScopeCoPartitioned(t *testing.T) {
	t.Parallel()
	c := testbroker.Kafka(t, kfake.SeedTopics(4, "impressions"), kfake.SeedTopics(3, "clicks"))
	args := []string{"run", "--model.name", "per", "--model.scope", "partition", "--kafka.brokers", strings.Join(c.ListenAddrs(), ","),
		"--source.kind", "kafka", "--source.topics", "impressions", "--labels.kind", "kafka", "--labels.topics", "clicks",
		"--snapshot.url", "mem://", "--http.addr", ""}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr strings.Builder
	err := run(ctx, args, func(string) string { return "" }, strings.NewReader(""), &stderr, &stderr)
	if err == nil || !strings.HasPrefix(err.Error(), "labels.topics: ") || !strings.Contains(err.Error(), "has 3 partitions") || !strings.Contains(err.Error(), "has 4") {
		t.Fatalf("run: %v, want a refusal naming labels.topics and both counts\n%s", err, stderr.String())
	}
}

// TestLabelsTopicGainsAPartition: a labels' topic that gains a partition
// beyond the examples' while the worker runs (over one partition, or
// several in epochs) stops it, naming labels.topics and both counts: the
// labels produced to the new partition would never be joined, as a
// start-up over such topics is refused.
func TestLabelsTopicGainsAPartition(t *testing.T) {
	t.Parallel()
	for _, n := range []int32{1, 2} {
		t.Run(fmt.Sprintf("partitions=%d", n), func(t *testing.T) {
			t.Parallel()
			c := testbroker.Kafka(t, kfake.SeedTopics(n, "impressions", "clicks"))
			args := []string{"run", "--model.name", "one", "--kafka.brokers", strings.Join(c.ListenAddrs(), ","),
				"--source.kind", "kafka", "--source.topics", "impressions", "--labels.kind", "kafka", "--labels.topics", "clicks",
				"--model.mixing.interval", "50ms", "--snapshot.url", "file://" + t.TempDir(), "--http.addr", ""}
			// A worker that goes on learns until the context ends.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			stderr := &lockedBuffer{}
			stopped := make(chan error, 1)
			go func() {
				stopped <- run(ctx, args, func(string) string { return "" }, strings.NewReader(""), io.Discard, stderr)
			}()
			waitRunning(t, time.Minute, "the labels' partition opened", stopped, stderr, func() bool {
				return strings.Contains(stderr.String(), "kafka:clicks/0")
			})
			req := kmsg.NewPtrCreatePartitionsRequest()
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = "clicks", n+1
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(context.Background(), c.Client(t))
			if err == nil {
				err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
			}
			if err != nil {
				t.Fatalf("create partitions: %v", err)
			}
			err = <-stopped
			want := fmt.Sprintf("has %d partitions now, and source.topics' topic impressions has %d", n+1, n)
			if err == nil || !strings.HasPrefix(err.Error(), "labels.topics: ") || !strings.Contains(err.Error(), want) {
				t.Fatalf("run: %v, want a stop naming labels.topics and saying %q\n%s", err, want, stderr.String())
			}
		})
	}
}

// TestLabelsEpochsCoPartitioned: in global scope over several
// partitions (epochs) the worker refuses to start on a labels' topic
// with another partition count than the source's, naming labels.topics
// and both counts.
func TestLabelsEpochsCoPartitioned(t *testing.T) {
	t.Parallel()
	c := testbroker.Kafka(t, kfake.SeedTopics(4, "impressions"), kfake.SeedTopics(3, "clicks"))
	args := []string{"run", "--model.name", "mixed", "--kafka.brokers", strings.Join(c.ListenAddrs(), ","),
		"--source.kind", "kafka", "--source.topics", "impressions", "--labels.kind", "kafka", "--labels.topics", "clicks",
		"--snapshot.url", "mem://", "--http.addr", ""}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr strings.Builder
	err := run(ctx, args, func(string) string { return "" }, strings.NewReader(""), &stderr, &stderr)
	if err == nil || !strings.Contains(err.Error(), "labels.topics: ") || !strings.Contains(err.Error(), "has 3 partitions") || !strings.Contains(err.Error(), "has 4") {
		t.Fatalf("run: %v, want a refusal naming labels.topics and both counts\n%s", err, stderr.String())
	}
}

// TestLabelsJetStreamCoPartitioned: over a partitioned stream, in epochs
// and in partition scope, the worker refuses to start on a labels' stream
// partitioned into another number of partitions than the source's,
// naming labels.stream and both counts, and on one that is not
// partitioned, naming labels.stream.
func TestLabelsJetStreamCoPartitioned(t *testing.T) {
	t.Parallel()
	ns := testbroker.NATS(t)
	js := ns.JetStream(t)
	for _, cfg := range []jetstream.StreamConfig{
		natsio.PartitionedStreamConfig("EX", "ex.*", 4),
		natsio.PartitionedStreamConfig("CLICKS", "clicks.*", 3),
		{Name: "FLAT", Subjects: []string{"flat.*"}},
	} {
		cfg.Storage = jetstream.MemoryStorage
		testbroker.CreateStream(t, js, cfg)
	}
	// Examples in every partition: the epochs begin with the shards that
	// hold some.
	for i := range 32 {
		if _, err := js.Publish(context.Background(), fmt.Sprintf("ex.k%d", i), []byte(`{"id":"a","features":{"x":1}}`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		scope, stream string
		want          []string
	}{
		{"global", "CLICKS", []string{"makes 3 partitions", "source.stream_partitions 4"}},
		{"partition", "CLICKS", []string{"makes 3 partitions", "source.stream_partitions 4"}},
		{"global", "FLAT", []string{"no subject transform"}},
	} {
		args := []string{"run", "--model.name", "m" + c.scope, "--model.scope", c.scope, "--nats.url", ns.URL(),
			"--source.kind", "jetstream", "--source.stream", "EX", "--source.subject", "ex.*", "--source.stream_partitions", "4",
			"--labels.kind", "jetstream", "--labels.stream", c.stream, "--labels.subject", strings.ToLower(c.stream) + ".*",
			"--snapshot.url", "mem://", "--http.addr", ""}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var stderr strings.Builder
		err := run(ctx, args, func(string) string { return "" }, strings.NewReader(""), &stderr, &stderr)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "labels.stream: ") {
			t.Fatalf("%s scope, labels in %s: run: %v, want a refusal naming labels.stream\n%s", c.scope, c.stream, err, stderr.String())
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s scope, labels in %s: %v, want it to say %q", c.scope, c.stream, err, w)
			}
		}
	}
}

// TestLabelsJetStreamEpochsFromEmpty: with labels over a partitioned
// stream whose partitions hold nothing yet, the worker learns in epochs
// from the start, as a join over one partition would not go on in epochs
// once the others fill.
func TestLabelsJetStreamEpochsFromEmpty(t *testing.T) {
	t.Parallel()
	ns := testbroker.NATS(t)
	js := ns.JetStream(t)
	for _, cfg := range []jetstream.StreamConfig{
		natsio.PartitionedStreamConfig("EX", "ex.*", 4),
		natsio.PartitionedStreamConfig("CLICKS", "clicks.*", 4),
	} {
		cfg.Storage = jetstream.MemoryStorage
		testbroker.CreateStream(t, js, cfg)
	}
	args := []string{"run", "--model.name", "empty", "--nats.url", ns.URL(),
		"--source.kind", "jetstream", "--source.stream", "EX", "--source.subject", "ex.*", "--source.stream_partitions", "4",
		"--labels.kind", "jetstream", "--labels.stream", "CLICKS", "--labels.subject", "clicks.*",
		"--snapshot.url", "mem://", "--http.addr", ""}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr lockedBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, args, func(string) string { return "" }, strings.NewReader(""), &stderr, &stderr)
	}()
	wait.For(t, time.Minute, 10*time.Millisecond, "the worker learning in epochs", func() bool {
		return strings.Contains(stderr.String(), "learning in epochs")
	})
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
}

// TestGenLabelsToKeyedSubject: with a * token in -labels-to's subject, a
// label's subject has its example's key in it, as the example's has, so
// that streams partitioned by that token put the two in one partition.
func TestGenLabelsToKeyedSubject(t *testing.T) {
	srv := testbroker.NATS(t)
	ctx := context.Background()
	js := srv.JetStream(t)
	examples := testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"ex.>"}})
	labels := testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "LABELS", Subjects: []string{"lb.>"}})
	const n = 300
	mustRun(t, "", "gen", "-examples", fmt.Sprint(n), "-seed", "6", "-keys", "7", "-to", "jetstream:ex.*.in",
		"-labels-to", "jetstream:lb.*", "-label-delay", "0s", "-nats-url", srv.URL())
	read := func(s jetstream.Stream) map[string]string { // id -> the key token of its subject
		t.Helper()
		byID := map[string]string{}
		for seq := uint64(1); ; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return byID
			}
			if err != nil {
				t.Fatal(err)
			}
			var rec struct{ ID string }
			if err := json.Unmarshal(m.Data, &rec); err != nil || rec.ID == "" {
				t.Fatalf("%s: %s has no id (%v)", m.Subject, m.Data, err)
			}
			byID[rec.ID] = strings.Split(m.Subject, ".")[1]
		}
	}
	ex, lb := read(examples), read(labels)
	if len(ex) != n || len(lb) != n {
		t.Fatalf("%d examples and %d labels stored, want %d of each", len(ex), len(lb), n)
	}
	for id, key := range lb {
		if ex[id] != key {
			t.Fatalf("the label of example %s went to key %s, its example to %s", id, key, ex[id])
		}
	}
}

// TestLabelsWindowChangeRefused: a model whose join was recorded under
// one labels.window refuses to go on under another, naming the field and
// both windows: the labels of the examples the join holds, and of every
// later one, would be decided otherwise than the logs decide them, and no
// replay would rebuild the model. Under the recorded window it goes on.
func TestLabelsWindowChangeRefused(t *testing.T) {
	c := testbroker.Kafka(t, kfake.SeedTopics(1, "impressions", "clicks"))
	brokers := strings.Join(c.ListenAddrs(), ",")
	if _, stderr, err := runCmd(t, "", "gen", "-examples", "400", "-seed", "5", "-to", "kafka:impressions",
		"-labels-to", "kafka:clicks", "-label-delay", "20ms", "-kafka-brokers", brokers); err != nil {
		t.Fatalf("gen: %v\n%s", err, stderr)
	}
	dir := t.TempDir()
	args := func(window string) []string {
		return []string{"run", "--model.name", "joined", "--kafka.brokers", brokers,
			"--source.kind", "kafka", "--source.topics", "impressions", "--labels.kind", "kafka", "--labels.topics", "clicks",
			"--labels.window", window, "--snapshot.url", "file://" + dir, "--snapshot.interval", "100ms", "--http.addr", ""}
	}
	store := storetest.OpenStore(t, "file://"+dir)
	generations := func() int {
		gens, err := store.Generations(context.Background(), "joined")
		if err != nil {
			t.Fatal(err)
		}
		return len(gens)
	}
	r := startRun(t, args("10m"))
	r.wait(t, time.Minute, "a generation of the joined model", func() bool { return generations() > 0 })
	r.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr strings.Builder
	err := run(ctx, args("5s"), func(string) string { return "" }, strings.NewReader(""), &stderr, &stderr)
	if err == nil || !strings.HasPrefix(err.Error(), "labels.window: ") || !strings.Contains(err.Error(), "10m0s") || !strings.Contains(err.Error(), "5s") {
		t.Fatalf("run under another window: %v, want a refusal naming labels.window and both windows\n%s", err, stderr.String())
	}
	before := generations()
	if _, stderr, err := runCmd(t, "", "gen", "-examples", "100", "-seed", "6", "-to", "kafka:impressions",
		"-labels-to", "kafka:clicks", "-label-delay", "20ms", "-kafka-brokers", brokers); err != nil {
		t.Fatalf("gen: %v\n%s", err, stderr)
	}
	r = startRun(t, args("10m"))
	r.wait(t, time.Minute, "a generation under the recorded window", func() bool { return generations() > before })
	r.stop(t)
}

// TestLabelsSettingsChangeRefusedInEpochs: over several partitions, a
// model whose joins were recorded under one labels.window and no
// labels.default refuses to go on under another window or with a
// default, naming the field and both values, as over one partition, not
// only a config digest that names neither. Under the recorded settings
// it goes on.
func TestLabelsSettingsChangeRefusedInEpochs(t *testing.T) {
	c := testbroker.Kafka(t, kfake.SeedTopics(2, "impressions", "clicks"))
	brokers := strings.Join(c.ListenAddrs(), ",")
	if _, stderr, err := runCmd(t, "", "gen", "-examples", "400", "-seed", "5", "-to", "kafka:impressions",
		"-labels-to", "kafka:clicks", "-label-delay", "20ms", "-kafka-brokers", brokers); err != nil {
		t.Fatalf("gen: %v\n%s", err, stderr)
	}
	dir := t.TempDir()
	args := func(more ...string) []string {
		return append([]string{"run", "--model.name", "joined", "--kafka.brokers", brokers,
			"--source.kind", "kafka", "--source.topics", "impressions", "--labels.kind", "kafka", "--labels.topics", "clicks",
			"--labels.window", "10m", "--snapshot.url", "file://" + dir, "--snapshot.interval", "100ms", "--http.addr", ""}, more...)
	}
	store := storetest.OpenStore(t, "file://"+dir)
	generations := func() int {
		gens, err := store.Generations(context.Background(), "joined")
		if err != nil {
			t.Fatal(err)
		}
		return len(gens)
	}
	r := startRun(t, args())
	r.wait(t, time.Minute, "a generation of the joined model", func() bool { return generations() > 0 })
	r.stop(t)
	for _, c := range []struct {
		flags       []string
		key, values string
	}{
		{[]string{"--labels.window", "5s"}, "labels.window: ", "10m0s|5s"},
		{[]string{"--labels.default", "-1"}, "labels.default: ", "none|-1"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var stderr strings.Builder
		err := run(ctx, args(c.flags...), func(string) string { return "" }, strings.NewReader(""), &stderr, &stderr)
		cancel()
		if err == nil || !strings.HasPrefix(err.Error(), c.key) {
			t.Fatalf("run with %v: %v, want a refusal naming %s\n%s", c.flags, err, c.key, stderr.String())
		}
		for _, v := range strings.Split(c.values, "|") {
			if !strings.Contains(err.Error(), v) {
				t.Fatalf("run with %v: %v, want both values (%s) named", c.flags, err, c.values)
			}
		}
	}
	before := generations()
	if _, stderr, err := runCmd(t, "", "gen", "-examples", "100", "-seed", "6", "-to", "kafka:impressions",
		"-labels-to", "kafka:clicks", "-label-delay", "20ms", "-kafka-brokers", brokers); err != nil {
		t.Fatalf("gen: %v\n%s", err, stderr)
	}
	r = startRun(t, args())
	r.wait(t, time.Minute, "a generation under the recorded settings", func() bool { return generations() > before })
	r.stop(t)
}

// TestLabelsDamagedJoinNamesTheGeneration: a generation whose join holds
// what no join records (here a served log-loss that is no sum of
// log-losses), sealed as a whole generation is, stops the worker at
// start-up with an error that names the generation to remove, over one
// partition and over several.
func TestLabelsDamagedJoinNamesTheGeneration(t *testing.T) {
	for _, partitions := range []int32{1, 2} {
		t.Run(fmt.Sprint(partitions), func(t *testing.T) {
			c := testbroker.Kafka(t, kfake.SeedTopics(partitions, "impressions", "clicks"))
			brokers := strings.Join(c.ListenAddrs(), ",")
			if _, stderr, err := runCmd(t, "", "gen", "-examples", "400", "-seed", "5", "-to", "kafka:impressions",
				"-labels-to", "kafka:clicks", "-label-delay", "20ms", "-kafka-brokers", brokers); err != nil {
				t.Fatalf("gen: %v\n%s", err, stderr)
			}
			dir := t.TempDir()
			args := []string{"run", "--model.name", "joined", "--kafka.brokers", brokers,
				"--source.kind", "kafka", "--source.topics", "impressions", "--labels.kind", "kafka", "--labels.topics", "clicks",
				"--labels.window", "10m", "--snapshot.url", "file://" + dir, "--snapshot.interval", "100ms", "--http.addr", ""}
			store := storetest.OpenStore(t, "file://"+dir)
			ctx := context.Background()
			r := startRun(t, args)
			r.wait(t, time.Minute, "a generation of the joined model", func() bool {
				gens, err := store.Generations(ctx, "joined")
				return err == nil && len(gens) > 0
			})
			r.stop(t)
			snap, err := store.Latest(ctx, "joined", nil)
			if err != nil {
				t.Fatal(err)
			}
			damage := func(b []byte) []byte {
				st, err := consumer.DecodeJoinState(b)
				if err != nil {
					t.Fatal(err)
				}
				st.Counts.ServedLogLoss = math.Inf(1)
				if b, err = msgpack.Marshal(st); err != nil {
					t.Fatal(err)
				}
				return b
			}
			if snap.Join != nil {
				snap.Join = damage(snap.Join)
			}
			for s, b := range snap.Joins {
				snap.Joins[s] = damage(b)
			}
			if snap.Join == nil && len(snap.Joins) == 0 {
				t.Fatalf("generation %d holds no join", snap.Generation)
			}
			// The generation is written again in place, sealed as a whole
			// one is: what is wrong is inside the join, not the object.
			b, err := snapshot.Marshal(snap)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, snapshot.Key("", "joined", snap.Generation)), b, 0o644); err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			var stderr strings.Builder
			err = run(rctx, args, func(string) string { return "" }, strings.NewReader(""), &stderr, &stderr)
			want := fmt.Sprintf("generation %d", snap.Generation)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "served log-loss is +Inf") {
				t.Fatalf("run on the damaged generation: %v, want an error naming %s and the log-loss\n%s", err, want, stderr.String())
			}
		})
	}
}
