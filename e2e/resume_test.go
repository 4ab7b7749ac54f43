package e2e

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"gocloud.dev/blob"
)

// TestKillAndResume kills the worker with SIGKILL at random points
// mid-stream, several times, restarting it each time from its snapshots:
// the final model must be bit-identical to one uninterrupted run, and every
// input position must have its prediction.
func TestKillAndResume(t *testing.T) {
	ctx := testContext(t)
	t.Setenv("HYPERPLANE_E2E_NATS_URL", "")
	ns := startNATS(t)
	prefix := uniquePrefix("KILL")
	js, _ := ns.streams(ctx, prefix)
	// Keep the repeated predictions: with the default two-minute
	// duplicate window the stream would drop them by Nats-Msg-Id, and the
	// check that repeats come only after the last snapshot would see none.
	// (100ms is the least JetStream allows; a restart takes longer.)
	if _, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: prefix + "_PRED", Subjects: []string{prefix + ".PRED"}, Duplicates: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	in := makeInput(30000, 11, 0)
	// The stream arrives over a few seconds, so that the kills land in it.
	fed := make(chan error, 1)
	go func() {
		for i, m := range in.messages {
			if _, err := js.PublishAsync(prefix+".IN", m); err != nil {
				fed <- err
				return
			}
			if i%1000 == 999 {
				<-js.PublishAsyncComplete()
				time.Sleep(40 * time.Millisecond)
			}
		}
		<-js.PublishAsyncComplete()
		fed <- nil
	}()
	store := s3test.Start(t).URL(t)
	cfg := writeConfig(t, jetStreamConfig(ns.url, prefix)+killSnapshots(store))
	source := "jetstream:" + prefix + "_IN"
	// The position, not the count of predictions: the stream keeps the
	// repeats.
	through := func(p *proc) bool {
		return p.metric(`hyperplane_position{source="`+source+`"}`) >= float64(len(in.messages))
	}
	snaps := killRepeatedly(t, cfg, store, source, rand.New(rand.NewPCG(1, 2)), 150, through)
	if err := <-fed; err != nil {
		t.Fatal(err)
	}
	p := start(t, "run", "--config", cfg, "--source.batch", "64")
	wait.For(t, time.Minute, 50*time.Millisecond, "the whole stream", func() bool { return through(p) })
	p.stop()
	if len(snaps) == 0 {
		t.Fatal("the worker was never killed: the test proves nothing")
	}

	gen := assertExactModel(t, store, source, in, len(snaps))
	seen := map[int64]int{}
	for _, e := range decodeEvents(t, readAll(t, ctx, js, prefix+"_PRED")) {
		seen[e.Position.Offset]++
	}
	for seq := int64(1); seq <= int64(len(in.messages)); seq++ {
		if seen[seq] == 0 {
			t.Fatalf("message %d has no prediction", seq)
		}
	}
	// A snapshot at sequence s includes the messages up to s.
	dups := assertRepeatsAfterSnapshots(t, seen, snaps, func(seq, s int64) bool { return seq <= s })
	t.Logf("%d kills after snapshots at %v, final generation %d, %d repeated predictions", len(snaps), snaps, gen, dups)
}

// killSnapshots is the snapshot section of the kill tests: frequent
// snapshots, so that the kills fall between them.
func killSnapshots(store string) string {
	return fmt.Sprintf(`
snapshot:
  url: %s
  every: 300
  interval: 200ms
  keep: 3
`, store)
}

