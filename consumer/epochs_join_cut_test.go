package consumer_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestEpochsJoinCutsNoEpochPerLabel: with labels that come later, while
// an example waits for its window, every shard holds more than the
// epoch's limit of examples after it. A label that comes then for one of
// them makes no epoch due by the limit, since the range would stop at
// the waiting example again: an epoch per label would learn nothing and
// cost a boundary and a result per shard. The labels are read by the next
// epoch that the interval cuts.
func TestEpochsJoinCutsNoEpochPerLabel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := newJoinedEpochs(t, 200)
		j.labels = memory.NewLog("labels", joinPartitions) // nothing closes a window yet
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		defer store.Close()
		cfg := j.config(store, memory.NewSink(), "w")
		cfg.Interval = time.Hour
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, done := j.start(ctx, cfg, store)
		lg := epochlog.New(store)
		epochs := func() []uint64 {
			t.Helper()
			es, err := lg.Epochs(context.Background(), "mixed")
			if err != nil {
				t.Fatal(err)
			}
			return es
		}
		synctest.Wait()
		before := epochs()
		if len(before) == 0 {
			t.Fatal("no epoch cut")
		}
		const labels = 10
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := range labels {
			j.labels.AppendAt(0, at.Add(time.Duration(i)*time.Millisecond), []byte(`{"id":"elsewhere","label":1}`))
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		if got := epochs(); len(got) != len(before) {
			t.Errorf("%d labels that decide no example cut epochs %v after %v, want none before the interval", labels, got[len(before):], before)
		}
		// The interval cuts the epoch that reads them.
		time.Sleep(cfg.Interval)
		synctest.Wait()
		if after := epochs(); len(after) <= len(before) {
			t.Errorf("no epoch cut once the interval passed: epochs %v", after)
		} else if b, _, err := lg.Boundary(context.Background(), "mixed", after[len(before)]); err != nil {
			t.Error(err)
		} else {
			if b.Cut.Reason != epochlog.CutInterval {
				t.Errorf("epoch %d cut for %q, want %q", b.Epoch, b.Cut.Reason, epochlog.CutInterval)
			}
			if r, _ := b.ShardRange(j.ex.Shard(0)); r.Labels == nil || r.Labels.To-r.Labels.From != labels {
				t.Errorf("epoch %d reads labels %+v of shard 0, want the %d that came", b.Epoch, r.Labels, labels)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}
