package snapshot_test

import (
	"slices"
	"testing"

	"github.com/hyperplane-ml/hyperplane/snapshot"
)

func TestShardSegment(t *testing.T) {
	for shard, want := range map[string]string{
		"kafka:clicks/0":         "kafka.clicks.0",
		"kafka:clicks.v2/17":     "kafka.clicks.v2.17",
		"kafka:a-b_c/2147483647": "kafka.a-b_c.2147483647",
		"jetstream:EVENTS#3":     "jetstream.EVENTS.3",
		"jetstream:EVENTS":       "jetstream.EVENTS",
	} {
		got, err := snapshot.ShardSegment(shard)
		if err != nil || got != want {
			t.Errorf("ShardSegment(%q) = %q, %v; want %q", shard, got, err, want)
		}
	}
	for _, shard := range []string{
		"", "clicks/0", "kafka:clicks", "kafka:/0", "kafka:a/b/0", "kafka:clicks/01", "kafka:clicks/-1",
		"kafka:clicks/x", "kafka:clicks/", "jetstream:", "jetstream:EV.ENTS#1", "jetstream:EVENTS#", "jetstream:EVENTS#01",
		"jetstream:EVENTS/1", "nats:events", "kafka:cli\x00cks/0", `kafka:a\b/0`,
	} {
		if got, err := snapshot.ShardSegment(shard); err == nil {
			t.Errorf("ShardSegment(%q) = %q, want an error", shard, got)
		}
	}
}

func TestCompareShards(t *testing.T) {
	want := []string{
		"jetstream:A", "jetstream:A#0", "jetstream:A#2", "jetstream:A#10", "jetstream:B#1",
		"kafka:a/0", "kafka:a/1", "kafka:a/9", "kafka:a/10", "kafka:a.b/0", "kafka:b/3",
		"bad", "kafka:zz",
	}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortFunc(got, snapshot.CompareShards)
	if !slices.Equal(got, want) {
		t.Fatalf("shard order\n%q\nwant\n%q", got, want)
	}
}