// killRepeatedly starts the worker and kills it with SIGKILL after a
// random while (the first time, after its first snapshot), three times or
// until done says the running worker is through the stream. It returns,
// for each kill, the position at source of the newest snapshot in store
// when the worker died (0 when there was none): where the next run
// resumed.
func killRepeatedly(t *testing.T, cfg, store, source string, r *rand.Rand, minDelay int, done func(*proc) bool) []int64 {
	t.Helper()
	ctx := testContext(t)
	s, err := snapshot.OpenStore(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var snaps []int64
	for len(snaps) < 3 {
		p := start(t, "run", "--config", cfg, "--source.batch", "64")
		// The first kill waits for a snapshot to resume from: kills
		// before any would test no resume. Then a kill at a random
		// moment, not a wait.
		if len(snaps) == 0 {
			wait.For(t, time.Minute, 10*time.Millisecond, "the worker's first snapshot", func() bool {
				_, err := s.Latest(ctx, "e2e", nil)
				return err == nil
			})
		}
		time.Sleep(time.Duration(minDelay+r.IntN(400)) * time.Millisecond)
		if done(p) {
			t.Logf("the stream was done before kill %d", len(snaps)+1)
			p.stop()
			break
		}
		p.cmd.Process.Kill() //nolint:errcheck // it may have died already, which the wait reports
		<-p.done
		var pos int64
		switch latest, err := s.Latest(ctx, "e2e", nil); {
		case err == nil:
			pos = latest.Positions[source]
		case !errors.Is(err, snapshot.ErrNotFound):
			t.Fatal(err)
		}
		snaps = append(snaps, pos)
	}
	return snaps
}

// assertRepeatsAfterSnapshots checks that the positions with more than one
// prediction are after the last snapshot before a kill: each kill may
// repeat a position its snapshot did not include, once, and nothing else
// is ever repeated. seen counts the predictions by position; included says
// whether a snapshot at s includes position p. It returns the number of
// repeats.
func assertRepeatsAfterSnapshots(t *testing.T, seen map[int64]int, snaps []int64, included func(p, s int64) bool) int {
	t.Helper()
	repeats := 0
	for p, n := range seen {
		allowed := 1
		for _, s := range snaps {
			if !included(p, s) {
				allowed++
			}
		}
		if n > allowed {
			t.Errorf("position %d has %d predictions; the snapshots before the kills (%v) allow at most %d", p, n, snaps, allowed)
		}
		repeats += n - 1
	}
	return repeats
}

// assertExactModel checks that the newest snapshot in store includes the
// whole input at source and is bit-identical to the learner run once over
// it, and returns its generation.
func assertExactModel(t *testing.T, store, source string, in input, kills int) uint64 {
	t.Helper()
	latest := latestSnapshot(t, store)
	if pos := latest.Positions[source]; pos != int64(len(in.messages)) {
		t.Fatalf("the last snapshot is at %d of %s, want %d", pos, source, len(in.messages))
	}
	ref := in.reference(t, testLearner())
	if got, want := latest.State, ref.State(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after %d kills the model differs from an uninterrupted run: examples %d/%d, mistakes %d/%d, updates %d/%d",
			kills, got.Examples, want.Examples, got.Mistakes, want.Mistakes, got.Updates, want.Updates)
	}
	return latest.Generation
}

