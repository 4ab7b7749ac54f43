package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// TestSetupJetStream: setup creates the source stream and a stream per
// output subject with the options given; a second run, with other
// options, reports them as existing and changes none; and run then
// starts against them and processes what gen published.
func TestSetupJetStream(t *testing.T) {
	srv := testbroker.NATS(t)
	dir := t.TempDir()
	path := writeSetupConfig(t, dir, fmt.Sprintf(`
nats:
  url: %s
source:
  kind: jetstream
  stream: EXAMPLES
  subject: in.examples.>
outputs:
  predictions: jetstream:out.predictions
  misclassifications: jetstream:out.misclassifications
  dead_letter: jetstream:out.dead_letter
`, srv.URL()))
	streams := map[string]string{ // stream: its subject
		"EXAMPLES":               "in.examples.>",
		"OUT_PREDICTIONS":        "out.predictions",
		"OUT_MISCLASSIFICATIONS": "out.misclassifications",
		"OUT_DEAD_LETTER":        "out.dead_letter",
	}

	out := mustRun(t, "", "setup", "--config", path, "--retention", "1h", "--duplicate-window", "5m")
	checkSetupReport(t, out, "created", "jetstream stream", slices.Collect(maps.Keys(streams))...)
	js := srv.JetStream(t)
	ctx := context.Background()
	before := map[string]*jetstream.StreamInfo{}
	for name, subject := range streams {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		c := s.CachedInfo().Config
		if !reflect.DeepEqual(c.Subjects, []string{subject}) || c.MaxAge != time.Hour || c.Duplicates != 5*time.Minute || c.Replicas != 1 || c.Storage != jetstream.FileStorage {
			t.Errorf("stream %s: subjects %v, max age %v, duplicates %v, replicas %d, %v storage; want [%s], 1h, 5m, 1, file",
				name, c.Subjects, c.MaxAge, c.Duplicates, c.Replicas, c.Storage, subject)
		}
		before[name] = s.CachedInfo()
	}

	out = mustRun(t, "", "setup", "--config", path, "--retention", "2h", "--duplicate-window", "1m", "--replicas", "1")
	checkSetupReport(t, out, "exists", "jetstream stream", slices.Collect(maps.Keys(streams))...)
	for name, b := range before {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if a := s.CachedInfo(); !reflect.DeepEqual(a.Config, b.Config) || !a.Created.Equal(b.Created) {
			t.Errorf("the second setup changed stream %s:\n%+v\nwas\n%+v", name, a.Config, b.Config)
		}
	}

	const n = 300
	mustRun(t, "", "gen", "-examples", fmt.Sprint(n), "-to", "jetstream:in.examples.gen", "-nats-url", srv.URL())
	runUntil(t, path, func() (bool, error) {
		s, err := js.Stream(ctx, "OUT_PREDICTIONS")
		if err != nil {
			return false, err
		}
		return s.CachedInfo().State.Msgs >= n, nil
	}, n)
}

