package consumer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// heldResultLog holds the write of epoch at's first result until release
// is closed, or fails it when its context is done first.
type heldResultLog struct {
	consumer.EpochLog
	at      uint64
	held    chan struct{} // closed when the held write starts
	release chan struct{}
	once    sync.Once
}

func (l *heldResultLog) WriteShard(ctx context.Context, r *epochlog.ShardResult, base *epochlog.Base) error {
	hold := false
	if r.Epoch == l.at {
		l.once.Do(func() { hold = true })
	}
	if hold {
		close(l.held)
		select {
		case <-l.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return l.EpochLog.WriteShard(ctx, r, base)
}

// TestEpochsMixBesideTheResults: a worker that learns every range of an
// epoch mixes it while the ranges' results are written and their outputs
// published (docs/scale-out.md, E6), and installs the mix only once every
// result is in the log and every output durable. With one result of
// epoch 3 held (a worker that writes its results), or one batch of its
// outputs (a worker alone, which writes none: 3.12), the mix of epoch 3
// is made but the worker still holds W_2. Released, the worker ends with
// the model of a run without the hold; stopped instead, before the held
// write, it never held W_3, and a restart ends with that model too.
func TestEpochsMixBesideTheResults(t *testing.T) {
	data := epochLog(600)
	want := oneWorkerDigest(t, data)

	// hold makes cfg hold a write of epoch 3, and returns the channels
	// closed when it starts and to release it.
	for _, tc := range []struct {
		name  string
		alone bool
		hold  func(cfg *consumer.EpochConfig) (held, release chan struct{})
	}{
		{"a result", false, func(cfg *consumer.EpochConfig) (chan struct{}, chan struct{}) {
			l := &heldResultLog{EpochLog: cfg.Log, at: 3, held: make(chan struct{}), release: make(chan struct{})}
			cfg.Log = l
			return l.held, l.release
		}},
		{"an output, alone", true, func(cfg *consumer.EpochConfig) (chan struct{}, chan struct{}) {
			l := &heldOutputs{EpochLog: cfg.Log, Sink: cfg.Worker.Predictions.Sink, at: 3, held: make(chan struct{}), release: make(chan struct{})}
			cfg.Log = l
			cfg.Worker.Predictions.Sink, cfg.Worker.Misclassifications.Sink, cfg.Worker.DeadLetter.Sink = l, l, l
			return l.held, l.release
		}},
	} {
		config := func(store *snapshot.Store, writer string) consumer.EpochConfig {
			cfg := epochConfig(data, store, memory.NewSink(), writer)
			if tc.alone {
				cfg.Alone = func() bool { return true }
			}
			return cfg
		}
		for _, stop := range []bool{false, true} {
			name := tc.name + "/released"
			if stop {
				name = tc.name + "/stopped"
			}
			t.Run(name, func(t *testing.T) {
				store := snapshot.NewStore(memblob.OpenBucket(nil), "")
				cfg := config(store, "held")
				held, release := tc.hold(&cfg)
				cfg.Worker.ShutdownTimeout = 2 * time.Second
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				x, done := runUntilHeld(t, ctx, cfg, held, tc.name+" of epoch 3 was written")
				wait.For(t, time.Minute, time.Millisecond, "epoch 3 mixed while "+tc.name+" of it is written", func() bool { return x.EarlyMixMade(3) })
				if got := x.Mixed(); got != 2 {
					t.Fatalf("the worker holds the mix of epoch %d while %s of epoch 3 is written, want 2", got, tc.name)
				}
				if !stop {
					close(release)
					if got := finalDigest(t, x, done, cancel, waitComplete(t, store, data)); got != want {
						t.Fatalf("the model is %x, without the hold %x", got, want)
					}
					return
				}
				cancel()
				<-done
				if got := x.Mixed(); got != 2 {
					t.Fatalf("stopped before %s of epoch 3 was written, the worker holds the mix of epoch %d, want 2", tc.name, got)
				}
				ctx, cancel = context.WithCancel(context.Background())
				defer cancel()
				y, stopped := startEpochs(t, ctx, config(store, "restarted"), store)
				if got := finalDigest(t, y, stopped, cancel, waitComplete(t, store, data)); got != want {
					t.Fatalf("after the stop the model is %x, without it %x", got, want)
				}
			})
		}
	}
}
