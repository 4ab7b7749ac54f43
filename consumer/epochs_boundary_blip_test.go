package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// blipLog is a log whose first read of epoch 1's boundary finds it
// damaged, as a read damaged in transit does, and whose second read
// fails as an unreachable store does.
type blipLog struct {
	*epochlog.Log
	mu    sync.Mutex
	reads int
}

func (l *blipLog) Boundary(ctx context.Context, model string, e uint64) (*epochlog.Boundary, [32]byte, error) {
	if e == 1 {
		l.mu.Lock()
		l.reads++
		n := l.reads
		l.mu.Unlock()
		switch n {
		case 1:
			return nil, [32]byte{}, fmt.Errorf("epoch 1's boundary: %w", epochlog.ErrDamagedLog)
		case 2:
			return nil, [32]byte{}, errStoreDown
		}
	}
	return l.Log.Boundary(ctx, model, e)
}

// TestEpochsBoundaryReadAgainThroughAnOutage: a boundary found damaged is
// read a second time to tell damage at rest from damage in transit; when
// that read fails as an unreachable store does, the boundary is read
// again as any read is, through the outage, and the epochs go on: an
// outage is back-pressure, never an exit.
func TestEpochsBoundaryReadAgainThroughAnOutage(t *testing.T) {
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { store.Close() })
	data := epochLog(100)
	cfg := epochConfig(data, store, memory.NewSink(), "w")
	cfg.Log = &blipLog{Log: epochlog.New(store)}
	x := newEpochs(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	wait.For(t, time.Minute, 5*time.Millisecond, "epoch 1 mixed", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run stopped: %v", err)
		default:
		}
		return x.Mixed() >= 1
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
