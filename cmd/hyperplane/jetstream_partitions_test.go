package main

import (
	"bytes"
	"context"
	"errors"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// TestPartitionedJetStream: setup creates a stream partitioned into four
// by its subject transform, gen spreads examples over it, and the model
// two workers learn with static assignment (partitions 0 and 2, then 1
// and 3) is the model one worker learns alone, to the bit.
func TestPartitionedJetStream(t *testing.T) {
	t.Parallel()
	ns := testbroker.NATS(t)
	dir := t.TempDir()
	common := []string{"--nats.url", ns.URL(), "--model.name", "parts", "--source.kind", "jetstream",
		"--source.stream", "EX", "--source.subject", "ex.*", "--source.stream_partitions", "4",
		"--model.mixing.epoch_examples", "1000", "--model.mixing.interval", "50ms",
		"--snapshot.every", "1", "--http.addr", ""}
	out := mustRun(t, "", append([]string{"setup"}, common...)...)
	if !strings.Contains(out, "{{partition(4,1)}}") {
		t.Fatalf("setup did not create a partitioned stream:\n%s", out)
	}
	mustRun(t, "", "gen", "-examples", "4000", "-seed", "21", "-to", "jetstream:ex.*", "--nats.url", ns.URL())

	// learn runs workers, each with its own partitions, on a store of
	// their own, until the newest generation covers the stream, and
	// returns its state digest.
	learn := func(name string, owned ...string) [32]byte {
		t.Helper()
		url := "file://" + filepath.Join(dir, name) + "?create_dir=1"
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var logs []*bytes.Buffer
		stopped := make(chan error, len(owned))
		for i, parts := range owned {
			var stderr bytes.Buffer
			logs = append(logs, &stderr)
			args := append(append([]string{"run"}, common...), "--snapshot.url", url, "--snapshot.writer", name+string(rune('a'+i)))
			if parts != "" {
				args = append(args, "--source.partitions", parts)
			}
			go func() {
				stopped <- run(ctx, args, func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr)
			}()
		}
		store, err := snapshot.OpenStore(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		var newest *snapshot.Snapshot
		waitRunning(t, 3*time.Minute, name+": the stream learned", stopped, logs[0], func() bool {
			newest, err = store.Latest(context.Background(), "parts", nil)
			return err == nil && newest.State.Examples == 4000
		})
		cancel()
		for range owned {
			if err := <-stopped; err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if newest.Epoch == 0 || len(newest.Boundary) != 4 {
			t.Fatalf("%s: generation %d has epoch %d and %d shards: not learned in epochs", name, newest.Generation, newest.Epoch, len(newest.Boundary))
		}
		// The young model's epochs hold 250 messages a shard, which the
		// four partitions' shared sequences spread over 1,000: the start's
		// epoch and four more learn the 4,000 examples. Epochs of 250
		// sequences would take sixteen.
		if newest.Epoch > 8 {
			t.Fatalf("%s: the stream took %d epochs, want 8 at most: epochs of 250 messages a shard span 4·250 sequences", name, newest.Epoch)
		}
		return newest.State.Digest()
	}
	one := learn("one", "")
	two := learn("two", "0,2", "1,3")
	if one != two {
		t.Fatalf("two workers learned state_sha256 %x, one worker %x", two, one)
	}
}

// TestPartitionedJetStreamOfOnePartition: a stream that setup partitions
// into one stores every message on its partition's subjects (ex.0.<key>),
// not on source.subject; the worker of its one shard reads them, as one
// worker learns a source of one partition. It read source.subject, which
// matched none, and idled.
func TestPartitionedJetStreamOfOnePartition(t *testing.T) {
	t.Parallel()
	ns := testbroker.NATS(t)
	url := "file://" + filepath.Join(t.TempDir(), "store") + "?create_dir=1"
	common := []string{"--nats.url", ns.URL(), "--model.name", "one", "--source.kind", "jetstream",
		"--source.stream", "EX1", "--source.subject", "ex1.*", "--source.stream_partitions", "1",
		"--snapshot.every", "1", "--snapshot.url", url, "--http.addr", ""}
	if out := mustRun(t, "", append([]string{"setup"}, common...)...); !strings.Contains(out, "{{partition(1,1)}}") {
		t.Fatalf("setup did not create a partitioned stream:\n%s", out)
	}
	mustRun(t, "", "gen", "-examples", "500", "-seed", "3", "-to", "jetstream:ex1.*", "--nats.url", ns.URL())
	r := startRun(t, append([]string{"run"}, common...))
	store := storetest.OpenStore(t, url)
	var newest *snapshot.Snapshot
	r.wait(t, 2*time.Minute, "the stream learned", func() bool {
		var err error
		newest, err = store.Latest(context.Background(), "one", nil)
		return err == nil && newest.State.Examples == 500
	})
	r.stop(t)
	if newest.Epoch != 0 {
		t.Fatalf("generation %d is of epoch %d: one partition is learned by one worker as it comes", newest.Generation, newest.Epoch)
	}
}

// TestPartitionedJetStreamLearnedInEpochsFromItsStart: a partitioned
// stream whose first messages are all in partition 0 is learned in epochs
// from the start, each example once. The worker counted the partitions
// that held a message, found one, and learned partition 0 alone under the
// stream's name (jetstream:EX); when the other partitions filled, the
// epochs began every shard from source.start, partition 0 again with
// them, and the model held its examples twice.
func TestPartitionedJetStreamLearnedInEpochsFromItsStart(t *testing.T) {
	t.Parallel()
	ns := testbroker.NATS(t)
	url := "file://" + filepath.Join(t.TempDir(), "store") + "?create_dir=1"
	common := []string{"--nats.url", ns.URL(), "--model.name", "grow", "--source.kind", "jetstream",
		"--source.stream", "EX", "--source.subject", "ex.*", "--source.stream_partitions", "4",
		"--model.mixing.epoch_examples", "1000", "--model.mixing.interval", "50ms",
		"--snapshot.every", "1", "--snapshot.url", url, "--http.addr", ""}
	mustRun(t, "", append([]string{"setup"}, common...)...)
	// A key of partition 0: the stream's transform hashes the subject's
	// last token with FNV-1a.
	key := ""
	for i := 0; key == ""; i++ {
		h := fnv.New32a()
		h.Write([]byte(strconv.Itoa(i))) //nolint:errcheck // a hash does not fail
		if h.Sum32()%4 == 0 {
			key = strconv.Itoa(i)
		}
	}
	mustRun(t, "", "gen", "-examples", "300", "-seed", "5", "-to", "jetstream:ex."+key, "--nats.url", ns.URL())

	r := startRun(t, append([]string{"run"}, common...))
	store := storetest.OpenStore(t, url)
	var newest *snapshot.Snapshot
	learned := func(n uint64) func() bool {
		return func() bool {
			var err error
			newest, err = store.Latest(context.Background(), "grow", nil)
			return err == nil && newest.State.Examples >= n
		}
	}
	r.wait(t, 2*time.Minute, "partition 0 learned", learned(300))
	// Then examples in every partition.
	mustRun(t, "", "gen", "-examples", "900", "-start", "300", "-seed", "5", "-to", "jetstream:ex.*", "--nats.url", ns.URL())
	r.wait(t, 2*time.Minute, "the stream learned", learned(1200))
	r.stop(t)
	if newest.Epoch == 0 || newest.State.Examples != 1200 {
		t.Fatalf("generation %d of epoch %d holds %d examples, want the stream's 1200, learned in epochs\n%s",
			newest.Generation, newest.Epoch, newest.State.Examples, r.log())
	}
	if _, ok := newest.Positions["jetstream:EX"]; ok {
		t.Fatalf("generation %d has a position of the stream read as one source, %v: its first partition was learned alone", newest.Generation, newest.Positions)
	}
}

// TestPartitionedJetStreamCountsItsEmptyPartitions: a worker of a
// partitioned stream whose partitions hold no message yet says it learns
// all of them in epochs ("partitions":4), not the ones that hold a
// message (it said 0, and a kernel model was refused "over 2").
func TestPartitionedJetStreamCountsItsEmptyPartitions(t *testing.T) {
	t.Parallel()
	ns := testbroker.NATS(t)
	common := []string{"--nats.url", ns.URL(), "--model.name", "empty", "--source.kind", "jetstream",
		"--source.stream", "EMPTY", "--source.subject", "em.*", "--source.stream_partitions", "4",
		"--snapshot.url", "file://" + filepath.Join(t.TempDir(), "store") + "?create_dir=1", "--http.addr", "", "--log.format", "json"}
	mustRun(t, "", append([]string{"setup"}, common...)...)
	r := startRun(t, append([]string{"run"}, common...))
	r.wait(t, time.Minute, "the learning in epochs line", func() bool { return strings.Contains(r.log(), `"learning in epochs"`) })
	r.stop(t)
	if !strings.Contains(r.log(), `"learning in epochs","partitions":4,`) {
		t.Fatalf("the worker did not say it learns the stream's 4 partitions:\n%s", r.log())
	}
}

// TestPartitionedJetStreamOrdinalIsAConfigurationError: a host whose name
// gives no ordinal of source.partitions' replicas:R (a StatefulSet scaled
// beyond R, or no StatefulSet at all) is a wrong configuration value, as
// operations.md says of exit status 2: run returns a usage error naming
// the key, before it connects to anything or reads the store.
func TestPartitionedJetStreamOrdinalIsAConfigurationError(t *testing.T) {
	t.Parallel()
	ns := testbroker.NATS(t)
	common := []string{"--nats.url", ns.URL(), "--model.name", "ord", "--source.kind", "jetstream",
		"--source.stream", "EX", "--source.subject", "ex.*", "--source.stream_partitions", "4", "--http.addr", ""}
	mustRun(t, "", append([]string{"setup"}, common...)...)
	replicas := 2
	host := config.Hostname()
	if i := strings.LastIndexByte(host, '-'); i >= 0 {
		if n, err := strconv.Atoi(host[i+1:]); err == nil && n >= 0 {
			replicas = max(n, 1)
			if n == 0 {
				t.Skipf("host %s is ordinal 0, which every replicas:R owns", host)
			}
		}
	}
	dir := filepath.Join(t.TempDir(), "store")
	args := append(append([]string{"run"}, common...), "--snapshot.url", "file://"+dir+"?create_dir=1",
		"--source.partitions", "replicas:"+strconv.Itoa(replicas))
	var stderr bytes.Buffer
	err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr)
	var u *usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "source.partitions") {
		t.Fatalf("run on host %q with replicas:%d returned %v (%T), want a usage error (exit 2) naming source.partitions; log:\n%s", host, replicas, err, err, stderr.String())
	}
	if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
		t.Errorf("the store %s was opened before the configuration was refused (%v)", dir, statErr)
	}
}
