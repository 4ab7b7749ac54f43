package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestReplayFollowsTheEpochLog learns a four-partition topic in epochs,
// then replays it: the replay follows the recorded epochs, checks every
// live generation it passes, and ends with the live model's
// state_sha256.
func TestReplayFollowsTheEpochLog(t *testing.T) {
	dir := t.TempDir()
	data := genFile(t, dir, "ex.jsonl", "-examples", "6000", "-seed", "8", "-unlabeled", "0.1")
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "examples", 4)
	cl := c.Client(t)
	var recs []*kgo.Record
	for i, l := range strings.Split(strings.TrimSpace(readFile(t, data)), "\n") {
		recs = append(recs, &kgo.Record{Topic: "examples", Partition: int32(i % 4), Value: []byte(l)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	storeURL := "file://" + filepath.Join(dir, "live") + "?create_dir=1"
	args := []string{"--model.name", "mixed", "--kafka.brokers", strings.Join(c.ListenAddrs(), ","),
		"--source.kind", "kafka", "--source.topics", "examples", "--snapshot.url", storeURL,
		"--model.mixing.epoch_examples", "400", "--model.mixing.interval", "50ms", "--snapshot.every", "1"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	stopped := make(chan error, 1)
	go func() {
		stopped <- run(ctx, append([]string{"run", "--http.addr", ""}, args...), func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr)
	}()
	store, err := snapshot.OpenStore(context.Background(), storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// The model holds every example once the newest generation's
	// positions are every partition's end (each epoch writes one).
	waitLearned := func() bool {
		newest, err := store.Latest(context.Background(), "mixed", nil)
		if err != nil {
			return false
		}
		total := int64(0)
		for _, v := range newest.Positions {
			total += v
		}
		return total == int64(len(recs))
	}
	deadline := time.Now().Add(time.Minute)
	for !waitLearned() {
		select {
		case err := <-stopped:
			t.Fatalf("run stopped: %v\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not learned after a minute:\n%s", stderr.String())
		}
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "learning in epochs") {
		t.Fatalf("the worker did not learn in epochs:\n%s", stderr.String())
	}
	newest, err := store.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if newest.Epoch == 0 {
		t.Fatalf("the newest generation %d has no epoch", newest.Generation)
	}
	var total int64
	for _, v := range newest.Positions {
		total += v
	}
	if total != int64(len(recs)) {
		t.Fatalf("the newest generation holds %d positions of %d", total, len(recs))
	}

	out := mustRun(t, "", append([]string{"replay", "--out", "file://" + filepath.Join(dir, "replayed") + "?create_dir=1"}, args...)...)
	var sum struct {
		Examples           int
		Epoch              uint64
		GenerationsChecked int    `json:"generations_checked"`
		StateSHA256        string `json:"state_sha256"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := fmt.Sprintf("%x", newest.State.Digest()); sum.StateSHA256 != want || sum.Epoch != newest.Epoch {
		t.Fatalf("replay: epoch %d, state_sha256 %s; the live model: epoch %d, %s", sum.Epoch, sum.StateSHA256, newest.Epoch, want)
	}
	if sum.GenerationsChecked < 2 {
		t.Fatalf("replay checked %d live generations: %s", sum.GenerationsChecked, out)
	}
}
