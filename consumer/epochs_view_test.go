package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestEpochsViewIsTheMixedModel: after every mix, the view predicts as
// the mixed model does, to the bit, and has its version, while other
// goroutines take views and predict with them throughout (the mix writes
// W_e into the vectors of W_{e-1}, which the view must not see half
// done: go test -race).
func TestEpochsViewIsTheMixedModel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := epochLog(300)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(log, store, memory.NewSink(), "a")
	cfg.EpochExamples = 30 // ten epochs of data, and more
	var xs []learner.Example
	for i := range 20 {
		var ex learner.Example
		for j := range 8 {
			ex.Add(uint32((97*i+31*j)%(1<<epochLearner().HashBits)), float64(j%3)+0.5)
		}
		xs = append(xs, ex)
	}
	m, err := learner.New(epochLearner())
	if err != nil {
		t.Fatal(err)
	}
	var x *consumer.Epochs
	errDone := errors.New("every epoch checked")
	var mixes int
	cfg.Verify = func(_ context.Context, e uint64, _ [32]byte) error {
		v, mixed := x.View(), x.Model()
		if v.Version() != mixed.Version() {
			return fmt.Errorf("epoch %d: view of version %d, the mixed model's is %d", e, v.Version(), mixed.Version())
		}
		var s learner.Scratch
		for i := range xs {
			got, want := v.Predict(&xs[i], &s), mixed.Predict(&xs[i])
			if math.Float64bits(got.Score) != math.Float64bits(want.Score) {
				return fmt.Errorf("epoch %d: the view scores %v, the mixed model %v", e, got.Score, want.Score)
			}
		}
		if mixes++; mixes == 8 {
			return errDone
		}
		return nil
	}
	x = consumer.NewEpochs(cfg, m, 1, nil, nil, nil, zaptest.NewLogger(t))
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s learner.Scratch
			for ctx.Err() == nil {
				v := x.View()
				for i := range xs {
					v.Predict(&xs[i], &s)
				}
			}
		}()
	}
	err = x.Run(ctx)
	cancel()
	wg.Wait()
	if !errors.Is(err, errDone) {
		t.Fatalf("Run: %v, want the epochs checked", err)
	}
}
