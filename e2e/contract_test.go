package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"gocloud.dev/blob"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// The contract suite's settings (issue 18): epochs of at most
// contractEpoch examples of a partition, an idle tail snapshotted every
// contractInterval, and a short shutdown.
const (
	contractEpoch    = 50
	contractInterval = time.Second
	contractShutdown = 3 * time.Second
	// contractExitSlack is the time a process may take beyond
	// shutdown.timeout to exit: to begin its shutdown, to notice a store
	// request's cancellation, to exit.
	contractExitSlack = 1500 * time.Millisecond
	// contractWait bounds every wait for an event: generous, since
	// nothing waits for a guessed time.
	contractWait = 90 * time.Second
	// contractEpochsEvery is snapshot.every over several shards: never
	// due. An epoch ends where a snapshot falls due by count (the mixed
	// model is what a generation holds), after a number of labeled
	// examples that depends on when the last generation was written, by
	// interval or at a restart; with snapshots by interval only every
	// boundary is min(from + E, end) whenever it is cut, and every run
	// over the same input learns the same history.
	contractEpochsEvery = 1_000_000
)

// contractTopology is one way of running the engine: a source of one
// shard, or of several learned in epochs, all its input in the source
// before any worker starts (so that every boundary is min(from + E, end)
// and the history depends on the data alone).
type contractTopology struct {
	in     input
	shards []string // the shards' names, as the gauges' shard label; nil: one shard
	// config is a worker's configuration for the run named run (its
	// consumer group and outputs) on store, with these snapshot settings.
	config func(run, store string, every int, interval time.Duration) string
	// tripOn is the key whose write begins an outage: a point early in
	// the history, reached whatever the machine's speed.
	tripOn *regexp.Regexp
	// every and interval are snapshot.every and snapshot.interval in the
	// runs with outages.
	every    int
	interval time.Duration
	// reference is the uninterrupted model's state digest when it is
	// known without a run (one shard: the learner over the input).
	reference *[32]byte
	// rebalance: a Kafka group, which a second worker can join.
	rebalance bool
	// predictions reads run's predictions (nil: not checked).
	predictions func(run string) *topicReader
	readAll     func(t *testing.T, r *topicReader, run string) []*kgo.Record
}

// TestContract is the contract of issue 18, end to end with the binary,
// over an S3 store (in-process, or the MinIO of CI) behind a proxy that
// can refuse writes, for the engine over one shard (a Kafka topic of one
// partition) and over several (a Kafka topic of three partitions, a
// JetStream stream of three partitions). For each topology, in order:
//
//   - reference: one worker learns the whole input uninterrupted, with
//     snapshots by interval only: a generation of every example appears
//     while the stream is idle, within a few intervals of the last
//     example; the gauges describe the served model, the one that
//     generation holds, and each shard's gauges carry its label.
//   - sigterm_during_outage: the store refuses writes; SIGTERM ends the
//     worker within shutdown.timeout, and a restart once the store is
//     back ends with the reference model.
//   - outage: the store refuses writes until the worker has said so on
//     /readyz and retried; it stays up, is ready again once the store is
//     back, and ends with the reference model. Over Kafka's three
//     partitions a second worker joins the group mid-epoch, during the
//     outage, and the first leaves once the store is back: every input
//     has its prediction, and each repeat is identical.
//   - damaged_only_generation: the store's only generation is
//     overwritten with garbage; a restart learns from the source's start
//     and ends with the reference model.
func TestContract(t *testing.T) {
	srv := s3test.Start(t)
	// The topologies run side by side, each its cases in order: they wait
	// mostly for the store's retries. (Not with t.Parallel, which would
	// run only GOMAXPROCS of them at a time.)
	var wg sync.WaitGroup
	for _, tc := range []struct {
		name string
		make func(t *testing.T) contractTopology
	}{
		{"kafka_1_partition", func(t *testing.T) contractTopology { return contractKafka(t, 1) }},
		{"kafka_3_partitions", func(t *testing.T) contractTopology { return contractKafka(t, 3) }},
		{"jetstream_3_partitions", contractJetStream},
	} {
		wg.Go(func() {
			t.Run(tc.name, func(t *testing.T) { runContract(t, srv, tc.make(t)) })
		})
	}
	wg.Wait()
}

