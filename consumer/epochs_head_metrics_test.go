package consumer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestEpochsHeadsLeaveTheShardGauges: with labels that come later, each
// shard's head predicts with the newest mixed model and learns nothing,
// so the shard's model gauges (hyperplane_shard_model_version,
// hyperplane_shard_rolling_accuracy) stay those of the shard's range,
// never the head's copy of the model it started from.
func TestEpochsHeadsLeaveTheShardGauges(t *testing.T) {
	j := newJoinedEpochs(t, 300)
	store, err := snapshot.OpenStore(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	marks := &partitionMarks{log: j.labels}
	cfg := j.config(store, memory.NewSink(), "head")
	cfg.Labels.Marks = func(shard shardid.ID) (consumer.Destination, error) {
		for p := range joinPartitions {
			if j.ex.Shard(p) == shard {
				return consumer.Destination{Sink: marks, Topic: "marks", Partition: int32(p), HasPartition: true}, nil
			}
		}
		return consumer.Destination{}, fmt.Errorf("no partition for %s", shard)
	}
	j.metrics = consumer.NewMetrics(prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	x, done := j.start(ctx, cfg, store)
	j.awaitLearned(t, x)
	// The heads go on reading the labels after the ranges have learned:
	// give each one more, for no example, and look once every head has
	// read it.
	for p := range joinPartitions {
		j.labels.AppendAt(p, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), []byte(`{"id":"none","label":1}`))
	}
	wait.For(t, time.Minute, 5*time.Millisecond, "every head read the last label", func() bool {
		for p := range joinPartitions {
			if x.HeadPositions(j.ex.Shard(p))[j.labels.Key(p)] != int64(j.labels.Len(p)) {
				return false
			}
		}
		return true
	})
	for p := range joinPartitions {
		shard := j.ex.Key(p)
		if v := testutil.ToFloat64(j.metrics.ShardModelVersion.WithLabelValues(shard)); v == 0 {
			t.Errorf("hyperplane_shard_model_version{shard=%q} is 0 once its range learned every example and its head read every label", shard)
		}
		if v := testutil.ToFloat64(j.metrics.ShardRollingAccuracy.WithLabelValues(shard)); v == 0 {
			t.Errorf("hyperplane_shard_rolling_accuracy{shard=%q} is 0 once its range learned every example and its head read every label", shard)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
