package consumer

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/shardid"
)

// lagEvery is how often the lag is asked of the source or the broker.
const lagEvery = 5 * time.Second

// reportLag copies the source's lag into metrics until ctx is done, and
// then removes it.
func reportLag(ctx context.Context, lr LagReporter, metrics *Metrics) {
	t := time.NewTicker(lagEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// A lag no longer reported is no lag to alert on.
			metrics.Lag.Reset()
			return
		case <-t.C:
			metrics.SetLag(lr.Lag())
		}
	}
}

// startShardLag runs reportShardLag until ctx is done or the stop it
// returns is called; stop returns once the lag is removed.
func startShardLag(ctx context.Context, shards Shards, learned func() map[shardid.ID]int64, metrics *Metrics, log *zap.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		reportShardLag(ctx, shards, learned, metrics, log)
	}()
	return func() {
		cancel()
		<-done
	}
}

// reportShardLag records in metrics the lag of the shards this worker
// learns, at once and then every lagEvery, until ctx is done; then it
// removes it. learned is how far this worker has learned each shard it
// learns; a shard's lag is its end, as Shards.Ends reports it, less that
// position, so that it is 0 once the shard is learned up to the end the
// broker holds. Where the shards share one sequence of positions
// (Spread > 1, a partitioned JetStream stream) the positions between are
// an estimate of the shard's messages: they are divided by Spread,
// rounded up, so a lag is 0 only when nothing is left. The lag of a shard
// this worker no longer learns is removed. When Ends fails, the lag stays as it was
// until the next time: the learning itself reports the outage.
func reportShardLag(ctx context.Context, shards Shards, learned func() map[shardid.ID]int64, metrics *Metrics, log *zap.Logger) {
	// A lag no longer reported is no lag to alert on.
	defer metrics.Lag.Reset()
	t := time.NewTicker(lagEvery)
	defer t.Stop()
	reported := map[string]bool{}
	for {
		ends, err := shards.Ends(ctx)
		switch {
		case err == nil:
			reported = setShardLag(metrics, ends, learned(), int64(max(shards.Spread(), 1)), reported)
		case ctx.Err() == nil:
			log.Debug("listing the ends of the source's partitions for the lag failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setShardLag sets the lag of each shard of learned from ends (a shard
// Ends leaves out holds no message, and has none), removes that of the
// shards reported before and not now, and returns the shards it set.
func setShardLag(metrics *Metrics, ends, learned map[shardid.ID]int64, spread int64, reported map[string]bool) map[string]bool {
	lag := make(map[string]int64, len(learned))
	for shard, at := range learned {
		n := max(0, ends[shard]-at)
		lag[shard.String()] = (n + spread - 1) / spread
	}
	now := make(map[string]bool, len(lag))
	for name := range lag {
		now[name] = true
	}
	for name := range reported {
		if !now[name] {
			metrics.Lag.DeleteLabelValues(name)
		}
	}
	metrics.SetLag(lag)
	return now
}
