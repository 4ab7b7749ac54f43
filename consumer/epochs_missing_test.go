package consumer_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestEpochsBarrierNamesTheMissingShards: a worker that owns half the
// shards, whose other owner is gone, waits at the barrier for the other
// half alone: hyperplane_epoch_missing_shards counts those, not the
// results it holds itself. Once the barrier has waited 10 intervals it
// logs them by name, once; and when it stops waiting (here, stopped) the
// gauge is 0.
func TestEpochsBarrierNamesTheMissingShards(t *testing.T) {
	log := epochLog(300)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(log, store, memory.NewSink(), "half")
	var mine, others []shardid.ID
	for p := range 6 {
		if p < 3 {
			mine = append(mine, shardid.Memory("ex", p))
		} else {
			others = append(others, shardid.Memory("ex", p))
		}
	}
	cfg.Owned = func() []shardid.ID { return mine }
	m, e, prev, pos, err := consumer.Continue(nil, epochLearner(), cfg.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	cfg.BaseDigest = consumer.BaseDigestOf(nil, m)
	core, logs := observer.New(zapcore.WarnLevel)
	metrics := consumer.NewMetrics(nil)
	x := consumer.NewEpochs(cfg, m, e, prev, pos, metrics, zap.New(core))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()

	warned := func() []observer.LoggedEntry { return logs.FilterMessageSnippet("barrier waits for the results").All() }
	wait.For(t, time.Minute, 5*time.Millisecond, "the barrier to name what it waits for", func() bool { return len(warned()) > 0 })
	if got := testutil.ToFloat64(metrics.MissingShards); got != float64(len(others)) {
		t.Errorf("hyperplane_epoch_missing_shards %v while this worker holds its own %d results, want the %d others'", got, len(mine), len(others))
	}
	var named []string
	for _, s := range others {
		named = append(named, s.String())
	}
	got := warned()[0].ContextMap()["missing"]
	if names, ok := got.([]any); !ok || !slices.EqualFunc(names, named, func(a any, b string) bool { return a == b }) {
		t.Errorf("the warning names %v as missing, want %v", got, named)
	}
	cancel()
	<-done
	if n := len(warned()); n != 1 {
		t.Errorf("%d warnings for one barrier, want 1", n)
	}
	if got := testutil.ToFloat64(metrics.MissingShards); got != 0 {
		t.Errorf("hyperplane_epoch_missing_shards %v once the worker stopped waiting, want 0", got)
	}
}
