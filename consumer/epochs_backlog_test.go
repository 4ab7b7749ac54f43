package consumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
)

// TestEpochsLearnTheEndOfABacklogAtOnce: a backlog whose shards are not
// all the same length ends with one shard holding fewer positions than
// an epoch's limit. That rest was waiting when the last full epoch was
// cut, so the next epoch takes it at once, not after model.mixing.interval
// (an hour here: the test would time out first). Every epoch but the last
// is full; the last is cut for the backlog and ends at every shard's end.
func TestEpochsLearnTheEndOfABacklogAtOnce(t *testing.T) {
	const shards, limit, full, rest = 4, 150, 6, 11
	log := memory.NewLog("ex", shards)
	for p := range shards {
		n := full * limit
		if p == 2 {
			n += rest
		}
		msgs, _ := messages(n)
		log.Append(p, msgs...)
	}
	store, last, _ := learnAll(t, log, func(cfg *consumer.EpochConfig) {
		cfg.EpochExamples, cfg.Interval, cfg.SnapshotEvery, cfg.Keep = limit, time.Hour, 0, 0
	})

	lg := epochlog.New(store)
	for e := uint64(1); e <= last; e++ {
		b, _, err := lg.Boundary(context.Background(), "mixed", e)
		if err != nil {
			t.Fatalf("boundary %d: %v", e, err)
		}
		if e < last {
			if b.Cut.Reason != epochlog.CutStart && b.Cut.Reason != epochlog.CutExamples {
				t.Errorf("epoch %d was cut for %q, want %q or %q: the backlog fills it", e, b.Cut.Reason, epochlog.CutStart, epochlog.CutExamples)
			}
			continue
		}
		if b.Cut.Reason != epochlog.CutBacklog {
			t.Errorf("the last epoch, %d, was cut for %q, want %q", e, b.Cut.Reason, epochlog.CutBacklog)
		}
		for _, r := range b.Shards {
			p, _ := r.Shard.Partition()
			want := int64(0)
			if p == 2 {
				want = rest
			}
			if got := r.To - r.From; got != want {
				t.Errorf("the last epoch's range of %s holds %d positions, want %d", r.Shard, got, want)
			}
		}
	}
	if want := uint64(full + 1); last != want {
		t.Errorf("the backlog took %d epochs, want %d", last, want)
	}
}
