package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// The partitioned stream's test: partitionedExamples examples over four
// partitions, learned in epochs of at most partitionedEpoch stream
// sequences of a partition.
const (
	partitionedExamples = 4000
	partitionedEpoch    = 1000
)

// TestPartitionedJetStream is scale-out over JetStream with the binary and
// the server a user runs (in CI, nats-server built from the version
// go.mod requires, standalone): hyperplane setup creates a stream
// partitioned into four by its subject transform, hyperplane gen spreads
// examples over it, and the model that two workers learn in epochs with
// static assignment (partitions 0 and 2, then 1 and 3) is the model one
// worker learns alone, to the bit.
func TestPartitionedJetStream(t *testing.T) {
	ns := startNATS(t)
	prefix := uniquePrefix("PARTS")
	stream, subject := prefix+"_EX", prefix+".ex.*"
	predictions := prefix + ".pred"
	// A standalone server outlives the test: what setup made goes with it.
	t.Cleanup(func() {
		js := ns.JetStream(t)
		for _, s := range []string{stream, strings.ToUpper(prefix) + "_PRED"} {
			js.DeleteStream(context.Background(), s) //nolint:errcheck // absent if the test failed early
		}
	})
	cfg := writeConfig(t, fmt.Sprintf(`
model:
  name: e2e
  learner:
    hash_bits: 16
  mixing:
    epoch_examples: %d
    interval: 50ms
nats:
  url: %s
source:
  kind: jetstream
  stream: %s
  subject: %s
  stream_partitions: 4
outputs:
  predictions: jetstream:%s
snapshot:
  every: 1
`, partitionedEpoch, ns.url, stream, subject, predictions))

	out := runBinary(t, "setup", "--config", cfg)
	if want := "stored as " + prefix + ".ex.{{partition(4,1)}}.{{wildcard(1)}}"; !strings.Contains(out, want) {
		t.Fatalf("setup did not create a partitioned stream (no %q):\n%s", want, out)
	}
	runBinary(t, "gen", "-examples", fmt.Sprint(partitionedExamples), "-seed", "21", "-to", "jetstream:"+subject, "-nats-url", ns.url)

	dir := t.TempDir()
	one := learnPartitioned(t, cfg, "file://"+filepath.Join(dir, "one")+"?create_dir=1", "")
	two := learnPartitioned(t, cfg, "file://"+filepath.Join(dir, "two")+"?create_dir=1", "0,2", "1,3")
	if one != two {
		t.Fatalf("two workers learned state_sha256 %x, one worker %x", two, one)
	}
}

// learnPartitioned runs a worker for each of owned (its source.partitions;
// "" for all) on the store at url until the newest generation there
// includes every example, stops them, and returns that generation's state
// digest, once it checked that the model was learned in epochs over the
// four partitions.
func learnPartitioned(t *testing.T, cfg, url string, owned ...string) [32]byte {
	t.Helper()
	ctx := testContext(t)
	var workers []*proc
	for i, parts := range owned {
		args := []string{"run", "--config", cfg, "--snapshot.url", url, "--snapshot.writer", fmt.Sprintf("w%d", i)}
		if parts != "" {
			args = append(args, "--source.partitions", parts)
		}
		workers = append(workers, start(t, args...))
	}
	store, err := snapshot.OpenStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var newest *snapshot.Snapshot
	wait.For(t, time.Minute, 50*time.Millisecond, fmt.Sprintf("a generation of all %d examples in %s", partitionedExamples, url), func() bool {
		assertRunning(t, workers)
		newest, err = store.Latest(ctx, "e2e", nil)
		return err == nil && newest.State.Examples == partitionedExamples
	})
	for _, w := range workers {
		w.stop()
	}
	if newest.Epoch == 0 || len(newest.Boundary) != 4 {
		t.Fatalf("generation %d has epoch %d and %d shards: not learned in epochs over four partitions", newest.Generation, newest.Epoch, len(newest.Boundary))
	}
	return newest.State.Digest()
}

// runBinary runs hyperplane with args to its end and returns what it
// printed; it fails the test if hyperplane fails.
func runBinary(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(hyperplane.path, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hyperplane %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}