func runContract(t *testing.T, srv s3test.Server, topo contractTopology) {
	var ref [32]byte
	if !t.Run("reference", func(t *testing.T) { ref = contractReference(t, srv, topo) }) {
		return
	}
	t.Run("sigterm_during_outage", func(t *testing.T) { contractSIGTERMDuringOutage(t, srv, topo, ref) })
	var damaged func(t *testing.T)
	if !t.Run("outage", func(t *testing.T) { damaged = contractOutage(t, srv, topo, ref) }) {
		return
	}
	t.Run("damaged_only_generation", damaged)
}

// contractReference runs one worker over the whole input, uninterrupted,
// snapshotting by interval only, and returns the state digest of the
// generation that includes every example. It checks that the generation
// is written while the stream is idle, within a few intervals of the last
// example (case 4), and that the gauges describe the model it holds (case
// 6).
func contractReference(t *testing.T, srv s3test.Server, topo contractTopology) [32]byte {
	ctx := testContext(t)
	prefix := s3test.Prefix(t)
	store := "s3://" + srv.Bucket + "/" + prefix + "?" + srv.Query()
	n := len(topo.in.messages)
	p := start(t, "run", "--config", writeConfig(t, topo.config("ref", store, 1_000_000, contractInterval)), "--snapshot.writer", "ref")
	s, err := snapshot.OpenStore(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var last time.Time // when the worker had learned every example, as first seen
	gen := waitComplete(t, []*proc{p}, s, n, func() {
		if last.IsZero() && examplesCounted(p) >= float64(n) {
			last = time.Now()
		}
	})
	if last.IsZero() {
		last = time.Now()
	}
	if d := gen.Created.Sub(last); d > 3*contractInterval {
		t.Errorf("idle tail: generation %d, of every example, was created %v after the last example; snapshot.interval is %v", gen.Generation, d, contractInterval)
	}
	t.Logf("idle tail: generation %d of all %d examples created %v after the last example was counted", gen.Generation, n, gen.Created.Sub(last).Round(time.Millisecond))

	// The gauges describe the model that serves: the one the newest
	// generation holds, now that the stream is done.
	m, err := learner.Restore(gen.State)
	if err != nil {
		t.Fatal(err)
	}
	want := m.Metrics()
	var body, seen string
	wait.For(t, contractWait, 50*time.Millisecond, fmt.Sprintf("the gauges of generation %d: hyperplane_model_version %d, hyperplane_rolling_accuracy %v",
		gen.Generation, want.Updates, want.RollingAccuracy), func() bool {
		body = metricsBody(p)
		v, vok := sample(body, "hyperplane_model_version")
		a, aok := sample(body, "hyperplane_rolling_accuracy")
		if now := fmt.Sprintf("hyperplane_model_version %v, hyperplane_rolling_accuracy %v", v, a); now != seen {
			t.Logf("gauges: %s", now)
			seen = now
		}
		return vok && aok && v == float64(want.Updates) && a == want.RollingAccuracy
	})
	for _, shard := range topo.shards {
		name := `hyperplane_shard_model_version{shard="` + shard + `"}`
		v, found := sample(body, name)
		if !found {
			t.Errorf("no %s in /metrics:\n%s", name, grepLines(body, "hyperplane_shard_"))
		} else if v <= 0 || v > float64(want.Updates) {
			t.Errorf("%s = %v: a shard's model version lies in (0, the mixed model's %d]", name, v, want.Updates)
		}
	}
	p.stop()
	digest := gen.State.Digest()
	if gen.State.Examples != uint64(n) {
		t.Fatalf("the uninterrupted run's generation %d has %d examples, the input %d", gen.Generation, gen.State.Examples, n)
	}
	if topo.reference != nil && digest != *topo.reference {
		t.Fatalf("the uninterrupted worker's state_sha256 %x differs from the learner's over the same examples, %x", digest, *topo.reference)
	}
	return digest
}

// contractSIGTERMDuringOutage stops the worker with SIGTERM while the
// store refuses writes: it exits within shutdown.timeout (and some
// slack), with status 0 or 1, the documented status of a shutdown that
// could not write its last snapshot, saying so; a restart once the store
// is back ends with the reference model (case 2).
func contractSIGTERMDuringOutage(t *testing.T, srv s3test.Server, topo contractTopology, ref [32]byte) {
	ctx := testContext(t)
	prefix := s3test.Prefix(t)
	fs := startFaultyStore(t, srv, topo.tripOn, nil)
	cfg := writeConfig(t, topo.config("term", fs.url(prefix), topo.every, topo.interval))
	s, err := snapshot.OpenStore(ctx, fs.direct(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := len(topo.in.messages)
	p := start(t, "run", "--config", cfg, "--snapshot.writer", "term-1")
	waitOutage(t, fs, []*proc{p}, s, n)

	took, werr := stopBounded(t, p)
	t.Logf("SIGTERM during the outage: exit (%v) after %v", werr, took.Round(time.Millisecond))

	fs.heal()
	p = start(t, "run", "--config", cfg, "--snapshot.writer", "term-2")
	gen := waitComplete(t, []*proc{p}, s, n, nil)
	p.stop()
	assertContractModel(t, gen, n, ref, "restarted after SIGTERM during an outage")
}

// stopBounded stops p with SIGTERM while its store is, or has just been,
// unavailable: it exits within shutdown.timeout (and some slack), with
// status 0 or 1, the documented status of a shutdown that could not write
// its last snapshot in that time, saying so. It returns how long the exit
// took and its error.
func stopBounded(t *testing.T, p *proc) (time.Duration, error) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	var werr error
	select {
	case werr = <-p.done:
	case <-time.After(contractShutdown + 30*time.Second):
		t.Fatalf("no exit %v after SIGTERM with shutdown.timeout %v", time.Since(signalled).Round(time.Millisecond), contractShutdown)
	}
	took := time.Since(signalled)
	if took > contractShutdown+contractExitSlack {
		t.Errorf("the exit took %v after SIGTERM, with shutdown.timeout %v", took.Round(time.Millisecond), contractShutdown)
	}
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee) && ee.ExitCode() == 1:
		if !strings.Contains(p.log(), "not written") {
			t.Errorf("exit status 1 without saying that the last snapshot was not written:\n%s", p.log())
		}
	default:
		t.Errorf("exit after SIGTERM: %v, want status 0 or 1", werr)
	}
	return took, werr
}

