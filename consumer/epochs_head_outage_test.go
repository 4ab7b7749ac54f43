package consumer_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// errBrokerDown is what a broker in an outage answers.
var errBrokerDown = errors.New("broker unreachable")

// downShards are shards whose broker refuses every Open until up is
// called, as an unreachable broker's lookups fail.
type downShards struct {
	consumer.Shards
	mu      sync.Mutex
	up      bool
	refused int
}

func (s *downShards) Open(ctx context.Context, shard shardid.ID, from int64) (consumer.Source, error) {
	s.mu.Lock()
	if !s.up {
		s.refused++
		s.mu.Unlock()
		return nil, errBrokerDown
	}
	s.mu.Unlock()
	return s.Shards.Open(ctx, shard, from)
}

func (s *downShards) recover() {
	s.mu.Lock()
	s.up = true
	s.mu.Unlock()
}

// TestEpochsHeadsWaitOutABrokerOutage: with labels that come later, a
// shard's head that cannot open the shard's examples or labels because
// the broker is down waits for it, not ready for the source, as a range
// that cannot open its shard does; the worker does not stop, and learns
// once the broker is back.
func TestEpochsHeadsWaitOutABrokerOutage(t *testing.T) {
	for name, down := range map[string]func(j *joinedEpochs, cfg *consumer.EpochConfig) *downShards{
		"examples": func(j *joinedEpochs, cfg *consumer.EpochConfig) *downShards {
			d := &downShards{Shards: j.ex}
			cfg.Shards = d
			return d
		},
		"labels": func(j *joinedEpochs, cfg *consumer.EpochConfig) *downShards {
			d := &downShards{Shards: j.labels}
			cfg.Labels.Shards = d
			return d
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := newJoinedEpochs(t, 100)
			store := snapshot.NewStore(memblob.OpenBucket(nil), "")
			t.Cleanup(func() { store.Close() })
			cfg := j.config(store, memory.NewSink(), "w")
			d := down(j, &cfg)
			ctx, cancel := context.WithCancel(context.Background())
			x, done := j.start(ctx, cfg, store)
			wait.For(t, time.Minute, 5*time.Millisecond, "the worker not ready for its source", func() bool {
				select {
				case <-done:
					t.Fatal("the worker stopped during the broker's outage")
				default:
				}
				return slices.ContainsFunc(x.NotReady(), func(r string) bool {
					return strings.HasPrefix(r, consumer.NotReadySource+":") && strings.Contains(r, errBrokerDown.Error())
				})
			})
			d.recover()
			wait.For(t, time.Minute, 5*time.Millisecond, "epoch 1 mixed after the outage", func() bool { return x.Mixed() >= 1 })
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}
