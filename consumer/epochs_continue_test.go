package consumer_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/consumer"
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
