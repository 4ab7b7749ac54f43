package nats_test

import (
	"slices"
	"testing"

	"github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

// TestStaticOwnership: a worker assigned partitions of a stream owns
// their shards, named as JetStreamShards.Shard names them, and hears of
// no change.
func TestStaticOwnership(t *testing.T) {
	own := nats.StaticOwnership("EX", []int{2, 0})
	if got, want := own.Owned(), []shardid.ID{shardid.JetStream("EX", 2), shardid.JetStream("EX", 0)}; !slices.Equal(got, want) {
		t.Errorf("Owned() = %q, want %q", got, want)
	}
	if own.Changed != nil || own.Commit != nil || own.Settled != nil {
		t.Error("a static assignment has a Changed, Commit or Settled")
	}
	if got := nats.StaticOwnership("EX", nil).Owned(); got == nil || len(got) != 0 {
		t.Errorf("Owned() of no partitions = %#v, want empty and not nil (nil would mean every shard)", got)
	}
}
