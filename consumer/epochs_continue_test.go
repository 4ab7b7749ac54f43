package consumer_test

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestContinuePositionsByShard: the epochs continue from a generation's
// positions by shard. An epoch's generation has them for the shards of
// its boundary; an older one's keys are the shards' names, and a key
// that is not one is an error that quotes it.
func TestContinuePositionsByShard(t *testing.T) {
	digest := [32]byte{1}
	ex0, ex1 := shardid.Memory("ex", 0), shardid.Memory("ex", 1)
	epoch := &snapshot.Snapshot{
		Model: "mixed", Generation: 3, Epoch: 3, ConfigDigest: digest,
		Boundary:  []snapshot.Range{{Shard: ex0, From: 0, To: 10}, {Shard: ex1, From: 2, To: 5}},
		Positions: map[string]int64{"memory:ex/0": 10, "memory:ex/1": 5},
	}
	e, prev, pos, err := consumer.ContinueModel(epoch, nil, digest)
	if err != nil || e != 4 || prev == nil || !maps.Equal(pos, map[shardid.ID]int64{ex0: 10, ex1: 5}) {
		t.Fatalf("an epoch's generation: epoch %d, positions %v, %v", e, pos, err)
	}
	epoch.Positions["memory:ex/2"] = 7
	if _, _, _, err := consumer.ContinueModel(epoch, nil, digest); err == nil || !strings.Contains(err.Error(), "memory:ex/2") {
		t.Errorf("a position of a shard the boundary does not list: %v, want an error naming it", err)
	}

	older := &snapshot.Snapshot{Model: "mixed", Generation: 8, Positions: map[string]int64{"memory:ex/0": 4}}
	if e, prev, pos, err := consumer.ContinueModel(older, nil, digest); err != nil || e != 9 || prev != nil || !maps.Equal(pos, map[shardid.ID]int64{ex0: 4}) {
		t.Fatalf("a generation from before epochs: epoch %d, positions %v, %v", e, pos, err)
	}
	older.Positions["memory:ex/01"] = 2
	_, _, _, err = consumer.ContinueModel(older, nil, digest)
	if err == nil || !strings.Contains(err.Error(), `"memory:ex/01"`) {
		t.Errorf("a position keyed memory:ex/01: %v, want an error quoting the key", err)
	}
}

// TestBaseDigestOfFormat2: a model restored from a generation of
// snapshot format 2 (a binary calibrator without its bins' expected
// positives) holds that generation's state, so the epochs go on with the
// base digest it records: the log above it (boundaries and results cut
// before an upgrade) learns from that digest. Taken for a changed model,
// its own digest would stop every worker at the next boundary.
func TestBaseDigestOfFormat2(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "snapshot", "testdata", "averaged-format2.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	snap.Generation, snap.Epoch, snap.BaseDigest = 5, 5, [32]byte{7}
	m, err := learner.Restore(snap.State)
	if err != nil {
		t.Fatal(err)
	}
	if got := consumer.BaseDigestOf(snap, m); got != snap.BaseDigest {
		t.Errorf("restored from format 2, the model's base digest is %x, the generation records %x", got, snap.BaseDigest)
	}
}