// TestSetupKafka: the same over Kafka, where the options are the
// partitions and the retention, and the default replication factor is
// the broker's.
func TestSetupKafka(t *testing.T) {
	c := testbroker.Kafka(t)
	dir := t.TempDir()
	path := writeSetupConfig(t, dir, fmt.Sprintf(`
kafka:
  brokers: [%s]
source:
  kind: kafka
  topics: [examples]
outputs:
  predictions: kafka:predictions
  dead_letter: kafka:dead-letter
`, c.ListenAddrs()[0]))
	topics := []string{"examples", "predictions", "dead-letter"}

	out := mustRun(t, "", "setup", "--config", path, "--partitions", "2", "--retention", "1h")
	checkSetupReport(t, out, "created", "kafka topic", topics...)
	if !strings.Contains(oneSpaced(out), "2 partitions, replication factor the brokers' default, retention 1h for source.topics") {
		t.Errorf("setup does not report the settings it created the topics with:\n%s", out)
	}
	cl := c.Client(t)
	check := func() {
		t.Helper()
		for _, name := range topics {
			if p, r := kafkaTopic(t, cl, name); p != 2 || r != "3600000" {
				t.Errorf("topic %s has %d partitions and retention.ms %s, want 2 and 3600000", name, p, r)
			}
		}
	}
	check()

	out = mustRun(t, "", "setup", "--config", path, "--partitions", "3", "--retention", "2h", "--replication-factor", "1")
	checkSetupReport(t, out, "exists", "kafka topic", topics...)
	if !strings.Contains(oneSpaced(out), "2 partitions, replication factor 1, retention 1h for outputs.predictions") {
		t.Errorf("setup does not report the settings of the topics that exist:\n%s", out)
	}
	check()

	const n = 300
	mustRun(t, "", "gen", "-examples", fmt.Sprint(n), "-to", "kafka:examples", "-kafka-brokers", c.ListenAddrs()[0])
	consumer := c.Client(t, kgo.ConsumeTopics("predictions"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	predictions := 0
	runUntil(t, path, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		fs := consumer.PollFetches(ctx)
		predictions += fs.NumRecords()
		return predictions >= n, nil
	}, n)
}

// TestSetupReportsProblems: bad options and configurations are usage
// errors naming the flag or key; an unreachable broker is an error naming
// the key to check; what cannot be created, or exists but would not work,
// is a failed line and a non-zero exit, and what exists is left as it is.
func TestSetupReportsProblems(t *testing.T) {
	srv := testbroker.NATS(t)
	closed := s3test.ClosedAddr(t)

	t.Run("help", func(t *testing.T) {
		out := mustRun(t, "", "setup", "-h")
		for _, want := range []string{"-partitions", "-replication-factor", "-retention", "-duplicate-window", "-replicas", "source.topics", "source.stream", "source.stream_partitions", "2.10.0", "outputs.dead_letter", "kafka.sasl", "nats.url"} {
			if !strings.Contains(out, want) {
				t.Errorf("setup -h does not mention %s:\n%s", want, out)
			}
		}
	})

	usage := []struct {
		name string
		args []string
		want string
	}{
		{"partitions", []string{"--partitions", "0"}, "-partitions: must be at least 1"},
		{"replication factor", []string{"--replication-factor", "0"}, "-replication-factor: must be at least 1, or -1"},
		{"replicas", []string{"--replicas", "7"}, "-replicas: must be between 1 and 5"},
		{"window beyond retention", []string{"--retention", "1m", "--duplicate-window", "5m"}, "-duplicate-window 5m0s is longer than -retention 1m0s"},
		{"window too short", []string{"--duplicate-window", "1ms"}, "-duplicate-window: must be 0"},
		{"not a duration", []string{"--retention", "week"}, "-retention"},
		{"no source", nil, "source.kind: required"},
		{"unknown key", []string{"--source.colour", "red"}, "-source.colour"},
	}
	for _, c := range usage {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := runCmd(t, "", append([]string{"setup"}, c.args...)...)
			var u *usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want a usage error with %q", err, c.want)
			}
		})
	}

	t.Run("core NATS", func(t *testing.T) {
		// Nothing to create, so nothing to connect to.
		out := mustRun(t, "", "setup", "--source.kind", "nats", "--source.subject", "in.x", "--nats.url", "nats://"+closed, "--outputs.predictions", "nats:out.x")
		for _, want := range []string{"nothing nats subject in.x core NATS stores no messages: nothing to create for source.subject", "nothing nats subject out.x "} {
			if !strings.Contains(oneSpaced(out), want) {
				t.Errorf("report without %q:\n%s", want, out)
			}
		}
	})

	unreachable := []struct {
		name string
		args []string
		want string
	}{
		{"nats", []string{"--source.kind", "jetstream", "--source.stream", "S", "--nats.url", "nats://" + closed}, "check nats.url"},
		{"kafka", []string{"--source.kind", "kafka", "--source.topics", "t", "--kafka.brokers", closed}, "check kafka.brokers"},
	}
	for _, c := range unreachable {
		t.Run(c.name+" unreachable", func(t *testing.T) {
			_, _, err := runCmd(t, "", append([]string{"setup"}, c.args...)...)
			var u *usageError
			if err == nil || errors.As(err, &u) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying to %s", err, c.want)
			}
		})
	}

	// A stream that stores in.> and out.taken: setup must leave it alone.
	js := srv.JetStream(t)
	ctx := context.Background()
	all := testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "ALL", Subjects: []string{"in.>", "out.taken"}})
	was := all.CachedInfo().Config
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "LB", Subjects: []string{"lb.x"}})
	nats := []string{"setup", "--nats.url", srv.URL(), "--source.kind", "jetstream"}
	failures := []struct {
		name  string
		args  []string
		lines []string // in the report
	}{
		{"subjects taken", []string{"--source.stream", "EXAMPLES", "--source.subject", "in.examples", "--outputs.predictions", "jetstream:out.taken"}, []string{
			"failed jetstream stream EXAMPLES could not create it for in.examples: ",
			"exists jetstream stream ALL subjects in.> out.taken, max age unlimited, duplicate window 2m, 1 replica, file storage, 0 messages for outputs.predictions",
		}},
		{"stream without the subject", []string{"--source.stream", "ALL", "--source.subject", "elsewhere.>"}, []string{
			"failed jetstream stream ALL exists, but its subjects in.> out.taken do not include source.subject elsewhere.>",
		}},
		{"labels' stream without the subject", []string{"--source.stream", "ALL", "--source.subject", "in.x", "--labels.kind", "jetstream", "--labels.stream", "LB", "--labels.subject", "lb.y"}, []string{
			"failed jetstream stream LB exists, but its subjects lb.x do not include labels.subject lb.y: change labels.subject, or the stream",
		}},
		{"stream not partitioned", []string{"--source.stream", "ALL", "--source.subject", "in.*", "--source.stream_partitions", "4"}, []string{
			"failed jetstream stream ALL exists, but has no subject transform, so no partitions, and source.stream_partitions is 4: delete it",
		}},
		// Without source.subject the worker reads its whole stream, whose
		// subjects only the server knows: setup finds the output in it
		// (one that source.subject takes in is refused by the config).
		{"outputs read back", []string{"--source.stream", "ALL", "--outputs.dead_letter", "jetstream:out.taken"}, []string{
			"exists jetstream stream ALL subjects in.> out.taken, ",
			"failed jetstream stream ALL exists and stores out.taken, but it is the source stream",
		}},
	}
	for _, c := range failures {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := runCmd(t, "", append(append([]string{}, nats...), c.args...)...)
			var u *usageError
			if err == nil || errors.As(err, &u) || !strings.Contains(err.Error(), "could not be set up") {
				t.Errorf("error %v, want a failure saying what could not be set up", err)
			}
			for _, want := range c.lines {
				if !strings.Contains(oneSpaced(out), want) {
					t.Errorf("report without %q:\n%s", want, out)
				}
			}
		})
	}
	if s, err := js.Stream(ctx, "ALL"); err != nil || !reflect.DeepEqual(s.CachedInfo().Config, was) {
		t.Errorf("setup changed the stream that existed (%v)", err)
	}
	if _, err := js.Stream(ctx, "EXAMPLES"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream EXAMPLES: %v, want none", err)
	}
}