// contractOutage runs the worker while the store refuses writes, until
// it has said so on /readyz and retried; then the store heals: the worker
// never exits, is ready again, and ends with the reference model (case
// 1). With a Kafka group, a second worker joins during the outage
// (mid-epoch: the epoch waits for results it cannot write) and the first
// leaves once the store is back; every input then has its prediction,
// and every repeat is identical (case 5). It returns the case of the
// damaged generation, on the store this run leaves (case 3).
func contractOutage(t *testing.T, srv s3test.Server, topo contractTopology, ref [32]byte) func(t *testing.T) {
	ctx := testContext(t)
	prefix := s3test.Prefix(t)
	// The second worker, started during the outage, passes its start-up
	// probe of create-if-absent, so that it joins the group during the
	// outage: a worker that starts while the store refuses writes waits
	// at its probe before it joins (TestEpochsStartDuringAStoreOutage in
	// cmd/hyperplane).
	fs := startFaultyStore(t, srv, topo.tripOn, regexp.MustCompile(`/e2e/epochs/probe/`))
	cfg := writeConfig(t, topo.config("out", fs.url(prefix), topo.every, topo.interval))
	var preds *topicReader
	if topo.predictions != nil {
		preds = topo.predictions("out")
	}
	s, err := snapshot.OpenStore(ctx, fs.direct(prefix))
	if err != nil {
		t.Fatal(err)
	}
	n := len(topo.in.messages)
	workers := []*proc{start(t, "run", "--config", cfg, "--snapshot.writer", "out-1")}
	waitOutage(t, fs, workers, s, n)
	if topo.rebalance {
		second := start(t, "run", "--config", cfg, "--snapshot.writer", "out-2")
		workers = append(workers, second)
		wait.For(t, contractWait, 50*time.Millisecond, "the second worker to join the group, during the outage", func() bool {
			assertRunning(t, workers)
			_, first := groupMember(t, workers[0])
			_, holds := groupMember(t, second)
			return first && holds
		})
		if refusing, _, _ := fs.outage(); !refusing {
			t.Fatal("the store is back before the rebalance")
		}
	}
	fs.heal()
	wait.For(t, contractWait, 50*time.Millisecond, "every worker to be ready again once the store is back", func() bool {
		assertRunning(t, workers)
		for _, p := range workers {
			if !p.ready() {
				return false
			}
		}
		return true
	})
	if topo.rebalance {
		// Just after the outage its writes may still wait out their
		// backoff: a shutdown that cannot write the last mixed model
		// within shutdown.timeout exits 1, saying so, as in the outage.
		took, werr := stopBounded(t, workers[0])
		t.Logf("the first worker left the group (exit %v after %v); ranges stopped mid-range (\"shard revoked\"): %d by the first worker, %d by the second",
			werr, took.Round(time.Millisecond), strings.Count(workers[0].log(), "shard revoked"), strings.Count(workers[1].log(), "shard revoked"))
		workers = workers[1:]
	}
	gen := waitComplete(t, workers, s, n, nil)
	// Retention follows the generation's write (snapshot.keep 1): a
	// worker stopped in between leaves the one before it.
	wait.For(t, contractWait, 50*time.Millisecond, "retention to leave one generation (snapshot.keep 1)", func() bool {
		assertRunning(t, workers)
		gens, err := s.Generations(ctx, "e2e")
		if err != nil {
			t.Fatal(err)
		}
		return len(gens) == 1
	})
	for _, p := range workers {
		p.stop()
	}
	s.Close()
	assertContractModel(t, gen, n, ref, "after a store outage")
	if preds != nil {
		assertContractOutputs(t, topo, topo.readAll(t, preds, "out"))
	}

	// Case 3: the only generation damaged, the same configuration
	// restarted.
	return func(t *testing.T) {
		ctx := testContext(t)
		s, err := snapshot.OpenStore(ctx, fs.direct(prefix))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		gens, err := s.Generations(ctx, "e2e")
		if err != nil {
			t.Fatal(err)
		}
		if len(gens) != 1 {
			t.Fatalf("generations %v: want exactly one (snapshot.keep 1)", gens)
		}
		bucket, err := blob.OpenBucket(ctx, "s3://"+srv.Bucket+"?"+srv.Query())
		if err != nil {
			t.Fatal(err)
		}
		defer bucket.Close()
		if err := bucket.WriteAll(ctx, snapshot.Key(prefix, "e2e", gens[0]), []byte("not a snapshot"), nil); err != nil {
			t.Fatal(err)
		}
		// The same configuration, on the store without the proxy, which
		// stopped with the outage's test.
		cfg := writeConfig(t, topo.config("out", fs.direct(prefix), topo.every, topo.interval))
		p := start(t, "run", "--config", cfg, "--snapshot.writer", "damaged-1")
		gen := waitComplete(t, []*proc{p}, s, n, nil)
		p.stop()
		assertContractModel(t, gen, n, ref, fmt.Sprintf("restarted on a store whose only generation (%d) was damaged", gens[0]))
		if !strings.Contains(p.log(), "skipping") {
			t.Errorf("the worker did not say it skipped the damaged generation %d:\n%s", gens[0], p.log())
		}
	}
}

