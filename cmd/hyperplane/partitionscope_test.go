package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestPartitionScope: with model.scope partition, each partition of a
// three-partition topic gets a model of its own, in a chain of its own,
// equal to the bit to one worker's model over that partition alone; and
// a prediction request names the partition whose model answers.
func TestPartitionScope(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lines := strings.Split(strings.TrimSpace(readFile(t, genFile(t, dir, "ex.jsonl", "-examples", "2400", "-seed", "31", "-unlabeled", "0.1"))), "\n")
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "keyed", 3)
	var recs []*kgo.Record
	parts := make([][]string, 3)
	for i, l := range lines {
		recs = append(recs, &kgo.Record{Topic: "keyed", Partition: int32(i % 3), Value: []byte(l)})
		parts[i%3] = append(parts[i%3], l)
	}
	if err := c.Client(t).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(dir, "store")
	args := []string{"run", "--model.name", "per", "--model.scope", "partition", "--kafka.brokers", strings.Join(c.ListenAddrs(), ","),
		"--source.kind", "kafka", "--source.topics", "keyed", "--snapshot.url", "file://" + storeDir + "?create_dir=1",
		"--snapshot.every", "300", "--snapshot.interval", "100ms", "--http.addr", "127.0.0.1:0", "--serve.refresh", "0s"}
	cfg, err := config.Load(args[1:], func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &lockedBuffer{}
	stopped := make(chan error, 1)
	go func() {
		stopped <- run(ctx, args, func(string) string { return "" }, strings.NewReader(""), io.Discard, stderr)
	}()
	var addr string
	waitRunning(t, time.Minute, "the http listening line", stopped, stderr, func() bool { addr = listenedAddr(stderr); return addr != "" })
	store := openStore(t, storeDir)
	chain := func(p int) *snapshot.Store { return store.Sub(fmt.Sprintf("per/partition/kafka.keyed.%d", p)) }
	for p := range 3 {
		waitRunning(t, time.Minute, fmt.Sprintf("partition %d learned", p), stopped, stderr, func() bool {
			newest, err := chain(p).Latest(context.Background(), "per", nil)
			return err == nil && newest.Positions[fmt.Sprintf("kafka:keyed/%d", p)] == int64(len(parts[p]))
		})
	}

	// Each partition's model answers the requests that name it.
	for p := range 3 {
		newest, err := chain(p).Latest(context.Background(), "per", nil)
		if err != nil {
			t.Fatal(err)
		}
		u := "http://" + addr + "/v1/predict?shard=" + url.QueryEscape(fmt.Sprintf("kafka:keyed/%d", p))
		resp, err := http.Post(u, "application/json", strings.NewReader(lines[0]))
		if err != nil {
			t.Fatal(err)
		}
		var reply struct{ Model struct{ Version uint64 } }
		if err := json.Unmarshal(readReply(t, resp, http.StatusOK), &reply); err != nil {
			t.Fatal(err)
		}
		if reply.Model.Version != newest.State.Updates {
			t.Errorf("partition %d answered with version %d, its newest generation has %d", p, reply.Model.Version, newest.State.Updates)
		}
	}
	resp, err := http.Post("http://"+addr+"/v1/predict", "application/json", strings.NewReader(lines[0]))
	if err != nil {
		t.Fatal(err)
	}
	if body := readReply(t, resp, http.StatusBadRequest); !bytes.Contains(body, []byte("?shard=")) {
		t.Errorf("a request naming no partition: %s", body)
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}

	for p := range 3 {
		newest, err := chain(p).Latest(context.Background(), "per", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := newest.State.Digest(), learnInOrder(t, cfg, parts[p]).Digest(); got != want {
			t.Errorf("partition %d: state_sha256 %x, one worker over the partition alone %x", p, got, want)
		}
	}
}

// TestReplayPartitionScope: replay of a model of partition scope rebuilds
// each partition's model on its own, into its own chain under --out,
// equal to the bit to one worker's model over that partition alone, and
// prints each partition's state_sha256.
func TestReplayPartitionScope(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lines := strings.Split(strings.TrimSpace(readFile(t, genFile(t, dir, "ex.jsonl", "-examples", "1500", "-seed", "37"))), "\n")
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "keyed", 3)
	var recs []*kgo.Record
	parts := make([][]string, 3)
	for i, l := range lines {
		p := (i * 7 / 5) % 3
		recs = append(recs, &kgo.Record{Topic: "keyed", Partition: int32(p), Value: []byte(l)})
		parts[p] = append(parts[p], l)
	}
	if err := c.Client(t).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(dir, "out")
	args := []string{"replay", "--model.name", "per", "--model.scope", "partition", "--kafka.brokers", strings.Join(c.ListenAddrs(), ","),
		"--source.kind", "kafka", "--source.topics", "keyed", "--out", "file://" + outDir + "?create_dir=1"}
	cfg, err := config.Load(append([]string{"--model.name", "per", "--model.scope", "partition"}, args[5:11]...), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "", args...)
	var summary struct {
		Partitions map[string]struct {
			Examples    uint64
			StateSHA256 string `json:"state_sha256"`
		}
	}
	if err := json.Unmarshal([]byte(out), &summary); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	store := openStore(t, outDir)
	for p := range 3 {
		shard := fmt.Sprintf("kafka:keyed/%d", p)
		snap, err := store.Sub(fmt.Sprintf("per/partition/kafka.keyed.%d", p)).Latest(context.Background(), "per", nil)
		if err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
		want := learnInOrder(t, cfg, parts[p]).Digest()
		if got := snap.State.Digest(); got != want {
			t.Errorf("partition %d: state_sha256 %x, one worker over the partition alone %x", p, got, want)
		}
		if s := summary.Partitions[shard]; s.StateSHA256 != fmt.Sprintf("%x", want) || s.Examples != uint64(len(parts[p])) {
			t.Errorf("partition %d: the summary says %+v, want %d examples and %x", p, s, len(parts[p]), want)
		}
	}
}