// latestSnapshot is the newest valid snapshot of the tests' model in the
// store at url.
func latestSnapshot(t *testing.T, url string) *snapshot.Snapshot {
	t.Helper()
	ctx := testContext(t)
	s, err := snapshot.OpenStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	latest, err := s.Latest(ctx, "e2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	return latest
}

// snapshotConfig is a JetStream worker configuration with snapshots in
// store.
func snapshotConfig(t *testing.T, ns *natsServer, prefix, store string) string {
	return writeConfig(t, jetStreamConfig(ns.url, prefix)+fmt.Sprintf(`
snapshot:
  url: %s
  every: 500
  interval: 1s
`, store))
}

// TestCorruptSnapshot damages the newest snapshot between two runs: the
// worker says so, starts from the generation before, and still ends with
// the model of an uninterrupted run.
func TestCorruptSnapshot(t *testing.T) {
	ctx := testContext(t)
	t.Setenv("HYPERPLANE_E2E_NATS_URL", "")
	ns := startNATS(t)
	prefix := uniquePrefix("CORRUPT")
	js, _ := ns.streams(ctx, prefix)
	in := makeInput(4000, 12, 0)
	srv := s3test.Start(t)
	store := srv.URL(t)
	cfg := snapshotConfig(t, ns, prefix, store)

	publishAll(t, ctx, js, prefix+".IN", in.messages[:2000])
	p := start(t, "run", "--config", cfg, "--source.batch", "100")
	wait.For(t, time.Minute, 50*time.Millisecond, "the first half", func() bool { return count(t, ctx, js, prefix+"_PRED") >= 2000 })
	p.stop()

	s, err := snapshot.OpenStore(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gens, err := s.Generations(ctx, "e2e")
	if err != nil || len(gens) < 2 {
		t.Fatalf("generations %v (%v): want at least two", gens, err)
	}
	// The store URL's path is its prefix within the bucket.
	u, err := url.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := blob.OpenBucket(ctx, "s3://"+srv.Bucket+"?"+srv.Query())
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	newest := snapshot.Key(strings.TrimPrefix(u.Path, "/"), "e2e", gens[len(gens)-1])
	if err := bucket.WriteAll(ctx, newest, []byte("not a snapshot"), nil); err != nil {
		t.Fatal(err)
	}

	publishAll(t, ctx, js, prefix+".IN", in.messages[2000:])
	p = start(t, "run", "--config", cfg, "--source.batch", "100")
	wait.For(t, time.Minute, 50*time.Millisecond, "every prediction", func() bool { return count(t, ctx, js, prefix+"_PRED") >= in.valid() })
	p.stop()
	if !strings.Contains(p.log(), "skipping unreadable snapshot") {
		t.Errorf("the worker did not say it skipped the corrupt snapshot:\n%s", p.log())
	}
	latest, err := s.Latest(ctx, "e2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(latest.State, in.reference(t, testLearner()).State()) {
		t.Fatal("the model differs from an uninterrupted run")
	}
}

// TestSecondWorkerIsFenced starts a second worker on a model of one
// shard that a first one is writing: the one that finds its next
// generation written by the other says so and goes on from the store's
// newest generation instead of stopping (docs/scale-out.md, section 7),
// both reach the end of the stream, and the stored model is that of one
// uninterrupted worker.
func TestSecondWorkerIsFenced(t *testing.T) {
	ctx := testContext(t)
	t.Setenv("HYPERPLANE_E2E_NATS_URL", "")
	ns := startNATS(t)
	prefix := uniquePrefix("FENCE")
	js, _ := ns.streams(ctx, prefix)
	in := makeInput(20000, 13, 0)
	store := s3test.Start(t).URL(t)
	cfg := snapshotConfig(t, ns, prefix, store)
	publishAll(t, ctx, js, prefix+".IN", in.messages[:1000])
	first := start(t, "run", "--config", cfg, "--source.batch", "50")
	wait.For(t, time.Minute, 50*time.Millisecond, "a first snapshot", func() bool { return first.metric("hyperplane_snapshots_total") >= 1 })
	second := start(t, "run", "--config", cfg, "--source.batch", "50")
	go func() {
		for _, m := range in.messages[1000:] {
			if _, err := js.Publish(ctx, prefix+".IN", m); err != nil {
				return // the test fails on the missing positions
			}
		}
	}()
	position := "hyperplane_position{source=\"jetstream:" + prefix + "_IN\"}"
	wait.For(t, time.Minute, 50*time.Millisecond, "both workers to finish the stream", func() bool {
		assertRunning(t, []*proc{first, second})
		return first.metric(position) >= float64(len(in.messages)) && second.metric(position) >= float64(len(in.messages))
	})
	first.stop()
	second.stop()
	const reload = "another worker wrote the model's next generation: reloading the newest"
	if !strings.Contains(first.log(), reload) && !strings.Contains(second.log(), reload) {
		t.Fatal("neither worker found a generation written by the other")
	}
	s, err := snapshot.OpenStore(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	latest, err := s.Latest(ctx, "e2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(latest.State, in.reference(t, testLearner()).State()) {
		t.Fatal("the model differs from an uninterrupted run")
	}
}

// TestKillAndResumeKafka is TestKillAndResume over a single-partition
// Kafka topic: the worker resumes from the next offset its snapshot
// records.
func TestKillAndResumeKafka(t *testing.T) {
	ctx := testContext(t)
	c := testbroker.Kafka(t, kfake.SeedTopics(1, "examples", "predictions", "misclassifications", "dead"))
	in := makeInput(30000, 14, 0)
	cl := c.Client(t)
	// The stream arrives over a few seconds, so that the kills land in it.
	fed := make(chan error, 1)
	go func() {
		for i := 0; i < len(in.messages); i += 1000 {
			var recs []*kgo.Record
			for _, m := range in.messages[i:min(i+1000, len(in.messages))] {
				recs = append(recs, &kgo.Record{Topic: "examples", Value: m})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				fed <- err
				return
			}
			time.Sleep(40 * time.Millisecond)
		}
		fed <- nil
	}()
	preds := readTopic(t, c, "predictions")
	store := s3test.Start(t).URL(t)
	cfg := writeConfig(t, kafkaConfig(c)+killSnapshots(store))
	source := "kafka:examples/0"
	snaps := killRepeatedly(t, cfg, store, source, rand.New(rand.NewPCG(3, 4)), 300, func(*proc) bool { return false })
	if err := <-fed; err != nil {
		t.Fatal(err)
	}
	p := start(t, "run", "--config", cfg, "--source.batch", "64")
	wait.For(t, time.Minute, 50*time.Millisecond, "the whole topic", func() bool {
		return p.metric(`hyperplane_position{source="kafka:examples/0"}`) >= float64(len(in.messages))
	})
	p.stop()

	gen := assertExactModel(t, store, source, in, len(snaps))
	// The topic holds the repeats too: every record, to the topic's end,
	// not as many as there are messages.
	end := endOffset(t, ctx, c, "predictions")
	wait.For(t, time.Minute, 50*time.Millisecond, "every prediction read back", func() bool { return int64(preds.count()) >= end })
	var values [][]byte
	for _, rec := range preds.records() {
		values = append(values, rec.Value)
	}
	seen := map[int64]int{}
	for _, e := range decodeEvents(t, values) {
		seen[e.Position.Offset]++
	}
	for i := range int64(len(in.messages)) {
		if seen[i] == 0 {
			t.Fatalf("offset %d has no prediction", i)
		}
	}
	// A snapshot at offset s includes the offsets before s.
	dups := assertRepeatsAfterSnapshots(t, seen, snaps, func(off, s int64) bool { return off < s })
	t.Logf("%d kills after snapshots at %v, final generation %d, %d repeated predictions (at-least-once)", len(snaps), snaps, gen, dups)
}