// waitOutage waits until the store, behind fs, refuses writes, /readyz
// says not ready for the snapshots, the worker has retried (two failed
// operations of its own, six refused requests), and the store's newest
// generation does not include every example yet: the outage is mid-stream.
// It fails if a worker exits meanwhile.
func waitOutage(t *testing.T, fs *faultyStore, workers []*proc, s *snapshot.Store, n int) {
	t.Helper()
	var body string
	wait.For(t, contractWait, 50*time.Millisecond, "an outage that the worker reports and retries", func() bool {
		assertRunning(t, workers)
		refusing, _, refused := fs.outage()
		if !refusing || refused < 6 {
			return false
		}
		p := workers[0]
		var code int
		code, body = p.readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "snapshots: ") &&
			p.metric("hyperplane_snapshot_errors_total") >= 2
	})
	_, tripped, refused := fs.outage()
	ctx := testContext(t)
	switch latest, err := s.Latest(ctx, "e2e", nil); {
	case errors.Is(err, snapshot.ErrNotFound):
	case err != nil:
		t.Fatal(err)
	case latest.State.Examples >= uint64(n):
		t.Fatalf("the store's generation %d holds every example before the outage: the test proves less than it should", latest.Generation)
	}
	t.Logf("outage since the write of %s: %d writes refused; /readyz: %q", tripped, refused, strings.TrimSpace(body))
}