// TestReplayPartitionScopeFromBeyondAPartition: --from offset:N starts
// every partition at N; where one partition ends before N, the replay is
// refused before it learns any, naming -from and that partition, and
// --out holds no chain a second replay into it would be refused over.
func TestReplayPartitionScopeFromBeyondAPartition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lines := strings.Split(strings.TrimSpace(readFile(t, genFile(t, dir, "ex.jsonl", "-examples", "120", "-seed", "41"))), "\n")
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "uneven", 2)
	var recs []*kgo.Record
	for i, l := range lines {
		p := int32(0)
		if i%6 == 5 {
			p = 1
		}
		recs = append(recs, &kgo.Record{Topic: "uneven", Partition: p, Value: []byte(l)})
	}
	if err := c.Client(t).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(dir, "out")
	args := []string{"replay", "--model.name", "per", "--model.scope", "partition", "--kafka.brokers", strings.Join(c.ListenAddrs(), ","),
		"--source.kind", "kafka", "--source.topics", "uneven", "--from", "offset:50", "--out", "file://" + outDir + "?create_dir=1"}
	_, stderr, err := runCmd(t, "", args...)
	if err == nil {
		t.Fatalf("a replay from offset 50 over a partition of 20 messages succeeded:\n%s", stderr)
	}
	for _, want := range []string{"-from offset:50", "kafka:uneven/1", "every partition"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "recreated") {
		t.Errorf("the refusal blames the topic: %v", err)
	}
	store := openStore(t, outDir)
	if shards, err := store.PartitionShards(context.Background(), "per"); err != nil || len(shards) > 0 {
		t.Errorf("the refused replay left chains in --out: %v, %v", shards, err)
	}
}

// TestPartitionScopeStartSaysNoNewModel: a worker in partition scope
// started over a store that holds its partitions' chains logs, for each
// partition, whether it resumes its chain or begins a new one, and never
// that the model as a whole is new: it has no model of its own.
func TestPartitionScopeStartSaysNoNewModel(t *testing.T) {
	t.Parallel()
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "ex", 2)
	dir := t.TempDir()
	writeSnapshot(t, "file://"+filepath.Join(dir, "per", "partition", "kafka.ex.0")+"?create_dir=1", "per", learner.DefaultConfig())
	args := []string{"run", "--model.name", "per", "--model.scope", "partition", "--kafka.brokers", strings.Join(c.ListenAddrs(), ","),
		"--source.kind", "kafka", "--source.topics", "ex", "--snapshot.url", "file://" + dir, "--http.addr", "127.0.0.1:0", "--log.format", "json"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &lockedBuffer{}
	stopped := make(chan error, 1)
	go func() {
		stopped <- run(ctx, args, func(string) string { return "" }, strings.NewReader(""), io.Discard, stderr)
	}()
	waitRunning(t, time.Minute, "both partitions opened", stopped, stderr, func() bool {
		log := stderr.String()
		return strings.Contains(log, `"resuming from snapshot","shard":"kafka:ex/0"`) && strings.Contains(log, `"no snapshot: a new model","shard":"kafka:ex/1"`) &&
			strings.Contains(log, `"kafka partition opened","source":"kafka:ex/0"`) && strings.Contains(log, `"kafka partition opened","source":"kafka:ex/1"`)
	})
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "a new model") && !strings.Contains(line, `"shard":`) {
			t.Errorf("a worker in partition scope over stored chains says the model is new: %s", line)
		}
	}
}

// TestScopeChangeRefused: a model stored in one scope is refused at
// start-up by a worker of the other, naming model.scope, rather than
// learned again from source.start as a new model (or new models) beside
// the stored one, its events published again with other contents.
func TestScopeChangeRefused(t *testing.T) {
	t.Parallel()
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "ex", 2)
	dir := t.TempDir()
	// A model learned in global scope: a generation of its own.
	writeSnapshot(t, "file://"+dir+"?create_dir=1", "glob", learner.DefaultConfig())
	// A model learned in partition scope: a chain for partition 0.
	writeSnapshot(t, "file://"+filepath.Join(dir, "per", "partition", "kafka.ex.0")+"?create_dir=1", "per", learner.DefaultConfig())

	for _, tc := range []struct {
		model, scope, want string
	}{
		{"glob", "partition", "learned in global scope"},
		{"per", "global", "learned in partition scope"},
	} {
		t.Run(tc.scope, func(t *testing.T) {
			args := []string{"run", "--model.name", tc.model, "--model.scope", tc.scope, "--kafka.brokers", strings.Join(c.ListenAddrs(), ","),
				"--source.kind", "kafka", "--source.topics", "ex", "--snapshot.url", "file://" + dir, "--http.addr", "127.0.0.1:0"}
			// A worker not refused learns until the context ends.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, args, func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "model.scope") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run in %s scope over a model %s: %v; want a refusal naming model.scope", tc.scope, tc.want, err)
			}
		})
	}
}