// TestSetupRefusesOldNATSServer: a partitioned stream needs nats-server
// 2.10.0 or later (an older server creates the stream without its subject
// transform, so unpartitioned, and the client reports the transform
// unsupported with the stream left behind). setup asks the server's
// version before it creates anything, the configuration's Kafka topics
// included, and says which release it needs and how to get one.
//
// The nats-server package's version is a constant, so no in-process
// server can be 2.9, and none of that age can run here: the old server is
// a listener that answers the client's handshake as 2.9.10 does (INFO,
// then PONG to its PING) and records what it is sent. Kafka is a closed
// port: had setup gone on to its topics, it would fail on them instead.
func TestSetupRefusesOldNATSServer(t *testing.T) {
	old := testbroker.OldNATS(t, "2.9.10")
	_, _, err := runCmd(t, "", "setup", "--nats.url", old.URL(),
		"--source.kind", "jetstream", "--source.stream", "EX", "--source.subject", "ex.*", "--source.stream_partitions", "4",
		"--outputs.predictions", "kafka:predictions", "--kafka.brokers", s3test.ClosedAddr(t))
	var u *usageError
	if err == nil || errors.As(err, &u) {
		t.Fatalf("setup against nats-server 2.9.10: error %v, want a failure", err)
	}
	for _, want := range []string{"nats-server 2.9.10", "needs nats-server 2.10.0 or later", "nothing was created", "go install github.com/nats-io/nats-server/v2@latest"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error without %q: %v", want, err)
		}
	}
	for _, line := range old.Received(t) {
		if verb, _, _ := strings.Cut(line, " "); verb != "CONNECT" && verb != "PING" && verb != "PONG" {
			t.Errorf("setup sent the old server %q: it asked more than the handshake", line)
		}
	}
}