// waitComplete waits until the store's newest readable generation
// includes n examples and returns it, calling tick (if not nil) at every
// look; it fails if a worker exits meanwhile, or if a generation holds
// more than n examples.
func waitComplete(t *testing.T, workers []*proc, s *snapshot.Store, n int, tick func()) *snapshot.Snapshot {
	t.Helper()
	ctx := testContext(t)
	var seen string
	var latest *snapshot.Snapshot
	wait.For(t, contractWait, 50*time.Millisecond, fmt.Sprintf("a generation of all %d examples", n), func() bool {
		assertRunning(t, workers)
		if tick != nil {
			tick()
		}
		gens, err := s.Generations(ctx, "e2e")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(gens) == seen {
			return false
		}
		seen = fmt.Sprint(gens)
		switch latest, err = s.Latest(ctx, "e2e", nil); {
		case errors.Is(err, snapshot.ErrNotFound):
			return false
		case err != nil:
			// Retained away meanwhile: look again.
			seen = ""
			return false
		}
		if latest.State.Examples > uint64(n) {
			t.Fatalf("generation %d holds %d examples, the input %d: some were learned twice", latest.Generation, latest.State.Examples, n)
		}
		return latest.State.Examples == uint64(n)
	})
	return latest
}

// assertContractModel checks that gen, the final generation, holds every
// example once and the reference model's state.
func assertContractModel(t *testing.T, gen *snapshot.Snapshot, n int, ref [32]byte, what string) {
	t.Helper()
	if gen.State.Examples != uint64(n) {
		t.Fatalf("%s: generation %d holds %d examples, the input %d", what, gen.Generation, gen.State.Examples, n)
	}
	if d := gen.State.Digest(); d != ref {
		t.Fatalf("%s: generation %d has state_sha256 %x, the uninterrupted run %x", what, gen.Generation, d, ref)
	}
	t.Logf("%s: generation %d holds the %d examples, state_sha256 %x as uninterrupted", what, gen.Generation, n, ref[:8])
}

// assertContractOutputs checks that every input message has a prediction
// event, and that the repeats of an event id have the same bytes.
func assertContractOutputs(t *testing.T, topo contractTopology, recs []*kgo.Record) {
	t.Helper()
	parts := max(len(topo.shards), 1)
	first := map[string][]byte{}
	repeats := 0
	for _, rec := range recs {
		id := string(rec.Key)
		if prev, ok := first[id]; ok {
			repeats++
			if string(prev) != string(rec.Value) {
				t.Fatalf("prediction %s repeated with other content:\nfirst: %s\nthis:  %s", id, prev, rec.Value)
			}
			continue
		}
		first[id] = rec.Value
	}
	for i := range topo.in.messages {
		if id := fmt.Sprintf("kafka:examples/%d/%d", i%parts, i/parts); first[id] == nil {
			t.Fatalf("input message %d (%s) has no prediction", i, id)
		}
	}
	t.Logf("outputs: each of the %d messages has its prediction; %d repeats, each identical to the first", len(topo.in.messages), repeats)
}

// contractKafka is a Kafka topic of the given partitions holding the
// input, message i at partition i%partitions.
func contractKafka(t *testing.T, partitions int) contractTopology {
	ctx := testContext(t)
	runs := []string{"ref", "term", "out"}
	var outputs []string
	for _, r := range runs {
		outputs = append(outputs, "predictions-"+r)
	}
	c := testbroker.Kafka(t, kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(int32(partitions), "examples"), kfake.SeedTopics(1, outputs...))
	topo := contractTopology{in: makeInput(300*max(partitions, 2), uint64(30+partitions), 0), every: 50}
	cl := c.Client(t)
	var recs []*kgo.Record
	for i, m := range topo.in.messages {
		recs = append(recs, &kgo.Record{Topic: "examples", Partition: int32(i % partitions), Value: m})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if partitions == 1 {
		// One shard: the learner over the input is the reference, and the
		// outage begins once the first generation is written.
		d := topo.in.reference(t, testLearner()).State().Digest()
		topo.reference = &d
		topo.tripOn = regexp.MustCompile(`/e2e/0{19}1\.msgpack$`)
		topo.interval = contractInterval
	} else {
		for p := range partitions {
			topo.shards = append(topo.shards, fmt.Sprintf("kafka:examples/%d", p))
		}
		// Several: the outage begins once the third epoch's boundary is
		// written, so that its ranges are learned and their results
		// refused.
		topo.tripOn = regexp.MustCompile(`/e2e/epochs/0{19}3/boundary\.msgpack$`)
		topo.every, topo.interval = contractEpochsEvery, contractInterval
		topo.rebalance = true
		topo.predictions = func(run string) *topicReader { return readTopic(t, c, "predictions-"+run) }
		topo.readAll = func(t *testing.T, r *topicReader, run string) []*kgo.Record {
			t.Helper()
			end := endOffset(t, testContext(t), c, "predictions-"+run)
			wait.For(t, contractWait, 50*time.Millisecond, "every prediction of run "+run, func() bool { return int64(r.count()) >= end })
			return r.records()
		}
	}
	brokers := strings.Join(c.ListenAddrs(), ", ")
	topo.config = func(run, store string, every int, interval time.Duration) string {
		return fmt.Sprintf(`
model:
  name: e2e
  learner:
    hash_bits: 16
  mixing:
    epoch_examples: %d
    interval: 100ms
kafka:
  brokers: [%s]
  session_timeout: 2s
source:
  kind: kafka
  topics: [examples]
  group: contract-%s
  batch: 32
outputs:
  predictions: kafka:predictions-%s
%s`, contractEpoch, brokers, run, run, contractSnapshots(store, every, interval))
	}
	return topo
}

// contractJetStream is a JetStream stream partitioned into three by its
// subject transform, as hyperplane setup creates it, holding the input.
func contractJetStream(t *testing.T) contractTopology {
	ctx := testContext(t)
	ns := startNATS(t)
	prefix := uniquePrefix("CONTRACT")
	stream, subject := prefix+"_EX", prefix+".ex.*"
	t.Cleanup(func() {
		js := ns.JetStream(t)
		for _, s := range []string{stream, strings.ToUpper(prefix) + "_PRED"} {
			js.DeleteStream(context.Background(), s) //nolint:errcheck // absent if the test failed early
		}
	})
	base := fmt.Sprintf(`
model:
  name: e2e
  learner:
    hash_bits: 16
  mixing:
    epoch_examples: %d
    interval: 100ms
nats:
  url: %s
source:
  kind: jetstream
  stream: %s
  subject: %s
  stream_partitions: 3
  batch: 32
outputs:
  predictions: jetstream:%s.pred
`, contractEpoch, ns.url, stream, subject, prefix)
	out := runBinary(t, "setup", "--config", writeConfig(t, base))
	if want := "{{partition(3,1)}}"; !strings.Contains(out, want) {
		t.Fatalf("setup did not create a partitioned stream (no %q):\n%s", want, out)
	}
	topo := contractTopology{in: makeInput(900, 33, 0), every: contractEpochsEvery, interval: contractInterval}
	js := ns.JetStream(t)
	for i, m := range topo.in.messages {
		if _, err := js.PublishAsync(prefix+".ex.k"+strconv.Itoa(i), m); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publishing the input timed out")
	}
	for k := range 3 {
		topo.shards = append(topo.shards, fmt.Sprintf("jetstream:%s#%d", stream, k))
	}
	topo.tripOn = regexp.MustCompile(`/e2e/epochs/0{19}3/boundary\.msgpack$`)
	topo.config = func(_, store string, every int, interval time.Duration) string {
		return base + contractSnapshots(store, every, interval)
	}
	return topo
}

func contractSnapshots(store string, every int, interval time.Duration) string {
	return fmt.Sprintf(`snapshot:
  url: %s
  every: %d
  interval: %s
  keep: 1
shutdown:
  timeout: %s
`, store, every, interval, contractShutdown)
}

// examplesCounted is the worker's count of examples learned.
func examplesCounted(p *proc) float64 {
	sum := 0.0
	for _, r := range []string{"correct", "mistake", "unlabeled"} {
		sum += p.metric(`hyperplane_examples_total{result="` + r + `"}`)
	}
	return sum
}

// metricsBody is the text of /metrics ("" while it does not answer).
func metricsBody(p *proc) string {
	resp, err := http.Get("http://" + p.httpAddr() + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// sample finds one sample of a /metrics text by its name and labels.
func sample(body, name string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// grepLines are the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