// writeSetupConfig writes a config file of the broker part given and a
// snapshot store, a model and logs every test of setup shares.
// TestSetupKafkaLabelsCoPartitioned: the labels' topic setup creates has
// as many partitions as the examples' topic, the one that exists as much
// as one it creates, whatever --partitions says: run refuses a labels'
// topic of another count.
func TestSetupKafkaLabelsCoPartitioned(t *testing.T) {
	c := testbroker.Kafka(t, kfake.SeedTopics(4, "impressions"))
	dir := t.TempDir()
	path := writeSetupConfig(t, dir, fmt.Sprintf(`
kafka:
  brokers: [%s]
source:
  kind: kafka
  topics: [impressions]
labels:
  kind: kafka
  topics: [clicks]
  window: 1m
outputs:
  predictions: kafka:predictions
`, c.ListenAddrs()[0]))
	out := mustRun(t, "", "setup", "--config", path)
	if !strings.Contains(oneSpaced(out), "created kafka topic clicks 4 partitions,") {
		t.Errorf("setup does not report the labels' topic created with 4 partitions:\n%s", out)
	}
	cl := c.Client(t)
	if p, _ := kafkaTopic(t, cl, "clicks"); p != 4 {
		t.Errorf("setup created the labels' topic with %d partitions beside a source topic of 4:\n%s", p, out)
	}
	if p, _ := kafkaTopic(t, cl, "predictions"); p != 1 {
		t.Errorf("setup created an output topic with %d partitions, want 1 (--partitions' default)", p)
	}

	// A labels' topic that exists with another count is reported failed,
	// naming the key and both counts, and setup fails: run would refuse it.
	c.CreateTopic(t, "taps", 1)
	path = writeSetupConfig(t, dir, fmt.Sprintf(`
kafka:
  brokers: [%s]
source:
  kind: kafka
  topics: [impressions]
labels:
  kind: kafka
  topics: [taps]
  window: 1m
outputs:
  predictions: kafka:predictions
`, c.ListenAddrs()[0]))
	out, _, err := runCmd(t, "", "setup", "--config", path)
	if err == nil {
		t.Fatalf("setup over a labels' topic of 1 partition beside a source of 4 succeeded:\n%s", out)
	}
	if line := oneSpaced(out); !strings.Contains(line, "failed kafka topic taps exists with 1 partition, and the source's topics have 4: labels.topics") {
		t.Errorf("setup does not report the labels' topic of 1 partition failed, naming labels.topics and both counts:\n%s", out)
	}
}

func writeSetupConfig(t *testing.T, dir, brokers string) string {
	t.Helper()
	path := filepath.Join(dir, "config.yaml")
	text := fmt.Sprintf("model:\n  name: setup\nsnapshot:\n  url: file://%s?create_dir=1\nhttp:\n  addr: \"\"\nlog:\n  format: json\n%s",
		filepath.ToSlash(filepath.Join(dir, "snapshots")), brokers)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkSetupReport checks that out has one line for each name, with
// state first and then what the name is.
func checkSetupReport(t *testing.T, out, state, what string, names ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(names) {
		t.Errorf("%d lines, want one for each of %d:\n%s", len(lines), len(names), out)
	}
	for _, name := range names {
		want := state + " " + what + " " + name + " "
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(oneSpaced(l), want) }) {
			t.Errorf("no line %q:\n%s", want, out)
		}
	}
}

// oneSpaced is s with every run of spaces made one, as the report's
// columns are padded.
func oneSpaced(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// runUntil runs "hyperplane run --config path" until done says so, then
// stops it and checks that it stopped cleanly having processed n examples.
func runUntil(t *testing.T, path string, done func() (bool, error), n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr bytes.Buffer
	stopped := make(chan error, 1)
	go func() {
		stopped <- run(ctx, []string{"run", "--config", path}, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	}()
	waitRunning(t, time.Minute, fmt.Sprintf("%d predictions published", n), stopped, &stderr, func() bool {
		ok, err := done()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if want := fmt.Sprintf(`"msg":"worker stopped","examples":%d`, n); !strings.Contains(stderr.String(), want) {
		t.Errorf("run's log has no %s:\n%s", want, stderr.String())
	}
}

// kafkaTopic is the partition count and retention.ms of a topic, asked
// of the broker with another client than setup's.
func kafkaTopic(t *testing.T, cl *kgo.Client, name string) (partitions int, retention string) {
	t.Helper()
	ctx := context.Background()
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(name)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("topic %s: %+v", name, mresp.Topics)
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, name, []string{"retention.ms"}
	dreq.Resources = append(dreq.Resources, r)
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range dresp.Resources {
		for _, c := range res.Configs {
			if c.Name == "retention.ms" && c.Value != nil {
				retention = *c.Value
			}
		}
	}
	return len(mresp.Topics[0].Partitions), retention
}
